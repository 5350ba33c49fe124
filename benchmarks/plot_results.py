"""Plot the current CPU table of benchmarks/RESULTS.md: our times against PyTorch's, as SVG.

    python benchmarks/plot_results.py                 # writes docs/_static/performance.svg
    python benchmarks/plot_results.py --out plot.svg

Reads the Markdown table under "## Current table" (one row per case and pass, columns "ours ms"
and "torch ms" among others) and draws two panels, the forward and forward+backward, with a bar
for each library per case, and ours/torch beside each pair. The SVG is reproducible: its ids
are salted with a fixed string and it carries no date, so the same table and matplotlib give the
same bytes. Its description holds a digest of the table's rows, which tests/test_doc_snippets.py
compares with the current RESULTS.md: change the table, and the test asks for this script to be
run again.
"""

from __future__ import annotations

import argparse
import hashlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
DEFAULT_OUT = ROOT / "docs" / "_static" / "performance.svg"
SECTION = "## Current table"
PASSES = ("fwd", "fwd+bwd")


def read_table(text: str, section: str = SECTION) -> list[dict[str, str]]:
    """The rows of the first Markdown table after the heading ``section``, as column -> cell."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == section)
    except StopIteration:
        raise ValueError(f"no {section!r} heading") from None
    rows: list[list[str]] = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break  # the table ended
    if len(rows) < 3 or not all(re.fullmatch(r":?-+:?", cell) for cell in rows[1]):
        raise ValueError(f"no Markdown table under {section!r}")
    header = rows[0]
    for row in rows[2:]:
        if len(row) != len(header):
            raise ValueError(f"a row of {len(row)} cells in a table of {len(header)}: {row}")
    return [dict(zip(header, row, strict=True)) for row in rows[2:]]


def timings(rows: list[dict[str, str]]) -> list[tuple[str, str, float, float, str]]:
    """(case, pass, ours ms, torch ms, ours/torch as written) of each row, in the table's
    order."""
    out = []
    for row in rows:
        if row["pass"] not in PASSES:
            raise ValueError(f"unknown pass {row['pass']!r} (expected one of {PASSES})")
        out.append((row["case"], row["pass"], float(row["ours ms"]), float(row["torch ms"]),
                    row["ours/torch"]))
    return out


def digest(entries) -> str:
    """A short digest of the plotted values, written into the SVG to tell whether it is current."""
    text = "\n".join("|".join(map(repr, entry)) for entry in entries)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def figure(entries):
    """The figure: a panel per pass, a pair of horizontal bars per case. Each bar's gid is
    ``ours-<row>`` or ``torch-<row>``, ``<row>`` the table row's index, so that the SVG can be
    checked bar by bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ours": "#1f77b4", "torch": "#ee854a"}
    fig, axes = plt.subplots(1, len(PASSES), figsize=(11, 5.2), sharey=True)
    cases = list(dict.fromkeys(case for case, *_ in entries))
    height = 0.38
    for ax, pass_ in zip(axes, PASSES, strict=True):
        rows = [(i, e) for i, e in enumerate(entries) if e[1] == pass_]
        ys = [cases.index(case) for _, (case, *_) in rows]
        for name, offset, column in (("ours", -height / 2, 2), ("torch", height / 2, 3)):
            bars = ax.barh([y + offset for y in ys], [e[column] for _, e in rows], height,
                           color=colors[name], label="jax_gridsample" if name == "ours"
                           else "PyTorch")
            for bar, (index, _) in zip(bars, rows, strict=True):
                bar.set_gid(f"{name}-{index}")
        longest = max((e[3] for _, e in rows), default=1.0)
        for y, (_, (_, _, ours, torch, ratio)) in zip(ys, rows, strict=True):
            ax.text(max(ours, torch) + 0.02 * longest, y, ratio, va="center", fontsize=8,
                    color="#333333")
        ax.set_xlim(0, longest * 1.18)
        ax.set_title("forward" if pass_ == "fwd" else "forward + backward")
        ax.set_xlabel("ms (lower is better)")
        ax.grid(axis="x", color="#dddddd")
        ax.set_axisbelow(True)
    axes[0].set_yticks(range(len(cases)), cases)
    axes[0].invert_yaxis()
    fig.suptitle("CPU, float32: jax_gridsample's native kernels against PyTorch "
                 "(ours/torch beside each pair)", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.legend(*axes[0].get_legend_handles_labels(), loc="upper center", ncol=2,
               frameon=False, bbox_to_anchor=(0.5, 0.955))
    return fig


def write_svg(entries, out: Path) -> None:
    """Write the figure of ``entries`` to ``out`` reproducibly (no date, fixed id salt)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"svg.hashsalt": "jax_gridsample", "svg.fonttype": "none"}):
        fig = figure(entries)
        fig.savefig(out, format="svg", metadata={
            "Date": None,
            "Title": "jax_gridsample against PyTorch on the CPU",
            "Description": (f"benchmarks/plot_results.py from benchmarks/RESULTS.md, "
                            f"table digest {digest(entries)}"),
        })
        plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    entries = timings(read_table(args.results.read_text()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_svg(entries, args.out)
    print(f"{args.out}: {len(entries)} rows, table digest {digest(entries)}")


if __name__ == "__main__":
    main()
