"""Channels-first vs channels-last timing of the native CPU kernels (a benchmark, not a test).

Prints a markdown table: per case, the forward and forward+backward (`jax.grad` of
`0.5 * sum(out**2)`, as in cpu.py) medians in ms with `layout=None` (NCHW / NCDHW) and with
channels last (NHWC / NDHWC, the input moved there before timing), and their ratio. Each entry
is the lower of two medians, taken in the order first, last, last, first, so that load drift
hits both layouts alike. float32, zeros padding, align_corners=False.

    python benchmarks/layouts.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import jax_gridsample

# (input NC+spatial, output spatial, mode)
CASES = [((8, c, 64, 64), (64, 64), mode) for c in (8, 32)
         for mode in ("bilinear", "nearest", "bicubic")]
CASES += [((2, 16, 32, 32, 32), (32, 32, 32), mode) for mode in ("bilinear", "nearest")]


def make_fns(shape, out_spatial, mode, channels_last):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(shape).astype(np.float32))
    k = len(out_spatial)
    grid = jnp.asarray(rng.uniform(-1.1, 1.1, (shape[0],) + out_spatial + (k,))
                       .astype(np.float32))
    layout = None
    if channels_last:
        x = jnp.moveaxis(x, 1, -1)
        layout = "NHWC" if k == 2 else "NDHWC"
    kw = dict(mode=mode, padding_mode="zeros", align_corners=False, layout=layout,
              implementation="native")
    fwd = jax.jit(lambda a, g: jax_gridsample.grid_sample(a, g, **kw))
    loss = jax.jit(jax.grad(
        lambda a, g: 0.5 * jnp.sum(jnp.square(jax_gridsample.grid_sample(a, g, **kw))),
        argnums=(0, 1)))
    return (lambda: jax.block_until_ready(fwd(x, grid)),
            lambda: jax.block_until_ready(loss(x, grid)))


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print("| case | pass | channels first ms | channels last ms | last / first |")
    print("|---|---|---|---|---|")
    for shape, out_spatial, mode in CASES:
        first = make_fns(shape, out_spatial, mode, False)
        last = make_fns(shape, out_spatial, mode, True)
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
