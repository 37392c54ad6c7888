"""The documentation holds together: every relative link in README.md and docs/ reaches a file
(and, inside the docs, a heading that exists), no page names a machine's absolute path, the
README stays short, and docs/index.md lists every page under docs/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 250

PAGES = sorted(DOCS.rglob("*.md"))
# [text](target): inline Markdown links and images, outside code spans and fenced blocks
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
ABSOLUTE_PATH = re.compile(r"(?<![\w.~$-])/(?:work|home|root|tmp|Users|mnt|srv|opt/[a-z])/")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans (where brackets are not links)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text()))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("//")


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file(page: Path):
    broken = []
    for target in _links(page):
        if not _relative(target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
            continue
        # anchors are checked inside the docs and the README only: other pages' headings
        # (the results page's) are renamed by their owners, and links to them name the page
        checked = dest.suffix == ".md" and (dest == README or DOCS in dest.parents)
        if anchor and checked and anchor not in _anchors(dest):
            broken.append(f"{target} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_machine_paths(page: Path):
    found = sorted({m.group(0) for m in ABSOLUTE_PATH.finditer(page.read_text())})
    assert not found, f"{page.relative_to(ROOT)} names a machine's absolute path: {found}"


def test_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"


def test_index_lists_every_page():
    index = DOCS / "index.md"
    listed = {(index.parent / target.partition("#")[0]).resolve()
              for target in _links(index) if _relative(target)}
    missing = [str(p.relative_to(DOCS)) for p in PAGES if p != index and p not in listed]
    assert not missing, f"docs/index.md does not list {missing}"


def test_readme_links_the_index_and_the_tutorial():
    targets = set(_links(README))
    assert {"docs/index.md", "docs/tutorial.md"} <= targets


@pytest.mark.parametrize("module, page", [
    ("ralp.bench.cli", "bench-cli.md"),
    ("ralp.planner.cli", "planner-cli.md"),
    ("ralp.profiler.cli", "profiler-cli.md"),
])
def test_cli_reference_names_every_flag(module: str, page: str):
    """docs/reference/*-cli.md name exactly the flags the command's parser defines."""
    import importlib

    parser = importlib.import_module(module).parser()
    flags = {o for a in parser._actions for o in a.option_strings
             if o.startswith("--") and o != "--help"}
    named = set(re.findall(r"`(--[a-z][a-z-]*)", (DOCS / "reference" / page).read_text()))
    assert not flags - named, f"docs/reference/{page} does not describe {sorted(flags - named)}"
    assert not named - flags, f"docs/reference/{page} names flags that do not exist: " \
                              f"{sorted(named - flags)}"
