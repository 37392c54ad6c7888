"""Rewriting where a Keras model's layers live and run, following a :class:`Plan`.

Three pieces, each used by the trainer:

- :func:`placed_clone` re-creates the user's model inside ``ParameterServerStrategy.scope()``.
  Layers the plan keeps get PSS' round-robin variables; each offloaded layer is constructed
  and built under a variable creator that colocates all of its variables with a small anchor
  variable on its PS task (:func:`ralp._compat.colocating_creator`). Weights
  are copied from the user's model, which is left untouched.
- :func:`split_model` cuts the placed model into a *head* (kept layers, run on the workers)
  and a *tail* (offloaded layers, run on the PS), sharing the same layer objects.
- :class:`LayerDeviceFunction` is the device function for the tail's ops: every op created
  inside an offloaded layer's name scope — forward, and ``gradient_tape/...`` backward — goes
  to that layer's PS task; any other op in the PS section (loss, boundary copies) goes to the
  task that computes the loss. Keras uniquifies scopes on re-trace (``fc6`` -> ``fc6_1``);
  the matcher allows for that.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import keras
import tensorflow as tf

from ralp._compat import colocating_creator, inbound_nodes, keras_history
from ralp.placement.plan import Plan, PlanError, ps_device


def _qualified_names(model: keras.Model, prefix: str = "") -> dict[int, str]:
    """id(layer) -> the profiler's qualified name (``outer/inner`` in nested models)."""
    names: dict[int, str] = {}
    for layer in model.layers:
        name = f"{prefix}{layer.name}"
        names[id(layer)] = name
        if isinstance(layer, keras.Model):
            names.update(_qualified_names(layer, f"{name}/"))
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
        task = plan.task_of(qualified.get(id(layer), layer.name))
        config = layer.get_config()
        if task is None:
            return layer.__class__.from_config(config)
        # Construct *and* build under the creator: some state (Dropout's seed generator) is
        # created in __init__, the weights in build().
        with tf.variable_creator_scope(colocating_creator(anchors[task])):
            new = layer.__class__.from_config(config)
            build_config = layer.get_build_config()
            if build_config:
                new.build_from_config(build_config)
        return new

    with strategy.scope():
        clone = keras.models.clone_model(model, clone_function=clone_layer, recursive=True)
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
    boundary: tuple[str, ...]  # layers whose outputs cross from the workers to the PS


def split_model(placed: PlacedModel) -> Split:
    """Cut the placed model at the plan's boundary, at the top level of the model."""
    model, plan = placed.model, placed.plan
    top = {layer.name: layer for layer in model.layers}
    for name in plan.offloaded:
        if name not in top and name.split("/")[0] not in plan.offloaded:
            raise PlanError(
                f"layer {name!r} sits inside a nested model that is only partly offloaded; "
                "offload the nested model whole, or flatten it into the outer model"
            )
    offloaded = {name for name in top if name in plan.offloaded}
    boundary: list[str] = []
    for layer in model.layers:
        if layer.name not in offloaded:
            continue
        for node in inbound_nodes(layer):
            for tensor in node.input_tensors:
                producer = keras_history(tensor)[0].name
                if producer not in offloaded and producer not in boundary:
                    boundary.append(producer)
    order = [layer.name for layer in model.layers]
    boundary.sort(key=order.index)
    cut = [top[name].output for name in boundary]
    cut = cut[0] if len(cut) == 1 else cut  # a single boundary tensor stays a plain tensor
    inputs = model.inputs[0] if len(model.inputs) == 1 else model.inputs
    outputs = model.outputs[0] if len(model.outputs) == 1 else model.outputs
    head = keras.Model(inputs, cut, name="ralp_head")
    tail = keras.Model(cut, outputs, name="ralp_tail")
    return Split(head, tail, tuple(boundary))


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
