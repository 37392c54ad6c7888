"""The results page, benchmarks/README.md, stays a page and not a log: it is short, every relative
link on it reaches a file (and every in-page anchor a heading), every ``python -m lab run NAME`` it
shows is an experiment of the lab's registry (with a setting that experiment has), and every
experiment the registry lists, retired ones aside, is named on it by its command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab.registry import experiments

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "benchmarks" / "README.md"
MAX_LINES = 400

# [text](target): inline Markdown links and images
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
# `python -m lab run NAME` and `python -m lab run NAME --setting S`, as code spans wrap them
RUN = re.compile(r"python -m lab\s+run\s+([a-z0-9][a-z0-9-]*)(?:\s+--setting\s+([a-z0-9][a-z0-9-]*))?")
ABSOLUTE_PATH = re.compile(r"(?<![\w.~$-])/(?:work|home|root|tmp|Users|mnt|srv|opt/[a-z])/")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


@pytest.fixture(scope="module")
def text() -> str:
    return PAGE.read_text()


@pytest.fixture(scope="module")
def registry():
    return experiments()


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    heading = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("//")


def test_page_is_short(text: str):
    lines = len(text.splitlines())
    assert lines <= MAX_LINES, f"benchmarks/README.md has {lines} lines (at most {MAX_LINES})"


def test_relative_links_reach_a_file(text: str):
    anchors = {_slug(h) for h in HEADING.findall(FENCE.sub("", text))}
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        if not _relative(target):
            continue
        path, _, anchor = target.partition("#")
        if not path:
            if anchor not in anchors:
                broken.append(f"{target} (no heading #{anchor} on the page)")
        elif not (PAGE.parent / path).resolve().exists():
            broken.append(f"{target} (no such file)")
    assert not broken, f"benchmarks/README.md: broken links: {broken}"


def test_results_links_stay_inside_the_lab(text: str):
    """Figures come from lab/results/: every link there resolves inside that folder."""
    results = (ROOT / "lab" / "results").resolve()
    outside = []
    for target in LINK.findall(text):
        if "lab/results" in target:
            dest = (PAGE.parent / target.partition("#")[0]).resolve()
            if dest != results and results not in dest.parents:
                outside.append(target)
    assert not outside, f"links naming lab/results that lead elsewhere: {outside}"


def test_every_command_is_a_registered_experiment(text: str, registry):
    commands = RUN.findall(text)
    assert commands, "the page shows no `python -m lab run NAME` command"
    unknown = sorted({name for name, _ in commands if name not in registry})
    assert not unknown, f"`python -m lab run` names no registered experiment: {unknown}"
    retired = sorted({name for name, _ in commands if registry[name].retired})
    assert not retired, f"the page shows commands of retired experiments: {retired}"
    bad = sorted({f"{name} --setting {setting}" for name, setting in commands
                  if setting and setting not in registry[name].settings})
    assert not bad, f"settings the experiments do not have: {bad}"


def test_every_experiment_is_on_the_page(text: str, registry):
    shown = {name for name, _ in RUN.findall(text)}
    missing = sorted(name for name, found in registry.items()
                     if not found.retired and name not in shown)
    assert not missing, f"experiments with no `python -m lab run NAME` on the page: {missing}"


def test_every_retired_experiment_links_its_reading(text: str, registry):
    missing = sorted(name for name, found in registry.items() if found.retired
                     and f"../lab/results/{name}/README.md" not in text)
    assert not missing, f"retired experiments the page does not link: {missing}"


def test_no_machine_paths_or_dates(text: str):
    found = sorted({m.group(0) for m in ABSOLUTE_PATH.finditer(text)}
                   | {m.group(0) for m in DATE.finditer(text)})
    assert not found, f"benchmarks/README.md names machine paths or dates: {found}"
