"""The planner's overlap term and the allreduce modes' step with it. Setting ``share``: the
share of the backward pass that gradient transfers can hide behind, from the reductions'
measured timelines (reduction-timeline, this checkout's runtime; lab/tools/overlap_share.py),
nothing runs. Setting ``n4-1gbit``: alexnet and vgg11 in horovod, stanza and collective on
budgeted devices (N = 4, 1 Gbit/s), calibrated beside the runs, with this checkout's runtime
(every reduction started as the backward pass produces its gradient), then the planner
against them. Setting ``validate``: the planner against the records of planner-devices' and
plan-validation's validations that hold the allreduce modes, all made before the reductions
overlapped, which the planner now predicts with the overlap (nothing runs)."""

from lab.experiments._common import SMALL, bench, netns, tool, validate
from lab.registry import Lab, Step

SUMMARY = "the overlap term from measured timelines; the rings' steps with it (budgeted devices)"
NEEDS = ("root", "horovod")
SETTINGS = {"share": "the overlap term from reduction-timeline's traces (no run)",
            "n4-1gbit": "alexnet and vgg11, horovod, stanza, collective, N = 4, 1 Gbit/s",
            "validate": "the planner against the rings' records made before the overlap"}

TIMELINES = ("alexnet_horovod", "alexnet_stanza", "alexnet_collective", "vgg11_horovod",
             "vgg11_stanza", "vgg11_collective")


def steps(lab: Lab) -> list[Step]:
    if lab.setting == "share":
        def timeline(name: str) -> str:
            return lab.of("reduction-timeline", f"reduction_timeline_after_{name}.json")

        horovod = [timeline(name) for name in TIMELINES if not name.endswith("collective")]
        collective = [timeline(name) for name in TIMELINES if name.endswith("collective")]
        return [tool(lab, "overlap_share", *horovod, "--at-hand-over", *collective, "--out",
                     lab.path("overlap_share.json"), stdout=lab.path("overlap_share.txt"))]
    if lab.setting == "n4-1gbit":
        record = lab.path("overlap_n4_1gbit.json")
        return [bench(lab, *netns("1gbit"), "--models", "alexnet", "vgg11", *SMALL, "--modes",
                      "horovod", "stanza", "collective", "--devices", "4", "--steps", "6",
                      "--warmup", "1", "--repeat", "2", "--calibrate", "--quiet", "--out",
                      record),
                validate(lab, record, "--step-model", "in-step",
                         stdout=lab.path("overlap_n4_1gbit_validation.txt"))]
    return revalidate(lab)


def revalidate(lab: Lab) -> list[Step]:
    """The validations of planner-devices and plan-validation whose records hold the
    allreduce modes, with this checkout's planner; those experiments' files keep the
    planner's figures before the overlap (the same commands)."""
    def of(experiment: str, name: str) -> str:
        return lab.of(experiment, f"{name}.json")

    def out(name: str) -> str:
        return lab.path(f"{name}.txt")

    in_step = ("--step-model", "in-step")
    ring = {n: ("--overlap-from", of("ring-overlap", f"ring_wire_n{n}")) for n in (4, 6, 8)}
    fabric = ("--overlap-from", *(of("fabric-transfer", f"fabric_transfer_n{n}_calibration")
                                  for n in (4, 8)))
    sweep = [of("devices-zoo", name) for name in (
        "devices_zoo_1gbit_again", "devices_zoo_n8_1gbit", "devices_zoo_500mbit",
        "devices_zoo_n8_500mbit")]
    steady = [of("devices-steady", name) for name in (
        "devices_n4_1gbit_steady", "devices_n4_1gbit_steady_rest", "devices_n4_500mbit_steady",
        "devices_n8_500mbit_steady", "devices_n8_500mbit_inception3_steady")]
    vgg11_all = of("heldout-n6", "heldout_vgg11_n6_all")
    turns = [of("turns-one-ps", f"turns_one_ps_resnet50_{rate}") for rate in ("500mbit", "750mbit")]
    day = ("--compute-profile-for",
           f"{vgg11_all}={of('heldout-n6', 'heldout_vgg11_n6_all_calibration')}",
           "--compute-profile-for",
           f"{turns[0]}={of('turns-one-ps', 'turns_one_ps_resnet50_calibration')}",
           "--compute-profile-for",
           f"{turns[1]}={of('turns-one-ps', 'turns_one_ps_resnet50_750mbit_calibration')}")
    every_steady = [*steady, of("two-workers", "devices_two_workers_resnet50_1gbit"),
                    of("two-workers", "devices_two_workers_overfeat_1gbit"), vgg11_all, *turns]
    shared = [of("planner-steady", name) for name in (
        "bench_plan_steady_1gbit", "bench_plan_steady_10gbit", "bench_plan_stanza_1gbit",
        "bench_plan_stanza_10gbit", "bench_plan_steady8_10gbit")]
    return [
        validate(lab, *every_steady, *day, stdout=out("devices_steady_validation")),
        validate(lab, of("devices-zoo", "devices_zoo_1gbit"), *ring[4], *in_step,
                 stdout=out("devices_zoo_1gbit_validation_wire")),
        validate(lab, of("devices-zoo", "devices_zoo_n8_1gbit"), *in_step,
                 stdout=out("devices_zoo_n8_1gbit_validation")),
        validate(lab, *sweep, *fabric, *in_step, stdout=out("devices_sweep_validation_fabric")),
        validate(lab, of("heldout-n6", "heldout_alexnet_n6"), "--compute-profile",
                 of("heldout-n6", "heldout_alexnet_n6_calibration"), *ring[6], *in_step,
                 stdout=out("heldout_alexnet_n6_validation_wire")),
        *(validate(lab, of("collective", f"collective_n8_{rate}"), *ring[8], *in_step,
                   stdout=out(f"collective_n8_{rate}_validation_wire"))
          for rate in ("1gbit", "10gbit")),
        validate(lab, *shared, stdout=out("plan_validation_calibrated")),
    ]
