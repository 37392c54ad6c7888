"""Placement audit: where every op of one real training step ran, and what crossed tasks.

The truth is not in the traced function (its ``op.device`` strings are partial; the runtime
places the rest and Grappler rewrites the graph) and not in the chief's run metadata (empty
under ClusterCoordinator). It is in the partitions the *worker* builds when it instantiates
the step: one graph per device, with a ``_Send``/``_Recv`` pair for every tensor that crosses
devices. Worker 0 is started with ``TF_DUMP_GRAPH_PREFIX`` so it writes them; this module
reads them back.

- Ops are attributed to layers by their name scopes (:func:`layer_of_op`).
- A crossing tensor's size comes from the same tensor in the traced function (partition
  graphs carry no shapes); control edges carry no data.
- A crossing tensor counts as *offloaded-variable bytes* when it is a read of an offloaded
  layer's variable (a ``ReadVariableOp`` on its handle), or when it has the shape of such a
  variable and flows, within a few ops, into an update of an offloaded variable or slot (its
  gradient on the way to the optimizer).
"""

from __future__ import annotations

import glob
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ralp._compat import INLINED_BRANCH_OP, cond_branch_graphs
from ralp.placement.rewriter import layer_of_op

STEP_FUNCTION = "__inference_ralp_train_step"
# e.g. __inference_ralp_train_step_567_partition__job:ps_replica:0_task:0_device:CPU:0.0003.main.after_partition_passes.pbtxt
_PARTITION_FILE = re.compile(
    r"_partition_(?P<device>_job:.+?_device:[A-Z]+:\d+)\.\d+\.main\.after_partition_passes\.pbtxt$"
)
_UPDATE_OPS = re.compile(
    r"^(Assign(Add|Sub)?VariableOp|ResourceApply\w+|ResourceScatter\w+|ResourceSparseApply\w+)$"
)
_DATA_FREE = ("/ctrl/",)  # control-edge sends carry no tensor data


def task_of(device: str) -> str:
    """``/job:ps/replica:0/task:1/device:CPU:0`` -> ``ps:1``."""
    job = re.search(r"/job:([^/]+)", device)
    task = re.search(r"/task:(\d+)", device)
    return f"{job.group(1) if job else '?'}:{task.group(1) if task else '?'}"


def dump_env(directory: str) -> dict[str, str]:
    """The environment a worker needs to dump its step partitions into ``directory``."""
    return {"TF_DUMP_GRAPH_PREFIX": directory, "TF_DUMP_GRAPH_NAME_FILTER": STEP_FUNCTION}


def read_partitions(directory: str, function_name: str) -> dict[str, object]:
    """device -> GraphDef of ``function_name``'s partitions (the newest instantiation)."""
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2

    found: dict[str, tuple[float, str]] = {}
    for path in glob.glob(
        os.path.join(
            directory, f"{glob.escape(function_name)}_partition_*after_partition_passes.pbtxt"
        )
    ):
        m = _PARTITION_FILE.search(os.path.basename(path))
        if m is None:
            continue
        device = re.sub(r"_(job|replica|task|device):", r"/\1:", m["device"])
        mtime = os.path.getmtime(path)
        if device not in found or mtime > found[device][0]:
            found[device] = (mtime, path)
    graphs = {}
    for device, (_, path) in found.items():
        graph = graph_pb2.GraphDef()
        with open(path) as f:
            text_format.Parse(f.read(), graph)
        graphs[device] = graph
    return graphs


@dataclass(frozen=True)
class Crossing:
    src_task: str
    dst_task: str
    tensor: str  # producing op:output in the traced function
    dtype: str
    shape: tuple[int, ...] | None
    nbytes: int | None  # None: size unknown (op not in the traced function)
    layer: str | None  # layer the producing op belongs to
    offloaded_variable: bool  # a read or gradient of an offloaded layer's variable

    def to_dict(self) -> dict:
        return {"src": self.src_task, "dst": self.dst_task, "tensor": self.tensor,
                "dtype": self.dtype, "shape": None if self.shape is None else list(self.shape),
                "bytes": self.nbytes, "layer": self.layer,
                "offloaded_variable": self.offloaded_variable}


