"""Masked ELMo benchmark: training speed against ELMo at equal parameters, and the mask
accumulation ablation (issue 11), on the device TensorFlow picks (CPU here).

    python bench/masked_elmo.py [--quick] [--output FILE]

* speed: `fit` steps of ELMo (`ElmoLanguageModel`, sentence batches) and Masked ELMo
  (`MaskedElmoLanguageModel`) on the same synthetic sentence batches (32 x 20 tokens), with a
  20,000-word vocabulary and 8192 sampled negatives, each recipe's optimizer (SparseAdagrad).
  The models share the token encoder (the `elmo_small` char CNN cut to 256 filters, 1 highway,
  P = 64); ELMo has LSTMs of C = 512 (clips 3), and Masked ELMo the C that gives the nearest
  parameter count (its second layer reads 2P). Masked ELMo at 15 % (BERT's) and 40 % (the
  recipes') of the tokens selected, with its softmax on the selected positions only and, as
  the baseline in the same run, on every position as before issue 38 (`EveryRowMaskedElmo`:
  unselected rows weighted 0). Tokens/s count every real token of a batch once. The models
  alternate, step by step, so that machine noise hits all; medians of the repeats and their
  ratios.
* `speed_xla`: the same with every model's training step compiled by XLA (`compile(xla=True)`,
  as on a GPU by default): static shapes, so the selected positions are sorted first and
  scored in as many of 8 equal chunks as they fill (`map_leading_rows`), against every
  position scored.
* `speed_rtd_xla`: Masked ELMo with the replaced-token detection (weight 50, the cloze loss
  off) at 40 % selected, its step compiled by XLA: the generator's softmax and draws on the
  selected positions sorted first, in as many of 8 equal chunks as they fill, against every
  position scored and drawn (`EveryRowReplacedTokenElmo`, as before), the speed part's batch
  and the C nearest ELMo's parameters; steps alternated, medians of the repeats.
* ablation of mask accumulation: `tiny_masked` trained on the built-in generated corpus for the
  same number of steps and rows (equal recurrent compute) with masks_per_sentence K = 1, 2, 4,
  two seeds each; the held-out masked-LM perplexity on one fixed masking (seed 0) of 500
  held-out sentences.
* ablation of bidirectional truncated backpropagation through time: `tiny_masked` on the same
  corpus, the same number of steps and rows, with sentence batches (every row from zero state,
  both ways), stream batches whose state is carried both ways (`BiLSTMStack`), and the same
  stream batches with the state zeroed before every batch (what the carried state alone
  brings). The stream window is the mean length of the sentence batches' rows as the LSTMs
  run them (padding and the two boundaries included), so both read the same number of LSTM
  steps (equal recurrent compute); three seeds each, the same held-out perplexity.
* the same on real text in document order (`tbptt_documents`): `masked_elmo_cpu`'s model and
  optimizer on `bench/real_text.py`'s LM corpus (fetched at run time), trained from sentence
  batches, streams of shuffled sentences, and streams of shuffled documents (each read whole,
  in text order) with the state carried both ways or zeroed every batch; scored in held-out
  sentence batches and in held-out document streams with the state carried; two seeds.

* `selection_rate`: `tiny_masked`'s rate chosen by measurement (issue 38): the recipe at 15,
  25 and 40 % selected, 1,500 steps by `train`, two seeds, on the built-in generated corpus and
  on real text (`bench/real_text.py`'s LM corpus); the held-out masked-LM perplexity (15 %
  masking, seed 0) on each held-out corpus's first half chooses, its second half reports.

* cells (`cell_speed`, `cell_loss`): Masked ELMo with ELMo's clipped projected cell (clips
  3), the clip-free projected cell (the presets'), and the clip-free cell without projection
  (C = P, the nearest backbone parameter count; its wider output also widens the softmax's
  input), at equal backbone parameters: training speed (the speed part's batch, encoder and
  C = 416; steps alternated, medians of 9 repeats of 5 steps) and, on `tiny_masked`'s shape,
  the held-out masked-LM perplexity after the same 300 steps of 32 rows on the built-in
  corpus, seeds 0, 1, 2.

Writes `bench/results/masked_elmo-cpu.json` (machine, versions, command, every figure);
`--only PART` runs one part and keeps the file's other parts. The speed parts time the
machine: run them alone on it.
"""

