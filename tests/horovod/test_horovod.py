"""The Horovod baseline for real: horovodrun + Gloo ranks, replicas, a single-process reference,
the bench's horovod mode end to end, failures and clean-up, and the build script's errors."""

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ralp._messages import MARK, parse_message
from ralp.bench.records import RECORD_KEYS
from ralp.emulation.budget import budget_for, thread_counts
from ralp.horovod.launch import (
    HorovodRunError,
    _last_error_line,
    horovodrun_command,
    launch,
    run_and_collect,
)
from tests.leftovers import HIERARCHY, assert_nothing_left, groups_left
from tests.needs import NETNS_MARKS, needs_horovod, needs_netns

ROOT = Path(__file__).resolve().parents[2]

STEPS, BATCH = 3, 16  # per rank; the single-process reference takes 2 x BATCH per step


# ------------------------------------------------------------------ output parsing (no Horovod)


def test_messages_are_found_behind_horovodruns_prefix():
    line = f'[0]<stdout>:{MARK}{{"step": 10}}\n'
    assert parse_message(line) == {"step": 10}
    assert parse_message(f'Tue Nov 21 10:00:00 2026[0]<stdout>:{MARK}{{"a": 1}}') == {"a": 1}
    assert parse_message("[1]<stderr>:some TensorFlow warning") is None
    assert parse_message(f"[0]<stdout>:{MARK}{{not json") is None


def test_last_error_line_prefers_the_exception():
    lines = ["[1]<stderr>:Traceback (most recent call last):",
             '[1]<stderr>:  File "x.py", line 1, in <module>',
             "[1]<stderr>:ValueError: image too small",
             "Process 1 exit with status code 1."]
    assert _last_error_line(lines) == "ValueError: image too small"
    assert _last_error_line(["", "rank 0 exited"]) == "rank 0 exited"
    aborted = ["[7]<stderr>:terminate called after throwing an instance of 'gloo::IoException'",
               "[7]<stderr>:  what():  [pair.cc:598] Connection closed by peer [10.0.0.8]:2141",
               "rank 7 exited with status -6: stopping the others",
               "Horovod detected that one or more processes exited with non-zero status"]
    assert _last_error_line(aborted) == (
        "rank 7 exited with status -6 (rank 7 aborted: [pair.cc:598] Connection closed by "
        "peer [10.0.0.8]:2141)")
    assert _last_error_line(aborted[:2]) == (  # no launcher's line: the abort alone
        "rank 7 aborted: [pair.cc:598] Connection closed by peer [10.0.0.8]:2141")
    # a rank's Python error is the cause; another rank's closed connection only follows it
    assert _last_error_line(["[2]<stderr>:ValueError: image too small", *aborted]) == (
        "ValueError: image too small")
    # a rank that died without a word (os._exit), then another aborted on its closed
    # connection: the first to exit is named, as the netns driver and horovodrun say it
    closed = "[1]<stderr>:  what():  [pair.cc:598] Connection closed by peer [127.0.0.1]:3295"
    assert _last_error_line(["rank 2 exited with status 3: stopping the others", closed]) == (
        "rank 2 exited with status 3")
    assert _last_error_line([closed, "RuntimeError: Horovod detected that one or more processes "
                             "exited with non-zero status, thus causing the job to be "
                             "terminated. The first process to do so was:",
                             "Process name: 2", "Exit code: 3"]) == "rank 2 exited with status 3"
    assert _last_error_line([]) is None


def test_horovodrun_commands():
    cmd = horovodrun_command(4, ["python", "job.py"])
    assert cmd[1:] == ["-np", "4", "-H", "localhost:4", "--gloo", "--network-interface", "lo",
                       "python", "job.py"]
    cmd = horovodrun_command(8, ["python", "job.py"], hostfile="hosts.txt")
    assert cmd[1:] == ["-np", "8", "--hostfile", "hosts.txt", "--gloo", "python", "job.py"]


# ------------------------------------------------------------------ failures and clean-up


def _processes_with(token: str) -> list:
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(token in part for part in p.info["cmdline"] or []):
                found.append(p)
        except psutil.Error:
            pass
    return found


@needs_horovod
def test_a_failing_rank_fails_the_job_with_its_error_and_leaves_nothing():
    token = f"boom-{uuid.uuid4().hex[:8]}"
    code = f"import os; assert os.environ['HOROVOD_RANK'] == '0', '{token} in rank 1'"
    with pytest.raises(HorovodRunError, match=f"AssertionError: {token} in rank 1"):
        run_and_collect(horovodrun_command(2, [sys.executable, "-c", code]), None, 120)
    assert _processes_with(token) == []


