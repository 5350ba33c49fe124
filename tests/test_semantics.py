"""Forward and both gradients against PyTorch's grid_sample, plus the documented edge cases.

Every test runs both implementations. Most sample arrays of the shared shapes
(``oracle.random_case``) in float64, so they reuse the programs test_matches_torch (and
test_gradients.py) compiled for the same configuration instead of compiling their own. Coverage:

- test_matches_torch: every (rank, mode, padding, align_corners) PyTorch has x float64, float32.
- test_half_types_compute_in_float32: every (rank, mode, padding, align_corners) x float16,
  bfloat16 natively (the reference: a covering set and 3D bicubic, see HALF_CASES), against the
  float64 result on the rounded values (PyTorch's; for 3D bicubic, which PyTorch lacks, the
  float64 reference's).
- test_size_one_axes_match_torch: every PyTorch case, on size-one spatial axes.
- test_pixel_centres_reproduce_the_input: every case samples every pixel centre exactly; the
  same points rounded onto the borders match PyTorch (every PyTorch case).
- test_huge_coordinates_match_torch: every 2D case, each huge value on either axis and on both,
  all in one grid.
- test_non_finite_coordinates_follow_the_documented_rule: every mode x padding, with +inf, -inf
  and NaN in one grid.
- test_channels_last_layout_matches_torch: a covering set (each mode, padding and align_corners
  in each rank): the layout is a transpose around the same math; the native channels-last kernel
  of every case is compared with the oracles in test_native_parity.py.
- rounding halves, empty tensors, 3D bicubic as 1D bicubic along each axis.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch
from oracle import (
    ALL_CASES,
    CASES,
    ON_CUDA,
    WITHOUT_FRACTION,
    case_id,
    implementations,
    ours,
    random_case,
    torch_grid_sample,
)

import jax_gridsample
from jax_gridsample import _native

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
    """Sampling at every pixel centre gives the input back, for every mode and padding.

    Both batch elements hold the same image and the grid's points, taken in order over the
    batch, start with its pixel centres in order (the shared shapes have room for them all).
    """
    dims, mode, padding, align_corners = case
    x, grid = random_case(dims, np.random.default_rng(3))
    image = x[:1]
    x = np.concatenate([image, image])
    axes = [_centres(s, align_corners) for s in image.shape[2:]]
    mesh = np.meshgrid(*axes, indexing="ij")  # D, H, W order
    centres = np.stack(mesh[::-1], axis=-1).reshape(-1, dims)  # (x, y, z) order
    points = grid.reshape(-1, dims).copy()
    points[:len(centres)] = centres
    grid = points.reshape(grid.shape)
    out = jax_gridsample.grid_sample(
        jnp.asarray(x), jnp.asarray(grid), mode=mode, padding_mode=padding,
        align_corners=align_corners, implementation=implementation,
    )
    sampled = np.moveaxis(np.asarray(out), 1, 0).reshape(x.shape[1], -1)  # (C, points)
    np.testing.assert_allclose(sampled[:, :len(centres)], image.reshape(x.shape[1], -1),
                               atol=1e-12)
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


HUGE = [1e10, -1e10, 3e9, -7e5]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("case", [c for c in CASES if c[0] == 2], ids=case_id)
def test_huge_coordinates_match_torch(case, implementation):
    """Each huge value as x, as y and as both, among the shared case's ordinary points."""
    dims, mode, padding, align_corners = case
    x, grid = random_case(dims, np.random.default_rng(4))
    points = grid.reshape(-1, 2).copy()
    huge = [p for v in HUGE for p in ([v, 0.3], [0.2, v], [v, v])]
    points[:len(huge)] = huge
    grid = points.reshape(grid.shape)
    _compare_with_torch(x, grid, implementation, dims, mode, padding, align_corners, np.float64)