import argparse
import dataclasses
import datetime
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.inference import machine, versions  # noqa: E402
from bench.real_text import DEFAULT_DATA_DIR, prepare  # noqa: E402
from elmo_tf.data import (  # noqa: E402
    build_vocabulary, masked_language_model_dataset, read_corpus)
from elmo_tf.data.generated_corpus import write_generated_corpus  # noqa: E402
from elmo_tf.files import write_json_atomically  # noqa: E402
from elmo_tf.models import (  # noqa: E402
    ElmoBackbone, ElmoConfig, ElmoLanguageModel, MaskedElmoBackbone, MaskedElmoConfig,
    MaskedElmoLanguageModel)
from elmo_tf.optimizers import Adam, SparseAdagrad  # noqa: E402
from elmo_tf.recipes.recipe import Recipe  # noqa: E402
from elmo_tf.text.char_ids import BOS_TOKEN, EOS_TOKEN  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENCODER = {"char_embedding_dim": 16, "filters": ((1, 32), (2, 32), (3, 64), (4, 128)),
           "n_highway": 1, "projection_dim": 64, "n_layers": 2, "use_skip_connections": True}
VOCABULARY, NEGATIVES, BATCH, TIME = 20_000, 8192, 32, 20
# The TBPTT ablation on real text in document order.
DOCUMENTS_MODEL, DOCUMENTS_STEPS, DOCUMENTS_SHUFFLE = "masked_elmo_cpu", 1000, 100_000


def optimizer():
    return SparseAdagrad(0.2, initial_accumulator_value=1.0, global_clipnorm=10.0)


def elmo_model(xla=False):
    config = ElmoConfig(lstm_dim=512, cell_clip=3.0, proj_clip=3.0, **ENCODER)
    model = ElmoLanguageModel(ElmoBackbone(config, dropout=0.1), VOCABULARY, NEGATIVES)
    model.compile(optimizer=optimizer(), xla=xla)
    return model


class EveryRowMaskedElmo(MaskedElmoLanguageModel):
    """The masked LM's softmax as before issue 38: every position scored, those without a
    target weighted 0 (as `selected_nll` did under XLA before its leading-rows chunks)."""

    def selected_nll(self, outputs, targets, training, seed=None, columns=None, drawable=None,
                     sparse=True):
        if drawable is not None:  # the replaced-token detection's draws: as the package's
            return super().selected_nll(outputs, targets, training, seed, columns, drawable)
        nll, valid = self.word_nll(outputs, targets, training, seed=seed, columns=columns)
        return tf.reduce_sum(nll), tf.reduce_sum(tf.cast(valid, tf.float32))


class EveryRowReplacedTokenElmo(MaskedElmoLanguageModel):
    """The replaced-token detection's generator as before: under XLA every position scored
    and drawn, those without a target weighted 0."""

    def selected_nll(self, outputs, targets, training, seed=None, columns=None, drawable=None,
                     sparse=True):
        if drawable is None or not self.xla:
            return super().selected_nll(outputs, targets, training, seed, columns, drawable,
                                        sparse)
        targets = tf.cast(targets, tf.int32)
        selected = targets >= 0
        nll, words = self.softmax.nll_and_samples(outputs, tf.maximum(targets, 0), training,
                                                  seed, drawable)
        return (tf.reduce_sum(tf.where(selected, nll, 0.0)),
                tf.reduce_sum(tf.cast(selected, tf.float32)), tf.where(selected, words, -1))


def masked_model(lstm_dim, model_class=MaskedElmoLanguageModel, xla=False,
                 replaced_token_weight=0.0, **cell):
    """Masked ELMo at the speed parts' shapes (`cell`: the config's cell options), with the
    replaced-token detection when `replaced_token_weight` > 0."""
    config = MaskedElmoConfig(**{**ENCODER, "lstm_dim": lstm_dim, **cell})
    model = model_class(MaskedElmoBackbone(config, dropout=0.1), VOCABULARY, NEGATIVES,
                        replaced_token_weight=replaced_token_weight)
    if replaced_token_weight:
        model.set_vocabulary(["<S>", "</S>", "<UNK>"] + [f"w{i}" for i in range(3, VOCABULARY)])
    model.compile(optimizer=optimizer(), xla=xla)
    return model


