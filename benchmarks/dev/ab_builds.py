"""In-process A/B timing of CPU kernel builds (a development check, not a test).

Loads the compiled `_cpu_kernels` module of each build folder (one with
`jax_gridsample/_cpu_kernels*.so`, e.g. a `pip install --target` or a CMake build copied there)
under its own FFI target names, and times their jitted calls alternately, so that the machine's
load drifts for all builds alike:

    python benchmarks/dev/ab_builds.py CASE[:nhwc] fwd|bwd|fwdbwd ITERS ROUNDS BUILD [BUILD ...]

`:nhwc` runs the case channels last. fwd is the forward, bwd the backward with a fixed
cotangent, fwdbwd `jax.grad` of `0.5 * sum(out**2)` (as in cpu.py) through a `jax.custom_vjp` of
the build's targets. Prints, per build, the p10 / median of each round in ms.

    python benchmarks/dev/ab_builds.py cpu.py ITERS ROUNDS BUILD [BUILD ...]

times every case of benchmarks/cpu.py, forward and forward+backward, the builds alternating
call by call, and prints each build's medians (the median over rounds of each round's median)
and their sum, against the first build's: how a compiler or flag change moves the whole table.
"""

from __future__ import annotations

import glob
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

INTERPOLATIONS = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}

# name: (input NC+spatial, output spatial, interpolation, padding), float32
CASES = {
    "bilinear": ((8, 32, 64, 64), (64, 64), 0, 0),
    "reflection": ((8, 32, 64, 64), (64, 64), 0, 2),
    "nearest": ((8, 32, 64, 64), (64, 64), 1, 1),
    "nearest-n2": ((2, 32, 64, 64), (64, 64), 1, 1),
    "nearest-c3": ((8, 3, 64, 64), (64, 64), 1, 1),
    "nearest-c8": ((8, 8, 64, 64), (64, 64), 1, 0),
    "bicubic": ((8, 32, 64, 64), (64, 64), 2, 0),
    "c3": ((1, 3, 512, 512), (512, 512), 0, 1),
    "bilinear-3d": ((2, 16, 32, 32, 32), (32, 32, 32), 0, 0),
    "nearest-3d": ((2, 16, 32, 32, 32), (32, 32, 32), 1, 2),
}


def load_build(index: int, folder: str) -> tuple[str, str]:
    """Registers the build's forward and backward under names of their own; returns them."""
    so = glob.glob(f"{folder}/jax_gridsample/_cpu_kernels*.so")[0]
    spec = importlib.util.spec_from_file_location("_cpu_kernels", so)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    regs = module.registrations()
    fwd_name, bwd_name = f"ab{index}_forward", f"ab{index}_backward"
    # builds before the targets carried their contract version name them without "_v1"
    for name, key in ((fwd_name, "jax_gridsample_forward"), (bwd_name, "jax_gridsample_backward")):
        capsule = regs.get(f"{key}_v1", regs.get(key))
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")
    return fwd_name, bwd_name


def build_fn(names: tuple[str, str], what: str, shape, out_spatial, attrs, arrays):
    fwd_name, bwd_name = names
    if attrs["channels_last"]:
        out_shape = (shape[0],) + out_spatial + (shape[1],)
    else:
        out_shape = (shape[0], shape[1]) + out_spatial

    def fwd(x, g):
        return jax.ffi.ffi_call(fwd_name, jax.ShapeDtypeStruct(out_shape, x.dtype))(x, g, **attrs)

    def bwd(go, x, g):
        results = [jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(g.shape, g.dtype)]
        return tuple(jax.ffi.ffi_call(bwd_name, results)(go, x, g, **attrs, input_mask=True,
                                                         grid_mask=True))

    x, g, ct = arrays
    if what == "fwd":
        return jax.jit(fwd), (x, g)
    if what == "bwd":
        return jax.jit(bwd), (ct, x, g)

    @jax.custom_vjp
    def sample(x, g):
        return fwd(x, g)

    sample.defvjp(lambda x, g: (fwd(x, g), (x, g)), lambda res, go: bwd(go, *res))
    loss = lambda x, g: 0.5 * jnp.sum(jnp.square(sample(x, g)))  # noqa: E731
    return jax.jit(jax.grad(loss, argnums=(0, 1))), (x, g)


