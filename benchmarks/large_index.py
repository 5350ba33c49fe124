"""Correctness beyond 2^31 elements: 64-bit indexing in the native CPU kernel.

Samples an input of shape (1, 1, 46341, 46341) float16 (2.15e9 elements, ~4.3 GB; peak RSS
about 13 GB) at a few points near its far end and at its corners, and compares with values
computed directly in numpy. Not a test (too large for CI).

    python benchmarks/large_index.py
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from jax_gridsample import _native

S = 46341  # S * S = 2_147_488_281 > 2**31


def main() -> None:
    if not _native.cpu_available():
        raise SystemExit(f"native CPU kernel not available: {_native.native_status()}")
    print(f"input (1, 1, {S}, {S}) float16: {S * S:,} elements (2^31 = {2**31:,})")
    # A cheap, position-dependent pattern exactly representable in float16:
    # value(y, x) = ((y * 7 + x * 3) % 1024) / 4.
    t0 = time.perf_counter()
    x = np.empty((S, S), np.float16)
    cols = np.arange(S, dtype=np.int64) * 3
    for y in range(S):
        x[y] = ((y * 7 + cols) % 1024) / 4.0
    print(f"filled in {time.perf_counter() - t0:.1f} s")

    # Pixel coordinates to sample (align_corners=True: u = (c + 1) / 2 * (S - 1)).
    rng = np.random.default_rng(0)
    pix = np.array([
        [S - 1, S - 1], [S - 1.25, S - 1.5], [S - 2.5, S - 1], [0.0, S - 1], [S - 1, 0.0],
        [0.0, 0.0], [S - 1.75, S - 1.25],
    ] + [[S - 1 - rng.uniform(0, 40), S - 1 - rng.uniform(0, 40)] for _ in range(9)])
    coords = pix / (S - 1) * 2 - 1  # normalized, float64
    xj = jnp.asarray(x.reshape(1, 1, S, S))
    del x
    # The grid shares the input's dtype (float16): its values near 1.0 are 2^-11 apart, ~22
    # pixels here, so recompute the pixel positions the kernel sees, in float32 as it does.
    grid16 = coords.astype(np.float16)
    u = (grid16.astype(np.float32) + np.float32(1)) / np.float32(2) * np.float32(S - 1)
    for mode, name in ((1, "nearest"), (0, "bilinear")):
        out = jax.ffi.ffi_call(
            _native.FORWARD_TARGET, jax.ShapeDtypeStruct((1, 1, 1, len(pix)), jnp.float16)
        )(xj, jnp.asarray(grid16.reshape(1, 1, -1, 2)), interpolation=np.int64(mode),
          padding=np.int64(0), align_corners=True, channels_last=False)
        got = np.asarray(out, np.float64).ravel()
        want = np.empty(len(pix))
        for i, (ux, uy) in enumerate(u.astype(np.float64)):
            if mode == 1:
                xs, ys = [np.rint(ux)], [np.rint(uy)]
                ws = [[1.0]]
            else:
                x0, y0 = np.floor(ux), np.floor(uy)
                xs, ys = [x0, x0 + 1], [y0, y0 + 1]
                wx = [x0 + 1 - ux, ux - x0]
                wy = [y0 + 1 - uy, uy - y0]
                ws = [[wy[j] * wx[i2] for i2 in range(2)] for j in range(2)]
            total = 0.0
            for j, yy in enumerate(ys):
                for i2, xx in enumerate(xs):
                    if 0 <= xx <= S - 1 and 0 <= yy <= S - 1:
                        v = ((int(yy) * 7 + int(xx) * 3) % 1024) / 4.0
                        total += (ws[j][i2] if mode == 0 else 1.0) * v
            want[i] = total
        err = np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))
        print(f"{name:8s}: max relative error {err:.2e} over {len(pix)} points "
              f"(flat offsets up to {int(u[:, 1].max()) * S + int(u[:, 0].max()):,})")
        assert err < 2e-3, (got, want)
    print("OK")


if __name__ == "__main__":
    main()
