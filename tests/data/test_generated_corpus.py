import collections
import functools
import glob
import inspect
import math
import os
import pathlib

import numpy as np
import pytest

from elmo_tf.data import generated_corpus as gc

SINGULAR = set(gc.NOUNS) | set(gc.NAMES)
PLURAL = {noun + "s" for noun in gc.NOUNS}
VERBS = gc.INTRANSITIVE_VERBS + gc.TRANSITIVE_VERBS + gc.SPEECH_VERBS
BASE, THIRD_SINGULAR, PAST = set(VERBS), {v + "s" for v in VERBS}, {v + "ed" for v in VERBS}
VERB_FORMS = BASE | THIRD_SINGULAR | PAST
PRE_NOUN = set(gc.SINGULAR_DETERMINERS) | set(gc.PLURAL_DETERMINERS) | set(gc.ADJECTIVES)
AUXILIARY_NUMBER = {"does": "sg", "do": "pl", "did": None}


def read(path):
    return pathlib.Path(path).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def language():
    return gc.GeneratedLanguage()


@pytest.fixture(scope="module")
def samples(language):
    rng = np.random.default_rng(123)
    return [language.sample_with_log_prob(rng) for _ in range(20_000)]


def check_structure(tokens):
    """Asserts agreement and the long-range constructions straight from the tokens.

    Independent of the grammar's rules: a noun after a verb or preposition (determiners and
    adjectives skipped) is an object, any other noun a subject waiting for its verb. A verb right
    after "that" belongs to the relative clause's head (the waiting subject, still waiting);
    any other verb takes the latest waiting subject. Verbs agree (past tense with either number);
    after does / do / did the subject's verb is the base form.
    """
    waiting, auxiliary, previous_head = [], None, None  # waiting: (number, after an auxiliary)
    for previous, token in zip([None] + tokens, tokens):
        if token in SINGULAR | PLURAL and previous_head not in VERB_FORMS | set(gc.PREPOSITIONS):
            number = "sg" if token in SINGULAR else "pl"
            assert AUXILIARY_NUMBER.get(auxiliary) in (None, number), tokens
            waiting.append((number, auxiliary is not None))
            auxiliary = None
        elif token in VERB_FORMS:
            if previous == "that":
                number, after_auxiliary = waiting[-1][0], False
            else:
                number, after_auxiliary = waiting.pop()
            present = THIRD_SINGULAR if number == "sg" else BASE
            assert token in (BASE if after_auxiliary else PAST | present), tokens
        elif token in AUXILIARY_NUMBER:
            auxiliary = token
        if token not in PRE_NOUN:
            previous_head = token
    assert not waiting, tokens
    assert (tokens[0] in AUXILIARY_NUMBER) == (tokens[-1] == "?") == (tokens[-1] != "."), tokens
    assert tokens.count(",") == tokens.count("then") == tokens.count("if") == (tokens[0] == "if")
    assert "then" not in tokens or tokens[tokens.index("then") - 1] == ",", tokens
    assert tokens.count('"') in (0, 2) and tokens.count('"') == 2 * (tokens[-2] == '"'), tokens


def test_monte_carlo_matches_the_exact_entropy_and_length(language, samples):
    surprisal = np.array([-log_prob for _, log_prob in samples])
    lengths = np.array([len(tokens) for tokens, _ in samples])
    se = surprisal.std() / math.sqrt(len(samples))
    assert abs(surprisal.mean() - language.sentence_entropy()) < 4 * se
    length_se = lengths.std() / math.sqrt(len(samples))
    assert abs(lengths.mean() - language.mean_tokens()) < 4 * length_se
    assert 8 < language.mean_tokens() < 15


def test_per_token_entropy_counts_the_end_of_sentence_prediction(language):
    expected = language.sentence_entropy() / (language.mean_tokens() + 1)
    assert language.entropy_per_token() == pytest.approx(expected)
    assert language.best_perplexity() == pytest.approx(math.exp(expected))
    assert 1.0 < language.entropy_per_token() < math.log(len(language.words()))


