"""The layer pipeline of a PS-mode worker (lab.planner.layer_pipeline), against steps worked out by
hand, and its place in the step-time model."""

from dataclasses import replace

import pytest

from lab.planner.device_workload import DeviceLinks
from lab.planner.layer_pipeline import Layer, Transfer, finish_times, lockstep_step_s, max_min_rates
from lab.planner.ps_step import Compute, Host, ps_step_time, ralp_step_time


def test_max_min_rates_fill_the_most_contended_link_first():
    # Bertsekas and Gallager's example shape: a, b cross link x (1.0), b, c cross y (3.0)
    rates = max_min_rates({"a": ["x"], "b": ["x", "y"], "c": ["y"]}, {"x": 1.0, "y": 3.0})
    assert rates == pytest.approx({"a": 0.5, "b": 0.5, "c": 2.5})


def test_finish_times_share_a_link_then_speed_up():
    # 1 byte and 9 bytes on a 1 byte/s link from t = 0: the first done at 2 (half the link),
    # the second has 8 left then, alone: done at 10; a third from t = 20 alone: 20 + 3
    done = finish_times([Transfer("a", ("l",), 1), Transfer("b", ("l",), 9),
                         Transfer("c", ("l",), 3, start_s=20)], {"l": 1.0})
    assert done == pytest.approx({"a": 2.0, "b": 10.0, "c": 23.0})


def test_a_step_without_bytes_is_its_compute():
    layers = (Layer(0.25), Layer(0.75))
    assert lockstep_step_s(layers, 3.0, workers=4, bandwidth=1.0) == pytest.approx(3.0)


def test_workers_in_step_take_turns_on_the_ps_link():
    # one variable of 10 bytes on ps:0, no compute: every worker pulls it at a W-th of the
    # link, then pushes it the same way: 2 x W x 10 / bandwidth
    layers = (Layer(1.0, ((0, 10),)),)
    assert lockstep_step_s(layers, 0.0, workers=1, bandwidth=5.0) == pytest.approx(4.0)
    assert lockstep_step_s(layers, 0.0, workers=3, bandwidth=5.0) == pytest.approx(12.0)


def test_the_forward_waits_for_every_read_and_the_backward_overlaps_the_pushes():
    # bandwidth 1 byte/s, one worker, one PS. Layer 1 reads 1 byte, layer 2 reads 9; compute
    # 3 s (forward 1 s, 0.5 s each; backward 2 s, 1 s each).
    # pulls: 1 byte done at 2 (half the link), 9 bytes at 10. Forward: both layers from 10 to
    # 11 (the step reads every variable before its forward; layer 1 does not start at 2).
    # Backward: layer 2 to 12 (push 9 bytes), layer 1 to 13 (push 1 byte). Pushes: 9 bytes
    # alone from 12 (1 byte by 13), then both at half the link: the 1 byte done at 15, 7 bytes
    # left then, alone: done at 22.
    layers = (Layer(0.5, ((0, 1),)), Layer(0.5, ((0, 9),)))
    assert lockstep_step_s(layers, 3.0, workers=1, bandwidth=1.0) == pytest.approx(22.0)
    # nothing overlapping would take 10 + 3 + 10
    assert lockstep_step_s(layers, 3.0, workers=1, bandwidth=1.0) < 23.0


def test_the_worker_link_bounds_pulls_from_several_ps_tasks():
    # two variables of 10 bytes on two PS tasks, 2 workers: each PS link gives a worker half
    # of 10 bytes/s, but its own link carries both: 10 bytes/s for 20 bytes each way
    layers = (Layer(1.0, ((0, 10), (1, 10))),)
    assert lockstep_step_s(layers, 0.0, workers=2, bandwidth=10.0) == pytest.approx(4.0)


def test_between_s_waits_between_forward_and_backward():
    layers = (Layer(1.0),)
    assert lockstep_step_s(layers, 3.0, 1, 1.0, between_s=2.0) == pytest.approx(5.0)


DEVICES = Host(False, 0.0, 0.0, device_cpus=0.5)


def test_plain_ps_in_the_first_cycles_steps_as_its_pipeline_or_its_busiest_cpu():
    layers = (Layer(0.5, ((0, 100),)), Layer(0.5, ((1, 100),)))
    links = DeviceLinks((200, 200), (200, 200), 200, 800, 4, layers=layers, in_step=True)
    compute = Compute(full_s=1.0, tail_s=0.0)
    pipeline = lockstep_step_s(layers, 1.0, 2, 100.0)
    assert ps_step_time(compute, links, 2, 100.0, DEVICES) == pytest.approx(pipeline)
    slow = Compute(full_s=50.0, tail_s=0.0)  # compute-bound: the worker's device sets it
    assert ps_step_time(slow, links, 2, 100.0, DEVICES) == pytest.approx(
        max(50.0, lockstep_step_s(layers, 50.0, 2, 100.0)))


