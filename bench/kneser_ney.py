"""An interpolated modified Kneser-Ney n-gram language model (KenLM's estimate), the baseline
that a neural language model on a CPU budget has to beat (`bench/downstream.py`).

Chen & Goodman (1998)'s interpolated modified Kneser-Ney, with KenLM's (Heafield et al. 2013)
conventions:

* Sentences are `<S> w1 .. wn </S>`; `</S>` is predicted, `<S>` is context only. Words outside
  the vocabulary are `<UNK>` (in training and evaluation alike).
* Adjusted counts: the highest order and n-grams that start with `<S>` keep their counts; every
  other n-gram counts its distinct left extensions (continuation counts).
* Three discounts per order from the counts of counts of the adjusted counts:
  `Y = t1 / (t1 + 2 t2)`, `D_k = k - (k + 1) Y t_{k+1} / t_k` for k = 1, 2, 3 (3 stands for 3
  and more).
* `p(w | h) = max(a(hw) - D(a(hw)), 0) / a(h.) + gamma(h) p(w | h')`, with
  `gamma(h) = (D_1 N_1(h.) + D_2 N_2(h.) + D_3 N_3+(h.)) / a(h.)` and `h'` the context without
  its first word; an unseen context backs off entirely; the unigrams interpolate with the
  uniform distribution over the vocabulary (every word but `<S>`, `<UNK>` included).

Example:
>>> model = KneserNey(order=3).fit([["a", "b"], ["a", "c"]], vocabulary=["a", "b", "c"])
>>> round(sum(model.probability(w, ("<S>", "a")) for w in model.words), 6)
1.0
>>> round(model.perplexity([["a", "b"]]), 2)
3.14
"""

import collections
import math

BOS, EOS, UNK = "<S>", "</S>", "<UNK>"


class KneserNey:
    """Interpolated modified Kneser-Ney (see the module docstring).

    Args:
        order: the longest n-gram (5: the usual baseline).
    """

    def __init__(self, order=5):
        if not isinstance(order, int) or order < 1:
            raise ValueError(f"order must be an integer >= 1; got {order!r}")
        self.order = order

    def fit(self, sentences, vocabulary):
        """Estimates the model from `sentences` (lists of word strings).

        Args:
            sentences: an iterable of token lists (no boundaries).
            vocabulary: the words the model predicts; others become `<UNK>`. `<S>`, `</S>`
                and `<UNK>` are added when missing.

        Returns:
            self.
        """
        known = set(vocabulary) - {BOS}
        self.words = sorted(known | {EOS, UNK})
        self._known = known
        counts = [collections.Counter() for _ in range(self.order + 1)]  # counts[n]: n-grams
        for sentence in sentences:
            tokens = self._tokens(sentence)
            for i in range(1, len(tokens)):
                for n in range(1, min(self.order, i + 1) + 1):
                    counts[n][tuple(tokens[i - n + 1:i + 1])] += 1
        adjusted = [None] * (self.order + 1)
        adjusted[self.order] = counts[self.order]
        for n in range(self.order - 1, 0, -1):
            extensions = collections.Counter(gram[1:] for gram in counts[n + 1])
            adjusted[n] = {gram: count if gram[0] == BOS else extensions[gram]
                           for gram, count in counts[n].items()}
        self._probabilities = [None] * (self.order + 1)
        self._backoffs = [None] * (self.order + 1)
        self.discounts = [None] * (self.order + 1)
        for n in range(1, self.order + 1):
            discounts = _discounts(adjusted[n].values())
            self.discounts[n] = discounts
            totals = collections.defaultdict(lambda: [0, 0, 0, 0])  # a(h.), N1, N2, N3+
            for gram, count in adjusted[n].items():
                total = totals[gram[:-1]]
                total[0] += count
                total[min(count, 3)] += 1
            self._probabilities[n] = {
                gram: (count - discounts[min(count, 3)]) / totals[gram[:-1]][0]
                for gram, count in adjusted[n].items()}
            self._backoffs[n] = {
                context: sum(discounts[k] * total[k] for k in (1, 2, 3)) / total[0]
                for context, total in totals.items()}
        return self

    def _tokens(self, sentence):
        return [BOS] + [w if w in self._known else UNK for w in sentence] + [EOS]

    def probability(self, word, context):
        """`p(word | context)`: `context` the preceding tokens (a tuple, `<S>` first at the
        start of a sentence), of which the last `order - 1` are used; words outside the
        vocabulary are `<UNK>`."""
        context = tuple(w if w in self._known or w in (BOS, EOS) else UNK
                        for w in tuple(context)[max(0, len(context) - self.order + 1):])
        word = word if word in self._known or word == EOS else UNK
        p = 1.0 / len(self.words)
        for n in range(1, len(context) + 2):
            history = context[len(context) - n + 1:]
            backoff = self._backoffs[n].get(history)
            if backoff is None:  # an unseen context: all the mass goes to the shorter one
                continue
            p = self._probabilities[n].get(history + (word,), 0.0) + backoff * p
        return p

    def log_likelihoods(self, sentences):
        """The natural-log probability of every predicted token (`w1 .. wn </S>` of each
        sentence), as one flat list."""
        out = []
        for sentence in sentences:
            tokens = self._tokens(sentence)
            for i in range(1, len(tokens)):
                out.append(math.log(self.probability(tokens[i], tokens[:i][-self.order + 1:]
                                                     if self.order > 1 else ())))
        return out

    def perplexity(self, sentences):
        """exp of the mean negative log-likelihood of the predicted tokens of `sentences`."""
        values = self.log_likelihoods(sentences)
        return math.exp(-sum(values) / len(values))


def _discounts(adjusted_counts):
    """`[0, D1, D2, D3+]` from the counts of counts (Chen & Goodman's estimate), clamped to
    `[0, k]` where a count of counts is missing (tiny corpora)."""
    t = collections.Counter(count for count in adjusted_counts if count <= 4)
    y = t[1] / (t[1] + 2 * t[2]) if t[1] + 2 * t[2] else 0.5
    discounts = [0.0]
    for k in (1, 2, 3):
        d = k - (k + 1) * y * t[k + 1] / t[k] if t[k] else k * 0.5
        discounts.append(min(max(d, 0.0), float(k)))
    return discounts
