"""CPU benchmark: "constant" against "zeros" and "wrap" against "border", native kernels.

Not a test. "constant" is "zeros" plus a fill term the kernels add (jax_gridsample/_fill.py),
"wrap" the kernels' own per-axis math; neither copies the input. Beside the issue's two cases of
uniform grids, a rotated panorama, ("wrap", "border") against "border": where the seam is a
thin line, as in use, rather than about 3% of the points per axis; and the first case's shape
on grids with 0, 1 and 4 seam points per output row and no other edge: what a seam point costs.
This measures what each costs beside the mode it extends, on the same data: forward, and
forward+backward (gradients with respect to the input and the grid, and the fill value for
"constant", whose fill is a per-channel array passed to the jitted function, as a traced
argument).

Rounds alternate the modes of a pair (A B A B ...), each round timing ``--calls`` calls of a mode
after one untimed call, so that a shared machine's drift falls on both; a mode's time is the
median over rounds of its per-round median. Prints a markdown table with the ratio
(constant / zeros, wrap / border).

    python benchmarks/padding_modes.py [--rounds 15] [--calls 21]
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import jax_gridsample


def uniform_grid(rng, shape, out_spatial):
    """Coordinates uniform in [-1.1, 1.1]: many points near the edges and, under "wrap", at
    the seam (about 3% per axis of 64 pixels)."""
    k = len(out_spatial)
    return rng.uniform(-1.1, 1.1, (shape[0],) + out_spatial + (k,))


def panorama_grid(rng, shape, out_spatial):
    """An equirectangular panorama turned by 0.4 rad about a horizontal axis and 0.3 rad in
    longitude (as examples/panorama_rotation.py does): the seam is one point per row or so."""
    del rng
    h, w = out_spatial
    lon = (np.arange(w) + 0.5) / w * 2 * np.pi - np.pi
    lat = (np.arange(h) + 0.5) / h * np.pi - np.pi / 2
    lon, lat = np.meshgrid(lon, lat)
    v = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1)
    a = 0.4
    v = v @ np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]]).T
    x = (np.arctan2(v[..., 1], v[..., 0]) + 0.3) / np.pi
    y = np.arcsin(np.clip(v[..., 2], -1, 1)) / (np.pi / 2)
    grid = np.stack([(x + 1) % 2 - 1, y], -1)
    return np.broadcast_to(grid, (shape[0],) + grid.shape)


def seam_grid(per_row: int):
    """Coordinates uniform in [-0.95, 0.95], whose taps on a 64-pixel axis neither leave it nor
    cross a seam, but for `per_row` evenly spaced points of each output row put on the x seam
    (pixel -0.375: taps 63 and 0): what seam points cost "wrap", apart from the edges."""
    def make(rng, shape, out_spatial):
        grid = rng.uniform(-0.95, 0.95, (shape[0],) + out_spatial + (2,))
        if per_row:
            grid[..., ::out_spatial[-1] // per_row, 0] = -1 + 1 / 256
        return grid
    return make


# (name, input NC+spatial, output spatial, mode, grid, pairs of padding modes)
CASES = [
    ("2d bilinear (8, 32, 64, 64) -> 64x64", (8, 32, 64, 64), (64, 64), "bilinear",
     uniform_grid, [("constant", "zeros"), ("wrap", "border")]),
    ("3d trilinear (2, 16, 32^3) -> 32^3", (2, 16, 32, 32, 32), (32, 32, 32), "bilinear",
     uniform_grid, [("constant", "zeros"), ("wrap", "border")]),
    ("2d panorama (2, 16, 256, 512) rotated", (2, 16, 256, 512), (256, 512), "bilinear",
     panorama_grid, [(("wrap", "border"), "border")]),
] + [
    (f"2d bilinear (8, 32, 64, 64) -> 64x64, {k} seam point(s) per row", (8, 32, 64, 64),
     (64, 64), "bilinear", seam_grid(k), [("wrap", "border")]) for k in (0, 1, 4)
]


def make_functions(mode: str, padding: str, channels: int):
    """Jitted forward and forward+backward of one padding mode."""
    def sample(x, grid, fill):
        kw = dict(mode=mode, padding_mode=padding, align_corners=False,
                  implementation="native")
        if padding == "constant":
            kw["fill_value"] = fill
        return jax_gridsample.grid_sample(x, grid, **kw)

    def loss(x, grid, fill):  # its cotangent is the output itself: nothing can be pruned
        return 0.5 * jnp.sum(jnp.square(sample(x, grid, fill)))

    argnums = (0, 1, 2) if padding == "constant" else (0, 1)
    return jax.jit(sample), jax.jit(jax.grad(loss, argnums=argnums))


def round_ms(fn, args, calls: int) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=21)
    args = parser.parse_args()
    print(f"jax {jax.__version__}, {jax.device_count()} CPU device(s), native kernels "
          f"{jax_gridsample.native_status()['cpu']}; {args.rounds} alternating rounds of "
          f"{args.calls} calls")
    print()
    print("| case | pair | fwd ms | baseline fwd ms | fwd ratio | fwd+bwd ms | baseline fwd+bwd ms "
          "| fwd+bwd ratio |")
    print("|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name, shape, out_spatial, mode, make_grid, pairs in CASES:
        x = jnp.asarray(rng.standard_normal(shape), jnp.float32)
        grid = jnp.asarray(make_grid(rng, shape, out_spatial), jnp.float32)
        fill = jnp.asarray(rng.standard_normal(shape[1]), jnp.float32)
        for padding, baseline in pairs:
            fns = {p: make_functions(mode, p, shape[1]) for p in (padding, baseline)}
            rounds = {(p, d): [] for p in fns for d in (0, 1)}
            for _ in range(args.rounds):
                for direction in (0, 1):
                    for p in (padding, baseline):
                        rounds[p, direction].append(
                            round_ms(fns[p][direction], (x, grid, fill), args.calls))
            t = {key: statistics.median(v) for key, v in rounds.items()}
            label = padding if isinstance(padding, str) else "+".join(padding)
            print(f"| {name} | {label} / {baseline} | {t[padding, 0]:.3f} | "
                  f"{t[baseline, 0]:.3f} | {t[padding, 0] / t[baseline, 0]:.3f} | "
                  f"{t[padding, 1]:.3f} | {t[baseline, 1]:.3f} | "
                  f"{t[padding, 1] / t[baseline, 1]:.3f} |", flush=True)


if __name__ == "__main__":
    main()
