"""Masked ELMo (Senay & Salin 2020): a fully bidirectional LSTM language model trained with
BERT's masked-LM objective, and its entry in the family registry. See `docs/masked_elmo.md`."""

from elmo_tf.models.family import register_family
from elmo_tf.models.masked_elmo.masked_elmo_family import MaskedElmoFamily

register_family(MaskedElmoFamily())
