"""`MaskedElmoLanguageModel`: Masked ELMo's pre-training task (BERT's masked-LM loss)."""

import keras
import tensorflow as tf

from elmo_tf.checks import non_negative_number_problems
from elmo_tf.layers.bilstm_stack import BiLSTMStack
from elmo_tf.metrics.perplexity import Perplexity
from elmo_tf.models.language_model import LanguageModel
from elmo_tf.ops.padding import char_ids_mask
from elmo_tf.text.char_ids import tokens_to_char_ids
from elmo_tf.text.vocabulary import Vocabulary

NEXT_TOKEN_TARGETS = ("forward_targets", "backward_targets")


@keras.saving.register_keras_serializable(package="elmo_tf")
class MaskedElmoLanguageModel(LanguageModel):
    """Pre-trains a `MaskedElmoBackbone` with BERT's masked-LM objective.

    The backbone reads sentences in which some tokens were masked
    (`elmo_tf.data.masked_language_model_dataset`, `elmo_tf.ops.masking`); at every selected
    position, and only there (the selected rows are gathered before the softmax), a softmax
    over the word vocabulary (`WordSoftmax`: sampled, log-uniform, accidental hits removed, in
    training when the vocabulary is larger than `num_negatives`; full otherwise and in
    evaluation) predicts the original token from `[forward; backward]` of the top layer (`2P`
    wide). The loss is the mean NLL over the selected positions of the global batch;
    `perplexity` is its exponential (masked-LM perplexity).

    With `next_token_weight` > 0 (beyond the paper; `docs/masked_elmo.md`), the loss adds that
    weight times ELMo's next-token loss on the *first* layer, whose directions have each read
    one side only (layer 2 on reads both): on the `<S> .. </S>` grid its forward half predicts
    the next word and its backward half the previous one, through the same softmax and its
    candidates (each half against its half of the softmax's columns: what `[forward; 0]` and
    `[0; backward]` would score, without the zeros), averaged over both directions; so every
    token, not 15 % of them, supervises the token encoder and the first layer.
    `next_token_perplexity` is that loss's perplexity.

    With `cloze_weight` > 0 (beyond the paper: the two-tower cloze objective of Baevski et al.
    2019 on the first layer; `docs/masked_elmo.md`), the loss adds that weight times a cloze
    loss: every token, selected or not, is predicted through the same softmax from
    `[forward; backward]` of the first layer with the forward half taken at the position
    before it and the backward half at the position after it, neither of which has read it.
    `cloze_perplexity` is its perplexity. On stream windows too: a window's first and last
    tokens, whose neighbour on one side is in another window, are not predicted (a carried
    state has read only one direction: still no leak).

    With `replaced_token_weight` > 0 (beyond the paper, a clearly labelled extension: ELECTRA's
    replaced-token detection, Clark et al. 2020; `docs/masked_elmo.md`), the masked LM is a
    small *generator*: the backbone's token encoder (shared, as ELECTRA shares its embeddings)
    and one bidirectional layer of a quarter of the backbone's memory cells, through this
    model's softmax. At each selected position a word is drawn from the generator's softmax
    (`WordSoftmax.nll_and_samples`: the full softmax, never a special token), and the
    backbone, the *discriminator*, reads the sentence
    with the drawn words in place of the selected ones (their char ids from the vocabulary,
    `set_vocabulary`) and predicts at every token, from `[forward; backward]` of its top layer,
    whether the token was replaced (a word drawn equal to the original is not). The loss is
    the generator's masked-LM loss plus `replaced_token_weight` times the mean binary
    cross-entropy over every token (ELECTRA's weight: 50), plus the cloze loss on the
    discriminator's first layer with `cloze_weight` > 0; `perplexity` is the generator's
    masked-LM perplexity (the discriminator has no softmax of its own) and
    `replaced_token_accuracy` the discriminator's accuracy (`replaced_token_share`: the share
    of tokens replaced, whose complement "never replaced" scores). The backbone saved and
    embedded is the discriminator; the generator is the task's. No gradient flows through the
    draw.

    The first layer's next-token loss and the replaced-token detection read sentence
    inputs only; training batches must hold the targets of the model's losses. In evaluation
    the loss is the masked LM's alone (so that held-out losses compare across runs); their
    perplexities are measured where the batches hold their targets.

    Inputs: `{"char_ids": int32 [batch, time, chars]}`, masked sentences without boundaries
    (every row from zero state); or `{"stream_char_ids": ...}`, masked windows of token streams
    (`<S>`/`</S>` are tokens; bidirectional truncated backpropagation through time, through
    `MaskedElmoBackbone.encode_stream`: the backbone needs `stream_rows`). Both from
    `elmo_tf.data.masked_language_model_dataset`.
    Targets: `{"targets": int32 [batch, time]}`, the original word id at selected positions,
    -1 elsewhere; with the cloze loss, `"cloze_targets"` int32 `[batch, time]` too (every
    word's id; on stream windows -1 at `<S>`, `</S>` and a window's first and last tokens; the
    replaced-token detection reads them too), and with the next-token loss,
    `"forward_targets"` and `"backward_targets"`
    int32 `[batch, time + 2]` (`masked_language_model_dataset(cloze_targets=True,
    next_token_targets=True)`).

    Args:
        backbone: the `MaskedElmoBackbone` (or any `Backbone`) to train.
        vocabulary_size: V, the softmax size.
        num_negatives: sampled-softmax candidates per batch.
        dropout: on the top layer in training; the backbone's `dropout` when None.
        next_token_weight: the weight of the first layer's next-token loss (0: none).
        cloze_weight: the weight of the first layer's cloze loss (0: none; both 0: BERT's
            masked LM alone).
        replaced_token_weight: the weight of the replaced-token detection (0: none). With
            it, the masked LM's softmax is the generator's, `set_vocabulary` must be called
            before training or scoring, and `next_token_weight` must be 0.

    Example:
    >>> backbone = MaskedElmoBackbone.from_architecture("tiny_masked")
    >>> model = MaskedElmoLanguageModel(backbone, vocabulary_size=len(vocab))
    >>> model.compile(optimizer=keras.optimizers.Adam(1e-3))
    >>> model.fit(masked_language_model_dataset(sentences, vocab), steps_per_epoch=100)
    """

    def __init__(self, backbone, vocabulary_size, num_negatives=8192, dropout=None,
                 next_token_weight=0.0, cloze_weight=0.0, replaced_token_weight=0.0,
                 **kwargs):
        # The softmax reads [forward; backward] of the top layer.
        super().__init__(backbone, vocabulary_size, num_negatives, dropout,
                         softmax_width=backbone.output_dim, **kwargs)
        problems = non_negative_number_problems(next_token_weight=next_token_weight,
                                                cloze_weight=cloze_weight,
                                                replaced_token_weight=replaced_token_weight)
        if replaced_token_weight and next_token_weight:
            problems.append("the replaced-token detection takes no next-token loss (its "
                            "discriminator reads replaced words, not the masked sentence): "
                            "give next_token_weight 0 or replaced_token_weight 0")
        if problems:
            raise ValueError(problems[0] + ".")
        self.next_token_weight = float(next_token_weight)
        self.cloze_weight = float(cloze_weight)
        self.replaced_token_weight = float(replaced_token_weight)
        if self.replaced_token_weight:
            # === Layers ===
            config = backbone.config
            self.generator = BiLSTMStack(
                1, max(1, config.lstm_dim // 4), config.projection_dim,
                use_skip_connections=False, dtype=backbone.dtype_policy, name="generator")
            self.generator.build((None, None, config.projection_dim))
            self.replaced_token_head = keras.layers.Dense(1, dtype="float32",
                                                          name="replaced_token_head")
            self.replaced_token_head.build((None, backbone.output_dim))
            # Each word's char ids, for the words the generator draws (`set_vocabulary`).
            # Not saved with the weights (`save_own_variables`): the vocabulary gives them back.
            self.word_char_ids = self.add_weight(
                name="word_char_ids", shape=(vocabulary_size, config.max_characters_per_token),
                dtype="int32", initializer="zeros", trainable=False)
            self._vocabulary_set = False
            self.replaced_token_accuracy = keras.metrics.Mean(name="replaced_token_accuracy")
            # The share of tokens replaced: 1 minus it is what "never replaced" scores.
            self.replaced_token_share = keras.metrics.Mean(name="replaced_token_share")
        # === Metrics ===
        self.perplexity = Perplexity(name="perplexity")
        if self.next_token_weight:
            self.next_token_perplexity = Perplexity(name="next_token_perplexity")
        if self.cloze_weight:
            self.cloze_perplexity = Perplexity(name="cloze_perplexity")

    def set_vocabulary(self, tokens):
        """Gives the replaced-token detection the char ids of the vocabulary's words (`tokens`
        in id order, e.g. `Vocabulary.tokens`), the words its generator draws (never `<S>`,
        `</S>` or `<UNK>`, which no sentence holds as a word: their rows stay zero); nothing
        to do for the other losses."""
        if not self.replaced_token_weight:
            return
        if len(tokens) != self.vocabulary_size:
            raise ValueError(f"set_vocabulary takes the {self.vocabulary_size} tokens of the "
                             f"softmax's vocabulary, in id order; got {len(tokens)}.")
        words = [token if token not in Vocabulary.SPECIALS else "" for token in tokens]
        self.word_char_ids.assign(tokens_to_char_ids([words], self.word_char_ids.shape[1])[0])
        self._vocabulary_set = True

    def save_own_variables(self, store):
        """Every weight of the task's own but the words' char ids (`set_vocabulary`'s: 50 int32
        per word, recomputed from the vocabulary, which every run keeps)."""
        for i, variable in enumerate(self._saved_own_variables()):
            store[str(i)] = variable

    def load_own_variables(self, store):
        for i, variable in enumerate(self._saved_own_variables()):
            variable.assign(store[str(i)])

    def _saved_own_variables(self):
        kept = getattr(self, "word_char_ids", None)
        return [v for v in self._trainable_variables + self._non_trainable_variables
                if v is not kept]

    def call(self, inputs, training=False):
        if not isinstance(inputs, dict) or set(inputs) not in ({"char_ids"},
                                                               {"stream_char_ids"}):
            got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError("MaskedElmoLanguageModel takes a dict with 'char_ids' (sentences) "
                             f"or 'stream_char_ids' (stream windows); got {got}.")
        first_layer_losses = (self.next_token_weight or self.cloze_weight
                              or self.replaced_token_weight)
        if "stream_char_ids" in inputs:
            if self.next_token_weight or self.replaced_token_weight:
                raise ValueError("the first layer's next-token loss (next_token_weight) and "
                                 "the replaced-token detection (replaced_token_weight) read "
                                 "sentences ('char_ids'), not stream windows.")
            layers = self.backbone.encode_stream(inputs["stream_char_ids"], training=training)
            top = self.top_layer(layers, training)
            if not self.cloze_weight:
                return top
            # The first layer with a row of zeros on either side of the window, where a
            # sentence has its <S> and </S>: the window's first and last tokens, whose
            # neighbour is in another window, have no cloze target (the batches' -1).
            return {"masked": top, "first_layer": tf.pad(
                self.top_layer(layers, training, index=1), [[0, 0], [1, 1], [0, 0]])}
        if self.replaced_token_weight:
            # The generator's layer; the discriminator reads the words it draws (compute_loss).
            char_ids = inputs["char_ids"]
            layers = self.generator(self.backbone.token_encoder(char_ids),
                                    mask=char_ids_mask(char_ids), training=training)
            return {"generator": self.top_layer(layers, training)}
        outputs = self.backbone(inputs["char_ids"], training=training)
        top = self.top_layer(outputs["layers"], training)
        if not first_layer_losses:
            return top
        # The first layer on the <S> .. </S> grid: each direction has read one side only.
        return {"masked": top, "first_layer": self.top_layer(
            outputs["layers_with_boundaries"], training, index=1)}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True,
                     loss_counts=None):
        """The loss; `loss_counts`: `global_loss_counts(x, y)` when already computed."""
        keys = self._target_keys(y, training)
        width = self.backbone.output_dim
        half = width // 2
        totals = loss_counts or self.global_loss_counts(x, y)
        if self.replaced_token_weight:
            if "cloze_targets" in keys:
                return self._replaced_token_loss(x, y, y_pred["generator"], training, totals)
            masked = y_pred["generator"]  # held-out batches without originals: the masked LM
            seed = None
        else:
            masked = y_pred["masked"] if isinstance(y_pred, dict) else y_pred
            # Only the selected positions are scored (the others have no target); one set of
            # sampled candidates for every loss of the batch.
            seed = self.softmax.draw_seed() if training and self.softmax.samples else None
        total, count = self.selected_nll(tf.reshape(masked, [-1, width]),
                                         tf.reshape(y["targets"], [-1]), training, seed)
        self.perplexity.update_state(total, count)
        loss = tf.math.divide_no_nan(total, totals["targets"])
        if self.replaced_token_weight:
            return loss
        first = y_pred["first_layer"] if keys != {"targets"} else None
        if "cloze_targets" in keys:
            cloze = self._cloze_nll(first, y, training, seed)
            if training:
                loss += self.cloze_weight * tf.math.divide_no_nan(cloze,
                                                                  totals["cloze_targets"])
        if "forward_targets" in keys:
            # The forward half predicts the next word, the backward half the previous one,
            # each against its half of the softmax's columns (as [forward; 0] and
            # [0; backward] would, without the zeros).
            sums, counts = zip(*(
                self.selected_nll(tf.reshape(part, [-1, half]), tf.reshape(y[name], [-1]),
                                  training, seed, columns, sparse=False)
                for part, name, columns in ((first[..., :half], "forward_targets", (0, half)),
                                            (first[..., half:], "backward_targets",
                                             (half, width)))))
            self.next_token_perplexity.update_state(sums[0] + sums[1], counts[0] + counts[1])
            if training:
                means = [tf.math.divide_no_nan(sums[k], totals[name])
                         for k, name in enumerate(NEXT_TOKEN_TARGETS)]
                loss += self.next_token_weight * 0.5 * (means[0] + means[1])
        # In evaluation the first layer's losses are measured, but held-out losses stay the
        # masked LM's, as any run's.
        return loss

    def _cloze_nll(self, first, y, training, seed):
        """The cloze loss's NLL sum over the batch's tokens, from the first layer `first` on
        the `<S> .. </S>` grid: token k (grid k + 1) from the forward half at grid k, which
        has read the tokens before it, and the backward half at grid k + 2, which has read
        those after it."""
        width = self.backbone.output_dim
        half = width // 2
        rows = tf.concat([first[:, :-2, :half], first[:, 2:, half:]], -1)
        cloze, counted = self.selected_nll(tf.reshape(rows, [-1, width]),
                                           tf.reshape(y["cloze_targets"], [-1]), training,
                                           seed, sparse=False)
        self.cloze_perplexity.update_state(cloze, counted)
        return cloze

    def _replaced_token_loss(self, x, y, generated, training, totals):
        """The loss with the replaced-token detection (see the class docstring): the
        generator's masked LM on `generated` (its top layer), the discriminator (the backbone)
        on the sentence with drawn words, and the cloze loss on the discriminator's first
        layer. In evaluation the words are drawn from the full softmax with a fixed seed, the
        discriminator's accuracy and the cloze perplexity are measured, and the loss is the
        generator's masked LM alone."""
        seed = self.softmax.draw_seed() if training else tf.constant([0, 0], tf.int32)
        if not self._vocabulary_set:
            raise ValueError("the replaced-token detection draws words whose char ids it needs:"
                             " call set_vocabulary(vocabulary.tokens) before training.")
        char_ids = x["char_ids"]
        targets = tf.cast(tf.reshape(y["targets"], [-1]), tf.int32)
        originals = tf.cast(tf.reshape(y["cloze_targets"], [-1]), tf.int32)
        rows = tf.reshape(generated, [-1, self.backbone.output_dim])
        drawable = tf.reduce_any(self.word_char_ids > 0, axis=-1)  # not the specials
        total, count, drawn = self.selected_nll(rows, targets, training, seed,
                                                drawable=drawable)
        self.perplexity.update_state(total, count)
        loss = tf.math.divide_no_nan(total, totals["targets"])
        # The discriminator reads each selected position's drawn word (a word drawn equal to
        # the original gives back the original's char ids; an original out of the vocabulary
        # is always replaced, `<UNK>` is never drawn), every other position as it is.
        shape = tf.shape(y["targets"])
        selected = tf.reshape(targets >= 0, shape)
        drawn = tf.reshape(drawn, shape)
        replaced_ids = tf.gather(self.word_char_ids, tf.maximum(drawn, 0))
        corrupted = tf.where(selected[..., None], tf.cast(replaced_ids, char_ids.dtype),
                             char_ids)
        replaced = selected & (drawn != tf.reshape(originals, shape))
        outputs = self.backbone(corrupted, training=training)
        top = self.top_layer(outputs["layers"], training)
        logits = self.replaced_token_head(top)[..., 0]
        valid = tf.reshape(originals >= 0, shape)
        labels = tf.cast(replaced, tf.float32)
        detection = tf.reduce_sum(tf.where(valid, tf.nn.sigmoid_cross_entropy_with_logits(
            labels=labels, logits=logits), 0.0))
        weights = tf.cast(valid, tf.float32)
        self.replaced_token_accuracy.update_state(tf.cast((logits > 0) == replaced, tf.float32),
                                                  sample_weight=weights)
        self.replaced_token_share.update_state(labels, sample_weight=weights)
        if training:
            loss += self.replaced_token_weight * tf.math.divide_no_nan(detection,
                                                                       totals["cloze_targets"])
        if self.cloze_weight:
            first = self.top_layer(outputs["layers_with_boundaries"], training, index=1)
            cloze = self._cloze_nll(first, y, training, seed)
            if training:
                loss += self.cloze_weight * tf.math.divide_no_nan(cloze,
                                                                  totals["cloze_targets"])
        return loss

    def _target_keys(self, y, training):
        """The target names of `y`, checked against the losses this model has: every one of
        them in training; in evaluation the masked LM's alone, or with any of the others."""
        wanted = {"targets"}
        if self.cloze_weight or self.replaced_token_weight:
            wanted.add("cloze_targets")
        if self.next_token_weight:
            wanted.update(NEXT_TOKEN_TARGETS)
        keys = set(y) if isinstance(y, dict) else None
        if keys is None or "targets" not in keys or not keys <= wanted \
                or len(keys & set(NEXT_TOKEN_TARGETS)) == 1:
            got = sorted(y) if isinstance(y, dict) else type(y).__name__
            raise ValueError(
                "MaskedElmoLanguageModel's targets are a dict with 'targets' (and, for the "
                "cloze loss of a model with cloze_weight > 0 and the replaced-token "
                "detection, 'cloze_targets'; for the "
                "next-token loss of a model with next_token_weight > 0, 'forward_targets' and "
                f"'backward_targets'); got {got}.")
        if training and keys != wanted:
            missing = sorted(wanted - keys)
            raise ValueError(
                f"this model trains with more than the masked LM (next_token_weight "
                f"{self.next_token_weight:g}, cloze_weight {self.cloze_weight:g}, "
                f"replaced_token_weight {self.replaced_token_weight:g}): its "
                f"training batches need {missing} too (masked_language_model_dataset("
                "next_token_targets=..., cloze_targets=...)).")
        return keys

    def loss_weight(self, x, counts):
        """The masked LM's predicted words (the next-token loss, an auxiliary term of the
        training loss, is a mean over other words): in evaluation the `loss` metric is the
        masked LM's cross-entropy, whose exponential is `perplexity`."""
        return counts["targets"]

    def get_config(self):
        return {**super().get_config(), "next_token_weight": self.next_token_weight,
                "cloze_weight": self.cloze_weight,
                "replaced_token_weight": self.replaced_token_weight}
