"""Rewriting where a Keras model's layers live and run, following a :class:`Plan`.

Three pieces, each used by the trainer:

- :func:`placed_clone` re-creates the user's model inside ``ParameterServerStrategy.scope()``.
  Layers the plan keeps get PSS' round-robin variables; each offloaded layer is constructed
  and built under a variable creator that colocates all of its variables with a small anchor
  variable on its PS task (:func:`ralp._compat.colocating_creator`). Weights
  are copied from the user's model, which is left untouched.
- :func:`split_model` cuts the placed model into a *head* (kept layers, run on the workers)
  and a *tail* (offloaded layers, run on the PS), sharing the same layer objects. It cuts at
  the top level of the model: a nested Sequential/functional model goes whole to one side,
  and so does a shared layer (one called more than once); a plan that would cut inside
  either is refused, saying what to do. The head takes every model input, as the model
  does; a model input that an offloaded layer reads (a second input's branch placed on the
  PS) is one of the head's outputs as it is, and crosses to the PS as an activation would
  (the profiler's cost counts it so: its values per sample); no gradient comes back for it.
- :class:`LayerDeviceFunction` is the device function for the tail's ops: every op created
  inside an offloaded layer's name scope — forward, and ``gradient_tape/...`` backward — goes
  to that layer's PS task; any other op in the PS section (loss, boundary copies) goes to the
  task that computes the loss. Keras uniquifies scopes on re-trace (``fc6`` -> ``fc6_1``);
  the matcher allows for that. A ``keras.ops`` node (``x + y`` in a functional graph) opens
  no scope of its own: offloaded, it runs on the loss task.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import keras
import tensorflow as tf

from ralp._compat import (
    colocating_creator,
    inbound_nodes,
    keras_history,
    read_kernel_outside_xla,
)
from ralp.placement.plan import Plan, PlanError, ps_device
from ralp.training.compile import clone_uncompiled


def _top_operations(model: keras.Model) -> list:
    """The layers and keras.ops nodes of ``model``'s own graph, in Keras' order."""
    return list(model.layers if isinstance(model, keras.Sequential) else model.operations)


def _qualified_names(model: keras.Model, prefix: str = "") -> dict[int, str]:
    """id(layer or op) -> the profiler's row name (``outer/inner`` in nested models)."""
    names: dict[int, str] = {}
    for op in _top_operations(model):
        name = f"{prefix}{op.name}"
        names[id(op)] = name
        if isinstance(op, keras.Model):
            names.update(_qualified_names(op, f"{name}/"))
    return names


def make_anchor(task: int, device_type: str = "CPU") -> tf.Variable:
    """A tiny variable on PS ``task``, created outside the strategy's scope: colocating a
    variable with it is how a variable is pinned to that task under PSS."""
    with tf.device(ps_device(task, device_type)):
        return tf.Variable(0, dtype=tf.int64, trainable=False, name=f"ralp_anchor_ps{task}")


@dataclass
class PlacedModel:
    """The placed clone and what the trainer needs to run it."""

    model: keras.Model  # same architecture and weights as the user's model, placed
    plan: Plan
    anchors: dict[int, tf.Variable]  # PS task -> anchor (offloaded tasks only)
    device_type: str = "CPU"

    @property
    def loss_task(self) -> int | None:
        """The PS task that computes the loss: the one running the model's output layer."""
        if self.plan.is_empty:
            return None
        return list(self.plan.offloaded.values())[-1]


def snapshot_state(model: keras.Model) -> list:
    """Every variable's value as numpy. Take it *before* connecting to a cluster: variables
    created before ParameterServerStrategy connects cannot be read afterwards."""
    return [v.numpy() for v in model.variables]


