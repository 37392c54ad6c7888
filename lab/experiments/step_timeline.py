"""Every task's link and CPU through a PS-mode window on budgeted devices, sampled every
20 ms (lab/tools/step_timeline.py): the budgeted sweep's worst settings, plain PS on alexnet
at N = 8, and RALP-H beside plain PS on resnet50 at N = 4. Then what a worker's CPU does
while its link receives and while it sends, over every timeline (lab/tools/step_phases.py)."""

from lab.experiments._common import tool
from lab.registry import Lab, Step

SUMMARY = "every task's link and CPU through PS-mode windows; a worker's CPU per link phase"
NEEDS = ("root",)
SETTINGS = {"worst": "the budgeted sweep's three worst PS-mode settings",
            "alexnet": "plain PS on alexnet, N = 8, 500 Mbit/s: in step or not?",
            "ralp": "RALP-H and plain PS on resnet50, N = 4, 1 Gbit/s",
            "phases": "a worker's CPU while its link receives and sends, every timeline"}

# (model, mode, N, link, measured steps per worker), and the file their printouts go to
TIMELINES = {
    "worst": ((("resnet50", "ralp-n", "8", "500mbit", "12"), ("overfeat", "ps", "8", "500mbit",
               "16"), ("vgg11", "ralp-h", "4", "1gbit", "30")), "step_timeline.txt"),
    "alexnet": ((("alexnet", "ps", "8", "500mbit", "16"),), "step_timeline_alexnet.txt"),
    "ralp": ((("resnet50", "ralp-h", "4", "1gbit", "12"), ("resnet50", "ps", "4", "1gbit", "12")),
             "step_timeline_ralp.txt"),
}


def stem(model: str, mode: str, devices: str, rate: str) -> str:
    return f"step_timeline_{model}_{mode.replace('-', '')}_n{devices}_{rate}"


def steps(lab: Lab) -> list[Step]:
    if lab.setting == "phases":
        files = sorted(lab.path(f"{stem(*setting[:4])}.json")
                       for settings, _ in TIMELINES.values() for setting in settings)
        return [tool(lab, "step_phases", *files, stdout=lab.path("step_phases.txt"))]
    settings, printout = TIMELINES[lab.setting]
    return [tool(lab, "step_timeline", "--model", model, "--mode", mode, "--devices", n,
                 "--bandwidth", rate, "--steps", count,
                 "--out", lab.path(f"{stem(model, mode, n, rate)}.json"),
                 "--plot", lab.path(f"{stem(model, mode, n, rate)}.png"),
                 stdout=lab.path(printout), append=index > 0)
            for index, (model, mode, n, rate, count) in enumerate(settings)]
