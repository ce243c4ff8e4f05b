"""What the pages and the shipped workflows' comments say about each other stays true, mechanically:

- a `pulumi` command that a page attributes to the pipeline (a code span in a sentence that names the pipeline,
  its schedule, GitOps or a workflow), or that a workflow's comment names, is one that a workflow's `run:` steps
  really run: the same subcommand, with no flag that the run lacks (`up --refresh` is not `refresh`, then `up`);
- a page that a workflow's comment points at is a file of this repository, its anchor one of the page's headings,
  and no comment sends the reader to "the README" by name alone (its sections moved to the documentation site);
- a version a page gives of a tool is one the project pins (constraints.txt, tools/*, the package, the runner
  image, the workflows), or what a pinned package requires: never the version one machine happened to have.

(tests/test_docs.py checks the README's links; `mkdocs build --strict` those inside docs/.)"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from markdown.extensions.toc import slugify

from actions_runners_simulator.tools import NODEJS_HOST_VERSION
from pulumi_actions_runners import __version__
from pulumi_actions_runners.github.releases import KNOWN_IMAGE
from tests.conftest import ROOT

WORKFLOWS = sorted((ROOT / "programs" / "gitops" / ".github" / "workflows").glob("*.yml"))
# The pages a reader reads: the changelog is history (earlier versions by design), reference.md is generated.
HISTORY_OR_GENERATED = ("changelog.md", "reference.md")
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name not in HISTORY_OR_GENERATED)]

# --- the pipeline's commands -----------------------------------------------------------------------------------

# The commands that act on the stack: what "the pipeline runs `…`" can mean (`pulumi config set`, which a comment
# advises a person to run, is not one).
STACK_COMMANDS = {"preview", "up", "update", "refresh", "destroy", "import"}
SHORT_FLAGS = {"-y": "--yes", "-s": "--stack", "-r": "--refresh", "-f": "--skip-preview", "-j": "--json"}
# A sentence that says what the pipeline does.
PIPELINE = re.compile(r"\bpipeline|\bschedule(?:d)?\b|\bGitOps\b|\bworkflows?\b|\brunners(?:-report)?\.yml\b", re.I)
# Commands a page names next to the pipeline on purpose, as what it does not run, and why.
NOT_RUN_ON_PURPOSE = {
    ("docs/getting-started/gitops.md", "up --refresh --plan"): "why the schedule runs `refresh` before `preview`",
}


def command(text: str) -> tuple[str, frozenset[str]] | None:
    """A code span's (or a run line's) stack command: its subcommand and its flags, without their values; None if
    it is not one. `pulumi up --plan x.json` and the shorthand `up --plan` alike."""
    try:
        words = shlex.split(re.split(r"\s(?:\||&&|;)\s|\s>", text, maxsplit=1)[0])
    except ValueError:
        return None
    full = bool(words) and words[0] == "pulumi"
    words = words[1:] if full else words
    if not words or words[0] not in STACK_COMMANDS:
        return None
    rest = words[1:]
    if not full and any(not w.startswith("-") for w in rest):  # `import x`, `up` in a sentence: not a command
        return None
    flags = {SHORT_FLAGS.get(w, w.split("=", 1)[0]) for w in rest if w.startswith("-")}
    return ("up" if words[0] == "update" else words[0]), frozenset(flags)


def workflow_runs() -> list[tuple[str, frozenset[str]]]:
    """Every `pulumi` command of every `run:` step of the shipped workflows."""
    runs = []
    for path in WORKFLOWS:
        for job in yaml.safe_load(path.read_text())["jobs"].values():
            for step in job.get("steps", []):
                script = step.get("run", "").replace("\\\n", " ")
                for line in script.splitlines():
                    if (found := command(line.strip())) is not None:
                        runs.append(found)
    return runs


def is_run(named: tuple[str, frozenset[str]], runs: list[tuple[str, frozenset[str]]]) -> bool:
    subcommand, flags = named
    return any(subcommand == ran and flags <= ran_flags for ran, ran_flags in runs)


def code_spans(text: str) -> list[str]:
    return [span.strip() for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", text)]


def prose_blocks(markdown: str) -> list[str]:
    """A page's paragraphs, list items and table rows, each on one line; no code blocks, headings or HTML."""
    blocks: list[list[str]] = []
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            blocks.append([])
        elif fenced or not line.strip() or line.startswith(("    ", "#", "<!--")):
            blocks.append([])
        elif re.match(r"\s*(?:[-*]|\d+\.)\s|\s*\|", line) or not blocks:
            blocks.append([line.strip()])
        else:
            blocks[-1].append(line.strip())
    return [" ".join(block) for block in blocks if block]


def sentences(block: str) -> list[str]:
    return re.split(r"(?<=[.!?])\s+(?=[A-Z*`(\[])", block)


def attributed_to_the_pipeline(markdown: str) -> list[tuple[str, str]]:
    """(sentence, command span) for each stack command in a sentence about the pipeline."""
    found = []
    for block in prose_blocks(markdown):
        for sentence in sentences(block):
            if PIPELINE.search(sentence):
                found += [(sentence, span) for span in code_spans(sentence) if command(span) is not None]
    return found


