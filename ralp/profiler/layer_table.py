"""The ordered layer table of a Keras model, computed from shapes alone (no forward pass).

One :class:`LayerRow` per layer, in forward order. Nested Sequential/functional models are
flattened: their layers appear in place, named ``outer/inner``. A ``keras.ops`` node of a
functional graph (``x + y``, ``keras.ops.relu``) is a row too, of kind ``other`` with no
parameters. A layer called more than once (shared) is one row: its parameters count once,
its FLOPs and outputs once per call, and its producers are those of every call. The table
also records each row's producers (``inbound``), so later stages can compute exactly which
tensors a split cuts, even in DAGs such as ResNet and Inception; and each row's place in the
skewness variable (:mod:`ralp.profiler.skewness`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import keras
import tensorflow as tf

from ralp._compat import inbound_nodes, is_functional, keras_history
from ralp.errors import RalpError
from ralp.profiler.kinds import rule_for
from ralp.profiler.skewness import PositionedRow, assign_positions


class ProfileError(RalpError, ValueError):
    """The model cannot be profiled; the message says why and what to do instead."""


@dataclass(frozen=True)
class LayerRow:
    index: int
    name: str  # qualified: "outer/inner" for layers of nested models
    layer_type: str  # the Keras class name, e.g. "Conv2D" (or a keras.ops node's, e.g. "Add")
    kind: str  # conv | pool | fc | norm | other, by what the layer computes
    params: int  # trainable + non-trainable (what a PS stores and serves)
    trainable_params: int
    param_bytes: int
    trainable_param_bytes: int  # what has gradients: Horovod allreduces only these
    output_shape: tuple[int, ...]  # first output, without the batch dimension
    output_elements: int  # per sample, all outputs of the layer
    output_bytes: int  # per step: output_elements * batch size * dtype size
    flops: int  # forward FLOPs per sample
    cumulative_params: int  # params of this row and every row before it
    inbound: tuple[str, ...]  # names of the rows whose outputs this row consumes
    position: int | None = None  # its position in the skewness variable (conv, pool, fc)
    counted_at: int | None = None  # the position its parameters count at (a norm: its conv's)
    calls: int = 1  # how many times the model calls it (a shared layer: more than one)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["output_shape"] = list(self.output_shape)
        d["inbound"] = list(self.inbound)
        return d


@dataclass(frozen=True)
class LayerTable:
    model_name: str
    batch_size: int
    rows: tuple[LayerRow, ...]
    output_names: tuple[str, ...]  # rows whose outputs are the model's outputs
    # (row name, variable path, bytes) in build order, layer state (seed generators) included
    variables: tuple[tuple[str, str, int], ...]

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def row(self, name: str) -> LayerRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def params_total(self) -> int:
        return sum(r.params for r in self.rows)

    @property
    def position_weights(self) -> list[int]:
        """The skewness variable's weights: parameters counted at each position 1..n."""
        totals = [0] * sum(r.position is not None for r in self.rows)
        for r in self.rows:
            if r.counted_at is not None:
                totals[r.counted_at - 1] += r.params
        return totals

    @property
    def param_bytes_total(self) -> int:
        return sum(r.param_bytes for r in self.rows)

    @property
    def trainable_param_bytes_total(self) -> int:
        return sum(r.trainable_param_bytes for r in self.rows)


def _dtype_size(dtype) -> int:
    return tf.dtypes.as_dtype(keras.backend.standardize_dtype(dtype)).size


def _is_graph_model(layer) -> bool:
    """Functional and built Sequential models: the kinds whose layer graph is known statically."""
    return isinstance(layer, keras.Sequential) or is_functional(layer)


def check_model(model, where: str) -> None:
    if not isinstance(model, keras.Model):
        raise ProfileError(
            f"{where}: expected a keras.Model, got {type(model).__name__}. ralp profiles Keras 3 "
            "Sequential and functional models."
        )
    if not _is_graph_model(model):
        raise ProfileError(
            f"{where}: {type(model).__name__} is a subclassed keras.Model. Its layer graph "
            "exists only inside call(), so layers cannot be profiled or placed from shapes. "
            "Rebuild it as a functional model (keras.Model(inputs, outputs)) or a "
            "keras.Sequential, e.g. by calling your layers on a keras.Input."
        )
    if isinstance(model, keras.Sequential) and not model.built:
        raise ProfileError(
            f"{where}: the Sequential model {model.name!r} has no input shape yet. Start it "
            "with keras.Input(shape=...) or call model.build((None, *input_shape)) first."
        )


