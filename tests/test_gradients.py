"""Gradients: numeric checks in float64, jax.grad == grid_sample_backward, affine_grid vs torch.

- test_numeric_gradients: every (rank, mode, padding, align_corners), both implementations, on
  the shared shapes (``oracle.random_case``), so it reuses test_semantics' float64 programs.
- test_grad_equals_grid_sample_backward: jax.grad's backward is grid_sample_backward's (the
  custom_vjp passes every parameter through and keeps the dtype): a covering set, each mode,
  padding and align_corners in each rank, x float64, bfloat16 x both implementations.
- test_gradients_of_gradients: every (rank, mode, padding), against finite differences.
- output_mask, affine_grid against PyTorch, a spatial transformer's d loss / d theta.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax.test_util import check_grads
from oracle import ALL_CASES, case_id, implementations, random_case

import jax_gridsample

IMPLEMENTATIONS = implementations()


def _smooth_grid(dims, spatial, align_corners, rng, points=(3, 4, 5), batch=2):
    """Grid values whose unnormalized coordinates sit inside the input, away from integers.

    Every interpolation weight is smooth there and no padding rule is active, so finite
    differences are exact up to O(eps^2).
    """
    out = points[-dims:]
    coords = []
    for size in spatial[::-1]:  # x over the last axis first
        whole = rng.integers(1, size - 2, out)
        u = whole + rng.uniform(0.2, 0.8, out)
        c = u / (size - 1) * 2 - 1 if align_corners else (2 * u + 1) / size - 1
        coords.append(c)
    return np.stack(coords, -1)[None].repeat(batch, 0)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_numeric_gradients(case, implementation):
    dims, mode, padding, align_corners = case
    rng = np.random.default_rng(10)
    x, _ = random_case(dims, rng)  # the shared shapes, with a smooth grid of its grid's shape
    x, grid = jnp.asarray(x), jnp.asarray(_smooth_grid(dims, x.shape[2:], align_corners, rng))

    def f(x, grid):
        return jax_gridsample.grid_sample(x, grid, mode=mode, padding_mode=padding,
                                          align_corners=align_corners,
                                          implementation=implementation)

    check_grads(f, (x, grid), order=1, modes=["rev"], eps=1e-6, atol=1e-6, rtol=1e-6)


# (rank, mode, padding, align_corners): each mode, padding and align_corners in each rank.
COVERING_CASES = [(2, "bilinear", "zeros", False), (2, "nearest", "border", True),
                  (2, "bicubic", "reflection", False), (3, "bilinear", "reflection", True),
                  (3, "nearest", "zeros", False), (3, "bicubic", "border", True)]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
@pytest.mark.parametrize("case", COVERING_CASES, ids=case_id)
def test_grad_equals_grid_sample_backward(case, dtype, implementation):
    dims, mode, padding, align_corners = case
    rng = np.random.default_rng(11)
    x, grid = random_case(dims, rng)
    x, grid = jnp.asarray(x, dtype), jnp.asarray(grid, dtype)
    kwargs = dict(mode=mode, padding_mode=padding, align_corners=align_corners,
                  implementation=implementation)
    weights = jnp.asarray(rng.standard_normal(x.shape[:2] + grid.shape[1:-1]), dtype)

    def loss(x, grid):
        return jnp.sum(jax_gridsample.grid_sample(x, grid, **kwargs) * weights)

    gx, gg = jax.grad(loss, argnums=(0, 1))(x, grid)
    bx, bg = jax_gridsample.grid_sample_backward(weights, x, grid, **kwargs)
    np.testing.assert_array_equal(np.asarray(gx), np.asarray(bx))
    np.testing.assert_array_equal(np.asarray(gg), np.asarray(bg))
    assert gx.dtype == x.dtype and gg.dtype == grid.dtype


@pytest.mark.parametrize("output_mask", [(True, False), (False, True), (False, False)])
def test_output_mask_returns_none_for_masked_outputs(output_mask):
    rng = np.random.default_rng(12)
    x = jnp.asarray(rng.standard_normal((1, 2, 4, 5)))
    grid = jnp.asarray(rng.uniform(-1, 1, (1, 3, 3, 2)))
    gout = jnp.ones((1, 2, 3, 3))
    full = jax_gridsample.grid_sample_backward(gout, x, grid)
    got = jax_gridsample.grid_sample_backward(gout, x, grid, output_mask=output_mask)
    for wanted, g, f in zip(output_mask, got, full, strict=True):
        if wanted:
            np.testing.assert_array_equal(np.asarray(g), np.asarray(f))
        else:
            assert g is None


@pytest.mark.filterwarnings("ignore:Since version 1.3.0")
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 3, 1, 4), (2, 1, 3, 4, 5), (1, 2, 1, 1, 3)])
def test_affine_grid_matches_torch(size, align_corners):
    rng = np.random.default_rng(13)
    k = len(size) - 2
    theta = rng.standard_normal((size[0], k, k + 1))
    expected = torch.nn.functional.affine_grid(torch.tensor(theta), size,
                                               align_corners=align_corners).numpy()
    got = jax_gridsample.affine_grid(jnp.asarray(theta), size, align_corners=align_corners)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-12, atol=1e-12)
    check_grads(lambda t: jax_gridsample.affine_grid(t, size, align_corners=align_corners),
                (jnp.asarray(theta),), order=1, modes=["rev"])


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("dims", [2, 3])
def test_spatial_transformer_gradient_matches_torch(dims, implementation):
    """d loss / d theta through affine_grid + grid_sample, as a spatial transformer trains."""
    rng = np.random.default_rng(14)
    size = (2, 3, 6, 7) if dims == 2 else (2, 3, 4, 5, 6)
    x = rng.standard_normal(size)
    theta = np.eye(dims, dims + 1)[None] + 0.2 * rng.standard_normal((2, dims, dims + 1))
    weights = rng.standard_normal(size)

    tt = torch.tensor(theta, requires_grad=True)
    grid = torch.nn.functional.affine_grid(tt, size, align_corners=False)
    out = torch.nn.functional.grid_sample(torch.tensor(x), grid, align_corners=False)
    (out * torch.tensor(weights)).sum().backward()

    def loss(theta):
        grid = jax_gridsample.affine_grid(theta, size)
        return jnp.sum(jax_gridsample.grid_sample(jnp.asarray(x), grid,
                                                  implementation=implementation) * weights)

    got = jax.grad(loss)(jnp.asarray(theta))
    np.testing.assert_allclose(np.asarray(got), tt.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", [c for c in ALL_CASES if not c[3]], ids=case_id)
def test_gradients_of_gradients(case):
    """Double backward (gradient penalties, meta-learning) matches finite differences.

    PyTorch's grid_sample has no double backward; ours differentiates the explicit backward.
    """
    dims, mode, padding, align_corners = case
    rng = np.random.default_rng(15)
    spatial = (5, 6, 7)[-dims:]
    x = jnp.asarray(rng.standard_normal((1, 2) + spatial))
    grid = jnp.asarray(_smooth_grid(dims, spatial, align_corners, rng, points=(3, 4, 2), batch=1))
    weights = jnp.asarray(rng.standard_normal((1, 2) + grid.shape[1:-1]))

    def loss(x, grid):
        out = jax_gridsample.grid_sample(x, grid, mode=mode, padding_mode=padding,
                                         align_corners=align_corners)
        return jnp.sum(out * weights)

    def penalty(x, grid):
        gx, gg = jax.grad(loss, argnums=(0, 1))(x, grid)
        return jnp.sum(gx**2) + jnp.sum(jnp.sin(gg))

    check_grads(jax.jit(penalty), (x, grid), order=1, modes=["rev"], eps=1e-6, atol=1e-6,
                rtol=1e-6)


def test_gradients_of_gradients_with_a_fill_value():
    """Double backward through "constant" (per axis, beside "wrap"): the backward primitive
    returns the fill value's gradient too, and its jvp differentiates all three; finite
    differences with respect to the input, the grid and the fill value."""
    rng = np.random.default_rng(16)
    x = jnp.asarray(rng.standard_normal((1, 2, 5, 6)))
    grid = jnp.asarray(rng.uniform(-1.3, 1.3, (1, 3, 4, 2)))
    fill = jnp.asarray([0.3, -0.7])
    weights = jnp.asarray(rng.standard_normal((1, 2, 3, 4)))

    def loss(x, grid, fill):
        out = jax_gridsample.grid_sample(x, grid, padding_mode=("constant", "wrap"),
                                         fill_value=fill)
        return jnp.sum(out * weights)

    def penalty(x, grid, fill):
        gx, gg, gf = jax.grad(loss, argnums=(0, 1, 2))(x, grid, fill)
        return jnp.sum(gx**2) + jnp.sum(jnp.sin(gg)) + jnp.sum(gf**3)

    check_grads(jax.jit(penalty), (x, grid, fill), order=1, modes=["rev"], eps=1e-6, atol=1e-6,
                rtol=1e-6)
