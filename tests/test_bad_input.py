"""Bad input, one table: each CLI answers a mistake with a message that says what was wrong
and what to do, exit code 2, no traceback, and leaves nothing running; the Python API raises
an error that says the same. (Bad input that needs a running cluster to be found -- a plan
naming a missing layer, a checkpoint of another model -- is in
tests/ps_strategy/test_failures.py.)

Each CLI runs in a session of its own, so that anything it started and left behind is found
by its session id.
"""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TF_CONFIG_NO_PS = json.dumps({"cluster": {"chief": ["127.0.0.1:2000"], "worker": ["127.0.0.1:2001"]},
                              "task": {"type": "worker", "index": 0}})  # fmt: skip
# Horovod made unimportable in this one process, as in an environment without it.
WITHOUT_HOROVOD = ("import runpy, sys; sys.modules['horovod'] = None; sys.argv[0] = 'ralp.bench'; "
                   "runpy.run_module('ralp.bench', run_name='__main__')")  # fmt: skip

BENCH = ["-m", "ralp.bench", "--out", "{tmp}/out.json"]
CASES = {
    "unknown model": (BENCH + ["--models", "nosuchnet"], None,
                      r"unknown model\(s\) \['nosuchnet'\]; the zoo has alexnet"),
    "unknown mode": (BENCH + ["--modes", "foo"], None,
                     r"unknown mode\(s\) \['foo'\]; choose from ps, ralp-h, ralp-n, horovod"),
    "negative batch size": (BENCH + ["--batch-size", "-1"], None,
                            "--batch-size: expected a positive integer, got -1"),
    "zero batch size": (BENCH + ["--batch-size", "0"], None,
                        "--batch-size: expected a positive integer, got 0"),
    "non-integer batch size": (BENCH + ["--batch-size", "1.5"], None,
                               "--batch-size: expected a positive integer, got '1.5'"),
    "bandwidth without a unit": (BENCH + ["--bandwidth", "100"], None,
                                 "bandwidth '100' is not a positive rate; write it like '1gbit'"),
    "image too small for the model": (BENCH + ["--models", "vgg11", "--image-size", "8"], None,
                                      "vgg11 needs --image-size >= 32"),
    "--jobs without netns": (BENCH + ["--jobs", "2", "--backend", "local"], None,
                             "--jobs needs the netns backend"),
    "ssp without its staleness": (BENCH + ["--sync", "ssp"], None,
                                  "ssp needs its bound: ssp:S or staleness=S"),
    "horovod without Horovod": (["-c", WITHOUT_HOROVOD, "--modes", "horovod", "--models", "lenet",
                                 "--backend", "local", "--out", "{tmp}/out.json"], None,
                                "mode horovod is unavailable: Horovod is not installed"),
    "cluster with no PS": (["-m", "ralp.server"], {"TF_CONFIG": TF_CONFIG_NO_PS},
                           "the cluster has no 'ps' task"),
    "TF_CONFIG not JSON": (["-m", "ralp.server"], {"TF_CONFIG": "{cluster"},
                           "TF_CONFIG is not valid JSON"),
    "busy port": (["-m", "ralp.server"], {"TF_CONFIG": "busy"},
                  "could not start the gRPC server for worker:0"),
    "missing .keras file": (["-m", "ralp.profiler", "--keras-model", "{tmp}/nope.keras"], None,
                            r"no such file: '.*nope.keras'; pass the path of a model saved"),
    "corrupt .keras file": (["-m", "ralp.profiler", "--keras-model", "{tmp}/corrupt.keras"], None,
                            r"could not load '.*corrupt.keras' as a Keras model"),
    "unknown model to audit": (["-m", "ralp.audit", "--model", "foo"], None,
                               "unknown model 'foo'; choose one of: alexnet"),
}  # fmt: skip


def session_processes(sid: int) -> list[int]:
    """Processes still alive (not zombies) in session ``sid``."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


@pytest.mark.parametrize("case", list(CASES))
def test_a_cli_refuses_bad_input_cleanly(case, tmp_path):
    args, env, message = CASES[case]
    (tmp_path / "corrupt.keras").write_text("not a zip archive")
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    holder = None
    if env.get("TF_CONFIG") == "busy":
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env["TF_CONFIG"] = json.dumps({"cluster": {"chief": ["127.0.0.1:1"],
                                                   "worker": [f"127.0.0.1:{port}"],
                                                   "ps": ["127.0.0.1:2"]},
                                       "task": {"type": "worker", "index": 0}})  # fmt: skip
    try:
        proc = subprocess.Popen([sys.executable, *[a.format(tmp=tmp_path) for a in args]],
                                env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
        out, err = proc.communicate(timeout=180)
    finally:
        if holder is not None:
            holder.close()
    assert proc.returncode == 2, (out, err)
    assert "Traceback" not in out + err
    import re

    assert re.search(message, err), err
    deadline = time.monotonic() + 10
    while session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session_processes(proc.pid) == []  # nothing it started is left running


def test_the_python_api_refuses_bad_input_with_the_same_messages():
    from ralp import ClusterError, ClusterSpec, profile
    from ralp.models import build_model

    with pytest.raises(ClusterError, match="the cluster has no 'ps' task"):
        ClusterSpec.from_dict({"chief": ["h0:2222"], "worker": ["h1:2222"]})
    with pytest.raises(ClusterError, match="is not a host:port address"):
        ClusterSpec.from_dict({"chief": ["h0"], "worker": ["h1:2222"], "ps": ["h2:2222"]})
    with pytest.raises(Exception, match="workers must be a positive integer, got 0"):
        profile(build_model("lenet"), workers=0)
