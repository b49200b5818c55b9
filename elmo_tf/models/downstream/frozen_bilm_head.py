"""`FrozenBiLMHead`: a downstream task's layers after its frozen biLM, on the biLM's outputs
computed once."""

import keras

from elmo_tf.keras_compat import run_graph
from elmo_tf.models.elmo_embedding import GIVEN
from elmo_tf.models.task import Task


class FrozenBiLMHead(Task, keras.Model):
    """The model of a downstream task (`DownstreamTask`) with its frozen biLM's outputs as
    inputs, in place of running it: a frozen biLM gives a sentence the same outputs at every
    epoch, so `elmo-tf finetune` computes them once per text and trains this (the scalar mix,
    the task-trained word embeddings and the head: every trainable variable of the task, the
    same variables, so training it trains the task).

    Its inputs are the task's features (its preprocessor's), and for each char-ids feature
    `NAME` (`char_ids`; a pair's `text_a_char_ids`, `text_b_char_ids`) the biLM's outputs for
    it, right-padded as the backbone returns them: `NAME_layers_with_boundaries` (float
    `[batch, layers, time + 2, dim]`) and `NAME_mask_with_boundaries` (bool `[batch,
    time + 2]`), where `time` is the char ids' (`given_names`, `given_key`). The char ids
    are still read where the task reads them (a tagger's loss counts its tokens by them);
    the biLM is not run. The loss, its counts, the loss metric's weights and the replicas'
    gradients are the task's, so it trains as the task does on the same batches (to float
    rounding: the biLM's outputs were computed in other batches), compiled with XLA or not,
    under any strategy. It is a training device, not saved: save the task.

    Args:
        task: a `DownstreamTask` whose biLM gives a text the same outputs at every call
            (`applies_to`).

    Example:
    >>> head = FrozenBiLMHead(classifier)
    >>> head.compile(optimizer=classifier.optimizer, xla="on")   # the task's optimizer
    >>> outputs = classifier.backbone.embed(features["char_ids"])
    >>> head.fit({**features, **{f"char_ids_{k}": outputs[k] for k in GIVEN}}, labels)
    """

    def __init__(self, task, **kwargs):
        embedding = task.embedding
        if not self.applies_to(task):
            raise ValueError(f"{task.name}'s biLM trains (fine_tune) or has dropout, or "
                             "carries state: its outputs change from call to call, and cannot "
                             "be computed once.")
        features = task.preprocessor.feature_inputs()
        dim = (embedding.backbone.num_layers, None, embedding.backbone.output_dim)
        shapes = {"layers_with_boundaries": (dim, "float32"),
                  "mask_with_boundaries": ((None,), "bool")}
        given = {name: {key: keras.Input(shapes[key][0], dtype=shapes[key][1],
                                         name=self.given_key(name, key)) for key in GIVEN}
                 for name in self.given_names(task)}
        by_tensor = {id(features[name]): outputs for name, outputs in given.items()}

        def call(layer, *args, **kwargs):
            if layer is embedding:  # the embedding mixes the outputs given for its char ids
                if id(args[0]) not in by_tensor:
                    raise ValueError(
                        f"{task.name}'s {layer.name} reads something other than one of the "
                        f"task's char-ids inputs {self.given_names(task)}: its biLM's outputs "
                        "cannot be given in place of running it.")
                return layer(by_tensor[id(args[0])], *args[1:], **kwargs)
            return layer(*args, **kwargs)

        outputs = run_graph(task, features, call)
        inputs = {**features, **{self.given_key(name, key): tensor
                                 for name, outputs in given.items()
                                 for key, tensor in outputs.items()}}
        super().__init__(inputs=inputs, outputs=outputs, name=f"{task.name}_head", **kwargs)
        self.task = task

    @staticmethod
    def applies_to(task):
        """Whether `task`'s biLM gives a text the same outputs at every call: frozen (none of
        its variables trains: not `fine_tune`), without `dropout` (a backbone of the contract
        with other randomness in training should say so with a `dropout` > 0) and stateless."""
        backbone = task.backbone
        return not (any(w.trainable for w in backbone.weights)
                    or getattr(backbone, "dropout", 0.0) or backbone.stateful)

    @staticmethod
    def given_names(task):
        """The task's char-ids features, the ones the biLM's outputs are given for."""
        return [name for name in task.preprocessor.feature_names()
                if name.endswith("char_ids")]

    @staticmethod
    def given_key(name, output):
        """The input of the biLM's `output` for the char-ids feature `name`."""
        return f"{name}_{output}"

    @property
    def backbone(self):
        return self.task.backbone

    @property
    def preprocessor(self):
        """The task's, which runs in the input pipeline (not in a compiled step)."""
        return self.task.preprocessor

    # The task's loss and how its replicas' steps combine (`CompiledStep`, `DownstreamTask`).
    def compute_loss(self, *args, **kwargs):
        return self.task.compute_loss(*args, **kwargs)

    def global_loss_counts(self, x, y):
        return self.task.global_loss_counts(x, y)

    def loss_weight(self, x, counts):
        return self.task.loss_weight(x, counts)

    def replica_gradients(self, gradients, variables):
        return self.task.replica_gradients(gradients, variables)
