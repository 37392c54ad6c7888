"""``--modes auto`` resolved when the run matrix is built: the mode the planner's core
decides (checked against the core's step formulas called directly, on the bench's layout of
each mode, and the decision's tie rule), with why in the record; bad requests fail cleanly.
No cluster is started (tests/bench/test_bench_run.py runs one)."""

import math
from dataclasses import replace
from pathlib import Path

import pytest

from ralp.bench.config import BenchRequest
from ralp.bench.mode_choice import chooser, offered_modes
from ralp.bench.pace import Paces
from ralp.bench.records import make_record
from ralp.bench.runspec import BenchError
from ralp.models import build_model
from ralp.planner.calibration import Calibration
from ralp.planner.cluster_plan import DECISION_MARGIN, NEEDS, predict_on_tasks
from ralp.planner.modes import PREDICTED_MODES, resources
from ralp.planner.topology import StanzaLayout, Topology, ring_step_s, stanza_step_s
from ralp.planner.workload import Workload
from ralp.profiler.api import profile

CALIBRATION = Path(__file__).resolve().parents[1] / "data" / "plan_calibration.json"


def _stanza_rates(work: Workload, compute, devices: int, bits: int) -> dict[int, float]:
    """Stanza's images/s for each n_f of 1..N/2, from the core's formula."""
    tail = work.tail_trainable_bytes
    head = work.table.trainable_param_bytes_total - tail
    topo = Topology(devices, 1, bits, math.inf)
    return {f: (devices - f) * 8 / stanza_step_s(
        compute, StanzaLayout(devices - f, f, head, tail, work.profile.boundary_bytes), topo,
        False) for f in range(1, devices // 2 + 1)}


def _direct(model: str, devices: int, bits: int, modes=PREDICTED_MODES,
            dilation: float = 1.0) -> dict[str, float]:
    """Each mode's images/s from the core's step formulas on the bench's layout of it: the PS
    family on its split of the devices, each task a machine; rings over every device; stanza
    at its best n_f of 1..N/2 (every FC rank here fits in memory). ``dilation``: the compute
    in the reference device's time (the host's divided by it)."""
    compute = Calibration.load(CALIBRATION).find(model, 8, 75, 1000).compute
    stacked = compute.tail_stacked_s
    compute = replace(compute, full_s=compute.full_s / dilation, tail_s=compute.tail_s / dilation,
                      head_measured_s=compute.head_s / dilation,
                      tail_stacked_s=None if stacked is None else stacked / dilation)
    work = Workload(profile(build_model(model, 1000, 75), 8))
    out = {}
    for mode in modes:
        if mode in ("horovod", "collective"):
            step = ring_step_s(compute, work.table.trainable_param_bytes_total,
                               Topology(devices, 1, bits, math.inf))
            out[mode] = devices * 8 / step
        elif mode == "stanza":
            out[mode] = max(_stanza_rates(work, compute, devices, bits).values())
        else:
            workers, ps = resources(mode, devices)
            out[mode] = predict_on_tasks(work, compute, mode, workers, ps, bits).images_per_sec
    return out


def _decided(direct: dict[str, float]) -> str:
    """The decision's rule: of the modes within the decision margin of the fastest, the one
    that needs least (the faster of equals)."""
    top = max(direct.values())
    tied = [m for m, v in direct.items() if v * (1 + DECISION_MARGIN) >= top]
    return min(tied, key=lambda m: (NEEDS[m][0], -direct[m]))


def _request(**kw) -> BenchRequest:
    return BenchRequest(**{"models": ("vgg11", "resnet50"), "modes": ("auto",), "devices": (4, 8),
                           "batch_size": 8, "image_size": 75, "steps": 3, **kw})


@pytest.mark.parametrize("bandwidth,cpus", [("1gbit", "auto"), ("10gbit", "auto"),
                                            ("1gbit", "shared")])
def test_auto_runs_the_mode_the_predictions_rank_first(bandwidth, cpus):
    request = _request(compute_profile=str(CALIBRATION), device_cpus=(cpus,))
    choose = chooser("netns", bandwidth, request.compute_profile, PREDICTED_MODES)
    runs = request.runs(request.mode_names(), choose)
    assert [(r.model, r.devices) for r in runs] == [("vgg11", 4), ("vgg11", 8),
                                                    ("resnet50", 4), ("resnet50", 8)]
    bits = {"1gbit": 10**9, "10gbit": 10**10}[bandwidth]
    for run in runs:
        direct = _direct(run.model, run.devices, bits)
        assert run.mode == _decided(direct), (run.label, direct)
        assert (run.workers, run.ps) == resources(run.mode, run.devices,
                                                  run.auto.get("fc_workers", 1))
        assert run.auto["chosen"] == run.mode
        assert run.auto["predicted_images_per_sec"] == pytest.approx(direct, rel=1e-9)
        assert str(CALIBRATION) in run.auto["calibration"]
        assert run.device_cpus == cpus
        assert run.label.startswith(f"{run.model} auto->{run.mode} ")
        # The record keeps the choice and why, through the one schema.
        record = make_record(run.to_dict(), {"backend": "netns", "bandwidth": bandwidth})
        assert record["mode"] == run.mode and record["auto"] == run.auto
        assert record["auto"]["why"].startswith(f"auto chose {run.mode}: ")


@pytest.mark.parametrize("dilation", [4.0, 0.5])
def test_on_dilated_links_auto_predicts_the_compute_in_the_reference_devices_time(dilation):
    """A run whose links are slowed by the host's dilation is reported in the reference
    device's time: its choice takes the compute in that time against the links as named."""
    request = _request(compute_profile=str(CALIBRATION), device_cpus=("auto",))
    choose = chooser("netns", "1gbit", request.compute_profile, PREDICTED_MODES,
                     Paces(dilation, "1gbit"))
    for run in request.runs(request.mode_names(), choose):
        direct = _direct(run.model, run.devices, 10**9, dilation=dilation)
        assert run.auto["predicted_images_per_sec"] == pytest.approx(direct, rel=1e-9)
        assert run.mode == _decided(direct)
        assert f"in the reference device's time (dilation {dilation:g})" in run.auto["why"]


def test_without_horovod_auto_chooses_among_the_others():
    request = _request(models=("resnet50",), devices=(8,), compute_profile=str(CALIBRATION))
    offered = offered_modes("horovodrun is not installed")  # and so no stanza either
    assert offered == ("ps", "ralp-h", "ralp-n", "collective")  # TensorFlow's own allreduce
    (run,) = request.runs(["auto"], chooser("netns", "1gbit", request.compute_profile, offered))
    direct = _direct("resnet50", 8, 10**9, offered)
    assert run.mode == _decided(direct)
    assert set(run.auto["predicted_images_per_sec"]) == set(offered)


def test_records_of_other_modes_have_no_auto_field():
    (run,) = _request(modes=("ps",), models=("vgg11",), devices=(4,)).runs(["ps"])
    assert run.auto is None and "auto" not in run.to_dict()
    assert "auto" not in make_record(run.to_dict(), {"backend": "netns"})


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(modes=("auto", "ps")), "runs the planner's choice on its own"),
        (dict(workers=2, ps=1), "drop --workers/--ps"),
        (dict(sync=("bsp",)), "drop --sync"),
        (dict(jobs=2), "drop --jobs"),
        (dict(modes=("ps",), compute_profile="cal.json"), "is for --modes auto"),
        (dict(modes=("autp",)), "unknown mode(s) ['autp']; choose from ps, ralp-h, ralp-n, "
                                "horovod, stanza, collective, auto"),
        (dict(fc_workers=2), "drop --fc-workers"),
    ],
)
def test_bad_auto_requests_fail_cleanly(kw, message):
    with pytest.raises(BenchError) as err:
        _request(**kw).mode_names()
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("backend", "bandwidth", "profile_path", "message"),
    [
        ("local", None, None, "use the netns backend"),
        ("netns", "1gbit", "/nonexistent.json", "cannot read calibration"),
    ],
)
def test_auto_needs_a_shaped_network_and_a_readable_calibration(backend, bandwidth,
                                                                profile_path, message):
    with pytest.raises((BenchError, ValueError), match=message):
        chooser(backend, bandwidth, profile_path, PREDICTED_MODES)