def equal_parameter_lstm_dim(target):
    """Masked ELMo's C (384 to 528, steps of 16) whose backbone parameter count is nearest
    `target` (ELMo's): `(C, its parameter count)`."""
    sizes = {c: backbone_parameters(masked_model(c)) for c in range(384, 544, 16)}
    lstm_dim = min(sizes, key=lambda c: abs(sizes[c] - target))
    return lstm_dim, sizes[lstm_dim]


def backbone_parameters(model):
    return int(sum(np.prod(v.shape) for v in model.backbone.trainable_variables))


def alternated_step_seconds(runs, repeats, steps):
    """Seconds per `train_on_batch` step of each `name: (model, (x, y))`, after 3 warm-up
    steps each: `repeats` rounds of `steps` steps per model, the models taking turns so that
    machine noise hits them all. `{name: [seconds per step, one per round]}`."""
    for model, batch in runs.values():
        for _ in range(3):
            model.train_on_batch(*batch)
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, (model, batch) in runs.items():
            started = time.perf_counter()
            for _ in range(steps):
                model.train_on_batch(*batch)
            times[name].append((time.perf_counter() - started) / steps)
    return times


def batches(rng, rate=0.15):
    """ELMo's and Masked ELMo's batches of the same sentences (random ids and words; `rate` of
    Masked ELMo's tokens selected)."""
    lengths = rng.integers(TIME // 2, TIME + 1, BATCH)
    chars = rng.integers(1, 256, (BATCH, TIME + 2, 50)).astype("int32")
    words = rng.integers(3, VOCABULARY, (BATCH, TIME + 2)).astype("int32")
    valid = np.arange(TIME + 2)[None, :] < (lengths + 2)[:, None]
    chars[~valid] = 0
    forward = np.where(np.roll(valid, -1, 1) & valid, np.roll(words, -1, 1), -1)
    backward = np.where(np.roll(valid, 1, 1) & valid, np.roll(words, 1, 1), -1)
    forward[:, -1], backward[:, 0] = -1, -1
    elmo = ({"char_ids": chars}, {"forward_targets": forward, "backward_targets": backward})
    inner = chars[:, 1:-1]  # Masked ELMo reads sentences without boundaries
    targets = np.where((rng.random((BATCH, TIME)) < rate) & valid[:, 2:], words[:, 1:-1], -1)
    return elmo, ({"char_ids": inner}, {"targets": targets.astype("int32")}), int(lengths.sum())


def speed(repeats, steps, rates=(0.15, 0.4), xla=False):
    keras.utils.set_random_seed(0)
    elmo = elmo_model(xla)
    target = backbone_parameters(elmo)
    lstm_dim, parameters = equal_parameter_lstm_dim(target)
    elmo_batch, _, tokens = batches(np.random.default_rng(0))
    runs, selected = {"elmo": (elmo, elmo_batch)}, {}
    for rate in rates:
        _, masked_batch, _ = batches(np.random.default_rng(0), rate)  # the same sentences
        selected[f"{rate:.0%}"] = int((masked_batch[1]["targets"] >= 0).sum())
        for name, model_class in (("masked_elmo", MaskedElmoLanguageModel),
                                  ("masked_elmo_every_row", EveryRowMaskedElmo)):
            runs[f"{name} {rate:.0%}"] = (masked_model(lstm_dim, model_class, xla),
                                          masked_batch)
    times = alternated_step_seconds(runs, repeats, steps)
    median = {k: float(np.median(v)) for k, v in times.items()}
    return {"xla": xla,
            "batch": f"{BATCH} sentences x up to {TIME} tokens ({tokens} real tokens)",
            "vocabulary": VOCABULARY, "num_negatives": NEGATIVES,
            "elmo": {"lstm_dim": 512, "backbone_parameters": target},
            "masked_elmo": {"lstm_dim": lstm_dim, "backbone_parameters": parameters},
            "selected_tokens": selected,
            "step_seconds": times, "step_seconds_median": median,
            "tokens_per_second": {k: tokens / v for k, v in median.items()},
            # > 1: Masked ELMo's step is faster than ELMo's, at equal parameters.
            "masked_over_elmo": {rate: median["elmo"] / median[f"masked_elmo {rate}"]
                                 for rate in selected},
            # > 1: scoring the selected positions only is faster than scoring every one.
            "every_row_over_selected": {
                rate: median[f"masked_elmo_every_row {rate}"] / median[f"masked_elmo {rate}"]
                for rate in selected}}


def speed_rtd_xla(repeats, steps, rate=0.4):
    """The replaced-token detection's compiled step, its generator on the selected positions
    against every position (`EveryRowReplacedTokenElmo`)."""
    keras.utils.set_random_seed(0)
    lstm_dim, parameters = equal_parameter_lstm_dim(backbone_parameters(elmo_model()))
    _, (x, y), tokens = batches(np.random.default_rng(0), rate)
    # The originals of every real token (the detection's labels), the selected ones' included.
    words = np.random.default_rng(1).integers(3, VOCABULARY, y["targets"].shape)
    valid = x["char_ids"][..., 0] > 0
    y = {**y, "cloze_targets": np.where(y["targets"] >= 0, y["targets"],
                                        np.where(valid, words, -1)).astype("int32")}
    runs = {name: (masked_model(lstm_dim, model_class, True, replaced_token_weight=50.0), (x, y))
            for name, model_class in (("selected", MaskedElmoLanguageModel),
                                      ("every_row", EveryRowReplacedTokenElmo))}
    times = alternated_step_seconds(runs, repeats, steps)
    median = {k: float(np.median(v)) for k, v in times.items()}
    return {"xla": True, "selection_rate": rate, "replaced_token_weight": 50.0,
            "batch": f"{BATCH} sentences x up to {TIME} tokens ({tokens} real tokens)",
            "vocabulary": VOCABULARY, "num_negatives": NEGATIVES,
            "masked_elmo": {"lstm_dim": lstm_dim, "backbone_parameters": parameters},
            "selected_tokens": int((y["targets"] >= 0).sum()), "rows": int(y["targets"].size),
            "step_seconds": times, "step_seconds_median": median,
            # > 1: the generator on the selected positions only is faster.
            "every_row_over_selected": median["every_row"] / median["selected"]}


def ablation_data():
    """The built-in generated corpus (20,000 sentences, 500 held out), its vocabulary and the
    fixed held-out masking."""
    directory = tempfile.mkdtemp()
    corpus = write_generated_corpus(directory, n_sentences=20_000, n_heldout=500, n_shards=2)
    vocabulary = build_vocabulary(read_corpus(corpus["train"]), progress=False)
    heldout = masked_language_model_dataset(read_corpus(corpus["heldout"]), vocabulary,
                                            batch_size=32, repeat=False, seed=0)
    return corpus, vocabulary, heldout


def train_and_evaluate(corpus, vocabulary, heldout, steps, seed, stream_rows=None,
                       callbacks=(), config=None, **data_options):
    """`tiny_masked` (or `config`) trained `steps` steps on
    `masked_language_model_dataset(**data_options)`; (held-out masked-LM perplexity, seconds)."""
    recipe = Recipe.from_name("tiny_masked")
    keras.utils.set_random_seed(seed)
    model = MaskedElmoLanguageModel(
        MaskedElmoBackbone(config or recipe.model, stream_rows=stream_rows,
                           dropout=recipe.dropout),
        len(vocabulary), num_negatives=recipe.num_negatives)
    model.compile(optimizer=optimizer())
    data = masked_language_model_dataset(read_corpus(corpus["train"]), vocabulary,
                                         batch_size=32, seed=seed, **data_options)
    started = time.perf_counter()
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=list(callbacks))
    seconds = time.perf_counter() - started
    return float(model.evaluate(heldout, verbose=0, return_dict=True)["perplexity"]), seconds


