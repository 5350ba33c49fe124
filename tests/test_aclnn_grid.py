"""``_reference.grid_for_aclnn``: the grid the Ascend lowering sends to CANN's aclnn kernels,
which have no guard (docs/semantics.md step 2), in place of the coordinates the guard replaces.

The reference on the replaced grid must compute what it computes on the original one, bit for
bit: output, input gradient, and the grid gradient wherever the guard kept the coordinate (where
it replaced one, the guard's gradient is 0, and the caller zeros the replacement's).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from jax_gridsample._reference import (
    grid_for_aclnn,
    grid_sample_backward_reference,
    grid_sample_reference,
)

MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}
BF16 = ml_dtypes.bfloat16

# (rank, mode, padding, align_corners, dtype): each mode with each padding, each padding with
# either align_corners, each dtype; bicubic border (whose replacements need the most care) in
# three dtypes.
CASES = [
    (2, "bilinear", "zeros", False, np.float32), (2, "nearest", "zeros", True, np.float16),
    (3, "bicubic", "zeros", True, np.float64),
    (2, "nearest", "border", False, BF16), (3, "bilinear", "border", True, np.float64),
    (2, "bicubic", "border", False, np.float32), (2, "bicubic", "border", True, np.float16),
    (2, "bicubic", "border", False, BF16),
    (2, "bilinear", "reflection", True, BF16), (3, "nearest", "reflection", False, np.float32),
    (2, "bicubic", "reflection", False, np.float16),
]
# Axes of odd and even sizes (a position past an edge on an even axis needs a grid value with a
# fraction), and one of a single pixel.
SPATIAL = {2: (5, 12), 3: (1, 6, 8)}
SPECIAL = [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e38, -3e38, 1e10, -1e10, 2.0**24, 40.0, -40.0,
           9.0, -9.0, 1.0, -1.0]


def _case(dims, dtype, rng):
    spatial = SPATIAL[dims]
    points = rng.uniform(-1.5, 1.5, (2, 48, dims))
    flat = points.reshape(-1)
    flat[rng.choice(flat.size, 60, replace=False)] = rng.choice(SPECIAL, 60)
    with np.errstate(over="ignore"):
        grid = points.reshape((2,) + (1,) * (dims - 2) + (6, 8, dims)).astype(dtype)
    x = rng.integers(-8, 9, (2, 3) + spatial).astype(dtype)
    go = rng.integers(-8, 9, (2, 3) + grid.shape[1:-1]).astype(dtype)
    return x, grid, go


def test_replaced_grid_gives_the_same_bits():
    rng = np.random.default_rng(0)
    data = [_case(dims, dtype, rng) for dims, _, _, _, dtype in CASES]

    @jax.jit
    def run(grids):
        results = []
        for (_, mode, padding, ac, _), (x, _, go), grid in zip(CASES, data, grids, strict=True):
            args = (MODES[mode], PADDINGS[padding], ac)
            out = grid_sample_reference(x, grid, *args)
            gi, gg = grid_sample_backward_reference(go, x, grid, *args, (True, True))
            results.append((out, gi, gg))
        return results

    @jax.jit
    def replace(grids):
        return [grid_for_aclnn(grid, SPATIAL[dims], PADDINGS[padding], ac)
                for (dims, _, padding, ac, _), grid in zip(CASES, grids, strict=True)]

    originals = [jnp.asarray(grid) for _, grid, _ in data]
    replacements = replace(originals)
    expected = run(originals)
    got = run([grid for grid, _ in replacements])
    for case, grid, (new_grid, replaced), want, have in zip(CASES, originals, replacements,
                                                            expected, got, strict=True):
        what = f"{case[0]}d {case[1]} {case[2]} align_corners={case[3]} {case[4].__name__}"
        grid, new_grid, replaced = (np.asarray(a) for a in (grid, new_grid, replaced))
        assert new_grid.dtype == grid.dtype and replaced.shape == grid.shape, what
        assert 0 < replaced.sum() < replaced.size, what
        kept = ~replaced
        np.testing.assert_array_equal(new_grid[kept], grid[kept], err_msg=what)
        assert np.all(np.abs(new_grid[replaced].astype(np.float64)) <= 7), what
        out, gi, gg = (np.asarray(a) for a in want)
        new_out, new_gi, new_gg = (np.asarray(a) for a in have)
        np.testing.assert_array_equal(new_out, out, err_msg=f"output, {what}")
        np.testing.assert_array_equal(new_gi, gi, err_msg=f"input gradient, {what}")
        np.testing.assert_array_equal(gg[replaced], 0, err_msg=f"grid gradient, {what}")
        np.testing.assert_array_equal(np.where(replaced, 0, new_gg), gg,
                                      err_msg=f"grid gradient, {what}")
