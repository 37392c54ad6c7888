"""Stanza's compute phases measured under Horovod: four real ranks on loopback."""

import pytest

from lab.planner import stanza_phases_probe as beside
from lab.planner.allreduce import AllreduceProbeError
from lab.planner.host import Host
from lab.planner.host_calibration import HostCalibration, HostEntry
from lab.planner.stanza_phases_probe import measure_beside
from tests.needs import needs_horovod


@pytest.mark.cluster
@needs_horovod
def test_the_probe_times_both_phases_with_three_conv_ranks():
    measured = measure_beside("lenet", 8, 32, 10, steps=3)
    assert measured["conv_ranks"] == beside.RANKS - 1 == 3
    assert measured["heads_s"] > 0 and measured["tail_s"] > 0


def test_without_horovodrun_the_probe_says_so(monkeypatch):
    monkeypatch.setattr(beside, "horovodrun_path", lambda: "/nonexistent/horovodrun")
    with pytest.raises(AllreduceProbeError, match="horovodrun is not installed"):
        measure_beside("lenet", 8, 32, 10)


def test_a_calibration_keeps_the_measured_phases_through_json():
    entry = HostEntry("alexnet", 8, 75, 1000, "pool5", 0.18, 0.14, 5, tail_stacked_s=0.16,
                  stacked=4, head_s=0.05, stanza_beside=[3, 0.25, 0.33])
    cal = HostCalibration(Host(True, 2e-9, cores=2), [entry])
    back = HostCalibration.from_dict(cal.to_dict()).find("alexnet", 8, 75, 1000)
    assert back.compute.stanza_beside == (3, 0.25, 0.33)
    assert HostEntry("alexnet", 8, 75, 1000, "pool5", 0.18, 0.14, 5).compute.stanza_beside is None