def comments(path: Path) -> str:
    """A workflow's comments (whole-line ones, a script's among them, and trailing ones), as one text."""
    lines = []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            lines.append(stripped.lstrip("#").strip())
        elif match := re.search(r"\s#\s(.*)$", line):
            lines.append(match[1])
        else:
            lines.append("")
    return "\n".join(lines)


def stale_commands(name: str, markdown: str, runs: list[tuple[str, frozenset[str]]]) -> list[str]:
    """The commands a page attributes to the pipeline that no workflow runs, each with its sentence."""
    stale = []
    for sentence, span in attributed_to_the_pipeline(markdown):
        parsed = command(span)
        if parsed is not None and not is_run(parsed, runs) and (name, span) not in NOT_RUN_ON_PURPOSE:
            stale.append(f"{name}: `{span}` in: {sentence}")
    return stale


def test_the_workflows_run_what_their_header_says() -> None:
    """The parse below sees the pipeline's commands (the checks after it would pass anything if it saw none)."""
    runs = workflow_runs()
    assert ("preview", frozenset({"--stack", "--json", "--show-sames"})) in runs
    assert ("refresh", frozenset({"--stack", "--yes", "--skip-preview"})) in runs
    assert ("up", frozenset({"--stack", "--yes", "--skip-preview", "--plan"})) in runs
    assert not is_run(command("pulumi up --refresh"), runs) and not is_run(command("destroy"), runs)
    assert is_run(command("pulumi preview --save-plan"), runs) and is_run(command("up --plan"), runs)


def test_every_command_a_workflow_comment_names_is_one_the_workflows_run() -> None:
    runs, stale = workflow_runs(), []
    for path in WORKFLOWS:
        for span in code_spans(re.sub(r"\s*\n\s*", " ", comments(path))):
            if (parsed := command(span)) is not None and not is_run(parsed, runs):
                stale.append(f"{path.name}: `{span}`")
    assert stale == []


def test_every_command_a_page_attributes_to_the_pipeline_is_one_the_workflows_run() -> None:
    runs = workflow_runs()
    stale = [line for p in PAGES for line in stale_commands(str(p.relative_to(ROOT)), p.read_text(), runs)]
    assert stale == [], "the schedule runs `pulumi refresh`, then `preview --save-plan` and `up --plan`"


def test_the_check_finds_a_command_the_pipeline_does_not_run() -> None:
    page = (
        "Intro.\n\n- A refresh. The shipped pipeline runs\n  `pulumi up --refresh` every 20 minutes; `up` too.\n"
        "- Locally, `pulumi up --refresh` is fine. The pipeline's `pulumi refresh`, then `up --plan`.\n\n"
        "    pulumi destroy  # the pipeline, in a code block\n"
    )
    assert stale_commands("page.md", page, workflow_runs()) == [
        "page.md: `pulumi up --refresh` in: The shipped pipeline runs `pulumi up --refresh` every 20 minutes; `up` too."
    ]


# --- pages the workflows point at ------------------------------------------------------------------------------


def anchors(page: Path) -> set[str]:
    """The ids MkDocs gives the page's headings (toc's slugify, or an attr_list `{#id}`)."""
    ids = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6}\s+(.*?)\s*$", line)):
            text = heading[1]
            if explicit := re.search(r"\{[^}]*#([\w-]+)[^}]*\}\s*$", text):
                ids.add(explicit[1])
            else:
                ids.add(slugify(re.sub(r"[`*]", "", text), "-"))
    return ids


PAGE = r"(?<![\w/.-])(?P<page>(?:[\w.-]+/)*[\w.-]+\.md)(?:#(?P<anchor>[\w-]+))?"


def broken_references(text: str) -> list[str]:
    """A page named by its path in this repository (with a heading's anchor, or a section's title quoted before
    it: `"Title", in docs/x.md`), or what is wrong with it."""
    text = re.sub(r"\s*\n\s*", " ", text)
    broken = [f"names the README without its path: {m[0]!r}" for m in re.finditer(r"\bREADME\b(?!\.md)\S*", text)]
    for match in re.finditer(PAGE, text):
        page, anchor = ROOT / match["page"], match["anchor"]
        if not page.is_file():
            broken.append(f"{match[0]}: no such file in this repository")
        elif anchor and anchor not in anchors(page):
            broken.append(f"{match[0]}: no such heading (it has: {', '.join(sorted(anchors(page)))})")
    for match in re.finditer(rf'"(?P<title>[^"]+)",? in (?:\S+\' )?{PAGE}', text):
        page = ROOT / match["page"]
        if page.is_file() and match["title"] not in page.read_text():
            broken.append(f"{match[0]}: the page has no section {match['title']!r}")
    return broken


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_page_a_workflow_comment_points_at_exists(workflow: Path) -> None:
    assert broken_references(comments(workflow)) == []


