"""The docs' code runs: every ```python block of docs/*.md, docs/envs/*.md and docs/algorithms/*.md, page by page.

The blocks of one page run in order, in one namespace, in a fresh process whose working directory is
an empty temp dir (so pages cannot lean on each other, on the registry state left by other tests, or
on files in the checkout). Tracebacks point at the Markdown file and line.

Tags after the language: ```python no-run shows a block without running it (the tutorial and the
reward-testing page may not use it); a ```text output block right after a python block is what that
block prints, and must match it exactly (trailing whitespace aside).

Every relative link of README.md and the docs (outside code blocks) points at a file the repository
holds, and at one of its headings when it names one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.md")) + sorted(DOCS.glob("envs/*.md")) + sorted(DOCS.glob("algorithms/*.md"))
TUTORIAL = DOCS / "tutorial-new-task.md"
MUST_RUN = [TUTORIAL, DOCS / "testing-rewards.md"]
MAX_ENV_LINES = 60
PAGE_TIMEOUT_S = 600  # a page that hangs fails; a loaded machine (2 cores, several jobs) is only slower

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")


@dataclass(frozen=True)
class Block:
    """One fenced code block: its info string's words, first code line (1-based) and code."""

    lang: str
    tags: tuple[str, ...]
    line: int
    code: str
    output: str | None = None
    """The following ```text output block, if any: what this block must print."""

    @property
    def runs(self) -> bool:
        return self.lang == "python" and "no-run" not in self.tags


def code_blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, in order."""
    blocks, lines, k = [], path.read_text().splitlines(), 0
    while k < len(lines):
        opening = _FENCE.match(lines[k])
        if not opening:
            k += 1
            continue
        fence, words = opening["fence"], opening["info"].split()
        end = k + 1
        while end < len(lines) and not (lines[end].strip().startswith(fence) and not lines[end].strip().strip(fence[0])):
            end += 1
        if end == len(lines):
            raise ValueError(f"{path}:{k + 1}: unclosed code fence")
        body = textwrap.dedent("\n".join(lines[k + 1 : end]))
        block = Block(words[0] if words else "", tuple(words[1:]), k + 2, body)
        if "output" in block.tags and blocks and blocks[-1].runs:
            blocks[-1] = replace(blocks[-1], output=body)
        blocks.append(block)
        k = end + 1
    return blocks


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


# Run in a child process: exec each block compiled against the Markdown file, padded so that its
# line numbers are the page's; record what each block prints; stop at the first failing block.
_RUNNER = """
import contextlib, io, json, sys, traceback
page, results = sys.argv[1], sys.argv[2]
namespace, printed = {"__name__": "__docs__"}, []
for line, code in json.load(sys.stdin):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile("\\n" * (line - 1) + code, page, "exec"), namespace)
    except BaseException:
        sys.stdout.write(out.getvalue())
        traceback.print_exc()
        print(f"\\nthe block at {page}:{line} failed", file=sys.stderr)
        sys.exit(1)
    sys.stdout.write(out.getvalue())
    printed.append(out.getvalue())
with open(results, "w") as f:
    json.dump(printed, f)