def test_every_sample_has_one_derivation_and_the_parser_agrees_with_the_sampler(
        language, samples):
    for tokens, log_prob in samples[:2_000]:
        parsed_log_prob, n_derivations = language.parse(tokens)
        assert n_derivations == 1, tokens
        assert parsed_log_prob == pytest.approx(log_prob, abs=1e-9), tokens


def test_sample_draws_the_same_sentences_as_sample_with_log_prob(language):
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert [language.sample(a) for _ in range(50)] == [
        language.sample_with_log_prob(b)[0] for _ in range(50)]


@pytest.mark.parametrize("sentence", [
    "the dog that the cats follow barks .",
    "does the dog that the cats that mara helps follow bark ?",
    'the cats that ida follows whisper " the dogs walked quickly " .',
    "did the kittens near the river walk ?",
])
def test_grammatical_sentences_have_one_derivation(language, sentence):
    log_prob, n_derivations = language.parse(sentence.split())
    assert n_derivations == 1 and math.isfinite(log_prob)


@pytest.mark.parametrize("sentence", [
    "the dog that the cats follow bark .",  # main verb disagrees across the relative clause
    "the dog that the cats follows barks .",  # relative clause verb disagrees
    "do the dog walk ?",  # auxiliary disagrees
    "does the dog walks ?",  # no base form after the auxiliary
    "does the dog walk .",  # question without "?"
    'mara whispers " the dogs walk .',  # quote not closed
    "if the dogs walk , the cats sleep .",  # "if" without "then"
    "the dog barks",  # no full stop
    "the dog barks . .",
    "dog the barks .",  # words shuffled
    "the dog that the cat that the bird that mara helps follows calls barks .",  # too deep
    "the dog zorps .",  # unknown word
    "",
])
def test_ungrammatical_sentences_score_minus_infinity(language, sentence):
    assert language.log_prob(sentence.split()) == -math.inf


def test_reversed_and_truncated_samples_score_minus_infinity(language, samples):
    for tokens, _ in samples[:300]:
        assert language.log_prob(tokens[::-1]) == -math.inf
        assert language.log_prob(tokens[:-1]) == -math.inf


def test_samples_respect_agreement_quotes_conditionals_and_questions(samples):
    for tokens, _ in samples:
        check_structure(tokens)
    counts = collections.Counter(tokens[0] for tokens, _ in samples)
    assert counts["if"] > 1_000 and counts["does"] > 1_000 and counts["do"] > 500
    assert sum('"' in tokens for tokens, _ in samples) > 1_000
    assert sum(tokens.count("that") >= 2 for tokens, _ in samples) > 100  # nested relatives


def test_the_structure_check_is_not_vacuous():
    for sentence in ["the dog that the cats follow bark .", "does the dogs walk ?"]:
        with pytest.raises(AssertionError):
            check_structure(sentence.split(" "))


def test_rules_are_distributions_over_a_bounded_language(language):
    for name, rules in language.rules.items():
        assert name[0].isupper() and sum(p for _, p in rules) == pytest.approx(1.0), name
        assert all(p > 0 for _, p in rules), name

    @functools.cache
    def longest(symbol):
        if symbol not in language.rules:
            return 1
        return max(sum(longest(part) for part in rhs) for rhs, _ in language.rules[symbol])

    assert longest("S") < 50


def test_words_are_lower_case_with_regular_morphology(language):
    words = language.words()
    assert 150 <= len(words) <= 400 and len(set(words)) == len(words)
    assert all(w == w.lower() and " " not in w for w in words)
    assert {",", ".", "?", '"'} <= set(words)
    assert {"dog", "dogs", "walk", "walks", "walked", "quick", "quickly"} <= set(words)
    classes = [SINGULAR, PLURAL, BASE, THIRD_SINGULAR, PAST, set(gc.ADJECTIVES),
               set(gc.PREPOSITIONS), set(gc.SINGULAR_DETERMINERS) | set(gc.PLURAL_DETERMINERS)]
    assert sum(map(len, classes)) == len(set().union(*classes))  # no word in two classes


