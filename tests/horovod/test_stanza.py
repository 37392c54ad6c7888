"""Stanza (layer separation) on the real Horovod library: the layout, its byte model, bad
requests, and CONV + FC ranks under horovodrun against a single-process Keras run of the same
model on the concatenated batch."""

import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from ralp.horovod.launch import HorovodRunError, horovodrun_command
from ralp.horovod.launch import run_and_collect as run_horovod
from ralp.horovod.stanza import StanzaError, StanzaLayout
from ralp.profiler.bytes_model import mode_traffic, stanza_groups
from tests.horovod.test_horovod import _processes_with
from tests.needs import needs_horovod, needs_netns

ROOT = Path(__file__).resolve().parents[2]

STEPS, BATCH = 5, 8  # per CONV rank; the reference takes n_c x BATCH per step


# ------------------------------------------------------------------ layout and bad requests


def test_layout_puts_the_fc_ranks_last_and_splits_the_conv_ranks_evenly():
    layout = StanzaLayout(7, 3)
    assert layout.conv_ranks == (0, 1, 2, 3) and layout.fc_ranks == (4, 5, 6)
    assert [layout.group(g) for g in range(3)] == [(0,), (1,), (2, 3)]
    assert [layout.fc_rank_of(c) for c in range(4)] == [4, 5, 6, 6]
    assert sum(layout.share(g) for g in range(3)) == pytest.approx(1.0)
    # every CONV rank is in exactly one group, for every shape
    for n_c in range(1, 9):
        for n_f in range(1, n_c + 1):
            members = [c for group in stanza_groups(n_c, n_f) for c in group]
            assert members == list(range(n_c))
            sizes = [len(g) for g in stanza_groups(n_c, n_f)]
            assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize(
    ("size", "fc", "message"),
    [(1, 1, "at least 2 ranks"), (4, 3, "at most 2 FC ranks"), (3, 0, "at least one FC rank")],
)
def test_bad_layouts_say_what_to_change(size, fc, message):
    with pytest.raises(StanzaError, match=message):
        StanzaLayout(size, fc)


def test_a_model_with_nothing_to_offload_is_refused_before_horovod_starts():
    import keras

    from ralp.horovod.stanza import StanzaRuntime

    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(4, 3)(inputs)
    outputs = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, outputs, name="convs_only")
    # Horovod is never touched: the split is checked first
    with pytest.raises(StanzaError, match="'convs_only' has none"):
        StanzaRuntime(model, keras.optimizers.SGD)


# ------------------------------------------------------------------ the byte model


def test_byte_model_per_link_kind_from_the_layer_table():
    from ralp.models import build_model
    from ralp.profiler.api import profile

    model = build_model("lenet", num_classes=10, image_size=28)
    prof = profile(model, BATCH, workers=3, ps=1)
    rows = prof.table.rows
    tail = {r.name: 0 for r in rows[prof.split.index + 1 :]}
    head_bytes = sum(r.trainable_param_bytes for r in rows[: prof.split.index + 1])
    tail_bytes = sum(r.trainable_param_bytes for r in rows[prof.split.index + 1 :])
    # the boundary (lenet's pool2) for one CONV rank's batch, float32
    activations = BATCH * int(np.prod(prof.table.row("pool2").output_shape)) * 4
    labels = BATCH * 4
    for n_c, n_f in ((2, 1), (4, 2), (5, 2)):
        t = mode_traffic(prof.table, "stanza", n_c, n_f, tail)
        head_ring = 2 * head_bytes * (n_c - 1) // n_c
        tail_ring = 2 * tail_bytes * (n_f - 1) // n_f
        assert (t.worker_link.tx, t.worker_link.rx) == (
            head_ring + activations + labels, head_ring + activations)
        sizes = [len(g) for g in stanza_groups(n_c, n_f)]
        assert [(link.tx, link.rx) for link in t.ps_links] == [
            (k * activations + tail_ring, k * (activations + labels) + tail_ring) for k in sizes
        ]
        # every byte sent is received: the links' sums agree with the total
        sent = n_c * t.worker_link.tx + sum(link.tx for link in t.ps_links)
        received = n_c * t.worker_link.rx + sum(link.rx for link in t.ps_links)
        assert sent == received == t.total
    with pytest.raises(ValueError, match="layers on the FC ranks"):
        mode_traffic(prof.table, "stanza", 2, 1, {})