"""


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_page_code_runs(page: Path, tmp_path: Path):
    blocks = [b for b in code_blocks(page) if b.runs]
    if not blocks:
        pytest.skip(f"{page.name} has no python blocks")
    workdir, results = tmp_path / "cwd", tmp_path / "printed.json"
    workdir.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MPLBACKEND": "Agg"}
    env["PYTHONPATH"] = os.pathsep.join([str(DOCS.parent), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(page), str(results)],
        input=json.dumps([(b.line, b.code) for b in blocks]),
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=PAGE_TIMEOUT_S,
    )
    assert proc.returncode == 0, f"{page.name}: a code block failed\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    printed = json.loads(results.read_text())
    for block, out in zip(blocks, printed):
        if block.output is not None and _normalise(out) != _normalise(block.output):
            pytest.fail(f"{page}:{block.line}: the block prints\n{out}\nbut the page shows\n{block.output}")


def test_docs_exist():
    names = {str(p.relative_to(DOCS)) for p in PAGES}
    assert {"index.md", "contract.md", "tutorial-new-task.md", "testing-rewards.md", "envs/math.md"} <= names


@pytest.mark.parametrize("page", MUST_RUN, ids=lambda p: p.name)
def test_tutorial_and_reward_pages_run_everything(page: Path):
    blocks = [b for b in code_blocks(page) if b.lang == "python"]
    assert blocks, f"{page.name} has no python blocks"
    assert all(b.runs for b in blocks), f"{page.name} may not use no-run blocks: its code is the proof"


def test_tutorial_env_fits_in_a_screenful():
    env_blocks = [b for b in code_blocks(TUTORIAL) if b.runs and re.search(r"^class \w+\(FlexEnv\)", b.code, re.M)]
    assert len(env_blocks) == 1, "the tutorial defines its env in exactly one python block"
    n_lines = len(env_blocks[0].code.strip().splitlines())
    assert n_lines < MAX_ENV_LINES, f"the tutorial's env is {n_lines} lines; the promise is under {MAX_ENV_LINES}"


def test_tutorial_runs_check_env_and_registers():
    code = "\n".join(b.code for b in code_blocks(TUTORIAL) if b.runs)
    assert re.search(r"\bcheck_env\(", code), "the tutorial must run marft_envs.testing.check_env on its env"
    assert re.search(r"\bregister\(", code), "the tutorial must register its env"
    assert "ready_agents()" in code, "the tutorial must play an episode through the layered interface"


def test_block_parser(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text(
        "x\n```python\na = 1\n```\n\n````python no-run\n```\nb\n````\n```text\nhi\n```\n```python\nprint(1)\n```\n```text output\n1\n```\n"
    )
    blocks = code_blocks(page)
    assert [(b.lang, b.tags, b.line, b.runs, b.output) for b in blocks] == [
        ("python", (), 3, True, None),
        ("python", ("no-run",), 7, False, None),
        ("text", (), 11, False, None),
        ("python", (), 14, True, "1"),
        ("text", ("output",), 17, False, None),
    ]
    assert blocks[1].code == "```\nb"


# -- links -------------------------------------------------------------------------------------------

LINKED_PAGES = [DOCS.parent / "README.md", *sorted(DOCS.rglob("*.md"))]
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)


def _prose(path: Path) -> str:
    """The page without its fenced code blocks (a link inside a code sample is an example, not a link)."""
    lines, keep, fence = path.read_text().splitlines(), [], None
    for line in lines:
        opening = _FENCE.match(line)
        if fence is None and opening:
            fence = opening["fence"]
        elif fence is not None and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            fence = None
        elif fence is None:
            keep.append(line)
    return "\n".join(keep)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]|<[^>]+>", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings (a repeated heading gets ``-1``, ``-2``, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _prose(path), re.M):
        base = slug(heading)
        out.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return out


def broken_links(page: Path, root: Path = DOCS.parent) -> list[str]:
    """``page: target`` for every relative link whose file (or heading anchor) is not in the repository."""
    text = _prose(page)
    broken = []
    for target in [*_LINK.findall(text), *_REF_LINK.findall(text)]:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            broken.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return broken


def test_link_checker_on_a_hand_made_page(tmp_path: Path):
    (tmp_path / "there.md").write_text("# A title\n\n## Tree sampling (`grpo.grouping=tree`)\n\n## Same\n\n## Same\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#tree-sampling-grpogroupingtree) [ok](there.md#same-1) [web](https://x.org/a.md)\n"
        "[gone](missing.md) ![img](pics/none.png) [bad](there.md#nope) [self](#a-heading)\n\n"
        "```python\n[example](not/checked.md)\n```\n\n# A heading\n\n[ref]: also-missing.md\n"
    )
    found = [line.split(": ", 1)[1] for line in broken_links(page, tmp_path)]
    assert found == [
        "missing.md (no such file)",
        "pics/none.png (no such file)",
        "there.md#nope (no such heading)",
        "also-missing.md (no such file)",
    ]


@pytest.mark.parametrize("page", LINKED_PAGES, ids=[str(p.relative_to(DOCS.parent)) for p in LINKED_PAGES])
def test_every_relative_link_points_at_a_file_the_repository_holds(page: Path):
    broken = broken_links(page)
    assert not broken, "links to files or headings the repository does not hold:\n" + "\n".join(broken)