# Row y = 2 (grid y = 0, H = 5) of arange(30).reshape(5, 6) + 1 is [13, 14, 15, 16, 17, 18].
NON_FINITE = (np.inf, -np.inf, np.nan)
# zeros reads nothing; border the last pixel for +inf, the first for -inf and NaN; reflection
# takes x = -1 for all three (below).
_NON_FINITE_EXPECTED = {"zeros": (0.0, 0.0, 0.0), "border": (18.0, 13.0, 13.0), "reflection": None}


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", list(_NON_FINITE_EXPECTED))
def test_non_finite_coordinates_follow_the_documented_rule(padding, mode, implementation):
    """+inf, -inf and NaN as x on an exact row, among the shared case's ordinary points: the
    documented value, a zero x derivative, finite gradients, and the input gradient on the
    pixel the value came from (each point's cotangent a different power of ten). Reflection:
    what PyTorch gives for x = -1 (bicubic, with align_corners=False: a mix of the first two
    pixels), output and input gradient."""
    x, grid = random_case(2, np.random.default_rng(8))
    x[0, 0] = (np.arange(30.0) + 1).reshape(5, 6)
    points = grid.reshape(-1, 2).copy()
    points[:3] = [[value, 0.0] for value in NON_FINITE]
    grid = points.reshape(grid.shape)
    cotangent = np.zeros(x.shape[:2] + grid.shape[1:-1])
    weights = np.array([1.0, 10.0, 100.0])
    cotangent[0, 0].flat[:3] = weights
    kwargs = dict(mode=mode, padding_mode=padding, implementation=implementation)
    out = jax_gridsample.grid_sample(jnp.asarray(x), jnp.asarray(grid), **kwargs)
    gi, gg = (np.asarray(g) for g in jax_gridsample.grid_sample_backward(
        jnp.asarray(cotangent), jnp.asarray(x), jnp.asarray(grid), **kwargs))
    assert np.all(np.isfinite(gi)) and np.all(np.isfinite(gg))
    np.testing.assert_array_equal(gg.reshape(-1, 2)[:3, 0], 0.0)  # replaced: d/dx is 0
    expected = _NON_FINITE_EXPECTED[padding]
    if expected is None:
        at_minus_one = points.copy()
        at_minus_one[:3, 0] = -1.0
        expected_out, expected_gi, _ = torch_grid_sample(
            x, at_minus_one.reshape(grid.shape), cotangent, mode=mode, padding_mode=padding,
            align_corners=False)
        np.testing.assert_allclose(np.asarray(out), expected_out, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(gi, expected_gi, rtol=1e-14, atol=1e-14)
        return
    np.testing.assert_array_equal(np.asarray(out)[0, 0].flat[:3], expected)
    expected_gi = np.zeros_like(gi)
    for value, weight in zip(expected, weights, strict=True):
        if value:  # the pixel whose value it took gets the whole cotangent
            expected_gi[0, 0].flat[int(value) - 1] += weight
    np.testing.assert_array_equal(gi, expected_gi)


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


# (rank, mode, padding, align_corners): each mode, padding and align_corners in each rank.
COVERING_CASES = [(2, "bilinear", "zeros", False), (2, "nearest", "border", True),
                  (2, "bicubic", "reflection", False), (3, "bilinear", "reflection", True),
                  (3, "nearest", "zeros", False), (3, "bicubic", "border", True)]
# The reference computes every dtype but float64 in float32 (as test_matches_torch checks for
# each PyTorch case) and rounds at the ends, whatever the case; so do the CPU kernels, which run
# the float32 kernel on widened copies (test_native_parity.py checks it bitwise), while the CUDA
# kernels are compiled per dtype and case. So: a covering set plus 3D bicubic (float32
# arithmetic checked nowhere else) on the reference, the covering set natively on the CPU and
# every case on CUDA (JAX_GRIDSAMPLE_TEST_PLATFORM=cuda).
_NATIVE_HALF_CASES = ALL_CASES if ON_CUDA else COVERING_CASES
HALF_CASES = [(case, "native") for case in _NATIVE_HALF_CASES] + [
    (case, "reference") for case in ALL_CASES
    if case in COVERING_CASES or (case[0] == 3 and case[1] == "bicubic")]


@pytest.mark.parametrize("dtype", list(HALF_TYPES), ids=str)
@pytest.mark.parametrize("case, implementation", HALF_CASES,
                         ids=[f"{case_id(c)}-{i}" for c, i in HALF_CASES])
def test_half_types_compute_in_float32(case, implementation, dtype):
    """Half inputs give the float64 result on the same (rounded) values, rounded once."""
    dims, mode, padding, align_corners = case
    dtype = HALF_TYPES[dtype]
    rng = np.random.default_rng(5)
    x, grid = random_case(dims, rng)
    x, grid = x.astype(dtype), grid.astype(dtype)
    gout = rng.standard_normal(x.shape[:2] + grid.shape[1:-1]).astype(dtype)
    kwargs = dict(mode=mode, padding_mode=padding, align_corners=align_corners)
    rounded = [a.astype(np.float64) for a in (x, grid, gout)]
    if case in CASES:
        expected = torch_grid_sample(*rounded, **kwargs)
    else:  # 3D bicubic: the float64 reference
        expected = ours(*rounded, implementation="reference", **kwargs)
    got = ours(x, grid, gout, implementation=implementation, **kwargs)
    eps = float(jnp.finfo(dtype).eps)
    for name, g, e in zip(("output", "input_grad", "grid_grad"), got, expected, strict=True):
        assert g.dtype == dtype, name
        # one rounding to the half type, plus float32 arithmetic far below it
        np.testing.assert_allclose(g.astype(np.float64), e, rtol=eps, atol=eps * 1e-2,
                                   err_msg=name)


@pytest.mark.parametrize("dtype", list(HALF_TYPES), ids=str)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("vmapped", [False, True], ids=["call", "vmap-of-fill"])
def test_half_types_add_the_fill_term_before_rounding(vmapped, implementation, dtype):
    """Under "constant", a half type's result is the float32 computation on the same values
    rounded once, the fill term added before that rounding: bitwise, the output and the grid
    and fill gradients (the input gradient not asked for: None). Rounding the "zeros" result
    first changes 7-8% of the outputs here. Also under a vmap of the fill value alone, whose
    fill term is added apart from the kernel (the input and the grid shared)."""
    dtype = HALF_TYPES[dtype]
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 5, 6)).astype(dtype)
    grid = rng.uniform(-1.3, 1.3, (2, 8, 8, 2)).astype(dtype)
    gout = rng.standard_normal((2, 3, 8, 8)).astype(dtype)
    fill = np.array([[0.3, -1.7, 2.9], [-2.3, 0.9, 1.1]], dtype)

    def run(compute):
        x_, grid_, gout_, fill_ = (jnp.asarray(a.astype(compute)) for a in (x, grid, gout, fill))

        def call(fill_):
            kwargs = dict(padding_mode="constant", fill_value=fill_,
                          implementation=implementation)
            return (jax_gridsample.grid_sample(x_, grid_, **kwargs),
                    *jax_gridsample.grid_sample_backward(gout_, x_, grid_,
                                                         output_mask=(False, True, True),
                                                         **kwargs))

        return jax.vmap(call)(fill_) if vmapped else call(fill_[0])

    (out, none, grid_grad, fill_grad), wide = run(dtype), run(np.float32)
    assert none is None and wide[1] is None
    for name, got, want in (("output", out, wide[0]), ("grid_grad", grid_grad, wide[2]),
                            ("fill_grad", fill_grad, wide[3])):
        assert got.dtype == dtype, name
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want.astype(dtype)),
                                      err_msg=name)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("axis", [0, 1, 2], ids=["z", "y", "x"])
