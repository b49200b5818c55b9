"""A generated language for ELMo pre-training: no download, no copied text, exact entropy.

`GeneratedLanguage` is a small probabilistic context-free grammar over 340 English-looking word
types (generic nouns, verbs and adjectives, invented names and a few invented words). Sentences
are independent draws of 3 to 44 tokens (10 on average). In outline, with `n` a number (sg or
pl) and `d` the depth of a subject (relative clauses nest at most 2 deep, so in the "if" clauses,
at depth 2, there are none):

    S        -> CLAUSE0 "." | "if" CLAUSE2 "," "then" CLAUSE2 "."
              | SUBJ_n1 SAY_n '"' CLAUSE1 '"' "."  (SAY: whisper, shout, ...)
              | ("does" SUBJ_sg0 | "do" SUBJ_pl0 | "did" SUBJ_n0) VP_base "?"
    CLAUSE_d -> SUBJ_nd VP_n                                    (the verb agrees with its subject)
    SUBJ_nd  -> DET_n ADJ{0,2} NOUN_n POST_nd | NAME (sg only)
    POST_nd  -> nothing | PP | "that" VP_n | "that" SUBJ_m(d+1) VT_m     (relatives only if d < 2)
    VP_n     -> VI_n MOD | VT_n OBJ MOD;  MOD -> nothing | ADV | PP;  PP -> PREP OBJ

OBJ is a determiner, adjectives and a noun of either number, or a name. The morphology is
regular so that a char CNN can use it: plural noun = singular + "s", verbs have base / + "s"
(3rd person singular present) / + "ed" (past, agrees with both numbers), adverb = adjective +
"ly". Long-range structure: agreement across up to two nested relative clauses ("the dog that
the cats that mara helps follow barks ."), "if" ... ", then", quotes that close, and a question
mark that answers the sentence's first word. Within every word class the words have Zipf
probabilities (proportional to 1 / rank), so the vocabulary is frequency-skewed like text.

The grammar is unambiguous (every sentence has exactly one derivation; `GeneratedLanguage.parse`
counts them), so P(sentence) is the product of the generator's choices and the entropy of a
sentence equals the expected sum of the choices' entropies, which `sentence_entropy` solves for
exactly. `write_generated_corpus` writes a corpus in the 1B Word Benchmark layout together with
the best perplexity any language model can reach on it.
"""

import bisect
import glob
import math
import os

import numpy as np

from elmo_tf.files import write_atomically

DEFAULT_SEED = 0
MAX_DEPTH = 2  # nested relative clauses in a subject

# Every class in Zipf order (the first word is the most frequent).
NOUNS = (  # plural = noun + "s"
    "dog", "cat", "bird", "farmer", "teacher", "river", "tree", "window", "garden", "baker",
    "sailor", "robot", "lamp", "kitten", "doctor", "painter", "singer", "horse", "rabbit", "ship",
    "tower", "lantern", "wizard", "pilot", "dragon", "clown", "monkey", "student", "kettle",
    "blicket", "wug", "tove", "glorp", "fendle", "zorbit", "mimble", "dorbin", "snapper",
    "quoggle", "trundle")
INTRANSITIVE_VERBS = (  # + "s": 3rd person singular present; + "ed": past
    "walk", "jump", "laugh", "wait", "rest", "wander", "listen", "linger", "yawn", "work",
    "play", "dream", "howl", "bark", "float", "glow", "hover", "blink", "frolp", "skitter")
TRANSITIVE_VERBS = (
    "follow", "help", "visit", "kick", "pull", "thank", "want", "call", "paint", "greet", "hunt",
    "guard", "mock", "warn", "avoid", "trust", "respect", "doubt", "remember", "answer", "bother",
    "collect", "protect", "blorf", "snib")
SPEECH_VERBS = ("whisper", "shout", "mutter", "yell", "insist", "remark", "explain", "claim")
ADJECTIVES = (  # the first ADVERB_BASES of them also give adverbs: adjective + "ly"
    "quick", "slow", "quiet", "loud", "bright", "soft", "warm", "cold", "brave", "calm", "odd",
    "sad", "glad", "kind", "wild", "proud", "swift", "neat", "rough", "smooth", "tall", "small",
    "old", "green", "blue", "round", "tiny", "wooden", "frumpy", "glib")
ADVERB_BASES = 20
NAMES = (
    "mara", "tobin", "elsa", "jonah", "priya", "oskar", "lena", "felix", "nadia", "ravi", "ida",
    "hugo", "zara", "milo", "anya", "cyrus", "wren", "bodhi", "ines", "kai")
PREPOSITIONS = (
    "near", "behind", "under", "beside", "with", "without", "above", "beyond", "toward", "inside")
SINGULAR_DETERMINERS = ("the", "this", "every", "each", "one")
PLURAL_DETERMINERS = ("the", "some", "these", "many", "few", "two", "several")


