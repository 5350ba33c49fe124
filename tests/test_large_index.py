"""64-bit indexing of the native CPU forward on an input of more than 2^31 elements.

Opt-in (`pytest -m slow`): the input is (1, 1, 46341, 46341) float16, 2,147,488,281 elements
(4.3 GB; the run peaks near 13 GB of memory and takes about a minute to fill). Points near the
far end and at the corners are sampled by the FFI target directly and compared with values
computed in numpy from the fill pattern.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_gridsample import _native

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _native.cpu_available(), reason="native CPU kernels not built"),
]

S = 46341  # S * S = 2_147_488_281 > 2**31


def _pattern(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Position-dependent values, exact in float16: ((7 y + 3 x) mod 1024) / 4."""
    return ((y * 7 + x * 3) % 1024) / 4.0


@pytest.fixture(scope="module")
def large_input() -> jax.Array:
    x = np.empty((S, S), np.float16)
    cols = np.arange(S, dtype=np.int64)
    for y in range(S):
        x[y] = _pattern(np.int64(y), cols)
    return jnp.asarray(x.reshape(1, 1, S, S))


def _points() -> np.ndarray:
    """Pixel (x, y) positions: corners, the far end, and random points within 40 of it."""
    rng = np.random.default_rng(0)
    fixed = [[S - 1, S - 1], [S - 1.25, S - 1.5], [S - 2.5, S - 1], [0.0, S - 1], [S - 1, 0.0],
             [0.0, 0.0], [S - 1.75, S - 1.25]]
    near_end = S - 1 - rng.uniform(0, 40, (9, 2))
    return np.concatenate([np.array(fixed), near_end])


def _expected(u: np.ndarray, mode: str) -> np.ndarray:
    """Nearest or bilinear samples of the pattern at pixel positions u (align_corners=True)."""
    want = np.empty(len(u))
    for i, (ux, uy) in enumerate(u):
        if mode == "nearest":
            taps = [(np.rint(ux), np.rint(uy), 1.0)]
        else:
            x0, y0 = np.floor(ux), np.floor(uy)
            taps = [(x0 + dx, y0 + dy, (1 - abs(ux - x0 - dx)) * (1 - abs(uy - y0 - dy)))
                    for dy in (0, 1) for dx in (0, 1)]
        want[i] = sum(w * _pattern(int(yy), int(xx)) for xx, yy, w in taps
                      if 0 <= xx <= S - 1 and 0 <= yy <= S - 1)
    return want


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_offsets_beyond_int32(large_input: jax.Array, mode: str) -> None:
    coords = _points() / (S - 1) * 2 - 1
    # The grid has the input's dtype: float16 coordinates near 1 are 2^-11 apart (about 22
    # pixels here), so the expected values use the positions the kernel sees, computed in
    # float32 as it computes them.
    grid16 = coords.astype(np.float16)
    u = ((grid16.astype(np.float32) + np.float32(1)) / np.float32(2) * np.float32(S - 1))
    assert int(u[:, 1].max()) * S + int(u[:, 0].max()) > 2**31  # the case needs 64-bit offsets
    out = jax.ffi.ffi_call(
        _native.FORWARD_TARGET, jax.ShapeDtypeStruct((1, 1, 1, len(u)), jnp.float16)
    )(large_input, jnp.asarray(grid16.reshape(1, 1, -1, 2)), jnp.zeros(1, jnp.float16),
      interpolation=np.int64({"bilinear": 0, "nearest": 1}[mode]), padding=np.zeros(2, np.int64),
      align_corners=True, channels_last=False)
    got = np.asarray(out, np.float64).ravel()
    want = _expected(u.astype(np.float64), mode)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
