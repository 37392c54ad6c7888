"""The planner's step models against every budgeted record, from the committed records and
calibrations (nothing runs on the cluster): after a change to the planner's model this brings
every validation up to date.

Windows inside an epoch's first cycles (a few warm-up steps: the zoo, the collective runs)
are validated with that regime's model (``--step-model in-step``); windows past them (16
warm-up steps) and one worker alone with the default, which auto and wrap use; the queueing
network alone (``--step-model queue``) beside both. Records whose calibrations predate a term
are lent it (``--overlap-from``: the rings' terms of ring-overlap, gRPC's cost on the fabric
of fabric-transfer); records without a calibration take the one made beside their runs
(``--compute-profile(-for)``)."""

from lab.experiments._common import tool, validate
from lab.registry import Lab, Step

SUMMARY = "the planner's step models against every budgeted record (no run)"
NEEDS = ()

IN_STEP = ("--step-model", "in-step")
QUEUE = ("--step-model", "queue")


def in_step(lab: Lab, *args: str, stdout: str) -> Step:
    """A validation with the step model of an epoch's first cycles (its option after the
    records, which ``--validate`` takes up to the next option)."""
    return validate(lab, *args, *IN_STEP, stdout=stdout)


def steps(lab: Lab) -> list[Step]:
    def zoo(name: str) -> str:
        return lab.of("devices-zoo", f"{name}.json")

    def epoch(name: str) -> str:
        return lab.of("devices-zoo-in-epoch", f"{name}.json")

    def steady(name: str) -> str:
        return lab.of("devices-steady", f"{name}.json")

    def ring(name: str) -> str:
        return lab.of("ring-overlap", f"{name}.json")

    def out(name: str) -> str:
        return lab.path(name)

    def of(experiment: str, name: str) -> str:
        return lab.of(experiment, f"{name}.json")

    first = zoo("devices_zoo_1gbit")
    one_ps = zoo("devices_zoo_1gbit_one_ps")
    sweep = [zoo(name) for name in ("devices_zoo_1gbit_again", "devices_zoo_n8_1gbit",
                                    "devices_zoo_500mbit", "devices_zoo_n8_500mbit")]
    fabric = ("--overlap-from", *(lab.of("fabric-transfer", f"fabric_transfer_n{n}_calibration"
                                         ".json") for n in (4, 8)))
    n4_steady, n4_rest = steady("devices_n4_1gbit_steady"), steady("devices_n4_1gbit_steady_rest")
    alone = steady("devices_n2_alone_1gbit")
    vgg11_all = of("heldout-n6", "heldout_vgg11_n6_all")
    turns = [of("turns-one-ps", f"turns_one_ps_resnet50_{rate}") for rate in ("500mbit", "750mbit")]
    # these records carry no calibration: each takes the one calibrated beside its runs
    day = ("--compute-profile-for",
           f"{vgg11_all}={of('heldout-n6', 'heldout_vgg11_n6_all_calibration')}",
           "--compute-profile-for",
           f"{turns[0]}={of('turns-one-ps', 'turns_one_ps_resnet50_calibration')}",
           "--compute-profile-for",
           f"{turns[1]}={of('turns-one-ps', 'turns_one_ps_resnet50_750mbit_calibration')}")
    every_steady = [n4_steady, n4_rest, steady("devices_n4_500mbit_steady"),
                    steady("devices_n8_500mbit_steady"),
                    steady("devices_n8_500mbit_inception3_steady"),
                    of("two-workers", "devices_two_workers_resnet50_1gbit"),
                    of("two-workers", "devices_two_workers_overfeat_1gbit"), vgg11_all, *turns]

    found = [
        # the first zoo, alone and with the rings' later terms lent
        in_step(lab, first, stdout=out("devices_zoo_1gbit_validation.txt")),
        in_step(lab, first, "--format", "json",
                 stdout=out("devices_zoo_1gbit_validation.json")),
        in_step(lab, first, "--overlap-from", ring("ring_overlap_curve_n4"),
                 stdout=out("devices_zoo_1gbit_validation_curve.txt")),
        in_step(lab, first, "--overlap-from", ring("ring_wire_n4"),
                 stdout=out("devices_zoo_1gbit_validation_wire.txt")),
        in_step(lab, first, "--overlap-from", ring("ring_wire_n4"), "--format", "json",
                 stdout=out("devices_zoo_1gbit_validation_wire.json")),
        in_step(lab, one_ps, stdout=out("devices_zoo_1gbit_one_ps_validation.txt")),
        in_step(lab, one_ps, "--overlap-from", ring("ring_wire_n4"),
                 stdout=out("devices_zoo_1gbit_one_ps_validation_wire.txt")),
        in_step(lab, zoo("devices_zoo_n8_1gbit"),
                 stdout=out("devices_zoo_n8_1gbit_validation.txt")),
        *(in_step(lab, zoo(name), stdout=out(f"{name}_validation.txt"))
          for name in ("devices_zoo_1gbit_again", "devices_zoo_500mbit", "devices_zoo_n8_500mbit")),
        # the sweep (N = 4 and 8 at 1 Gbit/s and 500 Mbit/s), alone and with the fabric's
        # gRPC cost lent, which three of its calibrations predate
        in_step(lab, *sweep, stdout=out("devices_sweep_validation.txt")),
        in_step(lab, *sweep, *fabric, stdout=out("devices_sweep_validation_fabric.txt")),
        in_step(lab, *sweep, *fabric, "--format", "json",
                 stdout=out("devices_sweep_validation_fabric.json")),
        validate(lab, *sweep, *fabric, *QUEUE,
                 stdout=out("devices_sweep_validation_fabric_queue.txt")),
    ]
    # the PS modes measured inside the epoch, in step and as the queueing network alone
    for name in ("devices_zoo_n8_500mbit_in_epoch", "devices_zoo_n4_1gbit_in_epoch",
                 "devices_zoo_n4_500mbit_in_epoch"):
        found += [in_step(lab, epoch(name), stdout=out(f"{name}_validation.txt")),
                  validate(lab, epoch(name), *QUEUE, stdout=out(f"{name}_validation_queue.txt"))]
    found += [
        # each round from its own calibration against every round from the first
        tool(lab, "calibration_rounds", epoch("devices_zoo_n4_1gbit_in_epoch"),
             stdout=out("devices_zoo_n4_1gbit_in_epoch_calibration_rounds.txt")),
        # the windows past the epoch's first cycles, file by file and together
        validate(lab, n4_steady, stdout=out("devices_n4_1gbit_steady_validation.txt")),
        validate(lab, n4_steady, *QUEUE,
                 stdout=out("devices_n4_1gbit_steady_validation_queue.txt")),
        validate(lab, n4_steady, n4_rest, stdout=out("devices_n4_1gbit_steady_zoo_validation.txt")),
        validate(lab, n4_steady, n4_rest, *QUEUE,
                 stdout=out("devices_n4_1gbit_steady_zoo_validation_queue.txt")),
        validate(lab, alone, stdout=out("devices_n2_alone_1gbit_validation.txt")),
        validate(lab, *every_steady, *day, stdout=out("devices_steady_validation.txt")),
        in_step(lab, *every_steady, *day,
                 stdout=out("devices_steady_validation_in_step.txt")),
        validate(lab, of("two-workers", "devices_two_workers_1gbit"),
                 stdout=out("devices_two_workers_1gbit_validation.txt")),
        *(validate(lab, of(experiment, name), stdout=out(f"{name}_validation.txt"))
          for experiment, name in (("two-workers", "devices_two_workers_resnet50_1gbit"),
                                   ("two-workers", "devices_two_workers_overfeat_1gbit"),
                                   ("devices-steady", "devices_n4_500mbit_steady"),
                                   ("devices-steady", "devices_n8_500mbit_steady"),
                                   ("devices-steady", "devices_n8_500mbit_inception3_steady"))),
        # the held-out vgg11 from that day's calibration and from the previous day's
        validate(lab, vgg11_all, "--compute-profile",
                 of("heldout-n6", "heldout_vgg11_n6_all_calibration"),
                 stdout=out("heldout_vgg11_n6_all_validation.txt")),
        validate(lab, vgg11_all, "--compute-profile",
                 of("heldout-n6", "heldout_vgg11_n6_calibration"),
                 stdout=out("heldout_vgg11_n6_all_validation_previous_day.txt")),
        validate(lab, turns[0], "--compute-profile",
                 of("turns-one-ps", "turns_one_ps_resnet50_calibration"),
                 stdout=out("turns_one_ps_resnet50_500mbit_validation.txt")),
        validate(lab, turns[1], "--compute-profile",
                 of("turns-one-ps", "turns_one_ps_resnet50_750mbit_calibration"),
                 stdout=out("turns_one_ps_resnet50_750mbit_validation.txt")),
        validate(lab, of("heldout-n6", "heldout_vgg11_n6"),
                 stdout=out("heldout_vgg11_n6_validation.txt")),
        # the sweep's windows inside the epoch with the default model past it
        validate(lab, *sweep, *fabric, stdout=out("devices_sweep_validation_fabric_steady.txt")),
        validate(lab, alone, *QUEUE, stdout=out("devices_n2_alone_1gbit_validation_queue.txt")),
        in_step(lab, of("heldout-n6", "heldout_alexnet_n6"), "--compute-profile",
                 of("heldout-n6", "heldout_alexnet_n6_calibration"), "--overlap-from",
                 ring("ring_wire_n6"), stdout=out("heldout_alexnet_n6_validation_wire.txt")),
    ]
    found += reference_table(lab, ring("ring_wire_n4"))
    found += steady_dilated(lab, ring("ring_wire_n4"))
    # the collective runs at N = 8 with each of the rings' terms lent
    for rate in ("1gbit", "10gbit"):
        records = of("collective", f"collective_n8_{rate}")
        for lent, tail in (("ring_overlap_n8", ""), ("ring_overlap_curve_n8", "_curve"),
                           ("ring_wire_n8", "_wire")):
            found.append(in_step(lab, records, "--overlap-from", ring(lent),
                                  stdout=out(f"collective_n8_{rate}_validation{tail}.txt")))
    return found


