"""The bench end to end: a tiny run's JSON, measured bytes against the audit, crashes, bad input."""

import json
import os
import subprocess
import sys
import time

import pytest

from ralp.bench.launcher import Launcher
from ralp.bench.ps_job import bench_job
from ralp.bench.records import RECORD_KEYS
from ralp.bench.runner import measure
from ralp.bench.runspec import RunSpec
from ralp.cluster.fresh_process import ChildError, run_in_fresh_process
from ralp.defaults import DEVICE_RESERVE_CPUS
from ralp.emulation.budget import thread_counts
from ralp.emulation.cpu_meter import CGROUP_ROOT_ENV
from ralp.planner.calibration import Calibration
from tests.leftovers import HIERARCHY, assert_nothing_left, groups_left
from tests.needs import NETNS, needs_netns

REQUIRED = ("model", "mode", "devices", "workers", "ps", "backend", "bandwidth",
            "images_per_sec", "step_time_s", "bytes_per_step_measured",
            "bytes_per_step_predicted")
TINY = dict(image_size=28, batch_size=16, num_classes=10, steps=6, warmup=1)


def _bench(*args, timeout=600, env=None):
    return subprocess.run([sys.executable, "-m", "ralp.bench", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.mark.cluster
def test_tiny_bench_run_writes_valid_json_and_csv(tmp_path):
    out = tmp_path / "r" / "results.json"
    p = _bench("--backend", "local", "--models", "lenet", "--modes", "ps", "ralp-n",
               "--devices", "2", "--steps", "4", "--warmup", "1", "--num-classes", "10",
               "--repeat", "2", "--out", str(out), "--plot", str(tmp_path / "fig.png"),
               "--quiet")
    assert p.returncode == 0, p.stderr
    records = json.loads(out.read_text())
    # two rounds, the second in the rotated order; every round kept
    assert [(r["mode"], r["round"]) for r in records] == [
        ("ps", 0), ("ralp-n", 0), ("ralp-n", 1), ("ps", 1)]
    assert "medians over 2 rounds" in p.stdout
    for r in records:
        _check_budgeted(r, ["worker:0", "ps:0"], "chief:0")
    records = records[:2]
    for r in records:
        assert tuple(r)[: len(RECORD_KEYS)] == RECORD_KEYS  # in the schema's order
        assert set(REQUIRED) <= set(r), set(REQUIRED) - set(r)
        assert r["setup_s"] > 0 and r["setup"]["place"] > 0
        assert r["error"] is None and r["backend"] == "local" and r["bandwidth"] is None
        assert r["images_per_sec"] > 0 and r["step_time_s"] > 0
        assert r["bytes_per_step_measured"] is None  # loopback links are not measured
    ps, ralp = records
    assert ralp["bytes_per_step_predicted"] < ps["bytes_per_step_predicted"]
    assert ralp["offloaded_layers"] and not ps["offloaded_layers"]
    assert (tmp_path / "r" / "results.csv").read_text().startswith("model,")
    assert (tmp_path / "fig.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "lenet" in p.stdout and "ralp-n" in p.stdout


def _check_budgeted(r: dict, tasks: list[str], apart: str) -> None:
    """A record of a run on budgeted devices (or, without cgroups here, on shared CPUs with
    the reason) carries its budget and each task's CPU against it."""
    cpu = r["cpu"]
    if HIERARCHY is None:
        assert cpu["fallback"] and r["host_kept_up"] is None
        return
    share = (cpu["host_cpus"] - DEVICE_RESERVE_CPUS) / r["devices"]
    assert r["device_cpus"] == "auto" and cpu["budget_cpus"] == pytest.approx(share, abs=1e-3)
    assert cpu["threads"] == list(thread_counts(share))
    assert set(cpu["tasks"]) == {*tasks, apart}
    for task in tasks:
        row = cpu["tasks"][task]
        assert 0 < row["used_cpus"] <= cpu["budget_cpus"] * 1.1, (task, row)
        assert 0 <= row["throttled_share"] <= 1 and row["budget_use"] <= 1.1
    assert "budget_use" not in cpu["tasks"][apart]  # the coordinator or driver only counts
    assert cpu["unbudgeted_cpus"] >= 0 and cpu["steal_cpus"] >= 0
    assert isinstance(r["host_kept_up"], bool) and r["host_kept_up"] == cpu["kept_up"]


@pytest.mark.cluster
def test_without_writable_cgroups_the_run_shares_the_cpus_and_says_so(tmp_path,
                                                                       read_only_cgroup_root):
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "ralp.bench", "--backend", "local", "--models",
                        "lenet", "--modes", "ps", "--devices", "2", "--steps", "2", "--warmup",
                        "1", "--num-classes", "10", "--out", str(out), "--quiet"],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, CGROUP_ROOT_ENV: read_only_cgroup_root})
    assert p.returncode == 0, p.stderr
    said = [line for line in p.stdout.splitlines() if line.startswith("devices:")]
    assert len(said) == 1 and "shared CPUs, no budgets (cannot create a control group" in said[0]
    (record,) = json.loads(out.read_text())
    assert "cannot create a control group" in record["cpu"]["fallback"]
    assert record["host_kept_up"] is None and "tasks" not in record["cpu"]