def test_a_calibration_without_the_workload_names_the_command_to_make_it():
    request = _request(models=("vgg11",), devices=(4,), image_size=80,
                       compute_profile=str(CALIBRATION))
    with pytest.raises(BenchError, match="vgg11 N=4: no calibration for vgg11 at batch 8, "
                       "image 80.*--calibrate"):
        request.runs(["auto"], chooser("netns", "1gbit", request.compute_profile, PREDICTED_MODES))


def test_auto_without_a_chooser_is_refused():
    with pytest.raises(BenchError, match="needs the planner"):
        _request().runs(["auto"])


def test_fc_workers_auto_is_stanzas_node_assignment():
    """--fc-workers auto: the n_c / n_f split the planner predicts fastest, searched over every
    n_f of 1..N/2 (checked against the core's Stanza formula called for each split)."""
    cal = Calibration.load(CALIBRATION)
    for model, devices, bandwidth, bits in (("vgg11", 8, "1gbit", 10**9),
                                            ("vgg11", 8, "10gbit", 10**10),
                                            ("resnet50", 4, "10gbit", 10**10)):
        work = Workload(profile(build_model(model, 1000, 75), 8))
        request = _request(models=(model,), modes=("stanza",), devices=(devices,),
                           fc_workers="auto", compute_profile=str(CALIBRATION),
                           device_cpus=("shared",))
        assign = chooser("netns", bandwidth, request.compute_profile, ("stanza",))
        (run,) = request.runs(request.mode_names(), assign=assign)
        rates = _stanza_rates(work, cal.find(model, 8, 75, 1000).compute, devices, bits)
        best = max(rates, key=rates.get)
        assert (run.mode, run.workers, run.ps) == ("stanza", devices - best, best), rates
        assert run.auto["fc_workers"] == best
    with pytest.raises(BenchError, match="for mode stanza"):
        BenchRequest(models=("vgg11",), modes=("ps",), fc_workers="auto").runs(["ps"])
