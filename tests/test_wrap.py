"""ralp.wrap, the one entry point: its settings per mode, checked before anything connects.
No cluster is started here (a ClusterSpec is only addresses)."""

import inspect

import pytest

import ralp
from ralp.cluster.spec import ClusterSpec, free_ports
from ralp.models import build_model

# Closed loopback ports: nothing here may reach another machine, and nothing listens there.
_PORTS = [f"127.0.0.1:{p}" for p in free_ports(4)]
REMOTE = ClusterSpec(_PORTS[0], tuple(_PORTS[1:3]), (_PORTS[3],))
QUICK = ralp.Failures(connect_timeout=0.1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(mode="bogus"), "mode 'bogus': choose from 'auto', 'skewness', 'ralp', 'ps', "
                             "'horovod', 'stanza', 'collective'"),
        (dict(mode="auto", bandwidth="1gbit", plan=object()), "plan= is for mode"),
        (dict(mode="ps", bandwidth="1gbit"), "bandwidth= is for mode auto"),
        (dict(mode="skewness", calibration="cal.json"), "calibration= is for mode auto"),
        (dict(mode="auto", bandwidth="fast"), "not a positive rate"),
        (dict(mode="auto", bandwidth="1gbit", calibration="/nonexistent.json"),
         "cannot read calibration"),
        (dict(mode="ps", fc_workers=2), "fc_workers= is for mode stanza"),
        (dict(mode="ps", pulls="sometimes"), "pulls must be one of"),
        (dict(mode="ps", device_type="tpu"), "device_type must be"),
        (dict(mode="ps", failures={"step_timeout": 1}), "ralp.Failures"),
    ],
)
def test_bad_requests_fail_before_any_connection(kwargs, message):
    model = build_model("lenet", 10, 28)
    kwargs.setdefault("failures", QUICK)
    with pytest.raises((ValueError, TypeError, ralp.ClusterError), match=message):
        ralp.wrap(model, REMOTE, batch_size=4, **kwargs)


@pytest.mark.parametrize(("mode", "kwargs", "message"), [
    ("horovod", dict(sync="bsp"), "sync= is for mode auto or skewness or ralp or ps"),
    ("collective", dict(pulls="ibatch"), "pulls= is for mode"),
    ("stanza", dict(device_type="gpu"), "device_type= is for mode"),
])
def test_allreduce_modes_refuse_the_parameter_server_settings(mode, kwargs, message):
    model = build_model("lenet", 10, 28)
    with pytest.raises(ValueError, match=message):
        ralp.wrap(model, mode=mode, **kwargs)


def test_allreduce_modes_take_no_cluster_and_ps_modes_need_one():
    model = build_model("lenet", 10, 28)
    with pytest.raises(ValueError, match="horovodrun, or TF_CONFIG"):
        ralp.wrap(model, REMOTE, mode="horovod")
    with pytest.raises(ValueError, match="give cluster="):
        ralp.wrap(model, mode="ps")


def test_a_cluster_given_as_a_mapping_is_read_as_a_cluster_spec():
    model = build_model("lenet", 10, 28)
    spec = {"chief": [_PORTS[0]], "worker": [_PORTS[1]], "ps": [_PORTS[3]]}
    with pytest.raises(ralp.ClusterError, match="unreachable"):  # it tried to connect
        ralp.wrap(model, spec, mode="ps", batch_size=4, failures=QUICK)
    with pytest.raises(ralp.ClusterError, match="no 'ps' task"):
        ralp.wrap(model, {"chief": ["h:1"], "worker": ["h:2"]}, mode="ps", batch_size=4)


def test_wraps_signature_names_every_parameter():
    kinds = {p.kind for p in inspect.signature(ralp.wrap).parameters.values()}
    assert inspect.Parameter.VAR_KEYWORD not in kinds
    assert "Args:" in ralp.wrap.__doc__ and "Raises:" in ralp.wrap.__doc__


def test_the_trainers_keras_methods_have_keras_signatures():
    """fit, evaluate and predict take Keras' arguments, by Keras' names, in Keras' order."""
    import keras

    for name in ("fit", "evaluate", "predict"):
        ours = list(inspect.signature(getattr(ralp.Trainer, name)).parameters)[1:]
        theirs = list(inspect.signature(getattr(keras.Model, name)).parameters)[1:]
        theirs = [p for p in theirs if p not in ("kwargs",)]
        assert ours[:len(theirs)] == theirs, name


def test_a_worker_with_several_devices_is_refused():
    """One replica per worker: a strategy reporting more replicas than workers (a worker that
    sees several GPUs) is refused before anything is placed. (The strategies here are
    stand-ins for the counts a GPU cluster reports; CI has no GPU.)"""
    from types import SimpleNamespace

    from ralp.collective.runtime import CollectiveError, check_one_replica_per_worker
    from ralp.ps_strategy.runtime import check_one_replica

    with pytest.raises(ralp.ClusterError, match="one worker task per GPU"):
        check_one_replica(SimpleNamespace(num_replicas_in_sync=2))
    check_one_replica(SimpleNamespace(num_replicas_in_sync=1))
    resolver = SimpleNamespace(cluster_spec=lambda: SimpleNamespace(
        as_dict=lambda: {"worker": ["a:1", "b:1"]}))
    with pytest.raises(CollectiveError, match="4 replicas on 2 workers"):
        check_one_replica_per_worker(SimpleNamespace(num_replicas_in_sync=4,
                                                     cluster_resolver=resolver))
    check_one_replica_per_worker(SimpleNamespace(num_replicas_in_sync=2, cluster_resolver=resolver))