def compare(data, steps, seeds, field, variants):
    """`tiny_masked` trained with each of `variants` (a value of `field` -> options of
    `train_and_evaluate`) and each seed, on `data` (`ablation_data()`): `(runs, median
    perplexity by variant)`."""
    corpus, vocabulary, heldout = data
    runs = []
    for value, options in variants.items():
        for seed in seeds:
            perplexity, seconds = train_and_evaluate(corpus, vocabulary, heldout, steps, seed,
                                                     **options)
            runs.append({field: value, "seed": seed,
                         "heldout_masked_lm_perplexity": perplexity, "train_seconds": seconds})
            print(f"{field} {value}, seed {seed}: perplexity {perplexity:.2f} "
                  f"({seconds:.0f} s)", flush=True)
    medians = {str(value): float(np.median([r["heldout_masked_lm_perplexity"] for r in runs
                                            if r[field] == value])) for value in variants}
    return runs, medians


def ablation(steps, seeds, ks):
    runs, medians = compare(ablation_data(), steps, seeds, "masks_per_sentence",
                            {k: {"masks_per_sentence": k} for k in ks})
    return {"recipe": "tiny_masked", "steps": steps, "batch_size": 32, "runs": runs,
            "median_by_k": medians}


class ZeroStateEveryBatch(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        self.model.reset_states()


def sentence_batch_steps(sentence_batches, n):
    """`(mean LSTM steps per row, mean real ones)` over the first `n` sentence batches: the
    LSTMs run a batch over its longest row plus `<S>` and `</S>`; a row's real steps are its
    tokens plus the two boundaries. The stream window of equal recurrent compute is the first,
    rounded."""
    steps, real = [], []
    for x, _ in sentence_batches.take(n):
        steps.append(int(x["char_ids"].shape[1]) + 2)
        real.append(float(np.mean(np.sum(x["char_ids"][:, :, 0].numpy() != 0, 1))) + 2)
    return float(np.mean(steps)), float(np.mean(real))


def tbptt_ablation(steps, seeds):
    data = ablation_data()
    corpus, vocabulary, _ = data
    sentence_batches = masked_language_model_dataset(read_corpus(corpus["train"]), vocabulary,
                                                     batch_size=32, seed=0)
    lstm_steps, _ = sentence_batch_steps(sentence_batches, 200)
    window = round(lstm_steps)
    runs, medians = compare(data, steps, seeds, "batches", {
        "sentence": {"mode": "sentence"},
        "stream, state carried both ways": {"mode": "stream", "window": window,
                                            "stream_rows": 32},
        "stream, zero state every batch": {"mode": "stream", "window": window,
                                           "stream_rows": 32,
                                           "callbacks": [ZeroStateEveryBatch()]},
    })
    return {"recipe": "tiny_masked", "steps": steps, "rows": 32,
            "lstm_steps_per_row": {"sentence (mean)": lstm_steps, "stream window": window},
            "runs": runs, "median": medians}


def document_sentences(path):
    """The documents of `path` (blank lines between documents), each as one 1-D string tensor:
    its sentences joined by `</S> <S>`. A stream puts `<S>`/`</S>` around each element
    (`with_sentence_boundaries`), so a document reads `<S> s1 </S> <S> s2 </S> ..`, its
    sentences in text order, and a stream of shuffled documents keeps each one whole."""
    def documents():
        sentences = []
        with open(path, encoding="utf-8") as f:
            for line in [*f, ""]:
                if line.strip():
                    sentences.append(line.split())
                elif sentences:
                    yield np.array([t for s in sentences for t in s + [EOS_TOKEN, BOS_TOKEN]
                                    ][:-2], object)
                    sentences = []

    return tf.data.Dataset.from_generator(documents,
                                          output_signature=tf.TensorSpec([None], tf.string))


def documents_tbptt(steps, seeds, rows=32):
    """Bidirectional TBPTT on real text in document order (`bench/real_text.py`'s LM corpus):
    `DOCUMENTS_MODEL` trained for the same steps of `rows` rows from sentence batches, from
    streams of shuffled sentences (bilm-tf's streams), and from streams of shuffled documents
    (each read in text order) with the state carried both ways or zeroed before every batch.
    Each model is scored on the held-out text twice: in sentence batches (every sentence from
    zero state) and in streams of the held-out documents with the state carried (context from
    the sentences around); each way on one fixed masking."""
    paths = prepare(DEFAULT_DATA_DIR)
    recipe = Recipe.from_name(DOCUMENTS_MODEL)
    vocabulary = build_vocabulary(read_corpus(paths["lm_train"]), min_count=2, progress=False)
    chars = recipe.model.max_characters_per_token
    # Measured on the training sentence batches' shuffle: the corpus lists its sources one
    # after the other, and their sentence lengths differ.
    lstm_steps, real_steps = sentence_batch_steps(masked_language_model_dataset(
        read_corpus(paths["lm_train"]), vocabulary, batch_size=rows, seed=0,
        shuffle_buffer=DOCUMENTS_SHUFFLE), 300)
    window = round(lstm_steps)
    heldout = {
        "sentences": masked_language_model_dataset(read_corpus(paths["lm_heldout"]), vocabulary,
                                                   batch_size=rows, repeat=False, seed=0,
                                                   max_characters_per_token=chars),
        "document streams, state carried": masked_language_model_dataset(
            document_sentences(paths["lm_heldout_documents"]), vocabulary, mode="stream",
            batch_size=rows, window=window, repeat=False, seed=0,
            max_characters_per_token=chars)}
    variants = {
        "sentence": (read_corpus(paths["lm_train"]), {"mode": "sentence"}, []),
        "stream of shuffled sentences, state carried": (
            read_corpus(paths["lm_train"]), {"mode": "stream", "window": window}, []),
        "stream of shuffled documents, state carried": (
            document_sentences(paths["lm_train_documents"]), {"mode": "stream",
                                                              "window": window}, []),
        "stream of shuffled documents, zero state every batch": (
            document_sentences(paths["lm_train_documents"]), {"mode": "stream",
                                                              "window": window},
            [ZeroStateEveryBatch()]),
    }
    runs = []
    for name, (train, options, callbacks) in variants.items():
        for seed in seeds:
            keras.utils.set_random_seed(seed)
            model = MaskedElmoLanguageModel(
                MaskedElmoBackbone(recipe.model, stream_rows=rows, dropout=recipe.dropout),
                len(vocabulary), num_negatives=recipe.num_negatives)
            model.compile(optimizer=Adam(recipe.learning_rate, global_clipnorm=recipe.clip_norm))
            data = masked_language_model_dataset(train, vocabulary, batch_size=rows, seed=seed,
                                                 shuffle_buffer=DOCUMENTS_SHUFFLE,
                                                 max_characters_per_token=chars, **options)
            started = time.perf_counter()
            model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=callbacks)
            seconds = time.perf_counter() - started
            scores = {}
            for how, batches_ in heldout.items():
                model.reset_states()
                scores[how] = float(model.evaluate(batches_, verbose=0,
                                                   return_dict=True)["perplexity"])
            runs.append({"training batches": name, "seed": seed,
                         "heldout_masked_lm_perplexity": scores, "train_seconds": seconds})
            print(f"{name}, seed {seed}: {json.dumps(scores)} ({seconds:.0f} s)", flush=True)
    medians = {name: {how: float(np.median([r["heldout_masked_lm_perplexity"][how]
                                            for r in runs if r["training batches"] == name]))
                      for how in heldout} for name in variants}
    return {"model": DOCUMENTS_MODEL, "optimizer": f"Adam {recipe.learning_rate}",
            "vocabulary": len(vocabulary), "steps": steps, "rows": rows,
            "lstm_steps_per_row": {"sentence (mean)": lstm_steps,
                                   "sentence, real tokens (mean)": real_steps,
                                   "stream window": window},
            "runs": runs, "median": medians}


