"""The lab's device workload: the PS modes' links carry each worker's layers (the layer
pipeline's input), on the PS tasks the byte model places their variables."""

import functools

import pytest

from lab.planner.device_workload import DeviceWorkload
from ralp.models import build_model
from ralp.planner.modes import resources
from ralp.profiler.api import profile


@functools.cache
def _vgg11() -> DeviceWorkload:
    return DeviceWorkload(profile(build_model("vgg11", 1000, 75), 8))


@pytest.fixture(scope="module")
def vgg11():
    return _vgg11()


@pytest.mark.parametrize("mode", ["ps", "ralp-n"])
def test_the_pipelines_layers_carry_the_byte_models_variables(vgg11, mode):
    workers, ps = resources(mode, 4)
    queue = DeviceWorkload.of(vgg11, pipeline=False)  # the queueing network's
    assert queue.links_on(mode, workers, ps).layers == ()
    links = vgg11.links_on(mode, workers, ps)  # the pipeline's, by default
    assert not links.in_step  # past an epoch's first cycles, by default
    assert DeviceWorkload.of(vgg11, in_step=True).links_on(mode, workers, ps).in_step
    per_task = [0] * ps
    for layer in links.layers:
        for task, nbytes in layer.variables:
            per_task[task] += nbytes
    moved = vgg11.offloaded if mode != "ps" else ()
    kept = [r.name for r in vgg11.table.rows if r.name not in moved]
    assert [layer.flops_share > 0 for layer in links.layers] == [
        vgg11.table.row(name).flops > 0 for name in kept]
    assert sum(layer.flops_share for layer in links.layers) == pytest.approx(1.0)
    if mode == "ps":  # every variable pulled from its task, once per worker batch
        assert [workers * b for b in per_task] == list(links.ps_tx)
    else:  # the kept variables, on the one PS, beside the activations
        assert 0 < workers * per_task[0] < links.ps_tx[0]
        assert per_task == [sum(b for row, _, b in vgg11.table.variables if row not in moved)]



def test_the_ring_modes_links_are_the_products():
    work = _vgg11()
    assert not hasattr(work.links_on("horovod", 4, 0), "layers")