@pytest.mark.cluster
@needs_netns
def test_each_workload_is_calibrated_once_in_its_budget_and_bounds_every_record(tmp_path):
    out = tmp_path / "calibrated.json"
    p = _bench("--backend", "netns", "--bandwidth", "1gbit", "--models", "lenet", "--modes",
               "ps", "ralp-n", "--devices", "2", "--batch-size", "16", "--steps", "3",
               "--warmup", "1", "--num-classes", "10", "--out", str(out),
               "--quiet", env={**os.environ, "RALP_BENCH_CALIBRATION": ""})
    assert p.returncode == 0, p.stderr
    ps, ralp = json.loads(out.read_text())
    assert ps["calibration"] == ralp["calibration"]  # measured once, before the first run
    cal = ps["calibration"]
    assert cal["schema_version"] == 2 and "host" not in cal  # the product's: compute only
    [entry] = cal["entries"]
    assert (entry["model"], entry["batch_size"], entry["image_size"], entry["num_classes"]) == (
        "lenet", 16, 28, 10)
    assert entry["full_s"] > entry["tail_s"] > 0
    budget = (ps.get("cpu") or {}).get("budget_cpus")
    if budget:  # measured inside one device's budget, which the calibration names
        assert f"{budget:g} CPU per device" in cal["machine"]
    assert cal["measured_at"] < time.time() and cal["seconds"] > 0
    assert Calibration.from_dict(cal).find("lenet", 16, 28, 10).full_s == entry["full_s"]
    for r in (ps, ralp):  # every successful record against its bound
        assert r["compute_step_time_s"] > 0 and r["bound_ratio"] > 0
        assert r["wire_step_time_s"] <= r["step_time_s"]
        sides = [r["compute_step_time_s"], r["wire_step_time_s"]]
        if budget:  # budgeted devices: the busiest one's CPU, at most its window
            assert 0 < r["cpu_step_time_s"] <= 1.05 * r["step_time_s"]
            assert r["busiest_cpu_task"] in r["cpu"]["tasks"]
            sides.append(r["cpu_step_time_s"])
        assert r["bound_step_time_s"] == pytest.approx(max(sides))
    _check_dilated(ps, ralp, p.stdout)