def test_tricubic_is_separable_bicubic(axis, align_corners, implementation):
    """3D bicubic of a volume that varies along one axis only is PyTorch's 1D bicubic.

    With border padding the constant axes contribute weights summing to one, so the result along
    the varying axis is 2D bicubic on a one-row image (in value and in both gradients). The
    volume and grid have the shared shapes, whichever axis varies.
    """
    rng = np.random.default_rng(6)
    x, grid = random_case(3, rng)
    size = x.shape[2 + axis]
    profile = rng.standard_normal(x.shape[:2] + (size,))  # (N, C, S)
    others = tuple(2 + a for a in range(3) if a != axis)
    volume = np.broadcast_to(np.expand_dims(profile, others), x.shape).copy()
    kwargs = dict(mode="bicubic", padding_mode="border", align_corners=align_corners)
    gout = rng.standard_normal(x.shape[:2] + grid.shape[1:-1])
    out, gi, gg = ours(volume, grid, gout, implementation=implementation, **kwargs)

    n, c = x.shape[:2]
    component = 2 - axis  # grid holds (x, y, z): x moves along the last axis
    line_grid = np.stack([grid[..., component], np.zeros(grid.shape[:-1])], -1).reshape(n, 1, -1, 2)
    line_out, line_gi, line_gg = torch_grid_sample(profile[:, :, None, :], line_grid,
                                                   gout.reshape(n, c, 1, -1), **kwargs)
    np.testing.assert_allclose(out.reshape(n, c, -1), line_out.reshape(n, c, -1), atol=1e-12)
    np.testing.assert_allclose(gg[..., component].reshape(n, -1), line_gg[..., 0].reshape(n, -1),
                               atol=1e-11)
    np.testing.assert_allclose(gi.sum(axis=others), line_gi[:, :, 0, :], atol=1e-11)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("case", COVERING_CASES, ids=case_id)