def no_projection_size(target, parameters, high):
    """The C = P of a cell without projection whose backbone has the nearest parameter count to
    `target`; `parameters(c)` counts a backbone's (it grows with c; `parameters(high)` is over
    the target). Bisection."""
    low = 1
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if parameters(middle) <= target else (low, middle)
    size = min((low, high), key=lambda c: abs(parameters(c) - target))
    return size, parameters(size)


PARTS = ["speed", "speed_xla", "speed_rtd_xla", "mask_accumulation", "tbptt", "tbptt_documents",
         "cell_speed", "cell_loss", "selection_rate"]
# `tiny_masked`'s selection rate, chosen by measurement (issue 38): BERT's 15 %, the larger
# recipes' 40 % and between; the step count of the run the issue reported (1,500 steps on a
# real corpus of 0.87 M words: 40 % scored 332, 15 % 276).
SELECTION_RATES, SELECTION_STEPS = (0.15, 0.25, 0.4), 1500
CELLS = ("clipped, projected (ELMo's cell)", "clip-free, projected (the presets')",
         "clip-free, no projection")


def cell_configs(base):
    """The three cells on `base`'s shape (a `MaskedElmoConfig`) at its backbone
    parameter count: ELMo's clipped projected cell (clips 3), the clip-free projected cell,
    and the clip-free cell without projection whose C = P gives the nearest count."""
    def count(config):
        backbone = MaskedElmoBackbone(config)
        return int(sum(np.prod(v.shape) for v in backbone.trainable_variables))

    clip_free = dataclasses.replace(base, cell_clip=None, proj_clip=None)
    size, _ = no_projection_size(count(clip_free), lambda c: count(dataclasses.replace(
        clip_free, lstm_dim=c, projection_dim=c, lstm_projection=False)), clip_free.lstm_dim)
    configs = dict(zip(CELLS, (
        dataclasses.replace(clip_free, cell_clip=3.0, proj_clip=3.0), clip_free,
        dataclasses.replace(clip_free, lstm_dim=size, projection_dim=size,
                            lstm_projection=False))))
    return configs, {name: {"lstm_dim": c.lstm_dim, "projection_dim": c.projection_dim,
                            "backbone_parameters": count(c)} for name, c in configs.items()}