@dataclass
class StepPlacement:
    """Placement of one worker's training step, read from its partitions."""

    ops_by_device: dict[str, list[tuple[str, str]]]  # device -> [(op name, op type)]
    crossings: list[Crossing]
    layer_devices: dict[str, Counter] = field(default_factory=dict)  # layer -> device -> #ops

    def bytes_by_link(self) -> dict[str, int]:
        links: Counter = Counter()
        for c in self.crossings:
            links[f"{c.src_task}->{c.dst_task}"] += c.nbytes or 0
        return dict(sorted(links.items()))

    @property
    def crossing_bytes(self) -> int:
        return sum(c.nbytes or 0 for c in self.crossings)

    @property
    def unknown_size_crossings(self) -> list[str]:
        return [c.tensor for c in self.crossings if c.nbytes is None]


def analyse(
    partitions: Mapping[str, object],
    graph,
    layer_names: Iterable[str],
    offloaded_handles: set[int],
    offloaded_shapes: set[tuple[int, ...]],
) -> StepPlacement:
    """Attribute every partition op to a layer and size every cross-task ``_Send``.

    ``graph`` is the traced step function's graph; ``offloaded_handles`` holds ``id()`` of the
    captured resource handles of offloaded variables (and their optimizer slots).
    """
    import tensorflow as tf

    names = set(layer_names)
    ops_by_device: dict[str, list[tuple[str, str]]] = {}
    layer_devices: dict[str, Counter] = defaultdict(Counter)
    for device, part in partitions.items():
        ops = [
            (n.name, n.op) for n in part.node if n.op not in ("_Send", "_Recv", "_Arg", "_Retval")
        ]
        ops_by_device[device] = ops
        for name, _ in ops:
            layer_devices[layer_of_op(name, names) or "(no layer)"][device] += 1

    # (id(graph), tensor name) -> id() of the handle it carries: the step's captured
    # variables, and (added as branches are entered) a cond's branch inputs that carry them
    captured = {(id(graph), internal.name): id(external) for external, internal in graph.captures}
    nodes = {n.name: n for part in partitions.values() for n in part.node}
    crossings = []
    for part in partitions.values():
        for node in part.node:
            if node.op != "_Send":
                continue
            src_dev = node.attr["send_device"].s.decode()
            dst_dev = node.attr["recv_device"].s.decode()
            if task_of(src_dev) == task_of(dst_dev):
                continue
            tensor = node.input[0]
            dtype = tf.as_dtype(node.attr["T"].type)
            shape, nbytes, offloaded = None, None, False
            if any(marker in tensor for marker in _DATA_FREE) or tensor.startswith("^"):
                nbytes = 0
            else:
                t = _traced_through_lowering(tensor, nodes, graph, captured)
                if t is not None and t.shape.is_fully_defined():
                    shape = tuple(t.shape.as_list())
                else:  # a constant grappler folded (inside an inlined branch): its own shape
                    shape = _constant_shape(nodes.get(tensor.partition(":")[0]))
                if shape is not None:
                    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.size
                if t is not None:
                    offloaded = _is_offloaded_variable_data(
                        t, captured, offloaded_handles, offloaded_shapes
                    )
            crossings.append(Crossing(task_of(src_dev), task_of(dst_dev), tensor, dtype.name, shape,
                                      nbytes, layer_of_op(tensor, names), offloaded))
    return StepPlacement(ops_by_device, crossings, dict(layer_devices))


_COND_OPS = ("If", "StatelessIf")
# Ops that lowering a cond (the step ledger's, ps_strategy/steps.py) puts between a traced
# tensor and the Send that carries it: they pass their first input through unchanged.
_PASS_THROUGH = ("Identity", "Switch", "RefSwitch")


def _traced_through_lowering(name: str, nodes: Mapping[str, object], graph, captured: dict):
    """The traced tensor a partition tensor is, or passes through (None if neither): a
    lowered cond's Switch and the inlined branch's input Identity are not in the traced
    function."""
    switches = []
    for _ in range(8):
        traced = _traced_tensor(graph, name, captured)
        if traced is not None:
            return traced
        node = nodes.get(name.partition(":")[0])
        if node is None or node.op not in _PASS_THROUGH or not node.input:
            break
        if node.op != "Identity":
            switches.append(node.name)
        name = node.input[0]
    else:
        traced = _traced_tensor(graph, name, captured)
        if traced is not None:
            return traced
    # Grappler may have fused the Switch's source away (oneDNN folds a bias gradient into
    # _MklNativeConv2DBackpropFilterWithBias:1); lowering named the Switch after it.
    for switch in switches:
        traced = _switch_source(switch, graph, captured)
        if traced is not None:
            return traced
    return None


