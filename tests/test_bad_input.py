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
                              "task": {"type": "worker", "index": 0}})
# Horovod made unimportable in this one process, as in an environment without it.
WITHOUT_HOROVOD = ("import runpy, sys; sys.modules['horovod'] = None; sys.argv[0] = 'ralp.bench'; "
                   "runpy.run_module('ralp.bench', run_name='__main__')")

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
                                  "ssp needs its bound: ssp:S"),
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
    # output paths are checked before the first run, not after the last
    "--out that cannot be written": (["-m", "ralp.bench", "--models", "lenet", "--out",
                                      "/proc/ralp-x.json"], None,
                                     r"cannot write '/proc/ralp-x.json'"),
    "--out a directory": (["-m", "ralp.bench", "--models", "lenet", "--out", "{tmp}"], None,
                          "it is a directory; give a file name"),
    "--plot that cannot be written": (BENCH + ["--models", "lenet", "--plot", "/proc/x.png"],
                                      None, r"cannot write '/proc/x.png'"),
    "ralp-h on an odd N": (BENCH + ["--models", "lenet", "--modes", "ralp-h", "--devices", "3"],
                           None, "mode 'ralp-h' gives half the devices to workers and one to "
                           "the PS: N must be even, got 3"),
    "a calibration that is a list": (["-m", "ralp.planner", "--model", "lenet", "--image-size",
                                      "28", "--compute-profile", "{tmp}/list.json"], None,
                                     "a calibration is a JSON object, not a list"),
    "a version 1 calibration with no host": (["-m", "ralp.planner", "--model", "lenet",
                                              "--image-size", "28", "--compute-profile",
                                              "{tmp}/format-only.json"], None,
                                             "not a calibration: version 1 has a 'host' object"),
    "a zero bandwidth to plan": (["-m", "ralp.planner", "--model", "lenet", "--bandwidth",
                                  "0gbit"], None, "bandwidth '0gbit' is not a positive rate"),
    "a bandwidth that is a word": (["-m", "ralp.planner", "--model", "lenet", "--bandwidth",
                                    "fast"], None, "bandwidth 'fast' is not a positive rate"),
    "records that cannot be read": (["-m", "lab.planner", "--validate", "{tmp}/corrupt.keras"],
                                    None, "cannot read bench results"),
    "records that are not records": (["-m", "lab.planner", "--validate", "{tmp}/list.json"],
                                     None, "is not a list of bench records"),
    "records with no run": (["-m", "lab.planner", "--validate", "{tmp}/empty.json"], None,
                            "no successful netns run"),
    "a NaN threshold": (["-m", "ralp.profiler", "--model", "vgg11", "--threshold", "nan"], None,
                        "--threshold: expected a finite number, got 'nan'"),
    "an infinite threshold": (["-m", "ralp.profiler", "--model", "vgg11", "--threshold", "inf"],
                              None, "--threshold: expected a finite number, got 'inf'"),
}


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
    (tmp_path / "list.json").write_text("[1, 2, 3]")
    (tmp_path / "empty.json").write_text("[]")
    (tmp_path / "format-only.json").write_text('{"format": 1}')
    # TMPDIR: a cluster that fails to start keeps its tasks' logs for the user; here in tmp_path
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path), **(env or {})}
    holder = None
    if env.get("TF_CONFIG") == "busy":
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env["TF_CONFIG"] = json.dumps({"cluster": {"chief": ["127.0.0.1:1"],
                                                   "worker": [f"127.0.0.1:{port}"],
                                                   "ps": ["127.0.0.1:2"]},
                                       "task": {"type": "worker", "index": 0}})
    try:
        proc = subprocess.Popen([sys.executable, *[a.format(tmp=tmp_path) for a in args]],
                                env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
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
    assert not (tmp_path / "out.json").exists()  # refused before anything ran


@pytest.mark.parametrize("module, args, message", [
    ("ralp.bench", ["--models", "nosuchnet"], "unknown model(s) ['nosuchnet']"),
    ("ralp.bench", ["--models", "vgg11", "--image-size", "8"], "vgg11 needs --image-size >= 32"),
    ("ralp.planner", ["--model", "nosuchnet"], "unknown model 'nosuchnet'"),
    ("ralp.profiler", ["--model", "nosuchnet"], "unknown model 'nosuchnet'"),
])
def test_a_bad_model_is_refused_before_tensorflow_is_imported(module, args, message):
    # The zoo's table needs no TensorFlow, so the mistake is said at once, not after its
    # import (8-9 s on 2 cores): the CLI's run() in a fresh interpreter, then a look.
    code = (f"import runpy, sys; sys.argv = [{module!r}, *{args!r}]\n"
            f"try:\n    runpy.run_module({module!r}, run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    print('exit', e.code, 'tensorflow' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert message in p.stderr
    assert p.stdout.split() == ["exit", "2", "False"], p.stdout + p.stderr


def test_the_python_api_refuses_bad_input_with_the_same_messages():
    from ralp import ClusterError, ClusterSpec, profile
    from ralp.models import build_model

    with pytest.raises(ClusterError, match="the cluster has no 'ps' task"):
        ClusterSpec.from_dict({"chief": ["h0:2222"], "worker": ["h1:2222"]})
    with pytest.raises(ClusterError, match="is not a host:port address"):
        ClusterSpec.from_dict({"chief": ["h0"], "worker": ["h1:2222"], "ps": ["h2:2222"]})
    with pytest.raises(Exception, match="workers must be a positive integer, got 0"):
        profile(build_model("lenet"), workers=0)


def test_labels_and_images_are_checked_before_training():
    import keras
    import numpy as np

    from ralp import TrainingSetupError, build_model
    from ralp.training.fit_inputs import fit_data

    model = build_model("lenet", num_classes=10, image_size=28)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def check(x, y):
        fit_data(x, y, sample_weight=None, class_weight=None, batch_size=2,
                 steps_per_epoch=None, shuffle=True, model=model, loss=loss)

    x, y = np.zeros((4, 28, 28, 3), "float32"), np.array([0, 3, 9, 2])
    check(x, y)  # fine
    with pytest.raises(TrainingSetupError, match=r"4 labels lie outside \[0, 10\) \(found 100..109\)"):
        check(x, y + 100)
    with pytest.raises(TrainingSetupError, match="labels must be integer class ids"):
        check(x, y + 0.5)
    check(x, y.astype("float32"))  # whole numbers as floats are ids
    bad = x.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(TrainingSetupError, match="1 NaN or infinite values"):
        check(bad, y)
    with pytest.raises(TrainingSetupError, match="4 images, 3 labels"):
        check(x, y[:3])
    with pytest.raises(TrainingSetupError, match=r"images of shape \(32, 32, 1\)"):
        check(np.zeros((4, 32, 32, 1), "float32"), y)  # the model takes (28, 28, 3)


CALIBRATE = ["-m", "ralp.planner", "--calibrate", "--model", "vgg11", "--output", "cal.json"]


@pytest.mark.slow  # 12 s into each run before the interrupt
@pytest.mark.parametrize("command, signum", [
    (["-m", "ralp.audit", "--model", "vgg11", "--workers", "1", "--ps", "1"], "SIGINT"),
    (CALIBRATE, "SIGINT"),
    (CALIBRATE, "SIGTERM"),  # a scheduler's stop, or the bench stopping its calibration
], ids=["audit", "calibrate", "calibrate-sigterm"])
def test_ctrl_c_ends_a_cli_cleanly(command, signum, tmp_path):
    import signal

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, *command], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(12)  # well into its work (TensorFlow imported, measuring or starting a cluster)
    proc.send_signal(getattr(signal, signum))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 15
    while session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session_processes(proc.pid) == []
