"""Layer-kind registry: what kind a Keras layer is, how many FLOPs it costs, and which kinds
hold a position in the skewness variable. The one place for these rules.

The profiler sorts every row of the layer table into one of five kinds (RALP's profiler, Park
et al. 2019): ``conv``, ``pool``, ``fc``, ``norm`` and ``other``. The kind drives

- the split rule: no split between two compute-demand layers (:data:`COMPUTE_DEMAND_KINDS`),
  so a ``conv`` row never runs on the PS;
- the skewness variable (:mod:`ralp.profiler.skewness`): rows of :data:`POSITION_KINDS`
  (every convolution, pooling and fully connected layer) hold a position; the others hold
  none, and the parameters of a position-less row that owns some (a norm's scale and offset)
  count at the position of the layer that feeds it.

A kind is decided by what a layer computes, not by its class name alone: a ``Dense`` applied
at more than one position (a rank-4 input, as ConvNeXt's pointwise layers are) reuses every
weight at each pixel, like a 1x1 convolution, and so is ``conv``; on a flat input it is
``fc``. Depthwise, separable and transposed convolutions are ``conv``; batch, layer, group and
unit normalization are ``norm``. Every Keras ``Operation`` that is not a layer (``x + y``,
``keras.ops.relu`` in a functional graph) is ``other``, with no parameters and one FLOP per
output element (none for pure data movement such as a reshape).

Rules are looked up along the class's MRO, so a user's subclass of ``keras.layers.Dense``
follows Dense's rule without registration. A user's own layer type can be registered with
:func:`register_layer_kind`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import keras

from ralp.errors import InvalidArgumentError, InvalidTypeError

KINDS = ("conv", "pool", "fc", "norm", "other")

# Kinds whose layers are compute-heavy: the split must never offload one of them (RALP's
# profiler, Park et al. 2019).
COMPUTE_DEMAND_KINDS = frozenset({"conv"})

# Kinds that hold a position in the skewness variable: the paper counts one position per
# conv, max/avg-pool and affine call of the benchmark model code (RALP's profiler, Park et al.
# 2019). Norms, activations, dropout, flatten, concat/add, padding and inputs hold none.
POSITION_KINDS = frozenset({"conv", "pool", "fc"})

Shape = tuple[int, ...]
# (layer, input shapes without batch dim, output shapes without batch dim) -> FLOPs per sample
FlopsFn = Callable[[keras.Operation, Sequence[Shape], Sequence[Shape]], int]
# (layer, input shapes, output shapes) -> kind, for layers whose kind depends on their inputs
KindFn = Callable[[keras.Operation, Sequence[Shape], Sequence[Shape]], str]

# keras.ops nodes that only move data: no arithmetic (matched by class name, the ops' classes
# are not public).
DATA_MOVEMENT_OPS = frozenset({
    "Reshape", "Transpose", "ExpandDims", "Squeeze", "Concatenate", "Stack", "Split",
    "Flip", "Roll", "Tile", "Repeat", "Pad", "Slice", "GetItem", "Ravel", "Cast",
    "BroadcastTo", "SwapAxes", "MoveAxis", "Take", "TakeAlongAxis", "Identity", "Copy",
})


@dataclass(frozen=True)
class LayerRule:
    kind: str | KindFn
    flops: FlopsFn

    def kind_of(self, layer, in_shapes: Sequence[Shape], out_shapes: Sequence[Shape]) -> str:
        """The kind of ``layer`` as called on these shapes (every call of a shared layer)."""
        if isinstance(self.kind, str):
            return self.kind
        kind = self.kind(layer, in_shapes, out_shapes)
        if kind not in KINDS:
            raise InvalidArgumentError(f"the kind rule of {type(layer).__name__} returned {kind!r}; "
                             f"expected one of {', '.join(KINDS)}")
        return kind


def _prod(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


def _elementwise_flops(layer, in_shapes, out_shapes) -> int:
    # One operation per output element: activations, adds, dropout masks, norms (roughly).
    return sum(_prod(s) for s in out_shapes)


def _no_flops(layer, in_shapes, out_shapes) -> int:
    return 0


def _conv_flops(layer, in_shapes, out_shapes) -> int:
    # 2 FLOPs (multiply + add) per MAC; each output value needs prod(kernel) * C_in / groups MACs.
    in_channels = in_shapes[0][-1]
    groups = getattr(layer, "groups", 1) or 1
    macs_per_output = _prod(layer.kernel_size) * in_channels // groups
    out = _prod(out_shapes[0])
    bias = out if getattr(layer, "use_bias", False) else 0
    return 2 * macs_per_output * out + bias


def _conv_transpose_flops(layer, in_shapes, out_shapes) -> int:
    # Every input value is scattered through the whole kernel into every output channel.
    in_elems = _prod(in_shapes[0])
    macs = in_elems * _prod(layer.kernel_size) * out_shapes[0][-1]
    bias = _prod(out_shapes[0]) if getattr(layer, "use_bias", False) else 0
    return 2 * macs + bias


def _depthwise_flops(layer, in_shapes, out_shapes) -> int:
    out = _prod(out_shapes[0])
    bias = out if getattr(layer, "use_bias", False) else 0
    return 2 * _prod(layer.kernel_size) * out + bias


def _separable_flops(layer, in_shapes, out_shapes) -> int:
    in_channels = in_shapes[0][-1]
    spatial = _prod(out_shapes[0][:-1])
    depth_mult = getattr(layer, "depth_multiplier", 1)
    depthwise = 2 * _prod(layer.kernel_size) * spatial * in_channels * depth_mult
    pointwise = 2 * spatial * in_channels * depth_mult * out_shapes[0][-1]
    bias = _prod(out_shapes[0]) if getattr(layer, "use_bias", False) else 0
    return depthwise + pointwise + bias


def _dense_flops(layer, in_shapes, out_shapes) -> int:
    # A matmul over the last axis, repeated over any leading (non-batch) axes.
    fan_in = in_shapes[0][-1]
    out = _prod(out_shapes[0])
    bias = out if getattr(layer, "use_bias", False) else 0
    return 2 * fan_in * out + bias


def _dense_kind(layer, in_shapes, out_shapes) -> str:
    # A Dense acts on the last axis and repeats over every other one: on a (H, W, C) input it
    # is a 1x1 convolution, each weight reused at H*W positions (compute-demand); on a flat
    # input (or at a single position) each weight is used once per sample, as an FC layer.
    positions = max((_prod(s[:-1]) for s in in_shapes), default=1)
    return "conv" if positions > 1 else "fc"


def _einsum_reuse(layer, out_shapes) -> int:
    """How many output positions each kernel weight of an EinsumDense is used at."""
    out = _prod(out_shapes[0])
    kernel_out = _prod(layer.full_output_shape[1:]) if hasattr(layer, "full_output_shape") else out
    return max(1, out // max(1, kernel_out))


def _einsum_dense_kind(layer, in_shapes, out_shapes) -> str:
    return "conv" if _einsum_reuse(layer, out_shapes) > 1 else "fc"


def _einsum_dense_flops(layer, in_shapes, out_shapes) -> int:
    # Each kernel weight is used once per output position it broadcasts over: approximate as
    # 2 * kernel size * (output elements / kernel's output elements).
    return 2 * _prod(layer.kernel.shape) * _einsum_reuse(layer, out_shapes)


def _operation_flops(op, in_shapes, out_shapes) -> int:
    # A keras.ops node in a functional graph: element-wise arithmetic (x + y, relu, ...) costs
    # about one FLOP per output element; pure data movement costs none.
    if type(op).__name__ in DATA_MOVEMENT_OPS:
        return 0
    return _elementwise_flops(op, in_shapes, out_shapes)


def _pool_flops(layer, in_shapes, out_shapes) -> int:
    window = getattr(layer, "pool_size", None)
    if window is None:  # global pooling: every input value is read once
        return _prod(in_shapes[0])
    return _prod(window) * _prod(out_shapes[0])


_RULES: dict[type, LayerRule] = {}


def register_layer_kind(
    layer_class: type, kind: str | KindFn, flops: FlopsFn | None = None
) -> None:
    """Declare what kind ``layer_class`` (and its subclasses) is, and how to count its FLOPs.

    ``kind`` is one of :data:`KINDS`, or a function ``kind(layer, input_shapes,
    output_shapes)`` returning one, for a layer whose kind depends on what it is applied to.
    ``flops(layer, input_shapes, output_shapes)`` gets shapes without the batch dimension and
    returns forward FLOPs for one sample; by default one FLOP per output element.
    """
    if not callable(kind) and kind not in KINDS:
        raise InvalidArgumentError(f"unknown layer kind {kind!r}; expected one of {', '.join(KINDS)}")
    if not isinstance(layer_class, type):
        raise InvalidTypeError(f"register_layer_kind expects a layer class, got {layer_class!r}")
    _RULES[layer_class] = LayerRule(kind, flops or _elementwise_flops)


def rule_for(layer: keras.Operation) -> LayerRule:
    """The most specific registered rule for ``layer``'s class (``other`` if none)."""
    for cls in type(layer).__mro__:
        rule = _RULES.get(cls)
        if rule is not None:
            return rule
    return LayerRule("other", _elementwise_flops)


