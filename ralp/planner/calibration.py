"""Calibration: one device's compute times, measured, as a versioned JSON profile.

One entry per (model, batch, image size, classes): the median time of one training step
(forward + backward + SGD update) of the whole model, of its tail (the layers RALP offloads,
from boundary activations to the loss, the boundary gradient included), of the tail on
``STACKED`` batches at once (Stanza's FC rank) and of the head alone, each in one process
after warm-up steps. A calibration taken on the user's own GPU host is passed to the planner
with ``--compute-profile FILE``.

The file carries ``schema_version`` (:data:`SCHEMA_VERSION`). Older files are migrated when
loaded (:func:`migrate`), so nothing past loading knows their shape: version 1 (``"format":
1``) also held a description of the simulated cluster's host and per-entry figures of it,
which the planner's core never reads; they are dropped.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ralp.defaults import DEFAULT_BATCH_SIZE
from ralp.errors import InvalidArgumentError
from ralp.planner.modes import PlannerError
from ralp.planner.terms import Compute
from ralp.planner.workload import Workload
from ralp.profiler.api import profile

SCHEMA_VERSION = 2
CALIBRATE = "python -m ralp.planner --calibrate"  # the command that writes a calibration
DEFAULT_CALIBRATION_STEPS = 5
STACKED = 4  # worker batches the tail is also timed on at once (Stanza's FC rank stacks them)
CALIBRATION_WARMUP = 2


@dataclass(frozen=True)
class Entry:
    """One workload's step times on the calibrated device, in seconds."""

    model: str
    batch_size: int
    image_size: int
    num_classes: int
    split_after: str | None
    full_s: float
    tail_s: float
    steps: int
    # the tail's step on ``stacked`` worker batches at once (Stanza's FC rank), None: not
    # measured
    tail_stacked_s: float | None = None
    stacked: int = 1
    # the head's own step (forward, backward from its boundary gradients, update), None: not
    # measured (the whole model's step less the tail's stands for it)
    head_s: float | None = None

    @property
    def key(self) -> tuple:
        return (self.model, self.batch_size, self.image_size, self.num_classes)

    @property
    def compute(self) -> Compute:
        return Compute(self.full_s, self.tail_s, self.tail_stacked_s, self.stacked, self.head_s)


ENTRY_FIELDS = tuple(f.name for f in fields(Entry))


def migrate(data: dict) -> dict:
    """``data`` (a calibration's JSON of any known version) in the current schema. Raises
    InvalidArgumentError for what is not a calibration, or of an unknown version."""
    if not isinstance(data, dict):
        raise InvalidArgumentError(f"a calibration is a JSON object, not a {type(data).__name__}")
    if data.get("schema_version") == SCHEMA_VERSION:
        return data
    if "schema_version" not in data and data.get("format") == 1:
        if not isinstance(data.get("host"), dict):
            raise InvalidArgumentError("not a calibration: version 1 has a 'host' object")
        entries = data.get("entries")
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise InvalidArgumentError("not a calibration: 'entries' must be a list of objects")
        return {"schema_version": SCHEMA_VERSION, "machine": data.get("machine", ""),
                "entries": [{k: v for k, v in e.items() if k in ENTRY_FIELDS}
                            for e in entries]}
    found = data.get("schema_version", data.get("format"))
    if found is None:
        raise InvalidArgumentError("not a calibration: it has no 'schema_version'")
    raise InvalidArgumentError(f"calibration schema version {found!r}; this ralp reads "
                               f"versions 1 to {SCHEMA_VERSION}")


def find_entry(entries, key: tuple, command: str):
    """The entry of ``entries`` whose (model, batch, image size, classes) is ``key``. Raises
    PlannerError saying how to measure it with ``command``."""
    for e in entries:
        if e.key == key:
            return e
    model, batch_size, image_size, num_classes = key
    raise PlannerError(
        f"no calibration for {model} at batch {batch_size}, image {image_size}, "
        f"{num_classes} classes; measure it with {command} "
        f"--model {model} --batch-size {batch_size} --image-size {image_size} "
        f"--num-classes {num_classes} --output FILE"
    )


