"""The planner against every recorded shared-CPU netns run (nothing runs): every record from
the zoo's calibration (plan-calibration), as calibrated and with the host's capacity fitted
on half of them; then the records calibrated beside their runs (planner-steady) from their
own calibrations."""

from lab.experiments._common import validate
from lab.registry import Lab, Step

SUMMARY = "the planner against every shared-CPU record, as calibrated and fitted on half"
NEEDS = ()


def steps(lab: Lab) -> list[Step]:
    recorded = [lab.of(experiment, name) for experiment, name in (
        ("zoo-sweep", "bench_sweep_1gbit.json"), ("zoo-sweep", "bench_sweep_10gbit.json"),
        ("horovod-vs-ralp", "bench_horovod_1gbit.json"),
        ("horovod-vs-ralp", "bench_horovod_10gbit.json"),
        ("vgg11-target", "bench_vgg11_target.json"), ("main-job", "main_job.json"),
        ("stanza-sweep", "bench_stanza_1gbit.json"), ("stanza-sweep", "bench_stanza_10gbit.json"),
        ("main-job", "main_job_with_stanza.json"))]
    # records that carry their own calibration are predicted from it, the rest from the zoo's
    calibrated = [lab.of("planner-steady", f"{name}.json") for name in (
        "bench_plan_steady_1gbit", "bench_plan_steady_10gbit", "bench_plan_stanza_1gbit",
        "bench_plan_stanza_10gbit", "bench_plan_steady8_10gbit")]
    every = ("--compute-profile", lab.of("plan-calibration", "plan_calibration.json"))
    found = []
    for records, profile, stem in ((recorded + calibrated, every, "plan_validation"),
                                   (calibrated, (), "plan_validation_calibrated")):
        for fit, tail in (((), ""), (("--fit-half",), "_fit_half")):
            found += [validate(lab, *records, *profile, *fit,
                               stdout=lab.path(f"{stem}{tail}.txt")),
                      validate(lab, *records, *profile, *fit, "--format", "json",
                               stdout=lab.path(f"{stem}{tail}.json"))]
    return found
