"""Times every CPU forward strategy (ffi/cpu/strategies.h) on cpu.py's cases (a development
check, not a test): each strategy that can take a case, forced through the
``jax_gridsample_forward_with_strategy`` target, medians of 21 calls under jit. Shows what each
strategy earns against the portable one, and whether the chooser's pick is the fastest.

    python benchmarks/dev/strategies.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import cpu  # noqa: E402  (benchmarks/cpu.py: the cases and their data)

import jax_gridsample  # noqa: E402,F401  (registers the CPU test targets)

STRATEGIES = {"portable": 0, "gather": 1, "tiles": 2, "tiles_via_copy": 3, "auto": -1}
MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}


def forced(shape, out_spatial, mode, padding, channels_last, strategy):
    n, c = shape[:2]
    out_shape = (n,) + out_spatial + (c,) if channels_last else (n, c) + out_spatial
    call = jax.ffi.ffi_call("jax_gridsample_forward_with_strategy",
                            jax.ShapeDtypeStruct(out_shape, jnp.float32))
    return jax.jit(lambda x, g: call(x, g, interpolation=np.int64(MODES[mode]),
                                     padding=np.int64(PADDINGS[padding]), align_corners=False,
                                     channels_last=channels_last, strategy=np.int64(strategy)))


def main() -> None:
    for name, shape, out_spatial, mode, padding, channels_last in cpu.CASES:
        x, grid = cpu.make_data(shape, out_spatial, channels_last)
        x = jnp.moveaxis(jnp.asarray(x), 1, -1) if channels_last else jnp.asarray(x)
        grid = jnp.asarray(grid)
        times = {}
        for label, value in STRATEGIES.items():
            fn = forced(shape, out_spatial, mode, padding, channels_last, value)
            try:
                jax.block_until_ready(fn(x, grid))
            except Exception:  # noqa: BLE001  (refused: the strategy cannot take this case)
                continue
            samples = []
            for _ in range(21):
                t0 = time.perf_counter()
                jax.block_until_ready(fn(x, grid))
                samples.append(time.perf_counter() - t0)
            times[label] = 1e3 * statistics.median(samples)
        print(f"{name:32s} " + "  ".join(f"{k} {v:.3f}" for k, v in times.items()) + " ms")


if __name__ == "__main__":
    main()