def test_channels_last_layout_matches_torch(case, implementation):
    """layout="NHWC"/"NDHWC": channels-last input and output, the same numbers as PyTorch's
    (for 3D bicubic, the float64 reference's on the channels-first arrays)."""
    dims, mode, padding, align_corners = case
    rng = np.random.default_rng(7)
    x, grid = random_case(dims, rng)
    grad_output = rng.standard_normal(x.shape[:2] + grid.shape[1:-1])
    kwargs = dict(mode=mode, padding_mode=padding, align_corners=align_corners)
    if case in CASES:
        expected = torch_grid_sample(x, grid, grad_output, **kwargs)
    else:
        expected = ours(x, grid, grad_output, implementation="reference", **kwargs)

    def last(a):  # channels first -> channels last
        return np.moveaxis(a, 1, -1)

    layout = "NHWC" if dims == 2 else "NDHWC"
    got = ours(last(x), grid, last(grad_output), implementation=implementation, layout=layout,
               **kwargs)
    for name, g, e in zip(("output", "input_grad", "grid_grad"), got,
                          (last(expected[0]), last(expected[1]), expected[2]), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-10, err_msg=name)


# --- reflection: exact at the mirrors in every width; coordinates without fractional bits -----

WIDTHS = range(1, 257)
FLIPS = np.arange(-3, 4)  # the grid value 2k - 1 unnormalizes to exactly lo + k span


