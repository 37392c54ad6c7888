"""The lab's calibration of the simulated cluster: the product's entries with the host's
figures (:mod:`lab.planner.host_calibration`)."""

import json

from lab.planner.host import Host
from lab.planner.host_calibration import HostCalibration, HostEntry
from ralp.planner.calibration import Calibration, Entry


def entry(model="vgg11", full=1.0, tail=0.2):
    return HostEntry(model, 8, 75, 1000, "pool5", full, tail, 5)


def test_round_trip_keeps_the_host(tmp_path):
    cal = HostCalibration(Host(True, 1e-9, 1e-3), [entry()], "here")
    cal.save(tmp_path / "cal.json")
    back = HostCalibration.load(tmp_path / "cal.json")
    assert back == cal and back.host == Host(True, 1e-9, 1e-3)


def test_a_product_calibration_loads_with_devices_of_their_own(tmp_path):
    Calibration([Entry("vgg11", 8, 75, 1000, "pool5", 1.0, 0.2, 5)], "gpu").save(tmp_path / "p.json")
    back = HostCalibration.load(tmp_path / "p.json")
    assert back.host == Host(False) and back.entries == [entry()]
    # and the product reads the lab's (version 1) by migrating it
    HostCalibration(Host(True), [entry()]).save(tmp_path / "lab.json")
    assert Calibration.load(tmp_path / "lab.json").entries[0].full_s == 1.0


def test_a_workloads_measured_capacity_applies_on_a_shared_host_only():
    e = HostEntry("vgg11", 8, 75, 1000, "pool5", 1.0, 0.2, 5, capacity=2.2)
    assert e.host_for(Host(True, capacity=1.3)).capacity == 2.2
    assert e.host_for(Host(False)) == Host(False)
    assert entry().host_for(Host(True, capacity=1.3)).capacity == 1.3  # none measured


def test_calibrations_written_before_per_workload_capacity_still_load(tmp_path):
    path = tmp_path / "old.json"
    old = HostCalibration(Host(True, 1e-9, 1e-3, 1.4), [entry()]).to_dict()
    for e in old["entries"]:
        del e["capacity"]
    path.write_text(json.dumps(old))
    assert HostCalibration.load(path).entries[0].capacity is None


def test_measured_capacities_per_process_count_round_trip_into_the_host(tmp_path):
    e = HostEntry("vgg11", 8, 75, 1000, "pool5", 1.0, 0.2, 5, capacity=1.2,
              capacities=[[2, 1.2], [4, 0.9]])
    host = Host(True, 1e-9, 1e-3, 1.2, capacities=((2, 1.2), (4, 0.9)), cores=2,
                ring_cpu_s_per_byte=2e-9)
    path = tmp_path / "cal.json"
    HostCalibration(host, [e]).save(path)
    back = HostCalibration.load(path)
    assert back.host == host
    on = back.entries[0].host_for(Host(True, capacity=1.0))
    assert [on.capacity_at(n) for n in (1, 2, 3, 4, 6)] == [1.0, 1.2, 1.2, 0.9, 0.9]




def test_a_stanza_phase_measured_beside_reaches_the_compute():
    e = HostEntry("vgg11", 8, 75, 1000, "pool5", 1.0, 0.2, 5, head_s=0.8,
                  stanza_beside=[3, 2.5, 0.7])
    assert e.compute.stanza_beside == (3, 2.5, 0.7) and e.compute.head_s == 0.8
    assert json.loads(json.dumps(HostCalibration(Host(True), [e]).to_dict()))["entries"][0][
        "stanza_beside"] == [3, 2.5, 0.7]