# ------------------------------------------------------------------ CONV + FC ranks, real Horovod
# (their weights against one Keras process: tests/training/test_keras_reference.py)


@needs_horovod
@pytest.mark.cluster
def test_a_dying_fc_rank_fails_the_job_clearly_and_leaves_nothing(tmp_path):
    token = f"die-{uuid.uuid4().hex[:8]}"
    script = str(ROOT / "tests" / "horovod" / "stanza_replicas.py")
    command = horovodrun_command(3, [sys.executable, script, str(tmp_path), str(STEPS),
                                     str(BATCH), "1", f"--die-at=2:{token}"])
    with pytest.raises(HorovodRunError, match=f"SystemExit|{token}|exited"):
        run_horovod(command, None, 300)
    assert _processes_with(token) == []


# ------------------------------------------------------------------ the bench's stanza mode


def _bench(tmp_path, *args) -> tuple[list, str, int]:
    """Run the bench; its records, its stdout and its pid (its namespaces are named by it)."""
    import json

    out = tmp_path / "r.json"
    p = subprocess.Popen([sys.executable, "-m", "ralp.bench", *args, "--out", str(out), "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    stdout, stderr = p.communicate(timeout=900)
    assert p.returncode == 0, stderr[-3000:]
    return json.loads(out.read_text()), stdout, p.pid


@needs_horovod
@pytest.mark.cluster
def test_bench_stanza_mode_end_to_end_on_loopback(tmp_path):
    records, stdout, _ = _bench(tmp_path, "--backend", "local", "--models", "lenet", "--modes",
                             "horovod", "stanza", "--devices", "3", "--image-size", "28",
                             "--batch-size", "8", "--steps", "3", "--warmup", "1",
                             "--data", "digits")
    hvd, stanza = records
    assert (stanza["mode"], stanza["workers"], stanza["ps"], stanza["error"]) == ("stanza", 2, 1, None)
    assert stanza["offloaded_layers"] == ["flatten", "fc3", "logits"]
    assert stanza["images_per_sec"] > 0 and stanza["measured_steps"] == 6
    assert stanza["final_loss"] > 0 and stanza["speedup_vs_horovod"] > 0
    assert stanza["bytes_per_step_predicted"] > 0 and stanza["ps_bytes_per_step_predicted"] > 0
    assert "stanza" in stdout and "vs hvd" in stdout


@needs_horovod
@needs_netns
@pytest.mark.cluster
@pytest.mark.parametrize("fc", [1, 2])
def test_bench_stanza_mode_on_netns_measures_the_models_bytes(tmp_path, fc):
    records, _, pid = _bench(tmp_path, "--backend", "netns", "--bandwidth", "1gbit", "--models",
                        "lenet", "--modes", "stanza", "--devices", str(3 * fc),
                        "--fc-workers", str(fc), "--image-size", "28", "--batch-size", "128",
                        "--steps", "3", "--warmup", "1", "--data", "digits")
    (r,) = records
    assert r["error"] is None and (r["workers"], r["ps"]) == (2 * fc, fc)
    assert sorted(r["links"]) == [f"ps:{g}" for g in range(fc)] + [
        f"worker:{k}" for k in range(2 * fc)]
    # The links carry the model's payload, plus Horovod's control plane, a time-proportional
    # stream: its rate while training was 0.2-1.4x its idle rate (measured on each kind of link
    # in the same run) in our runs, so at most 1.5x that over the measured wall time. At batch
    # 128 the payload is most of it (FC links 1.01-1.08x the model in bench_stanza_bytes), but
    # a 3-step run on a loaded machine can see the control plane at 10-20% of the FC link.
    steps, wall = r["measured_steps"], r["wall_s"]
    for measured, predicted, rate, links in (
        (r["bytes_per_step_measured"], r["bytes_per_step_predicted"], r["control_bytes_per_s"],
         r["workers"]),
        (r["ps_bytes_per_step_measured"], r["ps_bytes_per_step_predicted"],
         r["ps_control_bytes_per_s"], fc),
    ):
        assert rate > 0
        control = 1.5 * links * rate * wall / steps
        assert 0.97 * predicted <= measured <= 1.03 * predicted + control, (
            measured, predicted, control)
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"rlp{pid}" not in left