def make_arrays(shape, out_spatial, channels_last: bool) -> tuple:
    rng = np.random.default_rng(0)
    k = len(out_spatial)
    arrays = (jnp.asarray(rng.standard_normal(shape).astype(np.float32)),
              jnp.asarray(rng.uniform(-1.1, 1.1, (shape[0],) + out_spatial + (k,))
                          .astype(np.float32)),
              jnp.asarray(rng.standard_normal((shape[0], shape[1]) + out_spatial)
                          .astype(np.float32)))
    if channels_last:
        arrays = (jnp.moveaxis(arrays[0], 1, -1), arrays[1], jnp.moveaxis(arrays[2], 1, -1))
    return arrays


def time_alternately(fns: list, iters: int, rounds: int) -> list[list[tuple[float, float]]]:
    """Per build, the (p10, median) seconds of each round; the builds take turns call by call."""
    for fn, args in fns:
        jax.block_until_ready(fn(*args))
    results = [[] for _ in fns]
    for _ in range(rounds):
        times = [[] for _ in fns]
        for _ in range(iters):
            for i, (fn, args) in enumerate(fns):
                t0 = time.perf_counter()
                jax.block_until_ready(fn(*args))
                times[i].append(time.perf_counter() - t0)
        for i, t in enumerate(times):
            t.sort()
            results[i].append((t[len(t) // 10], t[len(t) // 2]))
    return results


def cpu_suite(iters: int, rounds: int, folders: list[str]) -> None:
    """Every case of benchmarks/cpu.py, fwd and fwdbwd: each build's medians and their sum."""
    path = Path(__file__).resolve().parent.parent / "cpu.py"
    spec = importlib.util.spec_from_file_location("cpu_benchmark", path)
    cpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cpu)
    names = [load_build(i, f) for i, f in enumerate(folders)]
    totals = [0.0 for _ in folders]
    print("| case | pass | " + " | ".join(folders) + " |")
    print("|---|---|" + "---|" * len(folders))
    for label, shape, out_spatial, mode, padding, channels_last in cpu.CASES:
        attrs = dict(interpolation=np.int64(INTERPOLATIONS[mode]),
                     padding=np.int64(PADDINGS[padding]), align_corners=False,
                     channels_last=channels_last)
        arrays = make_arrays(shape, out_spatial, channels_last)
        for what in ("fwd", "fwdbwd"):
            fns = [build_fn(n, what, shape, out_spatial, attrs, arrays) for n in names]
            medians = [statistics.median(m for _, m in res)
                       for res in time_alternately(fns, iters, rounds)]
            totals = [t + m for t, m in zip(totals, medians, strict=True)]
            cells = " | ".join(f"{1e3 * m:.3f}" for m in medians)
            print(f"| {label} | {what} | {cells} |", flush=True)
    cells = " | ".join(f"{1e3 * t:.2f} ({t / totals[0]:.3f})" for t in totals)
    print(f"| sum (/ first build) | | {cells} |")


def main() -> None:
    if sys.argv[1] == "cpu.py":
        cpu_suite(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
        return
    case, _, layout = sys.argv[1].partition(":")
    what, iters, rounds = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    channels_last = layout == "nhwc"
    folders = sys.argv[5:]
    shape, out_spatial, interpolation, padding = CASES[case]
    attrs = dict(interpolation=np.int64(interpolation), padding=np.int64(padding),
                 align_corners=False, channels_last=channels_last)
    arrays = make_arrays(shape, out_spatial, channels_last)
    fns = [build_fn(load_build(i, f), what, shape, out_spatial, attrs, arrays)
           for i, f in enumerate(folders)]
    for folder, res in zip(folders, time_alternately(fns, iters, rounds), strict=True):
        rounds_text = " ".join(f"{1e3 * a:.3f}/{1e3 * m:.3f}" for a, m in res)
        print(f"{folder}: p10/median ms {rounds_text}")


if __name__ == "__main__":
    main()