def placed_clone(
    model: keras.Model, plan: Plan, strategy, device_type: str = "CPU", state: list | None = None
) -> PlacedModel:
    """Clone ``model`` under ``strategy``'s scope with the offloaded layers' variables on their
    PS tasks, holding ``state`` (default: read from ``model``, see :func:`snapshot_state`).
    Raises :class:`PlanError` if the plan names layers the model lacks."""
    qualified = _qualified_names(model)
    plan.check_model(qualified.values())
    anchors = {
        task: make_anchor(task, device_type) for task in sorted(set(plan.offloaded.values()))
    }

    def clone_layer(layer):
        if not isinstance(layer, keras.layers.Layer):
            return layer  # a keras.ops node: no variables, nothing to place, reused as it is
        task = plan.task_of(qualified.get(id(layer), layer.name))
        config = layer.get_config()
        if task is None:
            new = layer.__class__.from_config(config)
        else:
            # Construct *and* build under the creator: some state (Dropout's seed generator)
            # is created in __init__, the weights in build().
            with tf.variable_creator_scope(colocating_creator(anchors[task])):
                new = layer.__class__.from_config(config)
                build_config = layer.get_build_config()
                if build_config:
                    new.build_from_config(build_config)
        read_kernel_outside_xla(new)  # its variables live on a PS task either way
        return new

    with strategy.scope():
        clone = clone_uncompiled(model, clone_function=clone_layer, recursive=True)
    _assign_state(clone, snapshot_state(model) if state is None else state)
    return PlacedModel(clone, plan, anchors, device_type.upper())


def _assign_state(model: keras.Model, state: list) -> None:
    """Assign every variable -- weights and layer state such as Dropout's seed generator."""
    variables = model.variables
    if len(variables) != len(state):
        raise PlanError(
            f"internal: the clone has {len(variables)} variables, the state {len(state)}"
        )
    for var, value in zip(variables, state, strict=True):
        if tuple(var.shape) != tuple(value.shape):
            raise PlanError(f"internal: clone mismatch at {var.path}: {var.shape} vs {value.shape}")
        var.assign(value)


@dataclass(frozen=True)
class Split:
    head: keras.Model  # kept layers: model inputs -> boundary tensors
    tail: keras.Model  # offloaded layers: boundary tensors -> model outputs
    boundary: tuple[str, ...]  # top-level layers whose outputs cross from the workers to the PS
    # per head output: True where the head computes it, False for a model input that an
    # offloaded layer reads (it crosses as it is; no gradient goes back for it)
    computed: tuple[bool, ...] = ()

    def has_gradient(self) -> tuple[bool, ...]:
        """Per head output, whether a boundary gradient goes back for it: the head computes
        it, in floating point."""
        computed = self.computed or (True,) * len(self.head.outputs)
        return tuple(c and tf.as_dtype(t.dtype).is_floating
                     for c, t in zip(computed, self.head.outputs, strict=True))


def _offloaded_top_level(model: keras.Model, plan: Plan) -> set[str]:
    """Names of the top-level operations the plan offloads; a nested model counts only when
    the plan offloads every layer in it (partly: refused)."""
    top = {op.name for op in _top_operations(model)}
    unknown = [n for n in plan.offloaded if n.split("/")[0] not in top]
    if unknown:
        raise PlanError(f"the plan offloads layers the model does not have: {unknown}")
    offloaded = set()
    for op in _top_operations(model):
        if isinstance(op, keras.layers.InputLayer) and op.name in plan.offloaded:
            raise PlanError(
                f"the plan offloads the model input {op.name!r}: inputs are fed on the "
                "workers; keep it there (plan.override({...: 'worker'}))"
            )
        if not isinstance(op, keras.Model):
            if op.name in plan.offloaded:
                offloaded.add(op.name)
            continue
        inner = [n for n in plan.layers if n.startswith(f"{op.name}/")]
        moved = [n for n in inner if n in plan.offloaded]
        if moved and len(moved) < len(inner):
            raise PlanError(
                f"the plan splits inside the nested model {op.name!r}: it offloads "
                f"{len(moved)} of its {len(inner)} layers (first {moved[0]!r}). A nested "
                f"model runs whole on one side. Split after it (offload only layers that "
                f"follow {op.name!r}), offload it whole, or rebuild the model without the "
                "nesting (call its layers on the outer model's tensors)"
            )
        if moved:
            offloaded.add(op.name)
    return offloaded


def _graph_nodes(model: keras.Model) -> list[tuple[object, object]]:
    """(operation, node) of every call in ``model``'s own graph, walked back from its outputs
    (a layer's inbound nodes also hold its calls in other graphs: those are left out)."""
    inputs = {id(t) for t in model.inputs}
    seen: set[tuple[int, int]] = set()
    found = []
    stack = list(model.outputs)
    while stack:
        tensor = stack.pop()
        if id(tensor) in inputs:
            continue
        op, node_index, _ = keras_history(tensor)
        if (id(op), node_index) in seen:
            continue
        seen.add((id(op), node_index))
        node = inbound_nodes(op)[node_index]
        found.append((op, node))
        stack.extend(node.input_tensors)
    return found


