import pytest


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """A small generated corpus (400 training sentences in 2 shards, 10 held out), read by the
    training runs of these tests (`test_pretraining.py` trains on a larger one of its own)."""
    from elmo_tf.data.generated_corpus import write_generated_corpus

    return write_generated_corpus(tmp_path_factory.mktemp("corpus"), n_sentences=400,
                                  n_heldout=10, n_shards=2)
