"""`load_backbone`: the backbone an options.json describes, of any registered family."""

from elmo_tf.files import read_json
from elmo_tf.models.family import family_for_options


def load_backbone(options_file, weight_file, **kwargs):
    """The backbone class of the family the options describe (`Family.describes`: ELMo's
    released files, Masked ELMo's `lstm.fully_bidirectional`, ...) built from `options_file`
    with `weight_file` loaded: what `elmo-tf dump`, `export`, `finetune` and
    `ElmoEmbedding.from_allennlp` load a model directory with.

    Args:
        options_file, weight_file: the model's options.json and weights.hdf5.
        **kwargs: the backbone's other constructor arguments (`dtype`; ELMo's `stateful`,
            `max_batch_size`).

    Example:
    >>> backbone = load_backbone("run/options.json", "run/weights.hdf5")
    """
    family = family_for_options(read_json(options_file), source=str(options_file))
    return family.backbone_class.from_allennlp(options_file, weight_file, **kwargs)