def read_file(path: str | Path, parse, command: str):
    """``parse`` of the JSON at ``path``. Raises PlannerError saying what is wrong with the
    file (unreadable, not JSON, or refused by ``parse``) and how ``command`` writes one."""
    try:
        return parse(json.loads(Path(path).read_text()))
    except OSError as e:
        problem = e.strerror or str(e)
    except (ValueError, KeyError, TypeError) as e:
        problem = str(e)
    raise PlannerError(f"cannot read calibration {str(path)!r}: {problem}; write one with "
                       f"{command} --model NAME --output FILE")


@dataclass
class Calibration:
    """Compute times measured on one machine (``machine``: where, for the reader)."""

    entries: list[Entry] = field(default_factory=list)
    machine: str = ""

    def find(self, model: str, batch_size: int, image_size: int, num_classes: int) -> Entry:
        return find_entry(self.entries, (model, batch_size, image_size, num_classes), CALIBRATE)

    def add(self, entry: Entry) -> None:
        self.entries = [e for e in self.entries if e.key != entry.key] + [entry]

    def to_dict(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "machine": self.machine,
                "entries": [asdict(e) for e in self.entries]}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        return read_file(path, cls.from_dict, CALIBRATE)

    @classmethod
    def from_dict(cls, data: dict) -> Calibration:
        """The inverse of :meth:`to_dict`, after :func:`migrate` (further keys, such as a
        bench record's ``measured_at``, are ignored). ValueError says what a malformed one
        lacks."""
        data = migrate(data)
        if not isinstance(data.get("entries"), list):
            raise InvalidArgumentError("not a calibration: 'entries' must be a list")
        return cls([Entry(**e) for e in data["entries"]], data.get("machine", ""))

    def merged(self, other: Calibration) -> Calibration:
        """This calibration with ``other``'s entries replacing its own."""
        out = Calibration(list(self.entries), other.machine or self.machine)
        for e in other.entries:
            out.add(e)
        return out


def load_source(source: str, num_classes: int, image_size: int):
    """The model a calibration's helper processes train: ``source`` is a zoo name, or the
    path of a model saved with ``model.save('x.keras')`` (a user's own model, which those
    processes cannot rebuild by name)."""
    if source.endswith(".keras"):
        import keras

        return keras.models.load_model(source, compile=False)
    from ralp.models import build_model

    return build_model(source, num_classes, image_size)


def this_machine() -> str:
    return f"{os.uname().nodename}, {os.cpu_count()} cores"


def _median_step_times(timed: list[tuple], steps: int) -> list[float]:
    """The median step time of each ``(step, args)`` of ``timed``, their steps interleaved
    (one of each in turn, ``steps`` turns, after the warm-up): a shared host's pace drifts
    over minutes, and timing one step function's block after another's would put that drift
    between them."""
    for step, args in timed:
        for _ in range(CALIBRATION_WARMUP):
            step(*args)
    times: list[list[float]] = [[] for _ in timed]
    for _ in range(steps):
        for (step, args), taken in zip(timed, times, strict=True):
            start = time.perf_counter()
            step(*args)
            taken.append(time.perf_counter() - start)
    return [statistics.median(taken) for taken in times]


