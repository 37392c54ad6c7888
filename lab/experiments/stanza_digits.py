"""Stanza's accuracy experiment in structure: lenet on the digits, Stanza (W CONV ranks + one
FC rank, synchronous) against plain PS (W workers + one PS, asynchronous), time to 85% and
90%: at 1 Gbit/s, then where plain PS is network-bound (250 Mbit/s) with Stanza's learning
rate scaled linearly, then by the square-root rule with Stanza's snapshots every 5 steps."""

from lab.registry import Lab, Step

SUMMARY = "Stanza against plain PS on the digits: time to 85% and 90% accuracy"
NEEDS = ("root", "horovod")

RUNS = (("stanza_digits", "1gbit", ()),
        ("stanza_digits_250mbit", "250mbit", ("--scale-lr",)),
        ("stanza_digits_250mbit_sqrt", "250mbit", ("--lr-scaling", "sqrt", "--eval-steps", "5")))


def steps(lab: Lab) -> list[Step]:
    return [Step((lab.python, "-m", "lab.studies.stanza_accuracy", "--workers", "2", "4",
                  "--bandwidth", rate, "--samples", "19200", "--target", "0.85", "0.9", *extra,
                  "--out", lab.path(f"{stem}.json"), "--plot", lab.path(f"{stem}.png")))
            for stem, rate, extra in RUNS]