def _switch_source(switch_name: str, graph, captured: dict):
    """The traced tensor a lowered cond's Switch was made for: lowering names it
    ``<cond>/<source op>/_<n>``. Only single-output sources (the output is then known)."""
    parts = re.sub(r"/_\d+$", "", switch_name).split("/")
    for i in range(1, len(parts)):
        op = _traced_op(graph, "/".join(parts[i:]), captured)
        if op is not None:
            return op.outputs[0] if len(op.outputs) == 1 else None
    return None


def _constant_shape(node) -> tuple[int, ...] | None:
    """The shape of a partition's ``Const`` node (from its value), else None."""
    if node is None or node.op != "Const":
        return None
    dims = node.attr["value"].tensor.tensor_shape.dim
    return tuple(int(d.size) for d in dims)


def _traced_tensor(graph, name: str, captured: dict):
    """The tensor of ``graph`` a partition names; for an op of a lowered cond's inlined
    branch, the tensor in that branch's graph (whose inputs that carry variable handles are
    added to ``captured``)."""
    op_name, _, index = name.partition(":")
    op = _traced_op(graph, op_name, captured)
    try:
        return op.outputs[int(index or 0)] if op is not None else None
    except (ValueError, IndexError):
        return None


def _traced_op(graph, op_name: str, captured: dict):
    try:
        return graph.get_operation_by_name(op_name)
    except (KeyError, ValueError):
        pass
    inlined = INLINED_BRANCH_OP.fullmatch(op_name)
    if inlined is None:
        return None
    cond = _traced_op(graph, inlined["cond"], captured)
    if cond is None or cond.type not in _COND_OPS:
        return None
    then_graph, else_graph = cond_branch_graphs(cond)
    branch = then_graph if inlined["branch"] == "then" else else_graph
    for outer, inner in zip(cond.inputs[1:], branch.inputs, strict=False):  # input 0: the test
        handle = _resource_id(outer, captured)
        if handle is not None:
            captured[(id(branch), inner.name)] = handle
    return _traced_op(branch, inlined["inner"], captured)


def _resource_id(tensor, captured: Mapping[tuple[int, str], int]) -> int | None:
    """id() of the captured handle behind a resource tensor (through Identity ops)."""
    for _ in range(4):
        if (id(tensor.graph), tensor.name) in captured:
            return captured[(id(tensor.graph), tensor.name)]
        if tensor.op.type in ("Identity", "IdentityN") and tensor.op.inputs:
            tensor = tensor.op.inputs[0]
        else:
            return None
    return None


def _is_offloaded_variable_data(tensor, captured, offloaded_handles, offloaded_shapes) -> bool:
    op = tensor.op
    if op.type == "ReadVariableOp":
        return _resource_id(op.inputs[0], captured) in offloaded_handles
    if not tensor.shape.is_fully_defined() or tuple(tensor.shape.as_list()) not in offloaded_shapes:
        return False
    # A gradient: within a few ops it reaches an update of an offloaded variable or slot.
    frontier, seen = [tensor], set()
    for _ in range(6):
        following = []
        for t in frontier:
            for consumer in t.consumers():
                if consumer.name in seen:
                    continue
                seen.add(consumer.name)
                writes = _UPDATE_OPS.match(consumer.type) and consumer.inputs
                if writes and _resource_id(consumer.inputs[0], captured) in offloaded_handles:
                    return True
                # The step ledger's cond applies the update in a branch: the If op takes the
                # gradient and, as inputs too, the handles its branch writes.
                if consumer.type in _COND_OPS and any(
                    _resource_id(t, captured) in offloaded_handles for t in consumer.inputs
                ):
                    return True
                following.extend(consumer.outputs)
        frontier = following
    return False
