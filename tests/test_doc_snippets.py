"""The Python blocks of README.md and docs/*.md run as they are written.

Convention: every fenced block opened with ```` ```python ```` in those files runs, in the order
of the file, in one namespace per file: a block may use what an earlier block of the same file
defined (the README's sharding example uses the arrays of its usage example). A block that
cannot run alone (it names a model or data defined elsewhere) is a fragment: the line just above
its fence is the HTML comment ``<!-- fragment: WHY -->`` (not shown when rendered), and it only
has to compile. Fragments are few: each must say why it is one.

Also here, for the site in docs/ (Sphinx): the examples in the docstrings of every public name
run (doctest) and every public name has one and is on the API page; and the performance plot,
docs/_static/performance.svg, is that of the current table of benchmarks/RESULTS.md (redraw it
with ``python benchmarks/plot_results.py``).
"""

from __future__ import annotations

import doctest
import importlib.util
import io
import re
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_gridsample

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FRAGMENT = re.compile(r"<!-- fragment: \S.* -->")
FENCE = re.compile(r"^(?P<indent> *)```(?P<language>\S*)(\s.*)?$")  # myst: ```{include} FILE


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
    assert sum(not fragment for _, fragment, _ in blocks) >= 1  # its example
    for path in FILES:
        text = path.read_text()
        assert text.count("<!-- fragment") == sum(fragment for _, fragment, _ in
                                                  python_blocks(path)), path.name


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150


@pytest.mark.parametrize("name", jax_gridsample.__all__)
def test_docstring_examples_run(name):
    """Each public name's docstring has examples (the API page shows them), and they run: in a
    namespace holding jax, jnp, np, jax_gridsample and the public names, as the API page says."""
    namespace = {"jax": jax, "jnp": jnp, "np": np, "jax_gridsample": jax_gridsample,
                 **{n: getattr(jax_gridsample, n) for n in jax_gridsample.__all__}}
    tests = doctest.DocTestFinder(recurse=False).find(getattr(jax_gridsample, name), name,
                                                      globs=namespace)
    assert tests and tests[0].examples, f"{name}'s docstring has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue()


def test_the_api_page_documents_every_public_name():
    text = (ROOT / "docs" / "api.md").read_text()
    documented = re.findall(r"^\.\. auto(?:function|class):: (\w+)", text, re.M)
    assert sorted(documented) == sorted(jax_gridsample.__all__)


def _plot_script():
    spec = importlib.util.spec_from_file_location("plot_results",
                                                  ROOT / "benchmarks" / "plot_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_performance_plot_is_that_of_the_current_table():
    plot = _plot_script()
    entries = plot.timings(plot.read_table(plot.RESULTS.read_text()))
    assert len(entries) >= 10 and {e[1] for e in entries} == set(plot.PASSES)
    svg = plot.DEFAULT_OUT.read_text()
    assert f"table digest {plot.digest(entries)}" in svg, (
        "docs/_static/performance.svg is not the plot of benchmarks/RESULTS.md's current table: "
        "run python benchmarks/plot_results.py")
    for library in ("ours", "torch"):  # one bar per row and library, in the checked-in SVG
        assert sorted(map(int, re.findall(rf'id="{library}-(\d+)"', svg))) == \
            list(range(len(entries)))


def test_the_plot_script_draws_a_bar_per_row_and_library():
    plot = _plot_script()
    entries = plot.timings(plot.read_table(plot.RESULTS.read_text()))
    figure = plot.figure(entries)
    bars = [patch for ax in figure.axes for patch in ax.patches]
    widths = {patch.get_gid(): patch.get_width() for patch in bars}
    import matplotlib.pyplot as plt

    plt.close(figure)
    assert len(bars) == len(widths) == 2 * len(entries)
    for index, (_, _, ours, torch, _) in enumerate(entries):
        assert widths[f"ours-{index}"] == ours and widths[f"torch-{index}"] == torch
    with pytest.raises(ValueError, match="no Markdown table"):
        plot.read_table("## Current table\n\nno table here\n")