def _one_variable(ps_tasks: int, workers: int) -> DeviceLinks:
    """100 B on ps:0 pulled and pushed by every worker, over ``ps_tasks`` PS tasks."""
    layer = (Layer(1.0, ((0, 100),)),)
    ps_bytes = (workers * 100,) + (0,) * (ps_tasks - 1)
    return DeviceLinks(ps_bytes, ps_bytes, 100, 2 * workers * 100, 2, layers=layer)


def test_past_the_first_cycles_plain_ps_workers_queue_beyond_their_step_alone():
    # 100 B/s links, compute 3 s (forward 1, backward 2). Alone: pull 1 s, forward, backward,
    # push 1 s: 5 s. Two workers on two PS tasks meet at random: the queueing network with
    # each PS link direction a queue of 1 s a batch and the worker's delay 5 - 2 = 3 s. At one
    # customer the cycle is 5 s, throughput 0.2, each direction's queue 0.2; at two each
    # direction takes 1 x (1 + 0.2): 1.2 + 1.2 + 3 = 5.4 s. In step it is 7 s: pull 2 s (half
    # the link), forward 1, backward 2, push 2.
    compute = Compute(full_s=3.0, tail_s=0.0)
    assert ps_step_time(compute, _one_variable(2, 1), 1, 100.0, DEVICES) == pytest.approx(5.0)
    assert ps_step_time(compute, _one_variable(2, 2), 2, 100.0, DEVICES) == pytest.approx(5.4)
    in_step = replace(_one_variable(2, 2), in_step=True)
    assert ps_step_time(compute, in_step, 2, 100.0, DEVICES) == pytest.approx(7.0)


def test_two_workers_on_one_ps_task_wait_half_of_meeting_at_random_where_turns_fit():
    compute = Compute(full_s=3.0, tail_s=0.0)
    # one PS task: each direction busy 1 s of a 5 s step alone, so turns fit. Taking turns,
    # each steps as alone (5 s); meeting at random, mean-value analysis by hand: one worker
    # leaves 0.2 in each direction's queue, so with two each direction takes 1.2 s and the
    # step 5.4 s. The two states are as likely: 5.2 s
    assert ps_step_time(compute, _one_variable(1, 2), 2, 100.0, DEVICES) == pytest.approx(5.2)
    # not in the epoch's first cycles, nor with three workers (they meet at random: the
    # queueing network, as on two PS tasks)
    first = replace(_one_variable(1, 2), in_step=True)
    assert ps_step_time(compute, first, 2, 100.0, DEVICES) == pytest.approx(7.0)
    three = ps_step_time(compute, _one_variable(1, 3), 3, 100.0, DEVICES)
    assert three == pytest.approx(ps_step_time(compute, _one_variable(2, 3), 3, 100.0, DEVICES))
    assert three > 5.4
    # RALP with a tail of 4 s on the PS: its critical section busy 4 s of a 4.x s step alone,
    # twice that does not fit, so the two queue for it
    head = (Layer(1.0, ((0, 1),)),)
    one_ps = DeviceLinks((2,), (2,), 1, 4, 2, layers=head)
    tail_heavy = Compute(full_s=4.03, tail_s=4.0)
    alone = ralp_step_time(tail_heavy, replace(one_ps, ps_tx=(1,), ps_rx=(1,)), 1, 100.0,
                           DEVICES)
    assert ralp_step_time(tail_heavy, one_ps, 2, 100.0, DEVICES) > alone + 1.0


def test_ralp_workers_step_alone_as_their_pipeline_and_queue_beyond_it():
    head = (Layer(0.5, ((0, 100),)), Layer(0.5, ((0, 100),)))
    # per worker batch: 200 B of kept variables and 50 B of activations each way
    known = DeviceLinks((2 * 250,), (2 * 250,), 250, 1000, 6, layers=head)
    unknown = DeviceLinks((2 * 250,), (2 * 250,), 250, 1000, 6)
    compute = Compute(full_s=3.0, tail_s=1.0)
    faster = ralp_step_time(compute, known, 2, 100.0, DEVICES)
    queued = ralp_step_time(compute, unknown, 2, 100.0, DEVICES)
    assert faster < queued
    # one worker: exactly its pipeline (head 2 s, exchange 1 s, tail 1 s between)
    alone = lockstep_step_s(head, 2.0, 1, 100.0, between_s=1.0 + 1.0)
    one = DeviceLinks((250,), (250,), 250, 500, 6, layers=head)
    assert ralp_step_time(compute, one, 1, 100.0, DEVICES) == pytest.approx(alone)


