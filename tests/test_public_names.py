"""Every name README.md or docs/guide.md has told users to import, at any commit, still imports.

Each entry: the module, the attribute path in it (None: the module itself), where it was first
documented (the README/guide commit and file), and, for a name kept as an alias of one that
moved, its new home, which must be the same object. Collected from `git log -- README.md
docs/guide.md` (docs/guide.md began as a copy of README.md in 8d258b8): names in code blocks
and in backticks, with the module the text gave them or, for a bare class name, the module it
was exported from then. Parameters, CLI commands and file paths are left out, and so are the old
names the "Changes from 0.1" table lists only as replaced.

Documented, then removed on purpose with no replacement of the same kind (not checked here):
`elmo_tf.layers.MaskTokens` (0f81b72 README.md; gone in 8d258b8, no caller: the masking is the
function `elmo_tf.ops.masking.mask_tokens`, checked below).
"""

import importlib
from typing import NamedTuple, Optional

import pytest


class Name(NamedTuple):
    module: str
    attribute: Optional[str]  # dotted path inside the module; None for the module itself
    first_documented: str     # "<commit> <file>"
    alias_of: Optional[tuple] = None  # (module, attribute) of the new home, for aliases


DOCUMENTED = [
    # The top level: README.md's examples since the first one with code.
    Name("elmo_tf", "ElmoEmbedding", "a60e06d README.md"),
    Name("elmo_tf", "ElmoEmbedding.from_allennlp", "a60e06d README.md"),
    Name("elmo_tf", "ElmoEmbedding.from_saved_model", "8d06e3b README.md"),
    Name("elmo_tf", "ElmoBackbone", "a60e06d README.md"),
    Name("elmo_tf", "ElmoBackbone.from_allennlp", "a60e06d README.md"),
    Name("elmo_tf", "ElmoBackbone.embed", "a60e06d README.md"),
    Name("elmo_tf", "ElmoBackbone.save_allennlp", "a60e06d README.md"),
    Name("elmo_tf", "ElmoBackbone.reset_states", "a60e06d README.md"),
    Name("elmo_tf", "ElmoBackbone.from_architecture", "8d258b8 README.md"),
    Name("elmo_tf", "ElmoBackbone.from_preset", "8d258b8 README.md"),
    Name("elmo_tf", "ElmoConfig", "a60e06d README.md"),
    Name("elmo_tf", "ElmoConfig.from_preset", "a60e06d README.md"),
    Name("elmo_tf", "ElmoConfig.from_options_json", "a60e06d README.md"),
    Name("elmo_tf", "ElmoConfig.presets", "96bef44 README.md"),
    Name("elmo_tf", "ElmoConfig.from_architecture", "8d258b8 docs/guide.md"),
    Name("elmo_tf", "tokens_to_char_ids", "a60e06d README.md"),
    Name("elmo_tf.xla_cache", None, "d3abb5a docs/guide.md"),
    # elmo_tf.models and its modules.
    Name("elmo_tf.models", None, "e0315d2 README.md"),
    Name("elmo_tf.models", "ElmoLanguageModel", "967994c README.md"),
    Name("elmo_tf.models", "ElmoLanguageModel.compile", "b017389 README.md"),
    Name("elmo_tf.models", "ElmoBackbone", "96bef44 README.md"),
    Name("elmo_tf.models", "Backbone", "64f6ca4 README.md"),
    Name("elmo_tf.models", "Backbone.from_preset", "8d258b8 README.md"),
    Name("elmo_tf.models", "Task", "64f6ca4 README.md"),
    Name("elmo_tf.models", "ElmoTokenizer", "issue 36 README.md"),
    Name("elmo_tf.models", "MaskedElmoTokenizer", "issue 36 docs/guide.md"),
    Name("elmo_tf.models", "Backbone.save_to_preset", "issue 36 README.md"),
    Name("elmo_tf.models", "MaskedElmoBackbone", "0f81b72 README.md"),
    Name("elmo_tf.models", "MaskedElmoBackbone.load_token_encoder_from", "f45b0b4 README.md"),
    Name("elmo_tf.models", "MaskedElmoLanguageModel", "0f81b72 README.md"),
    Name("elmo_tf.models", "MaskedElmoConfig", "8d258b8 README.md"),
    Name("elmo_tf.models", "MaskedElmoConfig.presets", "8d258b8 docs/guide.md"),
    Name("elmo_tf.models", "TextClassifier", "e0315d2 README.md"),
    Name("elmo_tf.models", "SentencePairClassifier", "e0315d2 README.md"),
    Name("elmo_tf.models", "SequenceTagger", "e0315d2 README.md"),
    Name("elmo_tf.models.saved_model_embedding", "SavedModelEmbedding", "8d06e3b README.md"),
    Name("elmo_tf.models.elmo.elmo_backbone", None, "96bef44 README.md"),
    Name("elmo_tf.models.elmo.elmo_config", None, "96bef44 README.md"),
    Name("elmo_tf.models.elmo.elmo_language_model", None, "96bef44 README.md"),
    Name("elmo_tf.models.elmo.elmo_weights", None, "96bef44 README.md"),
    Name("elmo_tf.models.family", "register_family", "8d258b8 README.md"),
    Name("elmo_tf.models.family", "preset_names", "8d258b8 docs/guide.md"),
    Name("elmo_tf.models.downstream", "DownstreamTask", "8d258b8 docs/guide.md"),
    Name("elmo_tf.models.downstream.downstream_task", "register_task", "8d258b8 README.md"),
    Name("elmo_tf.models.compiled_step", "CompiledStep", "d3abb5a docs/guide.md"),
    # elmo_tf.data and elmo_tf.text.
    Name("elmo_tf.data", "read_corpus", "967994c README.md"),
    Name("elmo_tf.data", "build_vocabulary", "967994c README.md"),
    Name("elmo_tf.data", "Vocabulary", "967994c README.md", ("elmo_tf.text", "Vocabulary")),
    Name("elmo_tf.data", "language_model_dataset", "967994c README.md"),
    Name("elmo_tf.data", "masked_language_model_dataset", "0f81b72 README.md"),
    Name("elmo_tf.data", "read_corpus_batches", "8d258b8 docs/guide.md"),
    Name("elmo_tf.data", "CorpusStats.count", "8d258b8 docs/guide.md"),
    Name("elmo_tf.data.glue", "read_glue", "e0315d2 README.md"),
    Name("elmo_tf.data.glue", "read_glue_tfds", "a4aaa2a README.md"),
    Name("elmo_tf.text", "Vocabulary", "8d258b8 docs/guide.md"),
    Name("elmo_tf.text", "tokens_to_char_ids", "8d258b8 docs/guide.md"),
    Name("elmo_tf.text.char_ids", None, "8d258b8 docs/guide.md"),
    Name("elmo_tf.text.vocabulary", None, "8d258b8 docs/guide.md"),
    Name("elmo_tf.text.tokenizers", "get_tokenizer", "8d258b8 docs/guide.md"),
    Name("elmo_tf.text.tokenizers", "TOKENIZERS", "8d258b8 docs/guide.md"),
    # Export, metrics, optimizers.
    Name("elmo_tf.export", "export_saved_model", "8d06e3b README.md"),
    Name("elmo_tf.export", "export_task_model", "e0315d2 README.md"),
    Name("elmo_tf.metrics", "Perplexity", "967994c README.md"),
    Name("elmo_tf.metrics.scores", None, "e0315d2 README.md"),
    Name("elmo_tf.optimizers", "SparseAdagrad", "d2c21a6 README.md"),
    Name("elmo_tf.optimizers", "Adam", "a85936a README.md"),
    # Layers and ops.
    Name("elmo_tf.layers", "sampled_softmax", "b017389 README.md", ("elmo_tf.ops", "softmax")),
    Name("elmo_tf.layers", "BiLSTMStack", "3744d81 README.md"),
    Name("elmo_tf.layers", "BiLMStack", "8d258b8 docs/guide.md"),
    Name("elmo_tf.layers.word_softmax", "WordSoftmax", "64f6ca4 README.md"),
    Name("elmo_tf.layers.bag_of_words", "BagOfWords", "e64f119 docs/guide.md"),
    Name("elmo_tf.ops.softmax", None, "64f6ca4 README.md"),
    Name("elmo_tf.ops.padding", None, "96bef44 README.md"),
    Name("elmo_tf.ops.chunking", None, "96bef44 README.md"),
    Name("elmo_tf.ops.masking", "mask_tokens", "8d258b8 docs/guide.md"),
    # Training (elmo_tf.recipes.training until 96bef44's README named the new home).
    Name("elmo_tf.training", "train", "96bef44 README.md"),
    Name("elmo_tf.training", "evaluate", "96bef44 README.md"),
    Name("elmo_tf.training", "make_strategy", "96bef44 README.md"),
    Name("elmo_tf.training", "build_language_model", "96bef44 README.md"),
    Name("elmo_tf.training", "RunDirectory.write_record", "8d258b8 docs/guide.md"),
    Name("elmo_tf.training.pretraining", "xla_pays_off_on_cpus", "82ac645 docs/guide.md"),
]


def resolve(module, attribute):
    """`from module import a` then `.b...`, as the documented code would."""
    value = importlib.import_module(module)
    for part in attribute.split(".") if attribute else ():
        value = getattr(value, part)
    return value


def test_names_are_listed_once():
    keys = [(name.module, name.attribute) for name in DOCUMENTED]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("name", DOCUMENTED, ids=lambda n: f"{n.module}:{n.attribute or ''}")
def test_documented_name_imports(name):
    value = resolve(name.module, name.attribute)
    if name.alias_of is not None:
        assert value is resolve(*name.alias_of), (
            f"{name.module}.{name.attribute} is not {'.'.join(name.alias_of)}")
        assert name.attribute in importlib.import_module(name.module).__all__