def _check_dilated(ps: dict, ralp: dict, stdout: str) -> None:
    """Each record of a budgeted netns run says its reference device, its budget's pace
    (measured once, before the first run, and again after the round's runs), the dilation,
    the nominal and the applied link, and gives its figures in the reference's time."""
    from ralp.bench.pace import PACE_TOLERANCE, REFERENCE_DEVICE, dilated_link

    if not (ps.get("cpu") or {}).get("budget_cpus"):
        return  # shared CPUs: no device to pace
    assert ps["pace_probe"] == ralp["pace_probe"]
    for r in (ps, ralp):
        assert r["reference_device"] == REFERENCE_DEVICE.describe()
        assert r["device_pace"] == pytest.approx(
            REFERENCE_DEVICE.step_s / r["pace_probe"]["probe_step_s"])
        assert r["pace_probe"]["device_cpus"] == r["cpu"]["budget_cpus"]
        assert r["dilation"] == pytest.approx(1 / r["device_pace"])
        assert (r["bandwidth"], r["latency"]) == ("1gbit", None)
        assert r["applied_bandwidth"] == dilated_link("1gbit", None, r["dilation"])[0]
        assert r["images_per_sec"] == pytest.approx(r["host_images_per_sec"] * r["dilation"])
        assert r["step_time_s"] == pytest.approx(r["host_step_time_s"] / r["dilation"])
        assert r["device_pace_after"] > 0 and r["pace_drift"] == pytest.approx(
            r["device_pace_after"] / r["device_pace"] - 1)
        assert r["pace_held"] is (abs(r["pace_drift"]) <= PACE_TOLERANCE)
    assert ps["device_pace_after"] == ralp["device_pace_after"]  # one probe after the round
    assert "after the round's runs" in stdout
    assert stdout.startswith("devices:") and f"dilation {ps['dilation']:.3g}" in stdout
    assert "reference device: " in stdout