def _zipf(words):
    """One rule per word (a single-terminal right-hand side) with probability ∝ 1 / rank."""
    weights = 1.0 / np.arange(1, len(words) + 1)
    return [((word,), float(w)) for word, w in zip(words, weights / weights.sum(), strict=True)]


def _grammar():
    """The rules: {nonterminal: [(right-hand side, probability), ...]}; terminals are words."""
    rules = {
        "S": [
            (("CLAUSE0", "."), 0.6),
            (("if", "CLAUSE2", ",", "then", "CLAUSE2", "."), 0.12),
            (("SUBJ_sg1", "SAY_sg", '"', "CLAUSE1", '"', "."), 0.06),
            (("SUBJ_pl1", "SAY_pl", '"', "CLAUSE1", '"', "."), 0.04),
            (("does", "SUBJ_sg0", "VP_base", "?"), 0.08),
            (("do", "SUBJ_pl0", "VP_base", "?"), 0.06),
            (("did", "SUBJ_sg0", "VP_base", "?"), 0.02),
            (("did", "SUBJ_pl0", "VP_base", "?"), 0.02)],
        "VP_base": [(("VI", "MOD"), 0.45), (("VT", "OBJ", "MOD"), 0.55)],
        "OBJ": [(("DET_sg", "ADJS", "NOUN_sg"), 0.5), (("DET_pl", "ADJS", "NOUN_pl"), 0.35),
                (("NAME",), 0.15)],
        "MOD": [((), 0.6), (("ADV",), 0.2), (("PP",), 0.2)],
        "PP": [(("PREP", "OBJ"), 1.0)],
        "ADJS": [((), 0.6), (("ADJ",), 0.3), (("ADJ", "ADJ"), 0.1)],
        "NOUN_sg": _zipf(NOUNS),
        "NOUN_pl": _zipf([noun + "s" for noun in NOUNS]),
        "DET_sg": _zipf(SINGULAR_DETERMINERS),
        "DET_pl": _zipf(PLURAL_DETERMINERS),
        "ADJ": _zipf(ADJECTIVES),
        "ADV": _zipf([adjective + "ly" for adjective in ADJECTIVES[:ADVERB_BASES]]),
        "NAME": _zipf(NAMES),
        "PREP": _zipf(PREPOSITIONS),
    }
    for verbs, v in ((INTRANSITIVE_VERBS, "VI"), (TRANSITIVE_VERBS, "VT"), (SPEECH_VERBS, "SAY")):
        rules[v] = _zipf(verbs)  # base form: plural present, and after does / do / did
        rules[v + "_s"] = _zipf([verb + "s" for verb in verbs])
        rules[v + "_ed"] = _zipf([verb + "ed" for verb in verbs])
        rules[v + "_sg"] = [((v + "_s",), 0.7), ((v + "_ed",), 0.3)]
        rules[v + "_pl"] = [((v,), 0.7), ((v + "_ed",), 0.3)]
    for n in ("sg", "pl"):
        rules["VP_" + n] = [(("VI_" + n, "MOD"), 0.45), (("VT_" + n, "OBJ", "MOD"), 0.55)]
        for d in range(MAX_DEPTH + 1):
            noun_phrase = ("DET_" + n, "ADJS", "NOUN_" + n, f"POST_{n}{d}")
            rules[f"SUBJ_{n}{d}"] = (
                [(noun_phrase, 0.8), (("NAME",), 0.2)] if n == "sg" else [(noun_phrase, 1.0)])
            rules[f"POST_{n}{d}"] = [((), 0.8), (("PP",), 0.2)] if d == MAX_DEPTH else [
                ((), 0.55), (("PP",), 0.15), (("that", "VP_" + n), 0.15),
                (("that", f"SUBJ_sg{d + 1}", "VT_sg"), 0.08),
                (("that", f"SUBJ_pl{d + 1}", "VT_pl"), 0.07)]
    for d in range(MAX_DEPTH + 1):
        rules[f"CLAUSE{d}"] = [((f"SUBJ_sg{d}", "VP_sg"), 0.55), ((f"SUBJ_pl{d}", "VP_pl"), 0.45)]
    return rules


def _add(table, end, log_p, count):
    """Adds `count` derivations of total probability `exp(log_p)` ending at `end` to `table`."""
    old_log_p, old_count = table.get(end, (-math.inf, 0))
    table[end] = (float(np.logaddexp(old_log_p, log_p)), old_count + count)