def test_the_reference_check_refuses_what_is_gone() -> None:
    assert broken_references('see the README\'s "GitOps: the pipeline"') != []
    assert broken_references("docs/getting-started/gitops.md#no-such-heading") != []
    assert broken_references("docs/no-such-page.md") != []
    gone = '("Who approves a preview", in pulumi-actions-runners\'\ndocs/getting-started/gitops.md)'
    assert broken_references(gone) != []
    assert broken_references('("What it protects, and what it cannot", in docs/getting-started/gitops.md)') == []
    assert broken_references("docs/concepts/pools.md#a-pool-that-refills-itself-runnerpool-refilltrue") == []


# --- tool versions ---------------------------------------------------------------------------------------------

TOOL = r"Node\.js|Node|Python|Go|npm|pulumi|etcd|\.NET|TypeScript"
# A version a page gives: `v1.2.3`, `v20` (not a path's `batch/v1`), or a number after a tool's name.
VERSION = re.compile(rf"(?<![\w/.-])v(?P<v>\d+(?:\.\d+)*)\b|\b(?P<tool>{TOOL})`?\s+(?:is\s+)?v?(?P<n>\d+(?:\.\d+)*)\b")
DOTTED = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)*)")
PIN_FILES = ["constraints.txt", "requirements.txt", "requirements-dev.txt", "provider/pyproject.toml"]
PIN_GLOBS = ["tools/*/go.mod", "tools/*/build.sh", "programs/*/package.json", "programs/gitops/.github/workflows/*.yml"]
# What the project requires without pinning it itself: the `engines` of the @pulumi/pulumi that
# programs/typescript/package.json pins (test_the_node_version_is_what_the_pinned_sdk_asks_for reads it).
NODE_REQUIRED = "22"


def pinned() -> set[str]:
    """Every dotted version the project's pin files name, with the package's own, the runner image's and the
    Python floor."""
    files = [ROOT / name for name in PIN_FILES] + [p for pattern in PIN_GLOBS for p in sorted(ROOT.glob(pattern))]
    versions = {v for path in files for v in DOTTED.findall(path.read_text())}
    python = re.search(r'requires-python = ">=(\S+)"', (ROOT / "provider/pyproject.toml").read_text())
    assert python is not None
    return versions | {__version__, KNOWN_IMAGE.rsplit(":", 1)[1], NODEJS_HOST_VERSION, python[1]}


def unpinned_versions(text: str, pins: set[str]) -> list[str]:
    found = []
    for block in prose_blocks(text):
        for match in VERSION.finditer(block):
            tool, version = match["tool"], match["v"] or match["n"]
            if tool in ("Node.js", "Node"):
                ok = version == NODE_REQUIRED
            else:
                ok = version in pins or (
                    "." not in version and any(p.split(".")[0] == version for p in pins if match["v"])
                )
            if not ok:
                found.append(f"{match[0]!r} in: {block[max(match.start() - 60, 0) : match.end() + 40]}")
    return found


def test_no_page_gives_a_tool_version_the_project_does_not_pin() -> None:
    pins = pinned()
    found = {str(p.relative_to(ROOT)): unpinned_versions(p.read_text(), pins) for p in PAGES}
    assert {page: versions for page, versions in found.items() if versions} == {}


def test_no_page_tells_one_machines_tool_version() -> None:
    machine = re.compile(rf"\bmachine's\s+(?:{TOOL})\b")
    assert [str(p.relative_to(ROOT)) for p in PAGES if machine.search(" ".join(prose_blocks(p.read_text())))] == []


def test_the_version_check_refuses_one_machines_version() -> None:
    pins = pinned()
    assert unpinned_versions("This machine's Node.js is v20.", pins) != []
    assert unpinned_versions("Node.js 20 or later.", pins) != []
    assert unpinned_versions("a pulumi v3.259.0 or later", pins) != []
    assert unpinned_versions("Python 3.10", pins) != []
    assert unpinned_versions("pulumi v3.260.0 or a later v3; Node.js 22; `apps/v1`; Python 3.11", pins) == []


def test_the_node_version_is_what_the_pinned_sdk_asks_for() -> None:
    """@pulumi/pulumi's package.json, from the Go module tools/pulumi-languages builds from (the SDK's source at
    the same release): its `engines` is the Node.js a TypeScript program of this version needs."""
    package = json.loads((ROOT / "programs" / "typescript" / "package.json").read_text())
    assert package["dependencies"]["@pulumi/pulumi"] == NODEJS_HOST_VERSION
    try:
        cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no Go toolchain: the SDK's source is not at hand")
    sdk = Path(cache.strip()) / f"github.com/pulumi/pulumi/sdk/v3@v{NODEJS_HOST_VERSION}/nodejs/package.json"
    if not sdk.is_file():
        pytest.skip(f"{sdk} is not in the Go module cache (tools/pulumi-languages/build.sh fetches it)")
    engines: dict[str, Any] = json.loads(sdk.read_text()).get("engines", {})
    assert engines.get("node") == f">={NODE_REQUIRED}", engines
