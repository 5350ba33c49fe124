"""The "constant" and "wrap" padding modes against independent oracles, in float64.

1. scipy: ``scipy.ndimage.map_coordinates`` with ``mode="grid-constant"`` (``cval`` the fill
   value) and ``"grid-wrap"``, order 0 (nearest) and 1 (bilinear), in 1D, 2D and 3D, both
   align_corners, on coordinates well outside [-1, 1]; a per-channel fill channel by channel.
2. PyTorch: "constant" is "border" on the input padded with the fill value, the grid rescaled
   to the padded image (points whose taps all lie in the padded image): 2D bilinear and bicubic,
   3D trilinear; forward, input, grid and fill gradients.
3. Gradients: ``check_grads`` with respect to input, grid and fill value; the native float32
   backward against the float64 reference; ``fill_grad`` against ``sum(go * (1 - W))`` (``W``
   sampled from an input of ones) and against finite differences of the output in the fill.
4. Exact rules: "constant" with fill 0 (or none) is "zeros"; a point with no tap outside does not
   depend on the fill value, NaN or infinite; a NaN, infinite or huge coordinate reads the fill
   value under "constant" and what -1 reads under "wrap".

Every test runs both implementations (``implementation="reference"`` and ``"native"``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax.test_util import check_grads
from oracle import WITHOUT_FRACTION, implementations, torch_grid_sample
from scipy import ndimage

import jax_gridsample as gs

IMPLEMENTATIONS = implementations()
TOL = 1e-12


def _unnormalize(c, size, align_corners):
    """docs/semantics.md's unnormalization, in numpy."""
    if align_corners:
        return (c + 1) / 2 * (size - 1)
    return ((c + 1) * size - 1) / 2


def _normalize(u, size, align_corners):
    """The grid value whose unnormalized coordinate is ``u``."""
    if align_corners:
        return 2 * u / (size - 1) - 1
    return (2 * u + 1) / size - 1


