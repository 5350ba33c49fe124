"""CPU benchmark: our native kernel vs our jnp reference vs torch.nn.functional.grid_sample.

Not a test. Prints a markdown table: per case, forward and forward+backward medians (ms) of our
native kernel, our reference and PyTorch, the ratio native/torch, and the fraction of the
memory-bandwidth floor the native kernel reaches (bytes that must move / measured copy bandwidth).

Each library is timed on all cases in one stretch (so that neither runs right after the other's
worker threads, which keep spinning for a while), twice, in the order ours, torch, torch, ours;
an entry is the lower of its two medians (the load of a shared machine drifts). Each stretch
starts with one untimed call of every case of its library.

    python benchmarks/cpu.py [--repeats 15] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch

try:
    import jax_gridsample
    from jax_gridsample import _native
except ImportError as exc:  # pragma: no cover - the benchmark needs the package
    raise SystemExit(f"jax_gridsample is not importable: {exc}") from exc

# (name, input NC+spatial, output spatial, mode, padding, channels_last)
CASES = [
    ("2d bilinear zeros", (8, 32, 64, 64), (64, 64), "bilinear", "zeros", False),
    ("2d bilinear reflection", (8, 32, 64, 64), (64, 64), "bilinear", "reflection", False),
    ("2d nearest border", (8, 32, 64, 64), (64, 64), "nearest", "border", False),
    ("2d bicubic zeros", (8, 32, 64, 64), (64, 64), "bicubic", "zeros", False),
    ("2d 512x512 C3 bilinear border", (1, 3, 512, 512), (512, 512), "bilinear", "border", False),
    ("3d bilinear zeros", (2, 16, 32, 32, 32), (32, 32, 32), "bilinear", "zeros", False),
    ("3d nearest reflection", (2, 16, 32, 32, 32), (32, 32, 32), "nearest", "reflection", False),
    ("2d bilinear zeros NHWC", (8, 32, 64, 64), (64, 64), "bilinear", "zeros", True),
    ("2d bicubic zeros NHWC", (8, 32, 64, 64), (64, 64), "bicubic", "zeros", True),
    ("3d bilinear zeros NDHWC", (2, 16, 32, 32, 32), (32, 32, 32), "bilinear", "zeros", True),
]


def median_ms(fn, repeats: int) -> float:
    fn()  # warm up / compile
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def copy_bandwidth() -> float:
    """Bytes per second of a large numpy copy (read + write counted)."""
    src = np.ones(64 * 2**20, np.float32)
    dst = np.empty_like(src)
    best = min(
        (lambda: (t := time.perf_counter(), np.copyto(dst, src), time.perf_counter() - t)[-1])()
        for _ in range(5)
    )
    return 2 * src.nbytes / best


def make_data(shape, out_spatial, channels_last, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    k = len(out_spatial)
    grid = rng.uniform(-1.1, 1.1, (shape[0],) + out_spatial + (k,)).astype(np.float32)
    return x, grid


def ours(x, grid, mode, padding, channels_last, implementation):
    layout = None
    xj = jnp.asarray(x)
    if channels_last:
        xj = jnp.moveaxis(xj, 1, -1)
        layout = "NHWC" if grid.ndim == 4 else "NDHWC"
    gj = jnp.asarray(grid)
    kw = dict(mode=mode, padding_mode=padding, align_corners=False,
              implementation=implementation, layout=layout)
    fwd = jax.jit(lambda a, g: jax_gridsample.grid_sample(a, g, **kw))
    # 0.5 * sum(out^2): its cotangent is the output itself, so the forward cannot be pruned.
    loss = jax.jit(jax.grad(
        lambda a, g: 0.5 * jnp.sum(jnp.square(jax_gridsample.grid_sample(a, g, **kw))),
        argnums=(0, 1)))
    return (lambda: jax.block_until_ready(fwd(xj, gj)),
            lambda: jax.block_until_ready(loss(xj, gj)))


def torch_fns(x, grid, mode, padding, channels_last):
    tx = torch.tensor(x)
    if channels_last:
        tx = tx.contiguous(memory_format=torch.channels_last if x.ndim == 4
                           else torch.channels_last_3d)
    tg = torch.tensor(grid)

    def fwd():
        with torch.no_grad():
            return torch.nn.functional.grid_sample(tx, tg, mode=mode, padding_mode=padding,
                                                   align_corners=False)

    def fwd_bwd():
        a = tx.detach().requires_grad_(True)
        g = tg.detach().requires_grad_(True)
        torch.nn.functional.grid_sample(a, g, mode=mode, padding_mode=padding,
                                        align_corners=False).square().sum().mul(0.5).backward()
        return a.grad, g.grad

    return fwd, fwd_bwd


def floor_bytes(shape, out_spatial, backward: bool) -> int:
    n, c = shape[:2]
    k = len(out_spatial)
    points = int(np.prod(out_spatial))
    inp, grid, out = int(np.prod(shape)) * 4, n * points * k * 4, n * c * points * 4
    fwd = inp + grid + out
    if not backward:
        return fwd
    # + grad_output read, input and grid read again, grad_input and grad_grid written
    return fwd + out + inp + grid + inp + grid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="skip the jnp reference")
    args = parser.parse_args()

    status = _native.native_status().get("cpu")
    if status != "available":
        raise SystemExit(f"native CPU kernel not available: {status}")
    bw = copy_bandwidth()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average {load:.1f}; jax {jax.__version__}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), "
          f"copy bandwidth {bw / 1e9:.1f} GB/s, float32, align_corners=False, "
          f"lower of two medians of {args.repeats}\n")
    runs = {"ours": [], "torch": [], "reference": []}
    for _name, shape, out_spatial, mode, padding, cl in CASES:
        x, grid = make_data(shape, out_spatial, cl)
        runs["ours"].append(ours(x, grid, mode, padding, cl, "native"))
        runs["torch"].append(torch_fns(x, grid, mode, padding, cl))
        runs["reference"].append(None if args.quick
                                 else ours(x, grid, mode, padding, cl, "reference"))

    def time_all(which: str, repeats: int) -> list[tuple[float, float]]:
        # One untimed pass over the library's cases first: otherwise the first case timed in a
        # stretch runs slower than it does later in the stretch, whichever case is first.
        for fns in runs[which]:
            for fn in fns or ():
                fn()
        return [(float("nan"), float("nan")) if fns is None
                else tuple(median_ms(fn, repeats) for fn in fns) for fns in runs[which]]

    first = {"ours": time_all("ours", args.repeats), "torch": time_all("torch", args.repeats)}
    second = {"torch": time_all("torch", args.repeats), "ours": time_all("ours", args.repeats)}
    best = {k: [tuple(min(a, b) for a, b in zip(x, y, strict=True))
                for x, y in zip(first[k], second[k], strict=True)] for k in first}
    best["reference"] = time_all("reference", max(3, args.repeats // 3))

    header = ("| case | pass | ours ms | reference ms | torch ms | ours/torch | "
              "floor fraction |")
    print(header)
    print("|" + "---|" * 7)
    for i, (name, shape, out_spatial, *_rest) in enumerate(CASES):
        for j, label in enumerate(("fwd", "fwd+bwd")):
            t_ours, t_torch, t_ref = (best[k][i][j] for k in ("ours", "torch", "reference"))
            floor_ms = 1e3 * floor_bytes(shape, out_spatial, j == 1) / bw
            print(f"| {name} | {label} | {t_ours:.2f} | {t_ref:.2f} | {t_torch:.2f} | "
                  f"{t_ours / t_torch:.2f} | {floor_ms / t_ours:.2f} |", flush=True)


if __name__ == "__main__":
    main()