def cell_speed(repeats, steps):
    """Training speed of the three cells (steps alternated; the speed part's batch and encoder,
    at the backbone parameters of Masked ELMo's C = 416 there)."""
    configs, shapes = cell_configs(MaskedElmoConfig(**{**ENCODER, "lstm_dim": 416}))
    models = {}
    for name, config in configs.items():
        keras.utils.set_random_seed(0)
        models[name] = MaskedElmoLanguageModel(MaskedElmoBackbone(config, dropout=0.1),
                                               VOCABULARY, NEGATIVES)
        models[name].compile(optimizer=optimizer())
    _, batch, tokens = batches(np.random.default_rng(0))
    times = alternated_step_seconds({name: (model, batch) for name, model in models.items()},
                                    repeats, steps)
    median = {k: float(np.median(v)) for k, v in times.items()}
    return {"shapes": shapes, "step_seconds": times, "step_seconds_median": median,
            "tokens_per_second": {k: tokens / v for k, v in median.items()},
            "over_elmo_cell": {k: median[CELLS[0]] / v for k, v in median.items()}}


def cell_loss(steps, seeds):
    """The held-out perplexity of the three cells on `tiny_masked`'s shape after equal steps."""
    configs, shapes = cell_configs(Recipe.from_name("tiny_masked").model)
    runs, medians = compare(ablation_data(), steps, seeds, "cell",
                            {name: {"config": c} for name, c in configs.items()})
    return {"recipe": "tiny_masked", "shapes": shapes, "steps": steps, "batch_size": 32,
            "runs": runs, "median": medians}