# Three ranks with Stanza's process sets (CONV ranks 0-1, FC rank 2) leave as the bench's rank
# job does; the FC rank falls behind right after the last barrier, as a rank descheduled on a
# loaded host does. Before Horovod was shut down there, its background loop then talked to a
# rank that had left already and aborted (gloo::IoException), failing the run after its record.
_LATE_LEAVER = """
import json, time
import horovod.tensorflow as hvd
import tensorflow as tf
from ralp.bench import horovod_job
hvd.init(process_sets="dynamic")
rank, allreduce = hvd.rank(), hvd.allreduce
conv_set, fc_set = hvd.add_process_set([0, 1]), hvd.add_process_set([2])
if rank < 2:
    hvd.allreduce(tf.ones([1000]), op=hvd.Sum, process_set=conv_set)

def falls_behind(*args, **kwargs):
    out = allreduce(*args, **kwargs)
    if kwargs.get("name") == "ralp_exit" and rank == 2:
        time.sleep(1.0)
    return out

hvd.allreduce = falls_behind
if rank == 0:
    print(MARK + json.dumps({"record": {"left": True}}), flush=True)
horovod_job._exit_together()
"""


@needs_horovod
def test_a_rank_that_falls_behind_after_the_last_barrier_still_leaves_cleanly():
    code = f"MARK = {MARK!r}\n" + _LATE_LEAVER
    assert run_and_collect(horovodrun_command(3, [sys.executable, "-c", code]), None,
                           120) == {"left": True}


_REPORT_GROUP = """
import json, os
import psutil
from ralp.emulation.devices import join_rank_group
join_rank_group()  # as a rank entry point does (a forked rank has joined already)
if os.environ["HOROVOD_RANK"] == "0":
    ancestors = [" ".join(p.cmdline()) for p in psutil.Process().parents()[:6]]
    print(MARK + json.dumps({"record": {"cgroup": open("/proc/self/cgroup").read(),
                                       "parent_cgroup": open(f"/proc/{os.getppid()}/cgroup").read(),
                                       "ancestors": ancestors,
                                       "intra": os.environ.get("TF_NUM_INTRAOP_THREADS")}}))
"""


@needs_horovod
@pytest.mark.skipif(HIERARCHY is None, reason="no writable cgroup cpu controller here")
@pytest.mark.parametrize("backend, start", [
    pytest.param("netns", "forkserver", marks=NETNS_MARKS),
    pytest.param("netns", "spawn", marks=NETNS_MARKS),
    ("local", "forkserver")])
def test_every_rank_runs_in_its_device_with_threads_sized_to_it(backend, start, tmp_path,
                                                                monkeypatch):
    # a rank module (python -m: the netns driver forks such ranks, unless spawn is asked for)
    module = f"rank_probe_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(f"MARK = {MARK!r}\n" + _REPORT_GROUP)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("RALP_START_METHOD", start)
    budget = budget_for("auto", 2)
    record = launch(lambda links, cpu: [sys.executable, "-m", module], 2, backend,
                    bandwidth="1gbit" if backend == "netns" else None, budget=budget,
                    timeout=120)
    # rank 0 in its own group (w0) of this run, in both the limit and the usage hierarchy
    joined = [line for line in record["cgroup"].splitlines() if f"/rlp{os.getpid()}" in line]
    assert joined and all(line.endswith("/w0") for line in joined), record["cgroup"]
    assert len(joined) == len(HIERARCHY.roots)
    assert record["intra"] == str(thread_counts(budget.cpus)[0])
    assert groups_left(os.getpid()) == []
    if backend == "netns":
        # The netns driver: forked from the zygote (no TensorFlow import of its own) unless
        # spawn is asked for, and in the run's driver group either way.
        driver = [a for a in record["ancestors"] if "ralp.horovod.netns_gloo" in a]
        assert bool(driver) == (start == "spawn"), record["ancestors"]
        if start == "forkserver":  # the forked ranks' parent is the driver itself
            assert "forkserver" in record["ancestors"][0], record["ancestors"]
            driver_groups = [line for line in record["parent_cgroup"].splitlines()
                             if f"/rlp{os.getpid()}" in line]
            assert driver_groups and all(line.endswith("/driver") for line in driver_groups)


@needs_horovod
@needs_netns
@pytest.mark.parametrize("start", ["forkserver", "spawn"])
def test_a_rank_dying_on_budgeted_devices_leaves_no_process_namespace_or_group(start,
                                                                                monkeypatch):
    monkeypatch.setenv("RALP_START_METHOD", start)
    token = f"die-{uuid.uuid4().hex[:8]}"
    code = f"import os, sys, time; '{token}'; time.sleep(1); sys.exit(int(os.environ['HOROVOD_RANK']))"
    with pytest.raises(HorovodRunError):
        launch(lambda links, cpu: [sys.executable, "-c", code], 2, "netns", bandwidth="1gbit",
               budget=budget_for("auto", 2), timeout=120)
    assert _processes_with(token) == []
    assert groups_left(os.getpid()) == []
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"rlp{os.getpid()}h" not in left