def _reflection_targets(width: int) -> np.ndarray:
    """Where 2k - 1 reflects to: k flips, so the first pixel for even k, the last for odd."""
    return np.where(FLIPS % 2 == 0, 0, width - 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_reflection_is_exact_at_the_mirrors_in_every_width(dtype):
    """Grid values 2k - 1 (k = -3..3) unnormalize exactly onto a mirror, k spans from the first,
    in every width 1-256 and either align_corners (float16 and bfloat16 compute in float32).
    The reference's reflection compiled for each width, where XLA once turned the division by
    the span into a multiplication by its reciprocal (41 * (1 / 41) < 1: x = 1 sampled the first
    pixel of a 41-pixel row; 38 widths failed in float32, 14 in float64); the native kernel
    and PyTorch sampling arange(width) (nearest); and, in float32, the reference through the
    public API on the first width that failed (41)."""
    from jax_gridsample._reference import _reflect

    def reflect_all(mirrors):
        return [_reflect(mirrors[ac][width - 1], width, ac)[0]
                for ac in (False, True) for width in WIDTHS]

    mirrors = {ac: jnp.asarray(np.array([(0.0 if ac else -0.5) + FLIPS * (w - 1 if ac else w)
                                         for w in WIDTHS], dtype)) for ac in (False, True)}
    grid = np.stack([2.0 * FLIPS - 1, np.zeros(len(FLIPS))], -1).reshape(1, 1, -1, 2)
    grid = jnp.asarray(grid, dtype)
    rows = [jnp.asarray(np.arange(w, dtype=dtype).reshape(1, 1, 1, w)) for w in WIDTHS]

    def sample_all(rows):  # the FFI target itself: 512 public calls take long to trace
        out = jax.ShapeDtypeStruct((1, 1, 1, len(FLIPS)), dtype)
        return [jax.ffi.ffi_call(_native.FORWARD_TARGET, out)(
            row, grid, jnp.zeros(1, dtype), interpolation=np.int64(1), padding=np.array([2, 2]),
            align_corners=ac, channels_last=False) for ac in (False, True) for row in rows]

    reference = iter(jax.jit(reflect_all)(mirrors))
    native = iter(jax.jit(sample_all)(rows))
    for ac in (False, True):
        for width, row in zip(WIDTHS, rows, strict=True):
            expected = _reflection_targets(width)
            what = f"width {width}, align_corners={ac}"
            np.testing.assert_array_equal(np.asarray(next(reference)), expected, err_msg=what)
            np.testing.assert_array_equal(np.asarray(next(native)).ravel(), expected, err_msg=what)
            torch_out = torch.nn.functional.grid_sample(
                torch.tensor(np.asarray(row)), torch.tensor(np.asarray(grid)), mode="nearest",
                padding_mode="reflection", align_corners=ac)
            np.testing.assert_array_equal(torch_out.numpy().ravel(), expected, err_msg=what)
    if dtype != np.float32:
        return
    width = 41
    row = jnp.asarray(np.arange(width, dtype=dtype).reshape(1, 1, 1, width))
    out = jax_gridsample.grid_sample(row, jnp.asarray([[[[1.0, 0.0]]]], dtype),
                                     padding_mode="reflection", implementation="reference")
    assert float(np.asarray(out).ravel()[0]) == width - 1


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_reflection_without_fractional_bits_is_minus_one(dtype, align_corners, mode,
                                                        implementation):
    """Reflection takes a coordinate whose position has no fractional bits in the compute dtype
    as x = -1 with a zero x derivative, and reflects every other one exactly: PyTorch's float64
    output and input gradient with those coordinates set to -1, among ordinary points. PyTorch's
    own float32 and float64 kernels disagree at x = 1e10 (pixels 0 and 2 of 5), as
    docs/semantics.md says."""
    width = 4 if align_corners else 5
    values = np.array(WITHOUT_FRACTION)
    c, one, two = values.astype(dtype), dtype(1), dtype(2)  # each operation rounded to dtype
    with np.errstate(over="ignore"):  # the largest overflow to inf, which `kept` leaves out
        if align_corners:
            u = (c + one) / two * dtype(width - 1)
        else:
            u = ((c + one) * dtype(width) - one) / two
    kept = np.abs(u) < (2.0**23 if dtype == np.float32 else 2.0**52)
    assert 0 < kept.sum() < len(values)
    exact = ((values + 1) / 2 * (width - 1) if align_corners else ((values + 1) * width - 1) / 2)
    np.testing.assert_array_equal(u[kept], exact[kept])  # so that float64 PyTorch agrees
    rng = np.random.default_rng(9)
    x = rng.integers(-8, 9, (1, 2, 3, width)).astype(dtype)
    points = np.stack([np.concatenate([values, [0.5, -0.75]]),
                       np.full(len(values) + 2, 0.25)], -1)
    grid = points.reshape(1, 1, -1, 2).astype(dtype)
    cotangent = rng.integers(-8, 9, (1, 2, 1, len(points))).astype(dtype)
    kwargs = dict(mode=mode, padding_mode="reflection", align_corners=align_corners)
    out, gi, gg = ours(x, grid, cotangent, implementation=implementation, **kwargs)
    substituted = points.copy()
    substituted[:len(values), 0] = np.where(kept, values, -1.0)
    expected = torch_grid_sample(x.astype(np.float64), substituted.reshape(grid.shape),
                                 cotangent.astype(np.float64), **kwargs)
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(out, expected[0], rtol=tol, atol=tol, err_msg="output")
    np.testing.assert_allclose(gi, expected[1], rtol=tol, atol=tol, err_msg="input gradient")
    np.testing.assert_array_equal(gg.reshape(-1, 2)[np.flatnonzero(~kept), 0], 0.0)
    if dtype == np.float64 and mode == "nearest" and not align_corners:
        row = np.arange(5.0).reshape(1, 1, 1, 5)
        pixels = [torch.nn.functional.grid_sample(
            torch.tensor(row, dtype=t), torch.tensor([[[[1e10, 0.0]]]], dtype=t), **kwargs).item()
            for t in (torch.float32, torch.float64)]
        assert pixels == [0.0, 2.0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_compiled_reference_rounds_as_written(dtype):
    """The reference's per-axis math compiled by XLA gives the bits it gives run operation by
    operation, each rounded as written (docs/semantics.md, "Bit for bit"): tap positions, the
    chain factor and, but for bicubic's polynomials, the weights. Compiled, XLA used to fuse the
    multiplication and subtraction of ((c + 1) S - 1) / 2 into one fused multiply-add and to
    divide by the span as a multiplication by its reciprocal. Random coordinates, huge and
    non-finite ones, and every mirror of the two axis sizes; every padding code (0-4)."""
    from jax_gridsample._reference import axis_taps

    rng = np.random.default_rng(10)
    sizes = (3, 37)
    mirrors = np.concatenate([2.0 * np.arange(-6, 7) - 1 + d for d in (0, 1 / 37, -1 / 3)])
    coord = np.concatenate([rng.uniform(-3, 3, 3000), rng.uniform(-1e7, 1e7, 300), mirrors,
                            [np.nan, np.inf, -np.inf, 1e30, -1e30, 2.0**24, -(2.0**53)]])
    coord = jnp.asarray(coord[None].astype(dtype))
    configs = [(size, interpolation, padding, ac) for size in sizes for interpolation in range(3)
               for padding in range(5) for ac in (False, True)]

    def all_taps(coord):
        return [axis_taps(coord, *config) for config in configs]

    for config, compiled, eager in zip(configs, jax.jit(all_taps)(coord), all_taps(coord),
                                       strict=True):
        fields = ("position", "coord_grad") + (() if config[1] == 2 else ("weight", "dweight"))
        for name in fields:
            np.testing.assert_array_equal(np.asarray(getattr(compiled, name)),
                                          np.asarray(getattr(eager, name)),
                                          err_msg=f"{name}, (size, mode, padding, ac) {config}")


def _row_positions(sample, coords: np.ndarray, size: int, floor: np.ndarray) -> np.ndarray:
    """The float32 positions a 2D bilinear ``sample(x, grid)`` ("border", align_corners=False)
    gives coordinates on a row of ``size`` alternating 0 and 1, each position's ``floor`` given:
    each output is a tap's weight, the position's distance from its floor or from the next
    pixel, which is exact; float64."""
    x = np.zeros((1, 1, 1, size), np.float32)
    x[..., 1::2] = 1
    grid = np.zeros((1, 1, coords.size, 2), np.float32)
    grid[..., 0] = coords
    out = np.float64(np.asarray(sample(x, grid)).ravel())
    return np.where(floor % 2 == 0, floor + out, floor + 1 - out)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_pytorch_cpu_unnormalizes_with_one_fma(implementation):
    """docs/semantics.md, "PyTorch's two unnormalization formulas": on 200,000 float32
    coordinates of a 1000-pixel axis (uniform in [-1, 1], seed 0), PyTorch's 2D CPU kernel
    puts every one where fma(c + 1, S / 2, -0.5) rounded once does, ours where
    ((c + 1) * S - 1) / 2 does, and the two differ for 339 (those inside the row are compared;
    all 339 are)."""
    size, f32 = 1000, np.float32
    coords = np.random.default_rng(0).uniform(-1, 1, 200_000).astype(f32)
    with_fma = f32(np.float64(coords + f32(1)) * (size / 2) - 0.5)  # exact, then rounded
    as_written = ((coords + f32(1)) * f32(size) - f32(1)) / f32(2)
    inside = (with_fma >= 0) & (with_fma <= size - 1) & (as_written >= 0) & (as_written <= size - 1)

    def torch_sample(x, grid):
        return torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(grid),
                                               padding_mode="border", align_corners=False)

    def our_sample(x, grid):
        return jax_gridsample.grid_sample(x, grid, padding_mode="border",
                                          implementation=implementation)

    floor = np.floor(as_written)  # the same for both formulas wherever compared
    np.testing.assert_array_equal(_row_positions(torch_sample, coords, size, floor)[inside],
                                  with_fma[inside])
    np.testing.assert_array_equal(_row_positions(our_sample, coords, size, floor)[inside],
                                  as_written[inside])
    assert np.sum(with_fma != as_written) == np.sum(with_fma[inside] != as_written[inside]) == 339