class GeneratedLanguage:
    """The generated language: a sampler, an exact scorer, and its exact entropy.

    Attributes:
        rules: `{nonterminal: [(right-hand side tuple, probability), ...]}`. Nonterminals start
            with an upper-case letter; every other symbol is a token.

    Example:
    >>> language = GeneratedLanguage()
    >>> tokens, log_prob = language.sample_with_log_prob(np.random.default_rng(0))
    >>> math.isclose(language.log_prob(tokens), log_prob)
    True
    >>> language.log_prob(["the", "dog", "that", "the", "cats", "follow", "barks", "."]) < 0
    True
    >>> language.log_prob(["the", "dog", "that", "the", "cats", "follow", "bark", "."])
    -inf
    """

    def __init__(self):
        self.rules = _grammar()
        self._log_rules = {a: [(rhs, math.log(p)) for rhs, p in rules]
                           for a, rules in self.rules.items()}
        # Sampling thresholds: rule i is chosen for a uniform u in [cumsum[i-1], cumsum[i]).
        self._thresholds = {a: np.cumsum([p for _, p in rules])[:-1].tolist()
                            for a, rules in self.rules.items()}

    def sample(self, rng):
        """Draws one sentence.

        Args:
            rng: a `numpy.random.Generator`.

        Returns:
            The sentence's tokens, a list of `str` without `<S>` / `</S>`.
        """
        return self.sample_with_log_prob(rng)[0]

    def sample_with_log_prob(self, rng):
        """Draws one sentence and its natural log probability (the sum of its choices' logs).

        Args:
            rng: a `numpy.random.Generator`.

        Returns:
            `(tokens, log_prob)`.
        """
        tokens, log_prob, stack = [], 0.0, ["S"]
        while stack:
            symbol = stack.pop()
            if symbol not in self.rules:
                tokens.append(symbol)
                continue
            rhs, log_p = self._log_rules[symbol][
                bisect.bisect(self._thresholds[symbol], rng.random())]
            log_prob += log_p
            stack.extend(reversed(rhs))
        return tokens, log_prob

    def parse(self, tokens):
        """Finds every derivation of `tokens` (a memoised top-down chart; no rule left-recurses).

        Independent of the sampler: it sums the probabilities of all derivations of the tokens,
        so it gives P(sentence) even if the grammar were ambiguous, and it counts them.

        Args:
            tokens: a sequence of `str` (no sentence boundaries).

        Returns:
            `(log_prob, n_derivations)`; `(-inf, 0)` for a sentence the grammar cannot produce.

        Example:
        >>> GeneratedLanguage().parse(["mara", "barks", "."])[1]
        1
        """
        tokens, memo = list(tokens), {}

        def spans(symbol, start):
            """`{end: (log P, derivations)}` of `symbol` producing `tokens[start:end]`."""
            if symbol not in self.rules:
                return {start + 1: (0.0, 1)} if tokens[start:start + 1] == [symbol] else {}
            if (symbol, start) not in memo:
                found = {}
                for rhs, log_p in self._log_rules[symbol]:
                    partial = {start: (log_p, 1)}
                    for part in rhs:
                        extended = {}
                        for middle, (left_log_p, left_count) in partial.items():
                            for end, (right_log_p, right_count) in spans(part, middle).items():
                                _add(extended, end, left_log_p + right_log_p,
                                     left_count * right_count)
                        partial = extended
                    for end, (rule_log_p, count) in partial.items():
                        _add(found, end, rule_log_p, count)
                memo[symbol, start] = found
            return memo[symbol, start]

        return spans("S", 0).get(len(tokens), (-math.inf, 0))

    def log_prob(self, tokens):
        """Natural log probability of a sentence (`-inf` if the grammar cannot produce it).

        Args:
            tokens: a sequence of `str` (no sentence boundaries).
        """
        return self.parse(tokens)[0]

    def _expected(self, cost):
        """Expected sum of `cost(rules)` over the expansions of a derivation of S.

        Per nonterminal A: x_A = cost(A's rules) + sum_rules p * sum_{B in rhs} x_B, a linear
        system (it stays correct if the grammar recursed: it is solved, not unrolled).
        """
        names = list(self.rules)
        index = {name: i for i, name in enumerate(names)}
        counts = np.zeros((len(names), len(names)))
        for name, rules in self.rules.items():
            for rhs, p in rules:
                for part in rhs:
                    if part in index:
                        counts[index[name], index[part]] += p
        costs = np.array([cost(self.rules[name]) for name in names])
        return float(np.linalg.solve(np.eye(len(names)) - counts, costs)[index["S"]])

    def sentence_entropy(self):
        """Exact entropy of a sentence, E[-log P(sentence)], in nats.

        The grammar is unambiguous, so this is the entropy of a derivation: the expected sum of
        the entropies of the choices it makes.
        """
        return self._expected(lambda rules: -sum(p * math.log(p) for _, p in rules))

    def mean_tokens(self):
        """Exact expected number of tokens in a sentence (without `<S>` / `</S>`)."""
        return self._expected(
            lambda rules: sum(p * sum(part not in self.rules for part in rhs) for rhs, p in rules))

    def entropy_per_token(self):
        """The best cross-entropy a language model can reach, in nats per prediction.

        A forward LM predicts a sentence's n tokens and then `</S>` (a backward LM the n tokens
        and then `<S>`): n + 1 predictions whose log probabilities sum to log P(sentence). As
        sentences are independent, the lowest expected loss per prediction over a corpus is
        `sentence_entropy() / (mean_tokens() + 1)`, what a perfect model would average.
        """
        return self.sentence_entropy() / (self.mean_tokens() + 1)

    def best_perplexity(self):
        """`exp(entropy_per_token())`: the perplexity of the true distribution itself."""
        return math.exp(self.entropy_per_token())

    def words(self):
        """Every token the grammar can produce, sorted."""
        return sorted({part for rules in self.rules.values() for rhs, _ in rules for part in rhs
                       if part not in self.rules})