def split_model(placed: PlacedModel) -> Split:
    """Cut the placed model at the plan's boundary, at the top level of the model."""
    model, plan = placed.model, placed.plan
    offloaded = _offloaded_top_level(model, plan)
    order = {id(op): k for k, op in enumerate(_top_operations(model))}
    nodes = _graph_nodes(model)
    calls: dict[int, int] = {}
    for op, _ in nodes:
        calls[id(op)] = calls.get(id(op), 0) + 1
    cut: dict[int, tuple[tuple[int, int], object, str]] = {}  # id(tensor) -> (rank, tensor, name)
    for op, node in nodes:
        for tensor in node.input_tensors:
            producer, _, tensor_index = keras_history(tensor)
            if op.name in offloaded and producer.name not in offloaded:
                rank = (order.get(id(producer), -1), tensor_index)
                cut[id(tensor)] = (rank, tensor, producer.name)
            elif op.name not in offloaded and producer.name in offloaded:
                shared = calls[id(op)] > 1
                raise PlanError(
                    f"layer {op.name!r} stays on the workers but is called on the output "
                    f"of {producer.name!r}, which the plan offloads"
                    + (" (a shared layer runs whole on one side: offload it too, or keep "
                       f"{producer.name!r})" if shared else
                       f": offload {op.name!r} too, or keep {producer.name!r}")
                )
    if not cut:
        raise PlanError("the plan offloads no layer that the kept layers feed: nothing to split")
    crossing = sorted(cut.values(), key=lambda entry: entry[0])
    tensors = [tensor for _, tensor, _ in crossing]
    boundary = tuple(dict.fromkeys(name for _, _, name in crossing))
    model_inputs = {id(t) for t in model.inputs}
    computed = tuple(id(t) not in model_inputs for t in tensors)
    cut_tensors = tensors[0] if len(tensors) == 1 else tensors  # one tensor stays a tensor
    outputs = model.outputs[0] if len(model.outputs) == 1 else model.outputs
    # the head takes the model's inputs as the model takes them (a dict stays a dict)
    head = keras.Model(_input_structure(model), cut_tensors, name="ralp_head")
    tail = keras.Model(cut_tensors, outputs, name="ralp_tail")
    return Split(head, tail, boundary, computed)


def _input_structure(model: keras.Model):
    """The model's inputs as its call takes them: one tensor, a list, or a dict."""
    if len(model.inputs) == 1 and not isinstance(getattr(model, "input", None), dict):
        return model.inputs[0]
    return model.input


_UNIQUIFIED = re.compile(r"^(?P<base>.+)_\d+$")


def layer_of_op(op_name: str, layer_names: Iterable[str]) -> str | None:
    """The layer an op belongs to, from its name scopes, or None.

    Keras opens a name scope per layer call; TF uniquifies scopes per graph (``fc6`` becomes
    ``fc6_1``) and prefixes backward ops with ``gradient_tape/``. The first scope component that
    is a layer name -- as is, or with one ``_N`` suffix removed -- wins. Exact names win over
    stripped ones, so a layer literally named ``conv1_1`` is not mistaken for ``conv1``.
    """
    names = layer_names if isinstance(layer_names, set | frozenset | dict) else set(layer_names)
    for component in op_name.split("/")[:-1]:
        if component in names:
            return component
        m = _UNIQUIFIED.match(component)
        if m and m["base"] in names:
            return m["base"]
    return None


class LayerDeviceFunction:
    """op -> device: offloaded layers' ops to their PS task, everything else to ``default``."""

    def __init__(self, plan: Plan, default_device: str, device_type: str = "CPU"):
        self.default_device = default_device
        # Only top-level names appear as scopes inside the tail model.
        self._devices = {
            name.split("/")[0]: ps_device(task, device_type)
            for name, task in plan.offloaded.items()
        }

    def __call__(self, op) -> str:
        # An inner, explicit device scope wins: the tail optimizer pins each variable's update
        # to that variable's task (device functions run after the inner scopes are merged).
        if op.device and "/job:" in op.device:
            return op.device
        layer = layer_of_op(op.name, self._devices)
        return self.default_device if layer is None else self._devices[layer]
