"""Checkpoints of the lockstep trainers, for real: a job loses a rank (SIGKILL) after its
newest checkpoint, is started again, and goes on from that checkpoint to the same weights as a
job that lost nothing; Stanza's lost FC rank gets its tail from its CONV peer's copy."""

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ralp.collective.launch import run_workers
from ralp.collective.runtime import CollectiveError
from ralp.horovod.launch import HorovodRunError, horovodrun_command
from ralp.horovod.launch import run_and_collect as run_horovod
from ralp.training.rank_checkpoints import assign_arrays, named_variables
from ralp.training.ranks import RESTART_FAILURE_ENV
from tests.needs import HOROVOD_MARKS, needs_horovod

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "training" / "restart_ranks.py")
RANKS = {"horovod": 2, "stanza": 3, "collective": 2}  # stanza: 2 CONV ranks + 1 FC rank
CRASH_STEP, RESTORED = 11, 8  # the fit checkpoints at steps 4, 6 (epoch end), 8 and 12


def _job(kind: str, out: Path, *crash: int, env: dict | None = None) -> None:
    command = [sys.executable, SCRIPT, str(out), kind, *map(str, crash)]
    env = {"CUDA_VISIBLE_DEVICES": "-1", **(env or {})}
    if kind == "collective":
        run_workers(command, RANKS[kind], timeout=300, env=env)
    else:
        import os

        run_horovod(horovodrun_command(RANKS[kind], command), None, 300, {**os.environ, **env})


def _ranks(out: Path, kind: str) -> list[dict]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(RANKS[kind])]


def _weights(out: Path) -> list[np.ndarray]:
    with np.load(out / "weights.npz") as data:
        return [data[k] for k in sorted(data.files, key=lambda k: int(k.split("_")[1]))]


def _lose_a_rank_and_restart(kind: str, out: Path, crash_rank: int, before_restart=None):
    error = CollectiveError if kind == "collective" else HorovodRunError
    with pytest.raises(error):
        _job(kind, out, crash_rank, CRASH_STEP)
    if before_restart is not None:
        before_restart(out / "ckpt")
    failure = {"task": f"rank:{crash_rank}", "kind": "rank", "at_step": CRASH_STEP,
               "detected_at": time.time(), "message": "killed"}
    _job(kind, out, env={RESTART_FAILURE_ENV: json.dumps(failure)})


@pytest.mark.slow
@pytest.mark.parametrize("kind", [pytest.param("horovod", marks=HOROVOD_MARKS), "collective"])
def test_a_restarted_job_goes_on_from_its_checkpoint_to_the_failure_free_weights(tmp_path, kind):
    clean, lossy = tmp_path / "clean", tmp_path / "lossy"
    clean.mkdir(), lossy.mkdir()
    _job(kind, clean)
    _lose_a_rank_and_restart(kind, lossy, crash_rank=1)
    for ours, reference in zip(_weights(lossy), _weights(clean), strict=True):
        np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-7)
    ranks, reference = _ranks(lossy, kind), _ranks(clean, kind)
    for rank in ranks:
        assert rank["resumed_from_step"] == RESTORED
        assert rank["steps_done"] == 12 - RESTORED  # this fit trained the rest only
        (failure,) = rank["failures"]
        assert failure["task"] == "rank:1" and failure["restored_step"] == RESTORED
        assert failure["steps_redone"] == CRASH_STEP - RESTORED
        assert failure["time_lost_s"] >= failure["recovery_s"] > 0
        # the epochs' losses cover every step, those before the restart included
        np.testing.assert_allclose(rank["history"]["loss"], reference[0]["history"]["loss"],
                                   rtol=1e-5)


@pytest.mark.slow
@needs_horovod
def test_stanza_restores_a_lost_fc_ranks_tail_from_its_conv_peers_copy(tmp_path):
    clean, lossy = tmp_path / "clean", tmp_path / "lossy"
    clean.mkdir(), lossy.mkdir()
    _job("stanza", clean)

    def lose_the_fc_ranks_disk(ckpt: Path) -> None:  # its node is gone, its files with it
        own = list(ckpt.glob("ckpt-*.tail0.npz"))
        assert own and list(ckpt.glob("ckpt-*.tail0-copy.npz"))
        for f in own:
            f.unlink()

    _lose_a_rank_and_restart("stanza", lossy, crash_rank=2, before_restart=lose_the_fc_ranks_disk)
    for ours, reference in zip(_weights(lossy), _weights(clean), strict=True):
        np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-7)
    ranks = _ranks(lossy, "stanza")
    assert ranks[2]["tail_restored_from"] == "peer"
    assert ranks[2]["failures"][0]["restored_step"] == RESTORED
    assert all(s > 0 for s in _ranks(clean, "stanza")[2]["copy_seconds"])


@pytest.mark.slow
@needs_horovod
def test_a_checkpoint_of_another_mode_is_refused_with_a_clear_error(tmp_path):
    _job("collective", tmp_path)
    with pytest.raises(HorovodRunError, match="mode 'collective'.*not mode 'horovod'"):
        _job("horovod", tmp_path)


# ------------------------------------------------------------------ parts, in one process


def test_a_part_of_another_model_is_a_clear_error():
    import keras

    from ralp.training.checkpoints import CheckpointError

    def net(width: int):  # the same names, another shape
        return keras.Sequential([keras.Input((width,)), keras.layers.Dense(2, name="d")],
                                name="net")

    small, other = net(3), net(4)
    arrays = {k: np.asarray(v.numpy()) for k, v in named_variables("model", small.weights)}
    with pytest.raises(CheckpointError, match="shape"):
        assign_arrays(named_variables("model", other.weights), arrays, "model")
    with pytest.raises(CheckpointError, match="another model"):
        assign_arrays(named_variables("model", other.weights[:1]), arrays, "model")
    assign_arrays(named_variables("model", small.weights),
                  {k: v + 1 for k, v in arrays.items()}, "model")
    np.testing.assert_allclose(small.weights[1].numpy(), arrays["model/0001/" +
                               small.weights[1].path] + 1)
