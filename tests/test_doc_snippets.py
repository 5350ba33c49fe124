"""The Python blocks of README.md and docs/*.md run as they are written.

Convention: every fenced block opened with ```` ```python ```` in those files runs, in the order
of the file, in one namespace per file: a block may use what an earlier block of the same file
defined (the README's sharding example uses the arrays of its usage example). A block that
cannot run alone (it names a model or data defined elsewhere) is a fragment: the line just above
its fence is the HTML comment ``<!-- fragment: WHY -->`` (not shown when rendered), and it only
has to compile. Fragments are few: each must say why it is one.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FRAGMENT = re.compile(r"<!-- fragment: \S.* -->")
FENCE = re.compile(r"^(?P<indent> *)```(?P<language>\S*)\s*$")


def python_blocks(path: Path) -> list[tuple[int, bool, str]]:
    """(line number of the fence, whether a fragment, code) of each Python block of ``path``."""
    blocks, lines, i = [], path.read_text().splitlines(), 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines))
                   if lines[j].strip() == "```" and lines[j].startswith(opening["indent"]))
        if opening["language"] == "python":
            fragment = i > 0 and bool(FRAGMENT.fullmatch(lines[i - 1].strip()))
            blocks.append((i + 1, fragment, textwrap.dedent("\n".join(lines[i + 1:end]))))
        i = end + 1
    return blocks


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_python_blocks_run(path):
    namespace: dict = {"__name__": f"snippets_of_{path.stem}"}
    for line, fragment, code in python_blocks(path):
        compiled = compile(code, f"{path.name}:{line}", "exec")
        if not fragment:
            exec(compiled, namespace)  # noqa: S102 - the documentation's own examples


def test_the_readme_has_blocks_that_run_and_fragments_that_say_why():
    blocks = python_blocks(ROOT / "README.md")
    assert sum(not fragment for _, fragment, _ in blocks) >= 3  # usage, sharding, export
    text = (ROOT / "README.md").read_text()
    assert text.count("<!-- fragment") == sum(fragment for _, fragment, _ in blocks)