def reference_table(lab: Lab, lent: str) -> list[Step]:
    """The README table's records (Horovod and Stanza reducing behind the backward pass, links
    dilated): they carry the bench's default calibration, a device's compute only, so the
    host's byte and ring terms are lent from ring-overlap's calibration of their budget; past
    the epoch's first cycles and in step."""
    records = [lab.of("reference-table", f"reference_table_{rate}.json")
               for rate in ("1gbit", "10gbit")]
    return [validate(lab, *records, "--overlap-from", lent,
                     stdout=lab.path("reference_table_validation.txt")),
            in_step(lab, *records, "--overlap-from", lent,
                    stdout=lab.path("reference_table_validation_in_step.txt"))]


def steady_dilated(lab: Lab, lent: str) -> list[Step]:
    """The steady set's N = 4, 1 Gbit/s settings measured again in the reference device's
    time (devices-steady's ``-dilated`` settings): the bench's default calibration, so the
    host's byte terms are lent as for the reference table; past the first cycles and in step."""
    records = [lab.of("devices-steady", f"{stem}_dilated.json")
               for stem in ("devices_n4_1gbit_steady", "devices_n4_1gbit_steady_rest")]
    return [validate(lab, *records, "--overlap-from", lent,
                     stdout=lab.path("devices_steady_dilated_validation.txt")),
            in_step(lab, *records, "--overlap-from", lent,
                    stdout=lab.path("devices_steady_dilated_validation_in_step.txt"))]