def _write_text(path, text):
    def write(tmp_path):
        with open(tmp_path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

    write_atomically(path, write)


def _lines(sentences):
    return "".join(" ".join(tokens) + "\n" for tokens in sentences)


def write_generated_corpus(directory, n_sentences=30_000, n_heldout=1_000, n_shards=10,
                           seed=DEFAULT_SEED):
    """Writes sentences of `GeneratedLanguage` in the 1B Word Benchmark layout.

    `directory/train/news.en-0000i-of-0000N` (i = 1..N, as the benchmark numbers its training
    shards), `directory/heldout/news.en.heldout-00000-of-00001` and `directory/README.txt` with
    the exact entropy and best perplexity. One sentence per line, tokens separated by spaces,
    UTF-8. Train and held-out sentences come from two independent streams of `seed`, so the
    held-out set does not depend on `n_sentences`. The same arguments give byte-identical files;
    each file is written atomically, and training shards left by an earlier call with another
    `n_shards` are removed.

    Args:
        directory: where to write (created if needed).
        n_sentences: training sentences.
        n_heldout: held-out sentences.
        n_shards: training shards (sentences split evenly, in order).
        seed: seed of `numpy.random.SeedSequence`.

    Returns:
        `{"train": glob, "heldout": glob, "readme": path, "entropy_per_token": nats,
        "best_perplexity": float, "n_sentences": int, "n_tokens": int}` where `n_tokens` counts
        the training tokens without sentence boundaries.

    Example:
    >>> corpus = write_generated_corpus("/tmp/generated", n_sentences=100, n_shards=2)
    >>> sorted(os.path.basename(p) for p in glob.glob(corpus["train"]))
    ['news.en-00001-of-00002', 'news.en-00002-of-00002']
    """
    language = GeneratedLanguage()
    train_rng, heldout_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    train = [language.sample(train_rng) for _ in range(n_sentences)]
    heldout = [language.sample(heldout_rng) for _ in range(n_heldout)]

    train_glob = os.path.join(directory, "train", "news.en-*")
    shards = [os.path.join(directory, "train", f"news.en-{i:05d}-of-{n_shards:05d}")
              for i in range(1, n_shards + 1)]
    for i, shard in enumerate(shards):
        _write_text(shard, _lines(train[i * n_sentences // n_shards:
                                        (i + 1) * n_sentences // n_shards]))
    for stale in set(glob.glob(train_glob)) - set(shards):
        os.remove(stale)
    _write_text(os.path.join(directory, "heldout", "news.en.heldout-00000-of-00001"),
                _lines(heldout))

    n_tokens = sum(len(tokens) for tokens in train)
    readme = os.path.join(directory, "README.txt")
    _write_text(readme, (
        "Sentences generated by elmo_tf.data.generated_corpus.GeneratedLanguage, a probabilistic\n"
        "grammar with one derivation per sentence, so its entropy is known exactly. No language\n"
        "model's expected cross-entropy per prediction (the tokens and </S>, or backwards the\n"
        "tokens and <S>) is below the entropy per token, nor its perplexity below the best.\n\n"
        f"seed: {seed}\n"
        f"train sentences: {n_sentences}\n"
        f"train tokens: {n_tokens}\n"
        f"heldout sentences: {n_heldout}\n"
        f"mean tokens per sentence: {language.mean_tokens():.6f}\n"
        f"sentence entropy (nats): {language.sentence_entropy():.6f}\n"
        f"entropy per token (nats): {language.entropy_per_token():.6f}\n"
        f"best perplexity: {language.best_perplexity():.6f}\n"))
    return {"train": train_glob,
            "heldout": os.path.join(directory, "heldout", "news.en.heldout-*"),
            "readme": readme,
            "entropy_per_token": language.entropy_per_token(),
            "best_perplexity": language.best_perplexity(),
            "n_sentences": n_sentences,
            "n_tokens": n_tokens}
