"""Forward and both gradients against PyTorch's grid_sample, plus the documented edge cases."""

from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from oracle import ALL_CASES, CASES, case_id, implementations, ours, random_case, torch_grid_sample

import jax_gridsample
from jax_gridsample._reference import grid_sample_backward_reference, grid_sample_reference

IMPLEMENTATIONS = implementations()
TOLERANCE = {np.float64: 1e-10, np.float32: 2e-5}


def _compare_with_torch(x, grid, implementation, dims, mode, padding, align_corners, dtype):
    rng = np.random.default_rng(1)
    x, grid = x.astype(dtype), grid.astype(dtype)
    kwargs = dict(mode=mode, padding_mode=padding, align_corners=align_corners)
    out_shape = x.shape[:2] + grid.shape[1:-1]
    grad_output = rng.standard_normal(out_shape).astype(dtype)
    expected = torch_grid_sample(x, grid, grad_output, **kwargs)
    got = ours(x, grid, grad_output, implementation=implementation, **kwargs)
    tol = TOLERANCE[dtype]
    for name, g, e in zip(("output", "input_grad", "grid_grad"), got, expected, strict=True):
        assert g.dtype == dtype, name
        scale = max(1.0, float(np.abs(e).max(initial=0)))
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol * scale, err_msg=name)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_matches_torch(case, dtype, implementation):
    dims, mode, padding, align_corners = case
    x, grid = random_case(dims, np.random.default_rng(0))
    _compare_with_torch(x, grid, implementation, dims, mode, padding, align_corners, dtype)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_size_one_axes_match_torch(case, implementation):
    dims, mode, padding, align_corners = case
    rng = np.random.default_rng(2)
    spatial = (1, 5) if dims == 2 else (1, 1, 4)
    x = rng.standard_normal((2, 2) + spatial)
    grid = rng.uniform(-1.5, 1.5, (2, 3, 2) + (1,) * (dims - 2) + (dims,))
    _compare_with_torch(x, grid, implementation, dims, mode, padding, align_corners, np.float64)