def train_step(net, boundary_gradient: bool):
    """A traced training step of ``net`` (SGD): ``step(inputs, labels) -> (loss, boundary
    gradients)``. The tail returns the gradient of its inputs (RALP's PS sends it back); the
    whole model does not: no worker computes its images' gradient (for a large strided first
    convolution that gradient alone can cost as much as the rest of the step)."""
    import keras
    import tensorflow as tf

    optimizer = keras.optimizers.SGD(1e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(inputs, y):
        boundary = [t for t in tf.nest.flatten(inputs) if t.dtype.is_floating] \
            if boundary_gradient else []  # (the tail's inputs; integers have no gradient)
        with tf.GradientTape() as tape:
            for tensor in boundary:
                tape.watch(tensor)
            loss = loss_fn(y, net(inputs, training=True))
        grads = tape.gradient(loss, [*net.trainable_variables, *boundary])
        n = len(net.trainable_variables)
        optimizer.apply(grads[:n], net.trainable_variables)
        return loss, grads[n:]

    return step


def random_inputs(net, rows: int, rng):
    """Random inputs for ``net``, in the structure its call takes (one tensor, a tuple, a
    dict): floats from a normal distribution, integers 0 (an id every embedding has)."""
    import tensorflow as tf

    from ralp.training.features import ModelInputs

    made = [tf.constant(rng.standard_normal((rows, *t.shape[1:])), tf.float32)
            if tf.as_dtype(t.dtype).is_floating else tf.zeros((rows, *t.shape[1:]), t.dtype)
            for t in net.inputs]
    return ModelInputs.of(net).pack(made)


def head_step(head, batch_size: int, rng, has_gradient=None):
    """A worker's head in RALP and a CONV rank's in Stanza, traced: forward, then backward
    from the boundary gradients the PS (FC rank) sends back, then the update: ``step(x)``.
    ``has_gradient``: per head output, whether a gradient comes back for it (a model input
    crossing as it is gets none: :meth:`ralp.placement.rewriter.Split.has_gradient`;
    default: each float output)."""
    import keras
    import tensorflow as tf

    optimizer = keras.optimizers.SGD(1e-3)
    outputs = head.outputs if isinstance(head.outputs, list) else [head.outputs]
    back = [k for k, t in enumerate(outputs) if tf.as_dtype(t.dtype).is_floating and (
        has_gradient is None or has_gradient[k])]
    grads_in = [tf.constant(rng.standard_normal((batch_size, *outputs[k].shape[1:])),
                            tf.float32) for k in back]

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            out = head(x, training=True)
        out = list(out) if isinstance(out, list | tuple) else [out]
        grads = tape.gradient([out[k] for k in back], head.trainable_variables,
                              output_gradients=grads_in)
        optimizer.apply(grads, head.trainable_variables)
        return out[0]

    return step


def measure(model, batch_size: int, layers: tuple[str, ...], offloaded: tuple[str, ...], *,
            model_name: str, image_size: int, num_classes: int, split_after: str | None,
            steps: int = DEFAULT_CALIBRATION_STEPS) -> Entry:
    """Time one training step of ``model`` and of its tail (``offloaded`` layers) on random
    data, in this process. The tail step returns the boundary gradient, as RALP's PS does."""
    import numpy as np
    import tensorflow as tf

    from ralp.placement.plan import Plan
    from ralp.placement.rewriter import PlacedModel, split_model

    rng = np.random.default_rng(0)
    labels = tf.constant(rng.integers(0, num_classes, batch_size), tf.int32)
    timed = [(train_step(model, boundary_gradient=False),
              (random_inputs(model, batch_size, rng), labels))]
    if offloaded:
        plan = Plan.offloading(layers, list(offloaded), 1)
        split = split_model(PlacedModel(model, plan, {}))
        tail_step = train_step(split.tail, boundary_gradient=True)
        timed += [(tail_step, (random_inputs(split.tail, batch_size, rng), labels)),
                  (tail_step, (random_inputs(split.tail, STACKED * batch_size, rng),
                               tf.concat([labels] * STACKED, 0))),
                  (head_step(split.head, batch_size, rng, split.has_gradient()),
                   (random_inputs(model, batch_size, rng),))]
    medians = _median_step_times(timed, steps)
    full_s, tail_s, stacked_s, head_s = medians if offloaded else (medians[0], 0.0, None, None)
    return Entry(model_name, batch_size, image_size, num_classes, split_after, full_s,
                 min(tail_s, full_s), steps, tail_stacked_s=stacked_s,
                 stacked=STACKED if offloaded else 1, head_s=head_s)


def shape_facts(model) -> tuple[int, int]:
    """(image size, number of classes) of an image classifier: its (first) image input's
    side, output width."""
    images = [t for t in model.inputs if len(t.shape) == 4] or model.inputs
    return int(images[0].shape[1]), int(model.outputs[0].shape[-1])


def calibrate_entry(model, batch_size: int = DEFAULT_BATCH_SIZE, *,
                    steps: int = DEFAULT_CALIBRATION_STEPS) -> Entry:
    """Measure ``model``'s whole-model and tail step times here (one process)."""
    work = Workload(profile(model, batch_size))
    image, classes = shape_facts(model)
    return measure(model, batch_size, tuple(r.name for r in work.table.rows), work.offloaded,
                   model_name=model.name, image_size=image, num_classes=classes,
                   split_after=work.profile.candidate_split_after, steps=steps)
