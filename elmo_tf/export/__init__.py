"""Getting vectors and models out: SavedModels for TF Serving and TF Hub, embedding files."""

from elmo_tf.export.embeddings_hdf5 import write_embeddings
from elmo_tf.export.saved_model import export_saved_model
from elmo_tf.export.task_saved_model import export_task_model

__all__ = ["export_saved_model", "export_task_model", "write_embeddings"]
