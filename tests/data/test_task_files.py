"""Readers of the files downstream tasks come in: GLUE's TSVs (each task's own columns, header
and quoting rules), CoNLL token/tag files and plain labelled text. The files are written here,
in the layouts GLUE's download script and CoNLL distribute."""

import pytest

from elmo_tf.data.conll import read_conll
from elmo_tf.data.glue import GLUE_TASKS, glue_splits, read_glue
from elmo_tf.data.labelled_text import read_labelled_text
from elmo_tf.metrics import scores

Q = '"'  # GLUE's files are not quoted: a quote is part of the text
# Per task: (train/dev lines, header included where the task has one), and its test lines.
GLUE_FILES = {
    "CoLA": (["gj04\t1\t\tOur friends won't buy this analysis, let alone the next one .",
              f"gj04\t0\t*\tOne more pseudo generalization and I'm giving {Q}up{Q} ."],
             ["index\tsentence", "0\tBill whistled past the house ."]),
    "SST-2": (["sentence\tlabel", f"it 's a {Q}charming{Q} journey . \t1", "unflinchingly bleak\t0"],
              ["index\tsentence", "0\tuneasy mishmash of styles"]),
    "MRPC": (["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
              "1\t702876\t702977\tAmrozi accused his brother .\tHe accused his brother ."],
             ["index\t#1 ID\t#2 ID\t#1 String\t#2 String", "0\t1\t2\tA first .\tA second ."]),
    "QQP": (["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
             "133273\t213221\t213222\tHow is the life of a math student?\tWhich is best?\t0"],
            ["id\tquestion1\tquestion2", "0\tWhy?\tWhy not?"]),
    "STS-B": (["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
               "\tscore", "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is "
               "taking off.\tAn air plane is taking off.\t5.000"],
              ["index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
               "sentence2", "0\tmain-news\theadlines\t2016\t0\tnone\tnone\tA b .\tC d ."]),
    "MNLI": (["index\tpromptID\tpairID\tgenre\ts1_bp\ts2_bp\ts1_p\ts2_p\tsentence1\tsentence2"
              "\tlabel1\tgold_label",
              "0\t31193\t31193n\tgov\t(\t(\t(\t(\tConceptually cream skimming .\tProduct and "
              "geography .\tneutral\tneutral"],
             ["index\tpromptID\tpairID\tgenre\ts1_bp\ts2_bp\ts1_p\ts2_p\tsentence1\tsentence2",
              "0\t1\t1n\tfiction\t(\t(\t(\t(\tHe ran .\tHe moved ."]),
    "QNLI": (["index\tquestion\tsentence\tlabel",
              "0\tWhen did it start?\tIt started in 1990 .\tentailment"],
             ["index\tquestion\tsentence", "0\tWho?\tNobody ."]),
    "RTE": (["index\tsentence1\tsentence2\tlabel", "0\tNo weapons .\tWeapons found .\t"
             "not_entailment"], ["index\tsentence1\tsentence2", "0\tA .\tB ."]),
    "WNLI": (["index\tsentence1\tsentence2\tlabel", "0\tI stuck a pin .\tI had a pin .\t1"],
             ["index\tsentence1\tsentence2", "0\tA .\tB ."]),
}
EXPECTED = {  # task: (first training example's texts, its label id or score)
    "cola": (("Our friends won't buy this analysis, let alone the next one .",), 1),
    "sst2": ((f"it 's a {Q}charming{Q} journey . ",), 1),
    "mrpc": (("Amrozi accused his brother .", "He accused his brother ."), 1),
    "qqp": (("How is the life of a math student?", "Which is best?"), 0),
    "stsb": (("A plane is taking off.", "An air plane is taking off."), 5.0),
    "mnli": (("Conceptually cream skimming .", "Product and geography ."), 2),
    "qnli": (("When did it start?", "It started in 1990 ."), 0),
    "rte": (("No weapons .", "Weapons found ."), 1),
    "wnli": (("I stuck a pin .", "I had a pin ."), 1),
}


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue")
    for task in GLUE_TASKS.values():
        lines, test_lines = GLUE_FILES[task.directory]
        (root / task.directory).mkdir()
        for split in ("train", *task.dev_files):
            name = task.dev_files.get(split, "train.tsv")
            (root / task.directory / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        tests = ["test_matched", "test_mismatched"] if task.directory == "MNLI" else ["test"]
        for split in tests:
            (root / task.directory / f"{split}.tsv").write_text("\n".join(test_lines) + "\n")
    return root


@pytest.mark.parametrize("task", list(GLUE_TASKS))
def test_each_glue_task_reads_its_own_columns(glue_dir, task):
    for split in glue_splits(task):
        texts, labels = read_glue(task, glue_dir, split)
        if split.startswith("test"):
            assert labels is None and len(texts) == 1
            assert len(texts[0]) == len(GLUE_TASKS[task].text_columns)
            assert all(texts[0]) and not any(t.isdigit() for t in texts[0])  # not the index
        else:
            assert (texts[0], labels[0]) == EXPECTED[task], split
    # The directory of the task itself works too, and every metric named exists.
    assert read_glue(task, glue_dir / GLUE_TASKS[task].directory, "train")[0][0] == \
        EXPECTED[task][0]
    assert all(callable(getattr(scores, m)) for m in GLUE_TASKS[task].metrics)


def test_cola_has_no_header_and_keeps_every_line(glue_dir):
    texts, labels = read_glue("cola", glue_dir, "train")
    assert labels == [1, 0] and texts[1][0].endswith(f"giving {Q}up{Q} .")


def test_glue_errors_name_the_file_the_line_and_what_is_expected(glue_dir, tmp_path):
    (tmp_path / "RTE").mkdir()
    bad = tmp_path / "RTE" / "train.tsv"
    bad.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\tonly two\n")
    with pytest.raises(ValueError, match=r"RTE/train.tsv, line 3: 2 tab-separated columns; "
                                         r"GLUE rte train/dev lines have at least 4 \(text in "
                                         r"column 2, text in column 3, the label in column 4\)"):
        read_glue("rte", tmp_path, "train")
    bad.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    with pytest.raises(ValueError, match=r"line 2: label 'maybe'; GLUE rte's labels are "
                                         r"\['entailment', 'not_entailment'\]"):
        read_glue("rte", tmp_path, "train")
    (tmp_path / "MNLI").mkdir()
    header = "\t".join(f"c{i}" for i in range(12))
    (tmp_path / "MNLI" / "train.tsv").write_text(header + "\n" + "\t".join("x" * 10) + "\n")
    with pytest.raises(ValueError, match=r"line 2: 10 tab-separated columns; GLUE mnli "
                                         r"train/dev lines have at least 11 .*the label in the "
                                         r"last column"):
        read_glue("mnli", tmp_path, "train")
    with pytest.raises(FileNotFoundError, match=r"DATA_DIR/RTE/dev.tsv"):
        read_glue("rte", tmp_path, "dev")
    with pytest.raises(ValueError, match=r"has the splits \['train', 'dev_matched', "
                                         r"'dev_mismatched', 'test_matched', 'test_mismatched'\]"):
        read_glue("mnli", glue_dir, "dev")
    with pytest.raises(ValueError, match="unknown GLUE task 'sst-2'; known: cola, sst2"):
        read_glue("sst-2", glue_dir, "train")


def test_conll_sentences_tags_and_errors(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n\n"
                    "Peter NNP B-NP B-PER\n")
    tokens, tags = read_conll(path)
    assert tokens == [["EU", "rejects"], ["Peter"]] and tags == [["B-ORG", "O"], ["B-PER"]]
    assert read_conll(path, tag_column=1)[1] == [["NNP", "VBZ"], ["NNP"]]
    path.write_text("EU B-ORG\nrejects\n")
    with pytest.raises(ValueError, match=r"train.txt, line 2: 1 column\(s\); a CoNLL line holds "
                                         r"the token, then its tag"):
        read_conll(path)
    path.write_text("\n\n")
    with pytest.raises(ValueError, match="holds no sentence"):
        read_conll(path)


def test_labelled_text_single_and_pairs(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text(f"positive\tA {Q}fine{Q} film .\n\nnegative\tDull .\n")
    assert read_labelled_text(path) == ([(f"A {Q}fine{Q} film .",), ("Dull .",)],
                                        ["positive", "negative"])
    path.write_text("1\tA man sleeps .\tA person rests .\n")
    assert read_labelled_text(path, pairs=True) == ([("A man sleeps .", "A person rests .")],
                                                    ["1"])
    with pytest.raises(ValueError, match=r"line 1: 3 tab-separated field\(s\); expected "
                                         r"label<TAB>text\."):
        read_labelled_text(path)
    path.write_text("\tno label\n")
    with pytest.raises(ValueError, match="with an empty label; expected label<TAB>text"):
        read_labelled_text(path)


def test_glue_from_a_prepared_tfds_dataset(tmp_path):
    """TFDS's `glue/mnli` layout (features, label names in TFDS's order), prepared here from a
    few rows: its labels come back as this package's ids, mapped by name."""
    import tensorflow as tf
    import tensorflow_datasets as tfds

    from elmo_tf.data.glue import read_glue_tfds

    features = tfds.features.FeaturesDict({
        "premise": tfds.features.Text(), "hypothesis": tfds.features.Text(),
        "label": tfds.features.ClassLabel(names=["entailment", "neutral", "contradiction"]),
        "idx": tf.int32})
    rows = tf.data.Dataset.from_tensor_slices({
        "premise": ["A man sleeps .", "It rains ."], "hypothesis": ["He rests .", "It is dry ."],
        "label": [0, 2], "idx": [0, 1]})
    tfds.dataset_builders.TfDataBuilder(
        name="glue", config="mnli", version="2.0.0", data_dir=str(tmp_path), features=features,
        split_datasets={"train": rows, "validation_matched": rows,
                        "validation_mismatched": rows.take(1)}).download_and_prepare()
    texts, labels = read_glue_tfds("mnli", tmp_path, "train")
    assert texts == [("A man sleeps .", "He rests ."), ("It rains .", "It is dry .")]
    assert [GLUE_TASKS["mnli"].labels[k] for k in labels] == ["entailment", "contradiction"]
    assert len(read_glue_tfds("mnli", tmp_path, "dev_mismatched")[0]) == 1
    with pytest.raises(FileNotFoundError, match="glue/rte is not prepared in .*Nothing is "
                                                "downloaded"):
        read_glue_tfds("rte", tmp_path, "train")