def _register_builtin_rules() -> None:
    L = keras.layers
    for cls in (L.Conv1D, L.Conv2D, L.Conv3D):
        register_layer_kind(cls, "conv", _conv_flops)
    for cls in (L.Conv1DTranspose, L.Conv2DTranspose, L.Conv3DTranspose):
        register_layer_kind(cls, "conv", _conv_transpose_flops)
    for cls in (L.DepthwiseConv1D, L.DepthwiseConv2D):
        register_layer_kind(cls, "conv", _depthwise_flops)
    for cls in (L.SeparableConv1D, L.SeparableConv2D):
        register_layer_kind(cls, "conv", _separable_flops)
    register_layer_kind(L.Dense, _dense_kind, _dense_flops)
    register_layer_kind(L.EinsumDense, _einsum_dense_kind, _einsum_dense_flops)
    for cls in (
        L.MaxPooling1D, L.MaxPooling2D, L.MaxPooling3D,
        L.AveragePooling1D, L.AveragePooling2D, L.AveragePooling3D,
        L.GlobalMaxPooling1D, L.GlobalMaxPooling2D, L.GlobalMaxPooling3D,
        L.GlobalAveragePooling1D, L.GlobalAveragePooling2D, L.GlobalAveragePooling3D,
    ):
        register_layer_kind(cls, "pool", _pool_flops)
    for cls in (L.BatchNormalization, L.LayerNormalization, L.GroupNormalization,
                L.UnitNormalization):
        register_layer_kind(cls, "norm")
    for cls in (L.InputLayer, L.Flatten, L.Reshape, L.Permute):  # data movement only
        register_layer_kind(cls, "other", _no_flops)
    # Layers no rule names fall back to Layer's; every other Operation is a keras.ops node.
    register_layer_kind(keras.Operation, "other", _operation_flops)
    register_layer_kind(L.Layer, "other", _elementwise_flops)


_register_builtin_rules()