def test_word_frequencies_are_skewed(language, samples):
    counts = collections.Counter(token for tokens, _ in samples for token in tokens)
    per_type = [counts[word] for word in language.words()]
    assert max(per_type) > 50 * np.median(per_type)
    nouns = [counts[noun] for noun in gc.NOUNS]
    assert nouns[0] > 10 * np.median(nouns)


def test_writer_layout_readme_and_defaults(tmp_path, language):
    defaults = inspect.signature(gc.write_generated_corpus).parameters
    assert 20_000 <= defaults["n_sentences"].default <= 50_000
    assert defaults["n_heldout"].default == 1_000 and defaults["seed"].default == gc.DEFAULT_SEED

    corpus = gc.write_generated_corpus(tmp_path, n_sentences=1_001, n_heldout=50, n_shards=3)
    train = sorted(glob.glob(corpus["train"]))
    assert [os.path.relpath(p, tmp_path) for p in train] == [
        os.path.join("train", f"news.en-0000{i}-of-00003") for i in (1, 2, 3)]
    assert glob.glob(corpus["heldout"]) == [
        os.path.join(tmp_path, "heldout", "news.en.heldout-00000-of-00001")]
    sentences = [line for path in train for line in read(path).split("\n")[:-1]]
    heldout = read(glob.glob(corpus["heldout"])[0])
    assert len(sentences) == corpus["n_sentences"] == 1_001 and heldout.count("\n") == 50
    assert corpus["n_tokens"] == sum(len(s.split(" ")) for s in sentences)
    assert all(language.log_prob(s.split(" ")) > -math.inf for s in sentences[:200])
    assert corpus["entropy_per_token"] == language.entropy_per_token()
    assert corpus["best_perplexity"] == language.best_perplexity()

    readme = dict(line.split(": ") for line in read(corpus["readme"]).split("\n") if ": " in line)
    assert int(readme["train sentences"]) == 1_001 and int(readme["heldout sentences"]) == 50
    assert int(readme["train tokens"]) == corpus["n_tokens"]
    for key, value in [("entropy per token (nats)", language.entropy_per_token()),
                       ("best perplexity", language.best_perplexity()),
                       ("sentence entropy (nats)", language.sentence_entropy()),
                       ("mean tokens per sentence", language.mean_tokens())]:
        assert float(readme[key]) == pytest.approx(value, abs=1e-6), key
    assert not glob.glob(os.path.join(tmp_path, "*", "*.tmp"))


def test_writer_is_deterministic_per_seed(tmp_path):
    def contents(directory, seed):
        gc.write_generated_corpus(directory, n_sentences=500, n_heldout=20, n_shards=2, seed=seed)
        return {os.path.relpath(p, directory): pathlib.Path(p).read_bytes()
                for p in glob.glob(os.path.join(directory, "**", "*"), recursive=True)
                if os.path.isfile(p)}

    first = contents(tmp_path / "a", 0)
    assert first == contents(tmp_path / "b", 0)
    other = contents(tmp_path / "c", 1)
    assert other.keys() == first.keys() and other != first
    key = os.path.join("train", "news.en-00001-of-00002")
    assert other[key] != first[key]


def test_heldout_does_not_depend_on_the_training_size_and_stale_shards_go(tmp_path):
    small = gc.write_generated_corpus(tmp_path / "a", n_sentences=100, n_heldout=30, n_shards=4)
    gc.write_generated_corpus(tmp_path / "b", n_sentences=300, n_heldout=30, n_shards=2)
    heldout_a, heldout_b = glob.glob(small["heldout"]) + glob.glob(str(tmp_path / "b/heldout/*"))
    assert read(heldout_a) == read(heldout_b)
    rewritten = gc.write_generated_corpus(tmp_path / "a", n_sentences=100, n_heldout=30, n_shards=2)
    assert len(glob.glob(rewritten["train"])) == 2


def test_default_corpus_is_quick_to_generate(tmp_path):
    corpus = gc.write_generated_corpus(tmp_path)
    assert corpus["n_sentences"] == 30_000 and len(glob.glob(corpus["train"])) == 10
    assert 8 * 30_000 < corpus["n_tokens"] < 15 * 30_000