@pytest.mark.cluster
@needs_netns
def test_auto_runs_the_planners_choice_and_records_why(tmp_path):
    out = tmp_path / "auto.json"
    p = _bench("--backend", "netns", "--bandwidth", "1gbit", "--models", "lenet", "--modes",
               "auto", "--devices", "2", "--batch-size", "16", "--steps", "3", "--warmup", "1",
               "--num-classes", "10", "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    (r,) = json.loads(out.read_text())
    figures = r["auto"]["predicted_images_per_sec"]
    assert set(figures) <= {"ps", "ralp-h", "ralp-n", "horovod", "stanza", "collective"}
    assert len(figures) >= 3
    # the planner's decision: the fastest, or inside its margin the mode needing least
    from ralp.planner.cluster_plan import DECISION_MARGIN, NEEDS

    tied = [m for m, v in figures.items() if v * (1 + DECISION_MARGIN) >= max(figures.values())]
    decided = min(tied, key=lambda m: (NEEDS[m][0], -figures[m]))
    assert r["mode"] == r["auto"]["chosen"] == decided
    assert r["error"] is None and r["images_per_sec"] > 0
    assert "measured here" in r["auto"]["calibration"]
    assert f"auto chose {r['mode']}: " in p.stdout and f"auto->{r['mode']}" in p.stdout


@pytest.mark.cluster
def test_pull_schedules_and_their_trace(tmp_path):
    out = tmp_path / "pulls.json"
    p = _bench("--backend", "local", "--models", "lenet", "--modes", "ps", "--devices", "2",
               "--steps", "3", "--warmup", "1", "--num-classes", "10", "--pull-schedule",
               "default,layer", "ibatch", "--trace-pulls", "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    records = json.loads(out.read_text())
    assert [r["pull_schedule"] for r in records] == ["default", "layer", "ibatch"]
    for r in records:
        assert r["error"] is None and r["images_per_sec"] > 0
        assert 0.0 <= r["pull_hidden_share"] <= 1.0 and r["pull_active_s"] > 0
        assert r["traced_step_s"] > 0
    default, layer, ibatch = records
    assert default["pull_batches"] is None and layer["pull_batches"] == 4  # lenet: 4 layers
    assert 1 <= ibatch["pull_batches"] <= 4 and ibatch["pull_predicted_s"] > 0
    assert "ps ibatch" in p.stdout and "ps layer" in p.stdout


@pytest.mark.slow  # each runs the CLI in a fresh interpreter (TensorFlow's import)
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--models", "nosuchnet"], "unknown model"),
        (["--backend", "local", "--bandwidth", "1gbit"], "netns backend"),
        (["--backend", "tf-config"], "TF_CONFIG"),
        (["--backend", "local", "--jobs", "2"], "--jobs needs the netns backend"),
        (["--backend", "local", "--modes", "ps", "--devices", "3"], "N must be even"),
        (["--backend", "local", "--models", "alexnet", "--image-size", "32"], "image-size >= 67"),
        (["--backend", "tf-config", "--modes", "horovod"], "--hostfile FILE (mode horovod)"),
        (["--backend", "local", "--hostfile", "hosts.txt"], "use it with --backend tf-config"),
        (["--backend", "local", "--data", "digits", "--num-classes", "1000"], "10 classes"),
        (["--backend", "local", "--modes", "horovod", "--sync", "bsp"], "for the PS modes"),
        (["--backend", "local", "--sync", "ssp"], "ssp needs its bound"),
        (["--backend", "local", "--modes", "ps", "--slow-worker", "7:2"], "worker 7 does not"),
        (["--backend", "local", "--modes", "stanza", "--fc-workers", "3"], "no more FC ranks"),
        (["--backend", "local", "--modes", "ps", "--fc-workers", "2"], "for mode stanza"),
        (["--backend", "local", "--modes", "ps", "--pull-schedule", "fast"], "unknown pull"),
        (["--backend", "local", "--modes", "auto", "ps"], "the planner's choice on its own"),
        (["--backend", "local", "--modes", "auto"], "use the netns backend"),
        (["--backend", "local", "--modes", "ps", "--compute-profile", "c.json"], "--modes auto"),
        (["--backend", "local", "--dilation", "2"], "--dilation slows the simulated links"),
        (["--backend", "local", "--dilation", "0"], "--dilation '0': give 'auto'"),
    ],
)
def test_bad_requests_fail_with_a_clear_message(args, message):
    p = _bench(*args, "--quiet", timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert message in p.stderr
    assert "Traceback" not in p.stderr


def _crash_ps(launcher: Launcher) -> tuple[str, dict]:
    """Run a bench job and kill the PS as soon as the measured steps start."""
    run = RunSpec.for_devices("lenet", "ralp-n", 3, **{**TINY, "steps": 100000})
    budget = launcher.budget(run.device_cpus, run.devices)  # each task in its device's group
    with launcher.cluster(run.workers, run.ps, budget=budget) as handle:
        cluster = handle.cluster

        def on_progress(message):
            if message == ("phase", "measuring"):
                cluster.kill_task("ps", 0)

        with pytest.raises(ChildError) as err:
            run_in_fresh_process(bench_job, handle.spec, run, handle.read_links,
                                 netns=handle.netns, group=handle.chief_group,
                                 on_progress=on_progress, timeout=300)
        pids = dict(cluster.pids)
    return str(err.value), pids


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.cluster
def test_a_task_crash_mid_run_is_an_error_and_everything_is_stopped():
    message, pids = _crash_ps(Launcher("local"))
    assert "parameter server lost" in message or "unreachable" in message
    assert pids and all(_gone(pid) for pid in pids.values())
    assert groups_left(os.getpid()) == []


@needs_netns
@pytest.mark.cluster
def test_a_task_crash_on_netns_leaves_no_process_or_namespace():
    launcher = Launcher("netns", bandwidth="1gbit")
    message, pids = _crash_ps(launcher)
    assert "parameter server lost" in message or "unreachable" in message
    assert all(_gone(pid) for pid in pids.values())
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"rlp{os.getpid()}-" not in left
    assert groups_left(os.getpid()) == []


@needs_netns
@pytest.mark.cluster
@pytest.mark.parametrize("mode", ["ps", "ralp-n"])
def test_measured_bytes_match_the_audit_prediction(mode):
    from ralp.audit.step_audit import AuditSettings, audit

    run = RunSpec.for_devices("lenet", mode, 2, **TINY)
    record = measure(run, Launcher("netns", bandwidth="1gbit"))
    assert record["error"] is None, record["error"]
    assert tuple(record)[: len(RECORD_KEYS)] == RECORD_KEYS  # the producer follows the schema
    assert set(record["setup"]) == {"cluster_start", "coordinator_start", "build_model",
                                    "place", "warmup"}
    assert record["setup_s"] == pytest.approx(sum(record["setup"].values()), abs=0.01)
    _check_budgeted(record, [f"worker:{i}" for i in range(run.workers)] + ["ps:0"], "chief:0")
    assert groups_left(os.getpid()) == []  # removed after a normal run
    audited = audit(AuditSettings("lenet", "ps" if mode == "ps" else "ralp", run.workers,
                                  run.ps, 28, 16, 10))
    predicted = audited["crossing_bytes_per_worker_batch"]
    measured = record["bytes_per_step_measured"]
    assert measured == pytest.approx(predicted, rel=0.10), (measured, predicted)
    assert record["bytes_ratio"] == pytest.approx(1.0, abs=0.10)
    # the busiest direction over the measured window at its rate: never above the step
    assert 0 < record["wire_step_time_s"] <= record["step_time_s"]


@pytest.mark.cluster
def test_tf_config_backend_uses_a_running_cluster_and_leaves_it_running(tmp_path):
    from ralp.cluster.local import LocalCluster

    with LocalCluster(2, 1) as cluster:
        path = tmp_path / "cluster.json"
        path.write_text(json.dumps(cluster.spec.as_dict()))
        out = tmp_path / "tf.json"
        common = ("--models", "lenet", "--steps", "4", "--warmup", "1", "--num-classes", "10",
                  "--quiet")
        p = _bench("--backend", "tf-config", "--cluster", str(path), "--modes", "ps", "ralp-n",
                   "--devices", "2", "--out", str(out), *common)
        assert p.returncode == 0, p.stderr
        records = json.loads(out.read_text())
        assert [(r["backend"], r["workers"], r["ps"]) for r in records] == [
            ("tf-config", 1, 1), ("tf-config", 1, 1)]
        assert all(r["images_per_sec"] > 0 for r in records)
        assert all(cluster.alive().values())  # not ours to stop

        # The chief's TF_CONFIG works as well; a run larger than the cluster is a clear error.
        env = {**os.environ, "TF_CONFIG": cluster.spec.tf_config("chief", 0)}
        p = subprocess.run([sys.executable, "-m", "ralp.bench", "--backend", "tf-config",
                            "--modes", "ralp-n", "--devices", "2", "8", *common],
                           capture_output=True, text=True, timeout=600, env=env)
        assert p.returncode == 1, p.stderr
        assert "needs 7 workers and 1 PS tasks, but the cluster has 2 and 1" in p.stdout
        assert all(cluster.alive().values())


@needs_netns
def test_latency_without_netem_fails_before_any_run():
    p = _bench("--backend", "netns", "--latency", "2ms", "--quiet", timeout=120)
    if p.returncode == 0:
        pytest.skip("this kernel has netem: latency emulation works here")
    assert p.returncode == 2
    assert "netem" in p.stderr and "Traceback" not in p.stderr


def _descendants(pid: int) -> list:
    """Every process the bench process ``pid`` started, directly or not, still alive."""
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _tasks(processes) -> list:
    """The cluster's server tasks among ``processes`` (they name themselves ralp-<task>)."""
    import psutil

    found = []
    for process in processes:
        try:
            if process.name().startswith("ralp-"):
                found.append(process)
        except psutil.NoSuchProcess:
            pass
    return found


@pytest.mark.cluster
def test_ctrl_c_mid_run_stops_every_task_and_namespace():
    import signal
    import time

    backend = "netns" if NETNS is None else "local"
    p = subprocess.Popen([sys.executable, "-m", "ralp.bench", "--backend", backend, "--models",
                          "lenet", "--modes", "ps", "--devices", "2", "--steps", "100000",
                          "--num-classes", "10", "--quiet"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         # As from a terminal: a shell running tests in the background hands
                         # its children SIGINT ignored, and Python then keeps ignoring it.
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while len(_tasks(_descendants(p.pid))) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(_tasks(_descendants(p.pid))) == 2, "the bench started no cluster"
    time.sleep(15)  # well into the run
    started = _descendants(p.pid)  # tasks, coordinator, zygote and all
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted" in err
    assert_nothing_left(p.pid, started)


def test_show_reprints_saved_results_without_running(tmp_path):
    from ralp.bench.report import RECORD_KEYS

    record = dict.fromkeys(RECORD_KEYS)
    record.update(model="vgg11", mode="ps", devices=4, workers=2, ps=2, backend="netns",
                  bandwidth="1gbit", batch_size=8, image_size=64, num_classes=1000, steps=5,
                  warmup=2, images_per_sec=5.0, images_per_sec_iqr=[4.9, 5.1], step_time_s=3.1,
                  step_time_iqr_s=[3.0, 3.2], bytes_per_step_measured=3.09e8,
                  bytes_per_step_predicted=3.08e8, bytes_ratio=1.003)
    saved = tmp_path / "r.json"
    saved.write_text(json.dumps([record]))
    p = _bench("--show", str(saved), "--plot", str(tmp_path / "r.png"), timeout=60)
    assert p.returncode == 0, p.stderr
    assert "vgg11" in p.stdout and "1.003" in p.stdout
    assert (tmp_path / "r.png").exists()
    # several saved files together, written out as one
    other = tmp_path / "r2.json"
    other.write_text(json.dumps([{**record, "model": "alexnet"}]))
    both = tmp_path / "both.json"
    p = _bench("--show", str(saved), str(other), "--out", str(both), timeout=60)
    assert p.returncode == 0, p.stderr
    assert [r["model"] for r in json.loads(both.read_text())] == ["vgg11", "alexnet"]
    assert "alexnet" in p.stdout and both.with_suffix(".csv").exists()
    p = _bench("--show", str(saved), "--out", str(saved), timeout=60)
    assert p.returncode == 2 and "is one of the --show files" in p.stderr
    assert json.loads(saved.read_text()) == [record]  # nothing lost
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    p = _bench("--show", str(bad), timeout=60)
    assert p.returncode == 2 and "not a list of bench records" in p.stderr
    # two files made apart, read as two rounds of one setting
    p = _bench("--show", str(saved), str(saved), "--as-rounds", "--out", str(both), timeout=60)
    assert p.returncode == 0, p.stderr
    assert [r["round"] for r in json.loads(both.read_text())] == [0, 1]
    assert "medians over 2 rounds" in p.stdout
    p = _bench("--as-rounds", timeout=60)
    assert p.returncode == 2 and "give them with --show" in p.stderr


@pytest.mark.cluster
def test_bench_sync_runs_record_their_bound(tmp_path):
    out = tmp_path / "sync.json"
    p = _bench("--backend", "local", "--models", "lenet", "--modes", "ps", "--devices", "4",
               "--sync", "bsp", "ssp:1", "--slow-worker", "0:2", "--steps", "3", "--warmup", "1",
               "--num-classes", "10", "--image-size", "28", "--batch-size", "8",
               "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    records = json.loads(out.read_text())
    assert [(r["mode"], r["sync"], r["slow_worker"]) for r in records] == [
        ("ps", "bsp", "0:2"), ("ps", "ssp:1", "0:2")]
    bsp, ssp = records
    assert bsp["sync_max_gap"] == 0 and ssp["sync_max_gap"] <= 1
    assert bsp["error"] is None and bsp["images_per_sec"] > 0
    assert "ps bsp" in p.stdout and "ps ssp:1" in p.stdout


def test_default_modes_leave_out_the_horovod_modes_where_it_is_missing():
    from ralp.bench.config import BenchRequest

    # TensorFlow's own allreduce takes horovod's place; stanza needs Horovod's alltoall
    assert BenchRequest().mode_names(horovod_missing="not installed") == ["ps", "ralp-n",
                                                                           "collective"]
    assert BenchRequest().mode_names() == ["ps", "ralp-n", "horovod", "stanza"]
    # asked for by name, a mode stays: the launcher then says why it cannot run
    named = BenchRequest(modes=("ps", "horovod"))
    assert named.mode_names(horovod_missing="not installed") == ["ps", "horovod"]