def _static_shape(shape, where: str) -> tuple[int, ...]:
    dims = tuple(shape)[1:]  # drop the batch dimension
    if any(d is None for d in dims):
        raise ProfileError(
            f"{where} has an unknown dimension in its output shape {tuple(shape)}. The profiler "
            "works from static shapes: build the model with a fixed input size, e.g. "
            "keras.Input((224, 224, 3))."
        )
    return tuple(int(d) for d in dims)


def _producer(tensor):
    op, node_index, tensor_index = keras_history(tensor)
    return op, node_index, tensor_index


class _Flattener:
    """Walks a model's node graph from its outputs and emits rows in forward order."""

    def __init__(self, batch_size: int):
        self.batch_size = batch_size
        self.order: list[tuple[str, keras.Operation]] = []
        self.inbound: dict[str, list[str]] = {}
        # per row, per call: (input shapes, output shapes), without the batch dimension
        self.calls: dict[str, list[tuple[list[tuple[int, ...]], list[tuple[int, ...]]]]] = {}
        self.out_itemsize: dict[str, int] = {}
        self._tensor_source: dict[int, str] = {}  # id(KerasTensor) -> row producing it
        self._objects: dict[str, keras.Operation] = {}  # row name -> its layer or operation

    def walk(self, model, prefix: str, bindings: dict[int, str]) -> list[str]:
        """Emit rows for ``model``; returns the row names that produce its outputs.

        ``bindings`` maps id(input KerasTensor of this model) -> the outer row feeding it.
        """
        check_model(model, f"layer {prefix or model.name!r}")
        visited: set[tuple[int, int]] = set()
        # The model's own inputs come first (a nested model's are fed from outside): every
        # input is data the workers feed, never something that follows the split.
        for tensor in model.inputs:
            if id(tensor) not in bindings:
                op, node_index = _producer(tensor)[:2]
                visited.add((id(op), node_index))
                self._emit(op, node_index, prefix, bindings)
        # Iterative DFS post-order: inputs of a node are emitted before the node, in the order
        # the node consumes them, which follows definition order for branchy models.
        for output in model.outputs:
            stack = [(_producer(output)[:2], False)]
            while stack:
                (op, node_index), expanded = stack.pop()
                key = (id(op), node_index)
                if expanded:
                    if key not in visited:
                        visited.add(key)
                        self._emit(op, node_index, prefix, bindings)
                    continue
                if key in visited:
                    continue
                stack.append(((op, node_index), True))
                node = inbound_nodes(op)[node_index]
                for t in reversed(node.input_tensors):
                    if id(t) in bindings and id(t) not in self._tensor_source:
                        continue  # an input of a nested model, fed from outside
                    stack.append((_producer(t)[:2], False))
        return [self._source_of(t, bindings) for t in model.outputs]

    def _source_of(self, tensor, bindings: dict[int, str]) -> str:
        if id(tensor) in self._tensor_source:
            return self._tensor_source[id(tensor)]
        if id(tensor) in bindings:
            return bindings[id(tensor)]
        raise ProfileError(f"internal: no producer recorded for tensor {tensor!r}")

    def _emit(self, op, node_index: int, prefix: str, bindings: dict[int, str]) -> None:
        node = inbound_nodes(op)[node_index]
        if isinstance(op, keras.layers.InputLayer) and any(
            id(t) in bindings for t in node.output_tensors
        ):
            return  # the input of a nested model: its outer producer stands in for it
        name = f"{prefix}{op.name}"
        sources = [self._source_of(t, bindings) for t in node.input_tensors]
        if isinstance(op, keras.Model):
            inner_bindings = dict(bindings)
            inner_inputs = op.inputs
            if len(inner_inputs) != len(sources):
                raise ProfileError(f"nested model {name!r}: input arity mismatch")
            for t, src in zip(inner_inputs, sources, strict=True):
                inner_bindings[id(t)] = src
            out_rows = self.walk(op, f"{name}/", inner_bindings)
            for t, src in zip(node.output_tensors, out_rows, strict=True):
                self._tensor_source[id(t)] = src
            return
        if name in self.inbound:  # a shared layer called again: merge its edges and outputs
            if self._objects[name] is not op:
                raise ProfileError(
                    f"two different layers or operations are named {name!r}; give every "
                    "layer of the model a unique name (name=...) so that rows and plans "
                    "can refer to it"
                )
            self.inbound[name].extend(s for s in sources if s not in self.inbound[name])
        else:
            self.order.append((name, op))
            self._objects[name] = op
            self.inbound[name] = list(dict.fromkeys(sources))
            self.calls[name] = []
        self.calls[name].append((
            [_static_shape(t.shape, f"input of layer {name!r}") for t in node.input_tensors],
            [_static_shape(t.shape, f"layer {name!r}") for t in node.output_tensors],
        ))
        self.out_itemsize[name] = _dtype_size(node.output_tensors[0].dtype)
        for t in node.output_tensors:
            self._tensor_source[id(t)] = name


