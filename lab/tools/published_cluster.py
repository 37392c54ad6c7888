"""The planner's real-cluster model against TensorFlow's published multi-node results.

TensorFlow's performance guide (2017, "Benchmarks", distributed training on Amazon EC2
p2.8xlarge: 8 NVIDIA K80 GPUs per instance, ``tf_cnn_benchmarks`` with
``--variable_update=distributed_replicated``, synthetic data) lists images/s at 1, 8, 16, 32
and 64 GPUs. Each instance ran one worker of 8 GPUs, which sums its GPUs' gradients before
pushing, and one PS task (Inception V3 at 8 instances: 6 PS tasks; ResNet-152: 4).

From the one-GPU figure and the topology alone, the planner's PS formula
(:func:`ralp.planner.topology.ps_family_step_s`, synchronous: the benchmark's
``cross_replica_sync``) predicts the 8-64 GPU figures. Nothing is fitted to them; the two
terms it needs are published hardware figures:

- each instance's NIC: 10 Gbit/s (EC2's listing for p2.8xlarge);
- each GPU's link inside the node: a K80 board holds two GPUs behind one PCIe 3.0 x16 link
  (NVIDIA's K80 board specification), 15.76 GB/s each way shared by two: 63 Gbit/s.

The guide does not say how the variables were spread over the PS tasks; each goes to the
least loaded task, largest first (TensorFlow's ``GreedyLoadBalancingStrategy`` by bytes).

It then predicts, without any measurement, ralp-n, horovod, collective and stanza for the
zoo's vgg11, alexnet and resnet50 (224 px, 1000 classes) on that cluster; their one-GPU
throughput is ResNet-50's published FLOP rate applied to each model's FLOPs.

    python -m lab.tools.published_cluster \
        --output lab/results/published-cluster/published_cluster.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys

PUBLISHED = {  # model: (batch per GPU, image side, {GPUs: images/s})
    "inception_v3": (64, 299, {1: 29.7, 8: 229, 16: 459, 32: 902, 64: 1783}),
    "resnet50": (64, 224, {1: 52.4, 8: 378, 16: 751, 32: 1388, 64: 2744}),
    "resnet152": (32, 224, {1: 19.4, 8: 146, 16: 291, 32: 565, 64: 981}),
}
PS_TASKS_AT_8_NODES = {"inception_v3": 6, "resnet152": 4}
GPUS_PER_NODE = 8
NIC = "10gbit"
INTRA_BITS = 16 * 985 * 10**6 * 8 // 2  # a K80 board's PCIe 3.0 x16, shared by its 2 GPUs
SOURCE = ("TensorFlow performance guide (2017), distributed training on EC2 p2.8xlarge "
          "(8 K80 per instance), tf_cnn_benchmarks distributed_replicated, synthetic data")
WHAT_IF_MODELS = ("vgg11", "alexnet", "resnet50")
WHAT_IF_MODES = ("ps", "ralp-n", "horovod", "collective", "stanza")


def _keras_application(name: str, image: int):
    import keras

    build = {"inception_v3": keras.applications.InceptionV3,
             "resnet50": keras.applications.ResNet50,
             "resnet152": keras.applications.ResNet152}[name]
    return build(weights=None, input_shape=(image, image, 3), classes=1000)


def validate() -> list[dict]:
    from ralp.planner.cluster_plan import device_compute, ps_layout
    from ralp.planner.topology import Topology, ps_family_step_s
    from ralp.planner.workload import Workload
    from ralp.profiler.api import profile
    from ralp.units import parse_bandwidth

    rows = []
    for name, (batch, image, table) in PUBLISHED.items():
        work = Workload(profile(_keras_application(name, image), batch))
        compute = device_compute(work, table[1])
        for gpus, measured in table.items():
            if gpus == 1:
                continue
            nodes = gpus // GPUS_PER_NODE
            topo = Topology(nodes, GPUS_PER_NODE, parse_bandwidth(NIC), INTRA_BITS)
            ps = PS_TASKS_AT_8_NODES.get(name, nodes) if nodes == 8 else nodes
            layout = ps_layout(work, "ps", topo, gpus_per_worker=GPUS_PER_NODE, ps_tasks=ps,
                               balanced=True)
            step = ps_family_step_s(compute, layout, topo, sync="bsp")
            predicted = gpus * batch / step
            rows.append({"model": name, "gpus": gpus, "nodes": nodes, "ps_tasks": ps,
                         "batch": batch, "published": measured,
                         "predicted": round(predicted, 1),
                         "error": round(predicted / measured - 1, 4)})
    return rows


def what_if(resnet50_flop_rate: float) -> list[dict]:
    """ralp's other modes on the same cluster for zoo models, their one-GPU throughput from
    ResNet-50's published FLOP rate (forward FLOPs per image times images/s)."""
    from ralp.models import build_model
    from ralp.planner.cluster_plan import device_compute, predict_mode
    from ralp.planner.modes import PlannerError
    from ralp.planner.topology import Topology
    from ralp.planner.workload import Workload
    from ralp.profiler.api import profile
    from ralp.units import parse_bandwidth

    rows = []
    for name in WHAT_IF_MODELS:
        work = Workload(profile(build_model(name, 1000, 224), 64))
        throughput = resnet50_flop_rate / sum(max(0, r.flops) for r in work.table.rows)
        compute = device_compute(work, throughput)
        for nodes in (2, 4, 8):
            topo = Topology(nodes, GPUS_PER_NODE, parse_bandwidth(NIC), INTRA_BITS)
            for mode in WHAT_IF_MODES:
                try:
                    p = predict_mode(work, compute, topo, mode, horovod_build="nccl")
                except PlannerError as e:
                    rows.append({"model": name, "gpus": topo.devices, "mode": mode,
                                 "skipped": str(e)})
                    continue
                rows.append({"model": name, "gpus": topo.devices, "mode": mode,
                             "workers": p.workers, "ps": p.ps,
                             "one_gpu_images_per_sec": round(throughput, 1),
                             "images_per_sec": round(p.images_per_sec, 1)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", help="write the results JSON here")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    rows = validate()
    for r in rows:
        print(f"{r['model']:>13} {r['gpus']:>3} GPUs: published {r['published']:>7.1f}, "
              f"predicted {r['predicted']:>7.1f} ({100 * r['error']:+.1f}%)")
    errors = sorted(abs(r["error"]) for r in rows)
    print(f"median |error| {100 * errors[len(errors) // 2]:.1f}%, max {100 * errors[-1]:.1f}%")
    from ralp.profiler.api import profile

    rn50 = profile(_keras_application("resnet50", 224), 64)
    rate = PUBLISHED["resnet50"][2][1] * sum(max(0, r.flops) for r in rn50.table.rows)
    extra = what_if(rate)
    for r in extra:
        shown = r.get("images_per_sec", r.get("skipped"))
        print(f"what-if {r['model']:>8} {r['gpus']:>3} GPUs {r['mode']:>10}: {shown}")
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"command": "python " + " ".join(sys.argv), "source": SOURCE,
                       "nic": NIC, "intra_node_bits": INTRA_BITS, "validation": rows,
                       "what_if": extra}, f, indent=1)


if __name__ == "__main__":
    main()
