"""``--modes auto`` resolved when the run matrix is built: the mode the planner's predictions
rank first (checked against the step-time functions called directly), with why in the record;
bad requests fail cleanly. No cluster is started (tests/bench/test_bench_run.py runs one)."""

from dataclasses import replace
from pathlib import Path

import pytest

from ralp.bench.auto import chooser, offered_modes
from ralp.bench.config import BenchRequest
from ralp.bench.records import make_record
from ralp.bench.runspec import BenchError
from ralp.emulation.budget import budget_for
from ralp.models import build_model
from ralp.planner import model as pm
from ralp.planner import ring_step
from ralp.planner.calibration import Calibration
from ralp.planner.modes import PREDICTED_MODES, resources
from ralp.planner.stanza_step import stanza_step_time
from ralp.planner.workload import Workload
from ralp.profiler.api import profile

CALIBRATION = Path(__file__).resolve().parents[1] / "data" / "plan_calibration.json"
STEP = {"ps": pm.ps_step_time, "ralp-h": pm.ralp_step_time, "ralp-n": pm.ralp_step_time,
        "horovod": ring_step.horovod_step_time, "stanza": stanza_step_time,
        "collective": ring_step.collective_step_time}


def _direct(model: str, devices: int, bits: int, modes=PREDICTED_MODES,
            cpus: str = "auto") -> dict[str, float]:
    """Each mode's images/s from its step-time function, on the run's devices: budgeted
    (``cpus``; one task per device) or, shared or where no control group can be made, the
    shared host; stanza at its best n_f of 1..N/2 (every FC rank here fits in memory)."""
    cal = Calibration.load(CALIBRATION)
    entry = cal.find(model, 8, 75, 1000)
    budget = budget_for(cpus, devices).cpus
    host = entry.host_for(replace(cal.host, shared=True) if budget is None
                          else replace(cal.host, shared=False, device_cpus=budget))
    work = Workload(profile(build_model(model, 1000, 75), 8))
    out = {}
    for mode in modes:
        if mode == "collective" and host.collective_cpu_s_per_byte is None:
            continue  # a calibration from before TensorFlow's ring was measured
        shapes = ([(devices - f, f) for f in range(1, devices // 2 + 1)] if mode == "stanza"
                  else [resources(mode, devices)])
        rates = []
        for workers, ps in shapes:
            assert work.fc_rank_bytes(devices) < 2**30
            links = work.links_on(mode, workers, ps)
            rates.append(workers * 8 / STEP[mode](entry.compute, links, workers, bits / 8, host))
        out[mode] = max(rates)
    return out


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
        direct = _direct(run.model, run.devices, bits, cpus=cpus)
        budget = budget_for(cpus, run.devices).cpus
        assert run.mode == max(direct, key=direct.get), (run.label, direct)
        assert (run.workers, run.ps) == resources(run.mode, run.devices,
                                                  run.auto.get("fc_workers", 1))
        assert run.auto["chosen"] == run.mode
        assert run.auto["predicted_images_per_sec"] == pytest.approx(direct, rel=1e-9)
        assert str(CALIBRATION) in run.auto["calibration"]
        assert run.device_cpus == cpus
        if budget is None:
            assert "shared host" in run.auto["calibration"]
        else:
            assert "shared host" not in run.auto["calibration"]
        assert run.label.startswith(f"{run.model} auto->{run.mode} ")
        # The record keeps the choice and why, through the one schema.
        record = make_record(run.to_dict(), {"backend": "netns", "bandwidth": bandwidth})
        assert record["mode"] == run.mode and record["auto"] == run.auto
        assert record["auto"]["why"].startswith(f"auto chose {run.mode}: ")


def test_without_horovod_auto_chooses_among_the_others():
    request = _request(models=("resnet50",), devices=(8,), compute_profile=str(CALIBRATION))
    offered = offered_modes("horovodrun is not installed")  # and so no stanza either
    assert offered == ("ps", "ralp-h", "ralp-n", "collective")  # TensorFlow's own allreduce
    (run,) = request.runs(["auto"], chooser("netns", "1gbit", request.compute_profile, offered))
    direct = _direct("resnet50", 8, 10**9, offered)
    assert run.mode == max(direct, key=direct.get)
    # the recorded calibration predates TensorFlow's ring cost: collective is not predicted
    assert set(run.auto["predicted_images_per_sec"]) == set(offered) - {"collective"}


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
    n_f of 1..N/2 (checked against the step-time function called for each split)."""
    cal = Calibration.load(CALIBRATION)
    bests = []
    # on the shared host (--device-cpus shared), resnet50 at N = 4, 10 Gbit/s: two FC ranks
    # predicted faster than one (the others: one)
    for model, devices, bandwidth, bits in (("vgg11", 8, "1gbit", 10**9),
                                            ("vgg11", 8, "10gbit", 10**10),
                                            ("resnet50", 4, "10gbit", 10**10)):
        entry = cal.find(model, 8, 75, 1000)
        host = entry.host_for(cal.host)
        work = Workload(profile(build_model(model, 1000, 75), 8))
        request = _request(models=(model,), modes=("stanza",), devices=(devices,),
                           fc_workers="auto", compute_profile=str(CALIBRATION),
                           device_cpus=("shared",))
        assign = chooser("netns", bandwidth, request.compute_profile, ("stanza",))
        (run,) = request.runs(request.mode_names(), assign=assign)
        rates = {f: (devices - f) * 8 / stanza_step_time(
            entry.compute, work.links_on("stanza", devices - f, f), devices - f, bits / 8, host)
            for f in range(1, devices // 2 + 1)}
        best = max(rates, key=rates.get)
        assert (run.mode, run.workers, run.ps) == ("stanza", devices - best, best), rates
        assert run.auto["fc_workers"] == best
        bests.append(best)
    assert bests == [1, 1, 2]  # a search that always kept one FC rank would fail here
    with pytest.raises(BenchError, match="for mode stanza"):
        BenchRequest(models=("vgg11",), modes=("ps",), fc_workers="auto").runs(["ps"])
