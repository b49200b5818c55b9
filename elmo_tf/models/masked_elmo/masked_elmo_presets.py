"""Masked ELMo's presets: ELMo's architectures (`elmo_tf.models.elmo.elmo_presets`) with
clip-free cells (and, being `MaskedElmoConfig`s, fully bidirectional layers), so that the token
encoder and the parameter counts compare with ELMo's and released ELMo weights can initialise
the token encoder. Each entry holds `MaskedElmoConfig`'s arguments."""

from elmo_tf.models.elmo.elmo_presets import ELMO_PRESETS


def _clip_free(name):
    return {**ELMO_PRESETS[name], "cell_clip": None, "proj_clip": None}


MASKED_ELMO_PRESETS = {
    "tiny_masked": _clip_free("tiny"),
    "masked_elmo_cpu": _clip_free("elmo_cpu"),
    "masked_elmo_small": _clip_free("elmo_small"),
    "masked_elmo_original": _clip_free("elmo_original"),
}
