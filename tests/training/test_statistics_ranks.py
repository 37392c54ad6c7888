"""Batch normalization's moving statistics in the allreduce modes: after ``fit`` every rank's
training replica, ``evaluate`` and ``unwrap()`` hold the same statistics, the mean over the
ranks of each rank's own moving averages (numpy's, for the layer on the images)
(tests/training/statistics_ranks.py)."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from ralp.horovod.launch import horovodrun_command
from ralp.horovod.launch import run_and_collect as run_horovod
from tests.needs import HOROVOD_MARKS
from tests.training import statistics_ranks

pytestmark = pytest.mark.slow
SCRIPT = str(Path(__file__).resolve().parent / "statistics_ranks.py")
CPU = {"CUDA_VISIBLE_DEVICES": "-1"}


@pytest.mark.parametrize(("mode", "ranks", "extra"), [
    pytest.param("horovod", 3, (), marks=HOROVOD_MARKS),
    ("collective", 2, ()),
    pytest.param("stanza", 5, (2,), marks=HOROVOD_MARKS),  # 3 CONV ranks + 2 FC ranks
], ids=["horovod-3", "collective-2", "stanza-3+2"])
def test_every_rank_holds_the_mean_of_the_ranks_statistics(tmp_path, mode, ranks, extra):
    command = [sys.executable, SCRIPT, str(tmp_path), mode, *map(str, extra)]
    if mode == "collective":
        from ralp.collective.launch import run_workers

        run_workers(command, ranks, timeout=600, env=CPU)
    else:
        run_horovod(horovodrun_command(ranks, command), None, 600, {**os.environ, **CPU})
    found = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(ranks)]
    data_ranks = ranks - (extra[0] if mode == "stanza" else 0)
    mean, variance = statistics_ranks.expected_input_statistics(data_ranks)
    for r, arrays in enumerate(found):
        np.testing.assert_allclose(arrays["unwrapped/bn_images/moving_mean"], mean, rtol=1e-5)
        np.testing.assert_allclose(arrays["unwrapped/bn_images/moving_variance"], variance,
                                   rtol=1e-5)
        for key, value in arrays.items():  # every rank's unwrapped model and evaluate alike
            if not key.startswith("replica/"):
                np.testing.assert_array_equal(value, found[0][key], err_msg=f"rank {r} {key}")
    trained = {"bn_images": range(data_ranks),  # which ranks train which layer
               "bn_fc": range(data_ranks, ranks) if mode == "stanza" else range(ranks)}
    for layer, by in trained.items():
        for r in by:
            for name in ("moving_mean", "moving_variance"):
                key = f"{layer}/{name}"
                np.testing.assert_array_equal(found[r][f"replica/{key}"],
                                              found[0][f"unwrapped/{key}"],
                                              err_msg=f"rank {r}'s replica, {key}")
