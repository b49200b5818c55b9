"""`load_backbone`: the backbone an options.json describes, ELMo's or Masked ELMo's."""

from elmo_tf.models.elmo.elmo_backbone import ElmoBackbone
from elmo_tf.models.elmo.elmo_config import ElmoConfig
from elmo_tf.models.masked_elmo.masked_elmo_backbone import MaskedElmoBackbone


def load_backbone(options_file, weight_file, **kwargs):
    """`ElmoBackbone.from_allennlp` or `MaskedElmoBackbone.from_allennlp`, as the options say
    (`lstm.fully_bidirectional`): what `elmo-tf dump`, `export` and `ElmoEmbedding.from_allennlp`
    load a model directory with.

    Args:
        options_file, weight_file: the model's options.json and weights.hdf5.
        **kwargs: the backbone's other constructor arguments (`dtype`; ELMo's `stateful`,
            `max_batch_size`).

    Example:
    >>> backbone = load_backbone("run/options.json", "run/weights.hdf5")
    """
    config = ElmoConfig.from_options_json(options_file)
    cls = MaskedElmoBackbone if config.fully_bidirectional else ElmoBackbone
    return cls.from_allennlp(options_file, weight_file, **kwargs)
