"""Telling a PS failure from other step errors, on the texts TensorFlow 2.21 gave in real runs
(tests/ps_strategy/test_failures.py and the chaos benchmark)."""

import pytest

from ralp.ps_strategy.health import is_ps_failure

RESTARTED_PS = (
    "Graph execution error: RecvTensor expects a different device incarnation: 1527 vs. 3145. "
    'Your worker job ("/job:ps/replica:0/task:0") was probably restarted. Check your worker job '
    "for the reason why it was restarted. Additional GRPC error information from remote target "
    "/job:ps/replica:0/task:0 while calling /tensorflow.WorkerService/RecvTensor: "
    "{grpc_status:10}"
)
LOST_PS = ("failed to connect to all addresses; Additional GRPC error information from remote "
           "target /job:ps/replica:0/task:0/device:CPU:0 while calling "
           "/tensorflow.eager.EagerService/RunComponentFunction: {grpc_status:14}")
UNPARSED_AT_RESTARTED_PS = (
    "{{function_node __wrapped__Identity_device_/job:chief/replica:0/task:0/device:CPU:0}} "
    "Unable to parse request Additional GRPC error information from remote target "
    "/job:ps/replica:0/task:0/device:CPU:0 while calling "
    "/tensorflow.eager.EagerService/RunComponentFunction: :UNKNOWN:Error received from peer  "
    '{grpc_status:13, grpc_message:"Unable to parse request"}'
)
LOST_WORKER = ("Socket closed Additional GRPC error information from remote target "
               "/job:worker/replica:0/task:2 while calling /tensorflow.eager.EagerService/Enqueue: "
               "{grpc_status:14}")


@pytest.mark.parametrize("text, expected", [
    (RESTARTED_PS, True), (LOST_PS, True), (UNPARSED_AT_RESTARTED_PS, True), (LOST_WORKER, False),
    ("Incompatible shapes: [32,10] vs. [32] on /job:ps/replica:0/task:0", False),
])
def test_a_ps_failure_is_told_by_the_task_and_the_kind_of_error(text, expected):
    assert is_ps_failure(Exception(text)) is expected


def test_a_worker_failure_the_coordinator_logs_is_one_event_with_the_probes_report():
    import logging

    from ralp._compat import WORKER_FAILED_LOG
    from ralp.cluster.spec import ClusterSpec
    from ralp.ps_strategy.health import ClusterWatch

    spec = ClusterSpec("127.0.0.1:1", ["127.0.0.1:2", "127.0.0.1:3"], ["127.0.0.1:4"])
    watch = ClusterWatch(spec, steps_done=lambda: 100)
    error = RuntimeError("Socket closed")
    with watch.coordinator_reports():  # as ClusterCoordinator logs it (tf_logging.error)
        logging.getLogger("tensorflow").error(WORKER_FAILED_LOG, "/job:worker/replica:0/task:1",
                                              error, error)
    with watch.coordinator_reports():  # a step that failed from the PS: not the worker's failure
        logging.getLogger("tensorflow").error(WORKER_FAILED_LOG, "/job:worker/replica:0/task:0",
                                              Exception(LOST_PS), Exception(LOST_PS))
        # but the PS's, kept while training: a step raised with another error beside it (an
        # input iterator cancelled, OutOfRange) is judged a PS failure from this report
        assert LOST_PS in watch.ps_failure_report
    with watch.coordinator_reports():
        assert watch.ps_failure_report is None  # each run of steps starts with none
    # outside training nothing is recorded
    logging.getLogger("tensorflow").error(WORKER_FAILED_LOG, "/job:worker/replica:0/task:0",
                                          error, error)
    assert [(e.task, e.at_step) for e in watch.events] == [("worker:1", 100)]
    with pytest.warns(UserWarning, match="worker lost during training: worker:1"):
        watch.judge([("worker", 1, "127.0.0.1:3")])  # the probes see it too: the same failure
    assert [e.task for e in watch.events] == ["worker:1"]


def test_the_failed_ps_is_named_from_the_error():
    from ralp.cluster.spec import ClusterSpec
    from ralp.ps_strategy.health import failed_ps_tasks

    spec = ClusterSpec("127.0.0.1:1", ["127.0.0.1:2"], ["127.0.0.1:4", "127.0.0.1:5"])
    assert failed_ps_tasks(Exception(RESTARTED_PS), spec) == [("ps", 0, "127.0.0.1:4")]
    assert failed_ps_tasks(Exception(LOST_WORKER), spec) == []
