"""Masked ELMo (Senay & Salin 2020): a fully bidirectional LSTM language model trained with
BERT's masked-LM objective. See `docs/masked_elmo.md`."""