def selection_rate(steps, seeds, rates=SELECTION_RATES, real_text=True):
    """`tiny_masked` with each of `rates` (every other setting the recipe's), trained `steps`
    steps with each of `seeds` by the package's `train`, on the built-in generated corpus and
    on real text (`bench/real_text.py`'s LM corpus; `real_text=False`: the built-in one only);
    scored by `evaluate` (the masked-LM perplexity at the fixed held-out masking: 15 %,
    seed 0) on each held-out corpus's first half (dev: a corpus's rate is the one of the
    lowest mean over seeds) and reported on its second half (test)."""
    from elmo_tf.training.pretraining import evaluate, train

    directory = tempfile.mkdtemp()
    generated = write_generated_corpus(os.path.join(directory, "builtin"))  # `--corpus builtin`
    corpora = {"builtin": (generated["train"], generated["heldout"])}
    if real_text:
        paths = prepare(DEFAULT_DATA_DIR)
        corpora["real_text"] = (paths["lm_train"], paths["lm_heldout"])
    out = {"recipe": "tiny_masked", "steps": steps, "seeds": list(seeds), "rates": list(rates),
           "chosen_on": "the mean over seeds of the dev half's held-out masked-LM perplexity",
           "corpora": {}}
    for corpus, (train_files, heldout_files) in corpora.items():
        lines = [line for path in sorted(tf.io.gfile.glob(heldout_files))
                 for line in open(path, encoding="utf-8") if line.strip()]
        halves = {}
        for split, part in (("dev", lines[:len(lines) // 2]), ("test", lines[len(lines) // 2:])):
            halves[split] = os.path.join(directory, corpus, f"heldout-{split}.txt")
            os.makedirs(os.path.dirname(halves[split]), exist_ok=True)
            with open(halves[split], "w", encoding="utf-8") as f:
                f.writelines(part)
        runs = []
        for rate in rates:
            recipe = Recipe.from_dict({"base": "tiny_masked", "selection_rate": rate})
            for seed in seeds:
                output = os.path.join(directory, corpus, f"rate-{rate:g}", f"seed-{seed}")
                started = time.perf_counter()
                train(recipe, train_files, output, steps=steps, seed=seed, verbose=0,
                      xla="off")  # as measured (auto compiles 1,000 steps and more on CPUs)
                seconds = time.perf_counter() - started
                scores = {split: evaluate(output, path)["perplexity"]
                          for split, path in halves.items()}
                runs.append({"rate": rate, "seed": seed, **scores,
                             "train_seconds": round(seconds, 1)})
                print(corpus, f"rate {rate:g}, seed {seed}:", json.dumps(scores), flush=True)
        mean = {split: {f"{rate:g}": float(np.mean([r[split] for r in runs if r["rate"] == rate]))
                        for rate in rates} for split in ("dev", "test")}
        chosen = min(rates, key=lambda rate: mean["dev"][f"{rate:g}"])
        out["corpora"][corpus] = {"heldout_sentences": {"dev": len(lines) // 2,
                                                        "test": len(lines) - len(lines) // 2},
                                  "runs": runs, "mean": mean, "chosen": chosen,
                                  "chosen_test": mean["test"][f"{chosen:g}"]}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few steps: checks the script")
    parser.add_argument("--only", choices=PARTS,
                        help="run this part only, keeping the output file's other parts")
    parser.add_argument("--output", default=os.path.join(ROOT, "bench", "results",
                                                         "masked_elmo-cpu.json"))
    args = parser.parse_args()
    report = {}
    if args.only and os.path.exists(args.output):
        with open(args.output) as f:
            report = json.load(f)
    if "runs_of_parts" not in report and "command" in report:  # a file of one whole run
        run = {k: report.pop(k) for k in ("quick", "command", "date", "machine", "versions")}
        report["runs_of_parts"] = {part: run for part in ("speed", "mask_accumulation")
                                   if part in report}
    report.setdefault("runs_of_parts", {})
    report["benchmark"] = "masked_elmo"
    parts = [args.only] if args.only else PARTS
    for part in parts:
        # Each part says where and how it ran (parts may come from different sessions).
        report["runs_of_parts"][part] = {
            "quick": args.quick, "command": " ".join(["python"] + sys.argv),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": machine(), "versions": versions()}
        if part in ("speed", "speed_xla"):
            report[part] = speed(repeats=2 if args.quick else 5, steps=2 if args.quick else 5,
                                 xla=part == "speed_xla")
            print(json.dumps({k: report[part][k] for k in (
                "tokens_per_second", "masked_over_elmo", "every_row_over_selected")}),
                flush=True)
        elif part == "speed_rtd_xla":
            report[part] = speed_rtd_xla(repeats=2 if args.quick else 5,
                                         steps=2 if args.quick else 5)
            print(json.dumps({k: report[part][k] for k in (
                "step_seconds_median", "every_row_over_selected")}), flush=True)
        elif part == "mask_accumulation":
            report["mask_accumulation"] = ablation(steps=20 if args.quick else 400,
                                                   seeds=[0] if args.quick else [0, 1],
                                                   ks=[1, 2, 4])
            print(json.dumps(report["mask_accumulation"]["median_by_k"]))
        elif part == "tbptt":
            report["bidirectional_tbptt"] = tbptt_ablation(
                steps=20 if args.quick else 600, seeds=[0] if args.quick else [0, 1, 2])
            print(json.dumps(report["bidirectional_tbptt"]["median"]))
        elif part == "tbptt_documents":
            report["bidirectional_tbptt_documents"] = documents_tbptt(
                steps=20 if args.quick else DOCUMENTS_STEPS, seeds=[0] if args.quick else [0, 1])
            print(json.dumps(report["bidirectional_tbptt_documents"]["median"]), flush=True)
        elif part == "cell_speed":  # the cells' speed and loss parts share one entry
            report.setdefault("cells", {})["speed"] = cell_speed(
                repeats=2 if args.quick else 9, steps=2 if args.quick else 5)
            print(json.dumps(report["cells"]["speed"]["over_elmo_cell"]), flush=True)
        elif part == "selection_rate":
            report["selection_rate"] = selection_rate(
                steps=20 if args.quick else SELECTION_STEPS, seeds=[0] if args.quick else [0, 1],
                real_text=not args.quick)
            print(json.dumps({c: (v["mean"], v["chosen"])
                              for c, v in report["selection_rate"]["corpora"].items()}),
                  flush=True)
        else:
            report.setdefault("cells", {})["loss"] = cell_loss(
                steps=20 if args.quick else 300, seeds=[0] if args.quick else [0, 1, 2])
            print(json.dumps(report["cells"]["loss"]["median"]), flush=True)
        write_json_atomically(args.output, report)


if __name__ == "__main__":
    main()