@needs_horovod
@needs_netns
@pytest.mark.cluster
def test_ctrl_c_mid_horovod_run_stops_the_forked_driver_and_every_rank():
    import signal
    import time

    import psutil

    p = subprocess.Popen([sys.executable, "-m", "ralp.bench", "--backend", "netns", "--models",
                          "lenet", "--modes", "horovod", "--devices", "2", "--steps", "100000",
                          "--num-classes", "10", "--quiet"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    bench = psutil.Process(p.pid)
    deadline = time.monotonic() + 120
    # the zygote, the driver forked from it, and the two ranks forked from the driver
    while len(bench.children(recursive=True)) < 4 and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(10)  # into the run
    started = bench.children(recursive=True)
    assert len(started) >= 4, "the bench started no Horovod job"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert_nothing_left(p.pid, started)


@needs_horovod
def test_a_hung_job_is_stopped_at_its_timeout_with_every_rank():
    token = f"hang-{uuid.uuid4().hex[:8]}"
    code = f"import time; '{token}'; time.sleep(600)"
    with pytest.raises(HorovodRunError, match="did not finish in 15 s"):
        run_and_collect(horovodrun_command(2, [sys.executable, "-c", code]), None, 15)
    assert _processes_with(token) == []


# ------------------------------------------------------------------ the bench's horovod mode


def _bench(*args):
    return subprocess.Popen([sys.executable, "-m", "ralp.bench", *args, "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@needs_horovod
@pytest.mark.cluster
def test_bench_horovod_mode_end_to_end_on_loopback(tmp_path):
    out = tmp_path / "r.json"
    p = _bench("--backend", "local", "--models", "lenet", "--modes", "ps,horovod",  # commas too
               "--devices", "2", "--image-size", "28", "--batch-size", "8", "--steps", "3",
               "--warmup", "1", "--num-classes", "10", "--out", str(out))
    stdout, stderr = p.communicate(timeout=600)
    assert p.returncode == 0, stderr
    ps, hvd = json.loads(out.read_text())
    assert tuple(hvd)[: len(RECORD_KEYS)] == RECORD_KEYS  # the Horovod job follows the schema
    assert set(hvd["setup"]) == {"rank_start", "build_model", "place", "warmup"}
    assert (hvd["mode"], hvd["workers"], hvd["ps"], hvd["error"]) == ("horovod", 2, 0, None)
    assert hvd["images_per_sec"] > 0 and hvd["measured_steps"] == 6
    assert hvd["bytes_per_step_measured"] is None  # loopback: not measured
    # Ring allreduce with W = 2: each rank sends and receives the gradients once (S each way);
    # plain PS with 1 PS moves the variables down and the gradients up: the same 2 S.
    assert hvd["bytes_per_step_predicted"] == pytest.approx(ps["bytes_per_step_predicted"], 0.01)
    assert "vs hvd" in stdout and "horovod" in stdout


@needs_horovod
@pytest.mark.cluster
def test_bench_horovod_mode_from_a_hostfile(tmp_path):
    # horovodrun starts the ranks of a host file's local host without ssh: the real-cluster
    # path, with this machine as the one host.
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("localhost slots=2\n")
    out = tmp_path / "r.json"
    p = _bench("--backend", "tf-config", "--hostfile", str(hosts), "--models", "lenet",
               "--modes", "horovod", "--devices", "2", "--image-size", "28", "--batch-size",
               "8", "--steps", "2", "--warmup", "1", "--num-classes", "10", "--out", str(out))
    stdout, stderr = p.communicate(timeout=600)
    assert p.returncode == 0, stderr
    (r,) = json.loads(out.read_text())
    assert (r["backend"], r["workers"], r["error"]) == ("tf-config", 2, None)
    assert r["images_per_sec"] > 0


@needs_horovod
@needs_netns
@pytest.mark.cluster
def test_bench_horovod_mode_on_netns_measures_the_ring_bytes(tmp_path):
    out = tmp_path / "r.json"
    p = _bench("--backend", "netns", "--bandwidth", "1gbit", "--models", "lenet", "--modes",
               "horovod", "--devices", "3", "--image-size", "28", "--batch-size", "8",
               "--steps", "3", "--warmup", "1", "--data", "digits", "--out", str(out))
    stdout, stderr = p.communicate(timeout=600)
    assert p.returncode == 0, stderr
    (r,) = json.loads(out.read_text())
    assert r["error"] is None and r["data"] == "digits" and r["num_classes"] == 10
    assert sorted(r["links"]) == ["worker:0", "worker:1", "worker:2"]
    # measured on the links: within 3% of 2 x 2 S (W-1)/W per rank (headers are the excess)
    assert 1.0 <= r["bytes_ratio"] < 1.03, r["bytes_ratio"]
    for link in r["links"].values():  # a ring: every rank sends as much as it receives
        assert link["tx"] == pytest.approx(link["rx"], rel=0.01)
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"rlp{p.pid}" not in left
    assert groups_left(p.pid) == []
    if HIERARCHY is not None:  # every rank in its device, the driver counted apart
        cpu = r["cpu"]
        assert set(cpu["tasks"]) == {"worker:0", "worker:1", "worker:2", "driver"}
        for k in range(3):
            assert 0 < cpu["tasks"][f"worker:{k}"]["used_cpus"] <= cpu["budget_cpus"] * 1.1
        assert "budget_use" not in cpu["tasks"]["driver"]
        assert isinstance(r["host_kept_up"], bool)


# ------------------------------------------------------------------ the build script


def test_build_script_rejects_unknown_arguments():
    done = subprocess.run(["bash", str(ROOT / "scripts" / "build_horovod.sh"), "--fast"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "usage: scripts/build_horovod.sh" in done.stderr


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "python").exists(), reason="needs .venv")
@pytest.mark.parametrize("asked, code, said", [
    ("x", 2, "RALP_HOROVOD_GPU must be auto, nccl or gloo"),
    # this environment's TensorFlow is the CPU build: NCCL's operations cannot be built
    ("nccl", 1, "NCCL's operations cannot be built: this TensorFlow is built without CUDA"),
])
def test_the_build_says_which_gpu_operations_and_why(asked, code, said):
    env = {**os.environ, "RALP_HOROVOD_GPU": asked}
    done = subprocess.run(["bash", "scripts/build_horovod.sh"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == code and said in done.stderr, done.stdout + done.stderr


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "python").exists(), reason="needs .venv")
def test_a_failed_build_says_what_failed_and_how_to_retry(tmp_path):
    # A PATH with every tool the script uses except cmake: the build must stop and say so.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sh", "env", "dirname", "cat", "sha256sum", "cut", "mkdir", "ls", "head",
                 "mktemp", "tail", "rm", "uname", "tar", "sed", "grep", "nproc", "cp",
                 "basename", "g++", "make"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    env = {**os.environ, "PATH": str(bin_dir), "RALP_WHEEL_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(["bash", "scripts/build_horovod.sh", "--rebuild"], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the build failed while: looking for cmake" in done.stderr
    assert "to retry: scripts/build_horovod.sh --rebuild" in done.stderr
    assert "RALP_HOROVOD=0 ./scripts/setup.sh" in done.stderr
    assert not list((tmp_path / "cache").rglob("*.whl"))


@needs_horovod
@pytest.mark.cluster
@pytest.mark.parametrize("kind, ranks", [("horovod", 2), ("stanza", 3)])
def test_rank_trainers_fit_as_keras_does(kind, ranks, tmp_path):
    import csv

    script = str(ROOT / "tests" / "horovod" / "keras_fit_ranks.py")
    run_and_collect(horovodrun_command(ranks, [sys.executable, script, str(tmp_path), kind]),
                    None, 600)
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(ranks)]
    history = seen[0]["history"]
    # every rank has the same epoch logs (collectives), with val_*, and stopped together
    assert all(s["history"] == history for s in seen)
    assert set(history) >= {"loss", "val_loss", "val_accuracy"} and len(history["loss"]) == 2
    assert all(s["stopped_epoch"] == 1 for s in seen)
    # Keras' batch logs: the epoch's running loss and metrics, the same on every rank
    assert all(set(b) == {"loss", "accuracy"} for s in seen for b in s["batch_logs"])
    assert all(s["batch_logs"] == seen[0]["batch_logs"] and len(s["batch_logs"]) == 6
               for s in seen)
    with open(tmp_path / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["0", "1"]
    assert float(rows[1]["val_loss"]) == pytest.approx(history["val_loss"][1], rel=1e-5)


@needs_horovod
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["horovod", "stanza"])
def test_ranks_whose_keras_names_differ_train_together(tmp_path, mode):
    # Horovod matches collectives by name: ralp's never come from Keras' per-process names
    script = str(ROOT / "tests" / "horovod" / "uneven_names.py")
    run_and_collect(horovodrun_command(3, [sys.executable, script, str(tmp_path), mode]), None,
                    300, {**os.environ, "CUDA_VISIBLE_DEVICES": "-1"})
    done = json.loads((tmp_path / "done.json").read_text())
    assert done["iterations"] == 2 * (24 // 8) and len(done["loss"]) == 2