def _centres(size: int, align_corners: bool) -> np.ndarray:
    i = np.arange(size)
    return 2 * i / (size - 1) - 1 if align_corners else (2 * i + 1) / size - 1


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_pixel_centres_reproduce_the_input(case, implementation):
    """Sampling at every pixel centre gives the input back, for every mode and padding."""
    dims, mode, padding, align_corners = case
    spatial = (3, 4, 5)[-dims:]
    x = np.random.default_rng(3).standard_normal((1, 2) + spatial)
    axes = [_centres(s, align_corners) for s in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # D, H, W order
    grid = np.stack(mesh[::-1], axis=-1)[None]  # (x, y, z) order
    out = jax_gridsample.grid_sample(
        jnp.asarray(x), jnp.asarray(grid), mode=mode, padding_mode=padding,
        align_corners=align_corners, implementation=implementation,
    )
    np.testing.assert_allclose(np.asarray(out), x, atol=1e-12)
    if case not in CASES:
        return
    # and on the borders (+-1 exactly) PyTorch agrees with us
    border = np.clip(np.round(grid), -1, 1)
    _compare_with_torch(x, border, implementation, dims, mode, padding, align_corners, np.float64)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("align_corners", [False, True])
def test_nearest_rounds_halves_to_even(implementation, align_corners):
    """Unnormalized x of 0.5, 1.5, 2.5 pick pixels 0, 2, 2 (C's nearbyint), as PyTorch does."""
    row = np.array([10.0, 20.0, 30.0, 40.0])
    x = row.reshape(1, 1, 1, 4)
    if align_corners:  # u = (c + 1) / 2 * 3, so c = 2u / 3 - 1: not exact, so use W = 5 there
        row = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
        x = row.reshape(1, 1, 1, 5)
        u = np.array([0.5, 1.5, 2.5, 3.5])
        c = u / 2 - 1  # (c + 1) / 2 * 4 = u, exact in binary
        expected = [10.0, 30.0, 30.0, 50.0]
    else:  # u = ((c + 1) * 4 - 1) / 2
        c = np.array([-0.5, 0.0, 0.5])
        expected = [10.0, 30.0, 30.0]
    grid = np.stack([c, np.zeros_like(c)], -1).reshape(1, 1, -1, 2)
    out = jax_gridsample.grid_sample(
        jnp.asarray(x), jnp.asarray(grid), mode="nearest", align_corners=align_corners,
        implementation=implementation,
    )
    np.testing.assert_array_equal(np.asarray(out).ravel(), expected)
    _compare_with_torch(x, grid, implementation, 2, "nearest", "zeros", align_corners, np.float64)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("value", [1e10, -1e10, 3e9, -7e5])
@pytest.mark.parametrize("case", [c for c in CASES if c[0] == 2], ids=case_id)
def test_huge_coordinates_match_torch(case, value, implementation):
    dims, mode, padding, align_corners = case
    x = np.random.default_rng(4).standard_normal((1, 2, 3, 4))
    grid = np.array([[[[value, 0.3], [0.2, value], [value, value]]]])
    _compare_with_torch(x, grid, implementation, dims, mode, padding, align_corners, np.float64)


# Row y = 0 (u_y = 1 with H = 3, align_corners=False) of arange(12) + 1 is [5, 6, 7, 8].
_NON_FINITE_EXPECTED = {
    ("zeros", np.inf): 0.0, ("zeros", -np.inf): 0.0, ("zeros", np.nan): 0.0,
    ("border", np.inf): 8.0, ("border", -np.inf): 5.0, ("border", np.nan): 5.0,
    ("reflection", np.inf): 5.0, ("reflection", -np.inf): 5.0, ("reflection", np.nan): 5.0,
}


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding, value", list(_NON_FINITE_EXPECTED), ids=str)
def test_non_finite_coordinates_follow_the_documented_rule(padding, value, mode, implementation):
    x = (np.arange(12.0) + 1).reshape(1, 1, 3, 4)
    grid = np.array([[[[value, 0.0]]]])
    kwargs = dict(mode=mode, padding_mode=padding, implementation=implementation)
    out = jax_gridsample.grid_sample(jnp.asarray(x), jnp.asarray(grid), **kwargs)
    assert float(out[0, 0, 0, 0]) == _NON_FINITE_EXPECTED[(padding, value)]
    gi, gg = jax_gridsample.grid_sample_backward(
        jnp.ones_like(out), jnp.asarray(x), jnp.asarray(grid), **kwargs
    )
    assert np.all(np.isfinite(np.asarray(gi))) and np.all(np.isfinite(np.asarray(gg)))
    assert float(gg[0, 0, 0, 0]) == 0.0  # the x derivative of a replaced coordinate is 0
    assert float(jnp.sum(gi)) == (0.0 if padding == "zeros" else 1.0)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize(
    "which", ["batch", "channels", "output"],
)
def test_empty_tensors(which, dims, implementation):
    n, c = (0 if which == "batch" else 2), (0 if which == "channels" else 3)
    spatial = (3, 4, 5)[-dims:]
    out_spatial = ((2, 0, 4) if which == "output" else (2, 3, 2))[-dims:]
    x = jnp.ones((n, c) + spatial)
    grid = jnp.zeros((n,) + out_spatial + (dims,))
    out = jax_gridsample.grid_sample(x, grid, implementation=implementation)
    assert out.shape == (n, c) + out_spatial
    gi, gg = jax_gridsample.grid_sample_backward(
        jnp.ones(out.shape), x, grid, implementation=implementation
    )
    assert gi.shape == x.shape and gg.shape == grid.shape
    assert not np.any(np.asarray(gi)) and not np.any(np.asarray(gg))


HALF_TYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("dtype", list(HALF_TYPES), ids=str)
@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_half_types_compute_in_float32(case, dtype, implementation):
    """Half inputs give the float64 result on the same (rounded) values, rounded once."""
    dims, mode, padding, align_corners = case
    dtype = HALF_TYPES[dtype]
    rng = np.random.default_rng(5)
    x, grid = random_case(dims, rng)
    x, grid = jnp.asarray(x, dtype), jnp.asarray(grid, dtype)
    params = (int(jax_gridsample.Interpolation[mode.upper()]),
              int(jax_gridsample.Padding[padding.upper()]), align_corners)
    x64, grid64 = x.astype(jnp.float64), grid.astype(jnp.float64)
    expected = grid_sample_reference(x64, grid64, *params)
    gout = jnp.asarray(rng.standard_normal(expected.shape), dtype)
    expected_grads = grid_sample_backward_reference(gout.astype(jnp.float64), x64, grid64,
                                                    *params, (True, True))
    got = ours(x, grid, gout, implementation=implementation, mode=mode, padding_mode=padding,
               align_corners=align_corners)
    eps = float(jnp.finfo(dtype).eps)
    for name, g, e in zip(("output", "input_grad", "grid_grad"), got,
                          (expected,) + expected_grads, strict=True):
        assert g.dtype == dtype, name
        e = np.asarray(e)
        # one rounding to the half type, plus float32 arithmetic far below it
        np.testing.assert_allclose(g.astype(np.float64), e, rtol=eps, atol=eps * 1e-2,
                                   err_msg=name)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("axis", [0, 1, 2], ids=["z", "y", "x"])
def test_tricubic_is_separable_bicubic(axis, align_corners, implementation):
    """3D bicubic of a volume that varies along one axis only is PyTorch's 1D bicubic.

    With border padding the constant axes contribute weights summing to one, so the result along
    the varying axis is 2D bicubic on a one-row image (in value and in both gradients).
    """
    rng = np.random.default_rng(6)
    size = 6
    profile = rng.standard_normal((1, 2, size))  # (N, C, S)
    volume = np.broadcast_to(
        np.expand_dims(profile, tuple(2 + a for a in range(3) if a != axis)),
        (1, 2) + tuple(size if a == axis else 3 + a for a in range(3)),
    ).copy()
    grid = rng.uniform(-1.3, 1.3, (1, 4, 3, 2, 3))
    kwargs = dict(mode="bicubic", padding_mode="border", align_corners=align_corners)
    gout = rng.standard_normal((1, 2, 4, 3, 2))
    out, gi, gg = ours(volume, grid, gout, implementation=implementation, **kwargs)

    component = 2 - axis  # grid holds (x, y, z): x moves along the last axis
    line_grid = np.stack([grid[..., component], np.zeros(grid.shape[:-1])], -1).reshape(1, 1, -1, 2)
    line_out, line_gi, line_gg = torch_grid_sample(profile[:, :, None, :], line_grid,
                                                   gout.reshape(1, 2, 1, -1), **kwargs)
    np.testing.assert_allclose(out.reshape(1, 2, -1), line_out.reshape(1, 2, -1), atol=1e-12)
    np.testing.assert_allclose(gg[..., component].ravel(), line_gg[..., 0].ravel(), atol=1e-11)
    summed = gi.sum(axis=tuple(2 + a for a in range(3) if a != axis))
    np.testing.assert_allclose(summed, line_gi[:, :, 0, :], atol=1e-11)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_channels_last_layout_matches_torch(case, implementation):
    """layout="NHWC"/"NDHWC": channels-last input and output, the same numbers as PyTorch's."""
    dims, mode, padding, align_corners = case
    rng = np.random.default_rng(7)
    x, grid = random_case(dims, rng)
    grad_output = rng.standard_normal(x.shape[:2] + grid.shape[1:-1])
    kwargs = dict(mode=mode, padding_mode=padding, align_corners=align_corners)
    expected = torch_grid_sample(x, grid, grad_output, **kwargs)

    def last(a):  # channels first -> channels last
        return np.moveaxis(a, 1, -1)

    layout = "NHWC" if dims == 2 else "NDHWC"
    got = ours(last(x), grid, last(grad_output), implementation=implementation, layout=layout,
               **kwargs)
    for name, g, e in zip(("output", "input_grad", "grid_grad"), got,
                          (last(expected[0]), last(expected[1]), expected[2]), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-10, err_msg=name)
