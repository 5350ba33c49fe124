"""Channels-first vs channels-last timing of the native CPU kernels (a benchmark, not a test).

Prints a markdown table: per case, the forward and forward+backward (`jax.grad` of
`0.5 * sum(out**2)`; cpu.py's data and functions) medians in ms with `layout=None` (NCHW /
NCDHW) and with channels last (NHWC / NDHWC, the input moved there before timing), and their
ratio. Each entry is the lower of two medians, taken in the order first, last, last, first, so
that load drift hits both layouts alike. float32, zeros padding, align_corners=False.

    python benchmarks/layouts.py [--repeats 30]
"""

from __future__ import annotations

import argparse

from cpu import make_data, median_ms, ours

# (input NC+spatial, output spatial, mode)
CASES = [((8, c, 64, 64), (64, 64), mode) for c in (8, 32)
         for mode in ("bilinear", "nearest", "bicubic")]
CASES += [((2, 16, 32, 32, 32), (32, 32, 32), mode) for mode in ("bilinear", "nearest")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print("| case | pass | channels first ms | channels last ms | last / first |")
    print("|---|---|---|---|---|")
    for shape, out_spatial, mode in CASES:
        x, grid = make_data(shape, out_spatial, False)
        first = ours(x, grid, mode, "zeros", False, "native")
        last = ours(x, grid, mode, "zeros", True, "native")
        for i, name in enumerate(("fwd", "fwd+bwd")):
            a1 = median_ms(first[i], args.repeats)
            b1 = median_ms(last[i], args.repeats)
            b2 = median_ms(last[i], args.repeats)
            a2 = median_ms(first[i], args.repeats)
            a, b = min(a1, a2), min(b1, b2)
            print(f"| {len(out_spatial)}d {mode} {shape} | {name} | {a:.3f} | {b:.3f} | "
                  f"{b / a:.2f} |", flush=True)


if __name__ == "__main__":
    main()
