"""The local launcher: real server processes that start, serve and always stop."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ralp.cluster.local import LocalCluster
from ralp.cluster.spec import ClusterError, ClusterSpec

pytestmark = pytest.mark.cluster


def gone(pid, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie of ours still answers kill(0); it is reaped by wait() in stop()
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split()[2] == "Z":
                return True
        time.sleep(0.2)
    return False


def serving(address):
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, int(port))) == 0


def test_starts_serves_and_stops():
    with LocalCluster(workers=2, ps=2) as cluster:
        pids = cluster.pids
        assert set(pids) == {"worker:0", "worker:1", "ps:0", "ps:1"}
        assert all(cluster.alive().values())
        assert all(serving(a) for _, _, a in cluster.spec.tasks())
        logs = cluster.log_dir
        assert "RALP_SERVER_READY" in cluster.log_text("ps", 1)
    assert all(gone(pid) for pid in pids.values())
    assert not logs.exists()  # its temporary log directory went with it


def test_stops_when_the_body_fails_and_when_a_task_crashed():
    with pytest.raises(RuntimeError, match="boom"), LocalCluster(workers=2, ps=1) as cluster:
        pids = cluster.pids
        cluster.kill_task("worker", 1)  # a crash mid-run
        assert cluster.alive() == {"worker:0": True, "worker:1": False, "ps:0": True}
        raise RuntimeError("boom")
    assert all(gone(pid) for pid in pids.values())


def test_busy_port_is_a_clear_error(tmp_path):
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        spec = ClusterSpec("127.0.0.1:1", (f"127.0.0.1:{port}",), ("127.0.0.1:2",))
        with pytest.raises(ClusterError, match="port is probably in use") as failed:
            LocalCluster(spec=spec, log_dir=tmp_path).start()
    # the error quotes the task's log, and the log is kept for the user to read
    assert "Could not start gRPC server" in str(failed.value)
    assert "Could not start gRPC server" in (tmp_path / "worker0.log").read_text()


def test_a_port_of_its_own_choosing_taken_meanwhile_is_chosen_again():
    cluster = LocalCluster(workers=1, ps=1)
    taken = cluster.spec.ps[0]
    host, port = taken.rsplit(":", 1)
    with socket.socket() as holder:  # as another program would, between choosing and binding
        holder.bind(("0.0.0.0", int(port)))
        holder.listen()
        with cluster:
            assert cluster.spec.ps[0] != taken
            assert all(serving(a) for _, _, a in cluster.spec.tasks())
            assert "RALP_SERVER_READY" in cluster.log_text("ps", 0)


LAUNCHER = """
import json, sys, time
from ralp.cluster.local import LocalCluster
cluster = LocalCluster(workers=1, ps=1, log_dir=sys.argv[1])  # the test's: removed with it
cluster.start()
print(json.dumps(list(cluster.pids.values())), flush=True)
time.sleep(600)
"""


def test_tasks_exit_when_the_launching_process_is_killed(tmp_path):
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(tmp_path)],
                                stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(launcher.stdout.readline())
        assert len(pids) == 2
    finally:
        launcher.send_signal(signal.SIGKILL)  # no chance to clean up
        launcher.wait()
    assert all(gone(pid) for pid in pids)


LAUNCHER_THAT_EXITS = """
import json, os, sys
from ralp.cluster.local import LocalCluster
cluster = LocalCluster(workers=1, ps=1, log_dir=sys.argv[1])  # the test's: removed with it
cluster.start()
print(json.dumps(list(cluster.pids.values())), flush=True)
os._exit(0)  # gone without stopping its tasks
"""


def test_tasks_exit_when_the_launcher_has_exited_but_is_not_reaped_yet(tmp_path):
    """A launcher that has exited stays a zombie until its parent reaps it, and a parent
    reading the launcher's output (subprocess.run) reaps it only once the pipes close: the
    tasks must not wait for the pid to vanish."""
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER_THAT_EXITS, str(tmp_path)],
                                stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(launcher.stdout.readline())
        deadline = time.monotonic() + 30
        while not zombie(launcher.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert zombie(launcher.pid)
        assert all(gone(pid) for pid in pids)  # while the launcher is still unreaped
    finally:
        launcher.wait()


def zombie(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.parametrize(
    "cluster, message",
    [
        ({"worker": ["a:1"], "ps": ["b:2"]}, "exactly one 'chief'"),
        ({"chief": ["c:1"], "worker": ["nocolon"], "ps": ["b:2"]}, "not a host:port"),
        ({"chief": ["c:1"], "worker": ["a:99999"], "ps": ["b:2"]}, "not a host:port"),
        ({"chief": ["c:1"], "worker": ["a:1"]}, "no 'ps' task"),
        ({"chief": ["c:1"], "ps": ["b:2"]}, "no worker"),
        ({"chief": ["c:1"], "worker": ["a:1"], "ps": ["a:1"]}, "share the address"),
        # (an "evaluator" is known: Kubeflow's TF_CONFIG has one, left out of the cluster)
        ({"chief": ["c:1"], "worker": ["a:1"], "ps": ["b:2"], "trainer": ["e:3"]}, "unknown job"),
        ({"master": ["c:1"], "worker": ["a:1"], "ps": ["b:2"]}, "'Master' replica type: use 'Chief'"),
        (["c:1"], "mapping"),
    ],
)
def test_bad_cluster_specs(cluster, message):
    with pytest.raises(ClusterError, match=message):
        ClusterSpec.from_dict(cluster)


def test_tf_config_round_trip_and_errors():
    spec = ClusterSpec("h0:1", ("h1:2", "h2:3"), ("h3:4",))
    again, job, index = ClusterSpec.from_tf_config(spec.tf_config("worker", 1))
    assert (again, job, index) == (spec, "worker", 1)
    for bad, message in [(None, "not set"), ("{", "not valid JSON"), ('{"cluster": {}}', "task"),
                         (json.dumps({"cluster": spec.as_dict(), "task": {"type": "ps", "index": 5}}),
                          "no task ps:5")]:
        with pytest.raises(ClusterError, match=message):
            ClusterSpec.from_tf_config(bad)


def test_server_cli_without_tf_config():
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    proc = subprocess.run(
        [sys.executable, "-m", "ralp.server"], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 2 and "TF_CONFIG is not set" in proc.stderr
