"""Kubeflow conventions: the TF_CONFIG that a TFJob of examples/k8s/tfjob.yaml gives each
pod parses into our ClusterSpec, with the tasks where the operator puts them."""

import json
from pathlib import Path

import pytest
import yaml

from ralp.cluster.spec import ClusterError, ClusterSpec

ROOT = Path(__file__).resolve().parents[2]
TFJOB = ROOT / "examples" / "k8s" / "tfjob.yaml"


def kubeflow_tf_config(job: dict, replica_type: str, index: int, namespace: str = "team") -> str:
    """TF_CONFIG as Kubeflow's training operator writes it (genTFConfigJSONStr): replica
    types lower-cased, each replica's headless service ``<job>-<type>-<i>.<ns>.svc`` at its
    ``tfjob-port``, and ``"environment": "cloud"``."""
    cluster = {}
    for rtype, spec in job["spec"]["tfReplicaSpecs"].items():
        [container] = spec["template"]["spec"]["containers"]
        port = next(p["containerPort"] for p in container["ports"] if p["name"] == "tfjob-port")
        name = f"{job['metadata']['name']}-{rtype.lower()}"
        cluster[rtype.lower()] = [f"{name}-{i}.{namespace}.svc:{port}"
                                  for i in range(spec["replicas"])]
    return json.dumps({"cluster": cluster, "task": {"type": replica_type.lower(), "index": index},
                       "environment": "cloud"})


def test_every_pod_of_the_shipped_tfjob_reads_its_tf_config():
    job = yaml.safe_load(TFJOB.read_text())
    assert job["kind"] == "TFJob"
    replicas = job["spec"]["tfReplicaSpecs"]
    assert set(replicas) == {"Chief", "Worker", "PS"}
    for rtype, spec in replicas.items():
        for index in range(spec["replicas"]):
            parsed, task, task_index = ClusterSpec.from_tf_config(
                kubeflow_tf_config(job, rtype, index))
            assert (task, task_index) == (rtype.lower(), index)
            assert parsed.chief == "ralp-digits-chief-0.team.svc:2222"
            assert parsed.workers == tuple(f"ralp-digits-worker-{i}.team.svc:2222"
                                           for i in range(3))
            assert parsed.ps == ("ralp-digits-ps-0.team.svc:2222",)
        command = spec["template"]["spec"]["containers"][0]["command"]
        if rtype == "Chief":
            assert "--tf-config" in command and "--checkpoint-dir" in command
        else:
            assert command[-2:] == ["-m", "ralp.server"]
    # the supervisor that brings a lost PS back, for the training to go on from a checkpoint
    assert replicas["PS"]["restartPolicy"] == "OnFailure"


def test_an_evaluator_replica_is_left_out_of_the_cluster():
    config = {"cluster": {"chief": ["j-chief-0.ns.svc:2222"], "worker": ["j-worker-0.ns.svc:2222"],
                          "ps": ["j-ps-0.ns.svc:2222"], "evaluator": ["j-evaluator-0.ns.svc:2222"]},
              "task": {"type": "worker", "index": 0}, "environment": "cloud"}
    spec, _, _ = ClusterSpec.from_tf_config(json.dumps(config))
    assert [job for job, _, _ in spec.tasks(include_chief=True)] == ["chief", "worker", "ps"]
    config["task"] = {"type": "evaluator", "index": 0}
    with pytest.raises(ClusterError, match="'evaluator', which takes no part"):
        ClusterSpec.from_tf_config(json.dumps(config))


def test_a_master_replica_is_refused_with_a_hint():
    config = {"cluster": {"master": ["j-master-0.ns.svc:2222"], "worker": ["j-worker-0.ns.svc:2222"],
                          "ps": ["j-ps-0.ns.svc:2222"]}, "task": {"type": "worker", "index": 0}}
    with pytest.raises(ClusterError, match="use 'Chief'"):
        ClusterSpec.from_tf_config(json.dumps(config))