def _close(actual, expected, tol, what=""):
    """Equal to ``tol`` relative to the largest expected magnitude (at least 1)."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale, err_msg=what)


def _grid_away_from_halves(rng, points, spatial, align_corners, low=-3.0, high=3.0):
    """Grid values uniform in [low, high) (many taps outside), redrawn where an unnormalized
    coordinate lies within 1e-6 of a half-integer (where nearest's rounding of halves, which
    scipy and we may do differently, would decide). ``spatial``: (D, H, W) sizes; x first."""
    k = len(spatial)
    grid = rng.uniform(low, high, points + (k,))
    while True:
        u = np.stack([_unnormalize(grid[..., j], spatial[k - 1 - j], align_corners)
                      for j in range(k)], -1)
        bad = np.any(np.abs(u - np.floor(u) - 0.5) < 1e-6, axis=-1)
        if not bad.any():
            return grid, u
        grid[bad] = rng.uniform(low, high, (int(bad.sum()), k))


# --- 1. scipy.ndimage.map_coordinates ---------------------------------------------------------

SCIPY_MODE = {"constant": "grid-constant", "wrap": "grid-wrap"}
ORDER = {"nearest": 0, "bilinear": 1}
FILL = 1.75
SPATIAL = {1: (7,), 2: (5, 6), 3: (3, 4, 5)}
POINTS = {1: (1, 1, 30), 2: (1, 4, 8), 3: (1, 2, 4, 4)}  # the grid's (N, *So)


def _scipy(image, u, mode, padding, cval):
    """map_coordinates of ``image`` at unnormalized ``u`` (..., k), x first."""
    coords = [u[..., j].ravel() for j in reversed(range(u.shape[-1]))]  # slowest axis first
    out = ndimage.map_coordinates(image, coords, order=ORDER[mode], mode=SCIPY_MODE[padding],
                                  cval=cval)
    return out.reshape(u.shape[:-1])


@pytest.mark.parametrize("align_corners", [False, True], ids=["noac", "ac"])
@pytest.mark.parametrize("padding", ["constant", "wrap"])
@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("dims", [1, 2, 3], ids=["1d", "2d", "3d"])
def test_matches_scipy(dims, mode, padding, align_corners):
    """One implementation per case, alternating, so that each meets every rank, mode, padding
    and align_corners (test_native_parity.py holds the two to each other)."""
    implementation = IMPLEMENTATIONS[(dims + ORDER[mode] + align_corners + (padding == "wrap"))
                                     % len(IMPLEMENTATIONS)]
    rng = np.random.default_rng(100 * dims + 10 * ORDER[mode] + align_corners)
    spatial = SPATIAL[dims]
    fill = dict(fill_value=FILL) if padding == "constant" else {}
    if dims == 1:  # a row: an input of height 1, y = 0 (the row itself under border)
        row = rng.standard_normal(spatial)
        x = row.reshape(1, 1, 1, -1)
        grid_x, u = _grid_away_from_halves(rng, POINTS[1], spatial, align_corners)
        grid = np.concatenate([grid_x, np.zeros_like(grid_x)], -1)
        padding_mode = (padding, "border")
        expected = _scipy(row, u, mode, padding, FILL)
    else:
        x = rng.standard_normal((1, 1) + spatial)
        grid, u = _grid_away_from_halves(rng, POINTS[dims], spatial, align_corners)
        padding_mode = padding
        expected = _scipy(x[0, 0], u, mode, padding, FILL)
    # the case tests padding: most points have a tap outside the input
    outside = np.any((np.floor(u) < 0) | (np.floor(u) + 1 > np.array(spatial[::-1]) - 1), -1)
    assert outside.mean() > 0.5
    out = gs.grid_sample(jnp.asarray(x), jnp.asarray(grid), mode=mode, padding_mode=padding_mode,
                         align_corners=align_corners, implementation=implementation, **fill)
    _close(np.asarray(out)[:, 0], expected, TOL)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("align_corners", [False, True], ids=["noac", "ac"])
def test_per_channel_fill_matches_scipy(align_corners, implementation):
    rng = np.random.default_rng(7)
    fill = np.array([1.5, -2.25, 0.5])
    x = rng.standard_normal((1, 3) + SPATIAL[2])
    grid, u = _grid_away_from_halves(rng, POINTS[2], SPATIAL[2], align_corners)
    out = gs.grid_sample(jnp.asarray(x), jnp.asarray(grid), padding_mode="constant",
                         align_corners=align_corners, implementation=implementation,
                         fill_value=jnp.asarray(fill))
    for channel in range(3):
        expected = _scipy(x[0, channel], u, "bilinear", "constant", fill[channel])
        _close(np.asarray(out)[:, channel], expected, TOL, f"channel {channel}")


# (id, spatial, align_corners): axes of size 1 among them, where both bilinear taps of wrap land
# on the same pixel
ADJOINT_CASES = [("2d-row", (1, 6), False), ("2d", (5, 6), True), ("3d-one-row", (3, 1, 5), False)]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("padding", ["constant", "wrap"])
@pytest.mark.parametrize("case", ADJOINT_CASES, ids=[c[0] for c in ADJOINT_CASES])
def test_input_gradient_is_the_adjoint_of_scipy(case, padding, implementation):
    """The input gradient is the adjoint of the (linear) map from input to output: its pixel k
    is sum(grad_output * scipy's output for the input e_k) (the fill value adds a constant)."""
    _, spatial, align_corners = case
    dims = len(spatial)
    rng = np.random.default_rng(30 + dims)
    grid, u = _grid_away_from_halves(rng, POINTS[dims], spatial, align_corners)
    grad_output = rng.standard_normal((1, 1) + POINTS[dims][1:])
    expected = np.zeros(spatial)
    for k in range(expected.size):
        basis = np.zeros(spatial)
        basis.flat[k] = 1
        expected.flat[k] = np.sum(grad_output[:, 0] * _scipy(basis, u, "bilinear", padding, 0.0))
    fill = dict(fill_value=FILL) if padding == "constant" else {}
    x = jnp.asarray(rng.standard_normal((1, 1) + spatial))
    input_grad, _ = gs.grid_sample_backward(jnp.asarray(grad_output), x, jnp.asarray(grid),
                                            padding_mode=padding, align_corners=align_corners,
                                            implementation=implementation, **fill)
    _close(np.asarray(input_grad)[0, 0], expected, TOL)


# --- 2. PyTorch on the input padded with the fill value ----------------------------------------

PAD = 5  # pixels of fill on each side
TORCH_CASES = [(2, "bilinear"), (2, "bicubic"), (3, "bilinear")]


def _padded(x, fill, dims):
    """torch.nn.functional.pad of each channel with its fill value (numpy in, numpy out)."""
    fills = np.broadcast_to(fill, x.shape[1:2])
    pads = (PAD,) * (2 * dims)
    return np.concatenate([
        torch.nn.functional.pad(torch.tensor(x[:, [i]]), pads, value=float(f)).numpy()
        for i, f in enumerate(fills)
    ], axis=1)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("align_corners", [False, True], ids=["noac", "ac"])
@pytest.mark.parametrize("case", TORCH_CASES, ids=[f"{d}d-{m}" for d, m in TORCH_CASES])
def test_constant_is_border_on_the_padded_input(case, align_corners, implementation):
    dims, mode = case
    rng = np.random.default_rng(20 + 3 * dims + align_corners)
    spatial = SPATIAL[dims]
    sizes = np.array(spatial[::-1])  # x first
    x = rng.standard_normal((1, 2) + spatial)
    fill = 1.25 if dims == 2 else np.array([0.5, -1.5])  # scalar / per channel
    grid = rng.uniform(-2.5, 2.5, POINTS[dims] + (dims,))
    u = _unnormalize(grid, sizes, align_corners)
    # every tap (bicubic's -1 .. 2 around floor(u)) inside the padded image
    inside = np.all((u >= -PAD + 2) & (u <= sizes - 1 + PAD - 2), -1)
    taps_out = np.any((np.floor(u) - 1 < 0) | (np.floor(u) + 2 > sizes - 1), -1)
    assert inside.mean() > 0.5 and (inside & taps_out).mean() > 0.3
    grad_output = rng.standard_normal((1, 2) + POINTS[dims][1:]) * inside[:, None]
    # torch: border padding on the padded image, the grid rescaled to it
    padded = _padded(x, fill, dims)
    grid_padded = _normalize(u + PAD, sizes + 2 * PAD, align_corners)
    out_t, gpad_t, ggrid_t = torch_grid_sample(padded, grid_padded, grad_output, mode=mode,
                                               padding_mode="border",
                                               align_corners=align_corners)
    interior = (slice(None), slice(None)) + (slice(PAD, -PAD),) * dims
    gx_t = gpad_t[interior]
    spatial_axes = tuple(range(2, 2 + dims))
    gfill_t = gpad_t.sum(spatial_axes).sum(0) - gx_t.sum(spatial_axes).sum(0)
    if np.ndim(fill) == 0:
        gfill_t = gfill_t.sum()
    # d (padded grid) / d grid, per component
    scale = (sizes - 1) / (sizes + 2 * PAD - 1) if align_corners else sizes / (sizes + 2 * PAD)
    ggrid_t = ggrid_t * scale
    # ours
    kwargs = dict(mode=mode, padding_mode="constant", align_corners=align_corners,
                  implementation=implementation, fill_value=jnp.asarray(fill))
    xj, gj = jnp.asarray(x), jnp.asarray(grid)
    out = np.asarray(gs.grid_sample(xj, gj, **kwargs))
    gx, ggrid, gfill = gs.grid_sample_backward(jnp.asarray(grad_output), xj, gj,
                                               output_mask=(True, True, True), **kwargs)
    keep = np.broadcast_to(inside[:, None], out.shape)
    _close(out[keep], out_t[keep], TOL, "output")
    _close(gx, gx_t, TOL, "input gradient")
    _close(ggrid, ggrid_t, TOL, "grid gradient")
    _close(gfill, gfill_t, TOL, "fill gradient")
    # a two-entry mask: the same input and grid gradients (the grid's with the fill term's)
    two = gs.grid_sample_backward(jnp.asarray(grad_output), xj, gj, **kwargs)
    for name, a, b in zip(("input", "grid"), two, (gx_t, ggrid_t), strict=True):
        _close(a, b, TOL, f"{name} gradient, mask (True, True)")


# --- 3. gradients ------------------------------------------------------------------------------

# (id, dims, mode, padding_mode, fill: None, "scalar" or "channels", align_corners)
GRAD_CASES = [
    ("2d-bilinear-constant", 2, "bilinear", "constant", "scalar", False),
    ("2d-bicubic-constant-channels", 2, "bicubic", "constant", "channels", True),
    ("3d-bilinear-constant-channels", 3, "bilinear", "constant", "channels", False),
    ("3d-bicubic-constant", 3, "bicubic", "constant", "scalar", True),
    ("2d-bilinear-wrap", 2, "bilinear", "wrap", None, True),
    ("2d-bicubic-wrap", 2, "bicubic", "wrap", None, False),
    ("3d-bilinear-wrap", 3, "bilinear", "wrap", None, True),
    ("2d-bilinear-wrap-border", 2, "bilinear", ("wrap", "border"), None, False),
    ("2d-bicubic-constant-reflection", 2, "bicubic", ("constant", "reflection"), "scalar",
     False),
    ("2d-bilinear-reflection-constant", 2, "bilinear", ("reflection", "constant"), "channels",
     True),
]
GRAD_SPATIAL = {2: (4, 5), 3: (3, 4, 4)}
GRAD_POINTS = {2: (1, 3, 4), 3: (1, 2, 2, 3)}
CHANNELS = 2
GRAD_TOLERANCE = dict(eps=1e-6, atol=1e-6, rtol=1e-6)


def _smooth_grid(rng, dims, align_corners):
    """Grid values whose unnormalized coordinates lie in [-3, S + 2), at least 0.15 from every
    integer and half-integer (the kinks of the weights, the mirrors, the clamps)."""
    spatial = GRAD_SPATIAL[dims]
    points = GRAD_POINTS[dims]
    coords = []
    for j in range(dims):
        size = spatial[dims - 1 - j]
        whole = rng.integers(-3, size + 2, points)
        frac = rng.uniform(0.15, 0.35, points) + 0.5 * rng.integers(0, 2, points)
        coords.append(_normalize(whole + frac, size, align_corners))
    return np.stack(coords, -1)


def _grad_case(case, dtype=np.float64):
    _, dims, mode, padding, fill_kind, align_corners = case
    rng = np.random.default_rng(sum(map(ord, case[0])))
    x = rng.standard_normal((1, CHANNELS) + GRAD_SPATIAL[dims])
    grid = _smooth_grid(rng, dims, align_corners)
    go = rng.standard_normal((1, CHANNELS) + GRAD_POINTS[dims][1:])
    fill = {None: None, "scalar": np.array(-1.3),
            "channels": np.array([0.7, -1.9])}[fill_kind]
    arrays = [jnp.asarray(a, dtype) for a in (x, grid, go)]
    if fill is not None:
        arrays.append(jnp.asarray(fill, dtype))
    kwargs = dict(mode=mode, padding_mode=padding, align_corners=align_corners)
    return arrays, kwargs


@pytest.mark.parametrize("case, implementation", [
    (case, IMPLEMENTATIONS[i % len(IMPLEMENTATIONS)]) for i, case in enumerate(GRAD_CASES)],
    ids=[f"{c[0]}-{IMPLEMENTATIONS[i % len(IMPLEMENTATIONS)]}" for i, c in enumerate(GRAD_CASES)])
def test_numeric_gradients(case, implementation):
    """Finite differences in float64, one implementation per case, alternating (the native
    gradients are held to the reference's by test_backward_native_float32_vs_reference...)."""
    (x, grid, _, *fill), kwargs = _grad_case(case)
    kwargs["implementation"] = implementation

    def f(x, grid, *fill):
        return gs.grid_sample(x, grid, **kwargs, **({"fill_value": fill[0]} if fill else {}))

    # grid_sample is a custom_vjp: reverse mode
    check_grads(f, (x, grid, *fill), order=1, modes=("rev",), **GRAD_TOLERANCE)


def _loss(x, grid, go, fill, kwargs, implementation="reference"):
    """sum(go * grid_sample(...)), the loss whose gradients grid_sample_backward gives."""
    extra = {} if fill is None else {"fill_value": fill}
    out = gs.grid_sample(x, grid, implementation=implementation, **kwargs, **extra)
    return jnp.sum(go * out)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_backward_native_float32_vs_reference_and_fill_gradient(case):
    (x, grid, go, *fill), kwargs = _grad_case(case)
    fill = fill[0] if fill else None
    extra = {} if fill is None else {"fill_value": fill}
    mask = (True, True, True)
    reference = gs.grid_sample_backward(go, x, grid, output_mask=mask,
                                        implementation="reference", **kwargs, **extra)
    f32 = [a.astype(jnp.float32) for a in (go, x, grid)]
    extra32 = {} if fill is None else {"fill_value": fill.astype(jnp.float32)}
    native = gs.grid_sample_backward(*f32, output_mask=mask, implementation="native", **kwargs,
                                     **extra32)
    for name, a, b in zip(("input", "grid", "fill"), native, reference, strict=True):
        assert a.dtype == jnp.float32 and a.shape == b.shape, name
        _close(a, b, 1e-4, f"native float32 vs reference float64 {name} gradient")
    # jax.grad of the loss (its fill gradient: autodiff of the fill term) is the backward
    if fill is not None:
        by_grad = jax.grad(_loss, argnums=(0, 1, 3))(x, grid, go, fill, kwargs)
        for name, a, b in zip(("input", "grid", "fill"), by_grad, reference, strict=True):
            _close(a, b, TOL, f"jax.grad vs grid_sample_backward {name} gradient")
    # fill_grad = sum(go * (1 - W)), W (the weight of the taps that read the input) sampled
    # from an input of ones with "zeros" for "constant"
    padding = kwargs["padding_mode"]
    zeros = (tuple("zeros" if p == "constant" else p for p in padding)
             if isinstance(padding, tuple) else padding.replace("constant", "zeros"))
    weight = gs.grid_sample(jnp.ones_like(x), grid, mode=kwargs["mode"], padding_mode=zeros,
                            align_corners=kwargs["align_corners"], implementation="reference")
    per_channel = np.sum(np.asarray(go) * (1 - np.asarray(weight)), axis=(0,) + tuple(
        range(2, go.ndim)))
    expected = per_channel if fill is not None and fill.ndim == 1 else per_channel.sum()
    _close(reference[2], expected, TOL, "fill gradient vs sum(go * (1 - W))")
    if fill is None:
        return
    # and against central differences of the loss in the fill value, which it is linear in
    # (exact up to rounding); also with the fill value omitted (a scalar 0)
    basis = np.eye(fill.size).reshape((fill.size,) + fill.shape)
    differences = [(_loss(x, grid, go, fill + e, kwargs) - _loss(x, grid, go, fill - e, kwargs))
                   / 2 for e in basis]
    _close(reference[2], np.reshape(differences, fill.shape), TOL, "fill gradient vs FD")
    at_zero = gs.grid_sample_backward(go, x, grid, output_mask=mask, implementation="reference",
                                      **kwargs)[2]
    one = np.ones(fill.shape)
    difference = (_loss(x, grid, go, one, kwargs) - _loss(x, grid, go, -one, kwargs)) / 2
    assert at_zero.shape == ()
    _close(at_zero, difference, TOL, "fill gradient with the fill omitted vs FD at 0")


# --- 4. exact rules ----------------------------------------------------------------------------

# (id, dims, mode, padding_mode with "constant" where zeros reads the fill value)
ZERO_FILL_CASES = [
    ("2d-bilinear", 2, "bilinear", "constant"),
    ("2d-nearest", 2, "nearest", "constant"),
    ("2d-bicubic", 2, "bicubic", "constant"),
    ("3d-bilinear", 3, "bilinear", "constant"),
    ("2d-bilinear-constant-border", 2, "bilinear", ("constant", "border")),
]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("case", ZERO_FILL_CASES, ids=[c[0] for c in ZERO_FILL_CASES])
def test_constant_with_fill_zero_is_zeros(case, implementation):
    """Bit for bit on the native kernels. The reference's sums over taps are XLA's reductions,
    whose order XLA picks per program, so there the two calls agree to their rounding (its
    weights are the same bits: docs/semantics.md, "Bit for bit")."""
    _, dims, mode, padding = case
    rng = np.random.default_rng(5)
    spatial = GRAD_SPATIAL[dims]
    x = jnp.asarray(rng.standard_normal((1, CHANNELS) + spatial))
    grid = jnp.asarray(rng.uniform(-2.5, 2.5, GRAD_POINTS[dims] + (dims,)))
    go = jnp.asarray(rng.standard_normal((1, CHANNELS) + GRAD_POINTS[dims][1:]))
    zeros = (tuple("zeros" if p == "constant" else p for p in padding)
             if isinstance(padding, tuple) else "zeros")
    common = dict(mode=mode, align_corners=False, implementation=implementation)
    mask = (True, True, True)
    expected = (gs.grid_sample(x, grid, padding_mode=zeros, **common),
                *gs.grid_sample_backward(go, x, grid, padding_mode=zeros, output_mask=mask,
                                         **common))
    for fill in ({}, {"fill_value": 0.0}, {"fill_value": jnp.zeros(CHANNELS)}):
        actual = (gs.grid_sample(x, grid, padding_mode=padding, **common, **fill),
                  *gs.grid_sample_backward(go, x, grid, padding_mode=padding, output_mask=mask,
                                           **common, **fill))
        for name, a, b in zip(("output", "input grad", "grid grad", "fill grad"), actual,
                              expected, strict=True):
            if np.ndim(a) == 1:  # the per-channel fill's gradient: its sum is the scalar one
                _close(np.sum(a), b, TOL, f"{name} {fill}")
            elif implementation == "reference":
                _close(a, b, TOL, f"{name} {fill}")
            else:
                np.testing.assert_array_equal(a, b, err_msg=f"{name} {fill}")


# (id, dims, mode): what reads no fill value, each interpolation mode
UNREAD_FILL_CASES = [("2d-bilinear", 2, "bilinear"), ("2d-nearest", 2, "nearest"),
                     ("2d-bicubic", 2, "bicubic"), ("3d-bilinear", 3, "bilinear")]


def _constant_call(x, grid, go, fill, dtype, channels_last, **common):
    """Output, input, grid and fill gradients of a "constant" call in ``dtype`` and the given
    layout (``x``, ``go`` channels first), as numpy: the output and the input gradient with
    channels last (points first), whatever the layout."""
    dims = grid.shape[-1]
    layout = ("NHWC" if dims == 2 else "NDHWC") if channels_last else None
    to_layout = (lambda a: np.moveaxis(a, 1, -1)) if channels_last else (lambda a: a)
    x, go = (jnp.asarray(to_layout(a), dtype) for a in (x, go))
    kwargs = dict(padding_mode="constant", fill_value=jnp.asarray(fill, dtype), layout=layout,
                  **common)
    grid = jnp.asarray(grid, dtype)
    results = (gs.grid_sample(x, grid, **kwargs),
               *gs.grid_sample_backward(go, x, grid, output_mask=(True, True, True), **kwargs))
    out, input_grad, grid_grad, fill_grad = (np.asarray(a) for a in results)
    if not channels_last:
        out, input_grad = np.moveaxis(out, 1, -1), np.moveaxis(input_grad, 1, -1)
    return out, input_grad, grid_grad, fill_grad


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("case", UNREAD_FILL_CASES, ids=[c[0] for c in UNREAD_FILL_CASES])
def test_a_point_that_reads_no_fill_value_does_not_depend_on_it(case, implementation):
    """A NaN or infinite fill value (scipy's ``cval=nan`` marks what was outside) reaches only the
    points with a tap outside: a point whose taps are all inside gives exactly the "zeros" output
    and grid gradient (its share of the fill value is exactly 0, and bicubic's inside weights,
    which sum to 1 only to rounding, are not summed for it), and the input and fill gradients do
    not depend on the fill value at all. Which taps are inside is counted here in numpy. In
    float64, and in float32 in both layouts, where the native CPU forward takes its vector
    kernels (4 channels: channels last too). Nor does a point exactly on the last pixel, whose
    second tap lies outside with weight 0 (unlike scipy's)."""
    _, dims, mode = case
    rng = np.random.default_rng(17)
    spatial = GRAD_SPATIAL[dims]
    points = (1, 6, 7) if dims == 2 else (1, 3, 4, 4)
    channels = 4
    x = rng.standard_normal((1, channels) + spatial)
    grid = rng.uniform(-1.3, 1.3, points + (dims,))
    go = rng.standard_normal((1, channels) + points[1:])
    reads_fill = np.zeros(points, bool)
    for j in range(dims):
        size = spatial[dims - 1 - j]
        u = _unnormalize(grid[..., j], size, False)
        first, last = {"nearest": (np.round(u),) * 2, "bilinear": (np.floor(u), np.floor(u) + 1),
                       "bicubic": (np.floor(u) - 1, np.floor(u) + 2)}[mode]
        reads_fill |= (first < 0) | (last > size - 1)
    assert 0 < reads_fill.sum() < reads_fill.size  # both kinds of point
    common = dict(mode=mode, align_corners=False, implementation=implementation)
    for dtype, channels_last in ((np.float64, False), (np.float32, False), (np.float32, True)):
        args = (x, grid, go)
        out0, input_grad0, grid_grad0, fill_grad0 = _constant_call(
            *args, np.zeros(channels), dtype, channels_last, **common)
        for fill in (np.nan, np.inf):
            what = f"{np.dtype(dtype).name} channels_last={channels_last} fill {fill}"
            out, input_grad, grid_grad, fill_grad = _constant_call(
                *args, [fill, -fill, fill, 2 * fill], dtype, channels_last, **common)
            np.testing.assert_array_equal(out[~reads_fill], out0[~reads_fill], err_msg=what)
            assert not np.isfinite(out[reads_fill]).any(), what
            np.testing.assert_array_equal(grid_grad[~reads_fill], grid_grad0[~reads_fill],
                                          err_msg=what)
            np.testing.assert_array_equal(input_grad, input_grad0, err_msg=what)
            np.testing.assert_array_equal(fill_grad, fill_grad0, err_msg=what)
    if mode == "bilinear":  # on the last pixel of every axis: a tap outside of weight 0 only
        corner = gs.grid_sample(jnp.asarray(x), jnp.ones((1,) * (dims + 1) + (dims,)),
                                padding_mode="constant", fill_value=np.nan, align_corners=True,
                                mode=mode, implementation=implementation)
        np.testing.assert_array_equal(np.ravel(corner), x[(0, slice(None)) + (-1,) * dims])


SPECIAL = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30])


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("align_corners", [False, True], ids=["noac", "ac"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["constant", "wrap"])
def test_non_finite_and_huge_coordinates(padding, mode, align_corners, implementation):
    rng = np.random.default_rng(9)
    x = jnp.asarray(rng.standard_normal((1, CHANNELS) + GRAD_SPATIAL[2]))
    # rows: x special, y special, both special; other components ordinary
    grid = rng.uniform(-1.5, 1.5, (1, 3, SPECIAL.size, 2))
    grid[0, 0, :, 0] = grid[0, 1, :, 1] = grid[0, 2, :, 0] = SPECIAL
    grid[0, 2, :, 1] = SPECIAL[::-1]
    special = ~np.isfinite(grid) | (np.abs(grid) > 1e20)
    kwargs = dict(mode=mode, padding_mode=padding, align_corners=align_corners,
                  implementation=implementation)
    fill = np.array([1.25, -0.5])
    if padding == "constant":
        kwargs["fill_value"] = jnp.asarray(fill)
    out = np.asarray(gs.grid_sample(x, jnp.asarray(grid), **kwargs))
    if padding == "constant":  # every tap outside: exactly the fill value
        expected = np.broadcast_to(fill[None, :, None, None], out.shape)
    else:  # the guard puts the coordinate where -1 puts it
        expected = np.asarray(gs.grid_sample(x, jnp.asarray(np.where(special, -1.0, grid)),
                                             **kwargs))
    np.testing.assert_array_equal(out, expected)
    go = jnp.asarray(rng.standard_normal(out.shape))
    grads = gs.grid_sample_backward(go, x, jnp.asarray(grid), **kwargs)
    assert all(np.all(np.isfinite(g)) for g in grads)
    np.testing.assert_array_equal(np.asarray(grads[1])[special], 0.0)  # replaced: derivative 0


NEAR_THE_BOUND = np.array(WITHOUT_FRACTION)  # on both sides of the guard's 2**23 pixels


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("align_corners", [False, True], ids=["noac", "ac"])
def test_wrap_keeps_every_position_below_the_bound(align_corners, implementation):
    """Float32 "wrap" samples a position below 2**23 pixels where scipy's grid-wrap samples it
    (in float64, at the same position), and one at 2**23 or more (no fractional bits) where the
    coordinate -1 puts it, with derivative 0: the guard's bound itself, not only its far side."""
    width, height = 5, 3
    with np.errstate(over="ignore"):  # the largest overflow to inf, which `kept` leaves out
        u = _unnormalize(NEAR_THE_BOUND.astype(np.float32), width, align_corners)  # rounded as ours
    kept = np.abs(u) < 2.0**23
    assert 0 < kept.sum() < kept.size
    np.testing.assert_array_equal(u[kept], _unnormalize(NEAR_THE_BOUND, width, align_corners)[kept])
    x = np.random.default_rng(12).standard_normal((1, CHANNELS, height, width)).astype(np.float32)
    grid = np.stack([NEAR_THE_BOUND, np.full(u.size, 0.25)], -1).reshape(1, 1, -1, 2)
    kwargs = dict(padding_mode="wrap", align_corners=align_corners, implementation=implementation)
    x, grid = jnp.asarray(x), jnp.asarray(grid, jnp.float32)
    out = gs.grid_sample(x, grid, **kwargs)
    at = np.stack([np.where(kept, u, _unnormalize(-1.0, width, align_corners)),
                   np.full(u.size, _unnormalize(0.25, height, align_corners))], -1)
    expected = [_scipy(np.asarray(x[0, c], np.float64), at, "bilinear", "wrap", 0.0)
                for c in range(CHANNELS)]
    _close(out[0, :, 0], np.stack(expected), 1e-6, "output")
    grid_grad = gs.grid_sample_backward(jnp.ones_like(out), x, grid, **kwargs)[1]
    np.testing.assert_array_equal(np.asarray(grid_grad)[0, 0, ~kept, 0], 0.0)
    assert np.all(np.asarray(grid_grad)[0, 0, kept, 0] != 0.0)