def _weights(op) -> tuple[list, list]:
    """(all weights, trainable weights) of a layer; a keras.ops node owns none."""
    if not isinstance(op, keras.layers.Layer):
        return [], []
    return list(op.weights), list(op.trainable_weights)


def build_layer_table(model, batch_size: int) -> LayerTable:
    """The ordered layer table of ``model`` at ``batch_size``, from static shapes only."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ProfileError(f"batch_size must be a positive integer, got {batch_size!r}")
    check_model(model, f"model {getattr(model, 'name', model)!r}")
    flat = _Flattener(batch_size)
    output_names = flat.walk(model, "", {})

    rows: list[dict] = []
    variables: list[tuple[str, str, int]] = []
    # The model's creation order of its variables: the order PSS hands out PS tasks in,
    # which is not the forward order of the layers (branches, blocks built out of order).
    creation = {id(v): k for k, v in enumerate(model.variables)}
    created: list[int] = []
    cumulative = 0
    for index, (name, layer) in enumerate(flat.order):
        # Every variable in creation order, layer state too (Dropout's seed generator): PSS
        # places each one round-robin, so a state variable shifts the PS task of every later
        # weight; each step also reads and advances it. A keras.ops node owns none.
        layer_vars = list(layer.variables) if isinstance(layer, keras.layers.Layer) else []
        created += [creation.get(id(v), len(creation)) for v in layer_vars]
        variables += [(name, v.path, math.prod(v.shape) * _dtype_size(v.dtype))
                      for v in layer_vars]
        row = _row(index, name, layer, flat, batch_size)
        cumulative += row["params"]
        rows.append(dict(row, cumulative_params=cumulative))
    positions = assign_positions(
        [PositionedRow(r["name"], r["kind"], r["params"], r["inbound"]) for r in rows]
    )
    return LayerTable(
        model_name=model.name,
        batch_size=batch_size,
        rows=tuple(
            LayerRow(**r, position=own, counted_at=at)
            for r, own, at in zip(rows, positions.position, positions.counted_at, strict=True)
        ),
        output_names=tuple(dict.fromkeys(output_names)),
        variables=tuple(v for _, v in sorted(zip(created, variables, strict=True),
                                             key=lambda pair: pair[0])),
    )


def _row(index: int, name: str, layer, flat: _Flattener, batch_size: int) -> dict:
    """One layer's row of the table (all but its cumulative parameters and position)."""
    rule = rule_for(layer)
    weights, trainable_weights = _weights(layer)
    calls = flat.calls[name]
    in_shapes = [s for ins, _ in calls for s in ins]
    out_shapes = [s for _, outs in calls for s in outs]
    elements = sum(math.prod(s) for s in out_shapes)
    return dict(
        index=index,
        name=name,
        layer_type=type(layer).__name__,
        kind=rule.kind_of(layer, in_shapes, out_shapes),
        params=sum(math.prod(w.shape) for w in weights),
        trainable_params=sum(math.prod(w.shape) for w in trainable_weights),
        param_bytes=sum(math.prod(w.shape) * _dtype_size(w.dtype) for w in weights),
        trainable_param_bytes=sum(math.prod(w.shape) * _dtype_size(w.dtype)
                                  for w in trainable_weights),
        output_shape=out_shapes[0],
        output_elements=elements,
        output_bytes=elements * batch_size * flat.out_itemsize[name],
        # FLOPs of every call (a shared layer computes once per call)
        flops=sum(int(rule.flops(layer, ins, outs)) for ins, outs in calls if ins),
        inbound=tuple(flat.inbound[name]),
        calls=len(calls),
    )