def test_one_ralp_worker_steps_as_its_pipeline_its_bytes_cpu_overlapping_the_wire():
    # gRPC's CPU (both ends 1 ms a byte: 0.5 s per 500 B at each end on a 0.5 CPU device)
    # runs while the bytes cross; it does not add to the step alone (measured on one worker
    # and one PS task: results/devices_n2_alone_1gbit.json)
    head = (Layer(0.5, ((0, 100),)), Layer(0.5, ((0, 100),)))
    one = DeviceLinks((250,), (250,), 250, 500, 6, layers=head)
    costly = Host(False, 1e-3, 0.0, device_cpus=0.5)
    alone = lockstep_step_s(head, 2.0, 1, 100.0, between_s=1.0 + 1.0)
    assert ralp_step_time(Compute(full_s=3.0, tail_s=1.0), one, 1, 100.0, costly) == \
        pytest.approx(alone)


def test_a_link_carries_no_faster_than_its_ends_cpu_serves_it():
    # 100 B pulled and pushed over a 100 B/s link whose worker end's CPU moves 50 B/s: 2 s
    # each way, not 1; the PS end's CPU (25 B/s) shared by 2 workers in step: 8 s each way
    layer = (Layer(1.0, ((0, 100),)),)
    assert lockstep_step_s(layer, 0.0, 1, 100.0) == pytest.approx(2.0)
    assert lockstep_step_s(layer, 0.0, 1, 100.0, cpu_rates=(50.0, 1e9)) == pytest.approx(4.0)
    assert lockstep_step_s(layer, 0.0, 2, 100.0, cpu_rates=(1e9, 25.0)) == pytest.approx(16.0)


def test_plain_ps_on_devices_moves_bytes_no_faster_than_the_ps_cpu_serves_them():
    # 100 B on ps:0, 2 workers in step, links of 1000 B/s; gRPC's CPU 0.02 s a byte at each
    # end of a 0.5 CPU device: 50 B/s with all of it, 25 B/s a worker on the shared PS. Pull
    # 4 s, forward 1 s, backward 2 s, push 4 s: 11 s. Uncapped the pipeline would take 3.4 s
    # and the step 8 s (the PS device's CPU for both workers' bytes, which leaves the
    # compute between them out).
    layer = (Layer(1.0, ((0, 100),)),)
    links = DeviceLinks((200,), (200,), 100, 400, 2, layers=layer, in_step=True)
    costly = Host(False, 0.02, 0.0, device_cpus=0.5)
    assert ps_step_time(Compute(full_s=3.0, tail_s=0.0), links, 2, 1000.0, costly) == \
        pytest.approx(11.0)


def _finish_times_one_by_one(transfers, capacity):
    """Reference: every transfer its own flow, rates recomputed at every event."""
    pending = sorted(transfers, key=lambda tr: tr.start_s)
    live, done, now = {}, {}, 0.0
    while pending or live:
        while pending and pending[0].start_s <= now:
            tr = pending.pop(0)
            live[tr.key] = [tr.links, float(tr.nbytes)]
        if not live:
            now = pending[0].start_s
            continue
        rates = max_min_rates({key: v[0] for key, v in live.items()}, capacity)
        step = min(v[1] / rates[key] for key, v in live.items())
        if pending:
            step = min(step, pending[0].start_s - now)
        now += step
        for key in list(live):
            live[key][1] -= rates[key] * step
            if live[key][1] <= 1e-9 * max(1.0, rates[key]):
                done[key] = now
                del live[key]
    return done


def test_max_min_rates_count_identical_flows():
    # three flows on x stand for one entry of count 3 beside a: x (1.0) split four ways
    rates = max_min_rates({"a": ["x"], "three": ["x", "y"]}, {"x": 1.0, "y": 3.0},
                          {"three": 3})
    assert rates == pytest.approx({"a": 0.25, "three": 0.25})


def test_finish_times_by_path_match_one_flow_per_transfer():
    import random

    rng = random.Random(7)
    paths = [("p0", "own"), ("p1", "own"), ("p0",), ("p1", "other")]
    capacity = {"p0": 3.0, "p1": 5.0, "own": 4.0, "other": 1.5}
    for _ in range(20):
        transfers = [Transfer(i, rng.choice(paths), rng.uniform(0.1, 20.0),
                              rng.choice([0.0, 0.0, rng.uniform(0.0, 10.0)]))
                     for i in range(rng.randint(1, 40))]
        expected = _finish_times_one_by_one(transfers, capacity)
        assert finish_times(transfers, capacity) == pytest.approx(expected, rel=1e-9)
