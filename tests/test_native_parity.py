"""The native CPU kernels against float64 oracles, called directly through their FFI targets.

Oracles: PyTorch's grid_sample (float64, gradients by ``.backward()``) for finite coordinates
wherever it has the case, and the jnp reference (``_reference.py``): jitted once per shape and
configuration for 3D bicubic, which PyTorch does not have, and run op by op for non-finite and
huge coordinates (docs/semantics.md step 2), in float64 or the dtype's own arithmetic. (The
reference and PyTorch agree on every case both have: test_semantics.py.)

test_float64_matches_oracles and test_low_precision_matches_float64_oracle cover every (rank,
mode, padding, align_corners) x dtype x layout; the tests after them the kernels' internal paths
(partitions, staging, vector widths, channel counts, plane sizes), each on the cases that take
it; test_nonfinite_and_huge_coordinates a covering set of every pair of mode, padding, rank,
align_corners, layout and dtype, each grid holding every special value on every axis.
"""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch
from oracle import ON_CUDA

import jax_gridsample
from jax_gridsample import _contract, _native
from jax_gridsample._reference import grid_sample_backward_reference, grid_sample_reference

# The platform whose native kernels these tests call (ON_CUDA, see conftest.py): "cpu" by default;
# "cuda" calls the CUDA targets, whose backward takes a `deterministic` attribute (default path
# unless JAX_GRIDSAMPLE_TEST_DETERMINISTIC=1; the determinism test always asks for it).
DETERMINISTIC = os.environ.get("JAX_GRIDSAMPLE_TEST_DETERMINISTIC") == "1"
_PLATFORM = "cuda" if ON_CUDA else "cpu"

pytestmark = pytest.mark.skipif(
    not (_native.cuda_available() if ON_CUDA else _native.cpu_available())
    and not os.environ.get("JAX_GRIDSAMPLE_REQUIRE_NATIVE"),
    reason=f"native {_PLATFORM} kernel not available: {_native.native_status().get(_PLATFORM)}",
)


def _backward_extra(deterministic=None) -> dict:
    """Attributes only the CUDA backward has."""
    if not ON_CUDA:
        return {}
    return dict(deterministic=DETERMINISTIC if deterministic is None else bool(deterministic))

MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2, "wrap": 4}
# One mode per axis (x, y, z; the first two in 2D): "mixed" wraps x (its seam points, whose two
# taps are not contiguous, are summed apart from the bilinear sampler's pairs) beside zeros and
# reflection.
# "constant" (fill_values(C)): the forward and, on the CPU, the backward (version 3) take the fill
# value; CUDA's backward takes "zeros" in its place (the fill term's gradients are XLA's there).
CONSTANT = {"constant": 3}
# "mixed-constant" has a constant axis beside border and wrap.
MIXED = {"mixed": ("wrap", "zeros", "reflection"),
         "mixed-constant": ("border", "constant", "wrap")}
TORCH_PADDINGS = ("zeros", "border", "reflection")


CODES = {**PADDINGS, **CONSTANT}


def pad_code(padding):
    """The target's `padding` attribute of a padding name: a code, or a tuple (x, y, z) that
    the calls cut to the grid's axes."""
    if padding in MIXED:
        return tuple(CODES[m] for m in MIXED[padding])
    return CODES[padding]


def pad_codes(padding, dims):
    """The target's `padding` attribute (one code per axis, x first) of a padding name."""
    if padding in MIXED:
        return tuple(CODES[m] for m in MIXED[padding][:dims])
    return (CODES[padding],) * dims


def has_constant(padding):
    return 3 in pad_codes(padding, 3)


DTYPES = {
    "float64": np.float64,
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
}
# Comparison tolerance (relative to the magnitude of the quantity) per dtype.
TOL = {"float64": 1e-10, "float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2}

NAMES = ("output", "grad_input", "grad_grid")
ALL_CASES = list(itertools.product((2, 3), MODES, PADDINGS, (False, True)))


def _attrs(interpolation, padding, align_corners, channels_last, dims):
    """`padding`: a code for every axis, or a tuple of one per axis (x first)."""
    codes = padding[:dims] if isinstance(padding, tuple) else (padding,) * dims
    return dict(interpolation=np.int64(interpolation), padding=np.asarray(codes, np.int64),
                align_corners=bool(align_corners), channels_last=bool(channels_last))


def _to_layout(x, channels_last):
    return jnp.moveaxis(x, 1, -1) if channels_last else x


def _from_layout(x, channels_last):
    return jnp.moveaxis(x, -1, 1) if channels_last else x


# The backward target the lowering calls: version 3 on the CPU (the fill value, its gradient),
# version 2 on CUDA.
BACKWARD = _native.BACKWARD_TARGET if ON_CUDA else _native.CPU_BACKWARD_TARGET

# The CPU module's test targets that take a `strategy` attribute (not part of the contract).
STRATEGY_TARGETS = {_native.FORWARD_TARGET: "jax_gridsample_forward_with_strategy",
                    _native.CPU_BACKWARD_TARGET: "jax_gridsample_backward_with_strategy"}


def _target(name, strategy):
    """The FFI target and its extra attributes: the production one, or with `strategy` the CPU
    test target that forces that strategy (ffi/cpu/strategies.h)."""
    if strategy is None:
        return name, {}
    return STRATEGY_TARGETS[name], {"strategy": np.int64(strategy)}


def fill_values(channels, dtype=np.float64):
    """The fill value of the tests' "constant" calls: one per channel, all different."""
    return np.linspace(-1.5, 2.25, channels).astype(dtype)


def native_forward(x, grid, interpolation, padding, align_corners, channels_last=False,
                   strategy=None):
    """x is NC* (channels first) whatever the layout; the result too. A "constant" axis reads
    fill_values(C)."""
    xl = _to_layout(jnp.asarray(x), channels_last)
    grid = jnp.asarray(grid)
    n, c = x.shape[0], x.shape[1]
    so = grid.shape[1:-1]
    shape = (n,) + so + (c,) if channels_last else (n, c) + so
    target, extra = _target(_native.FORWARD_TARGET, strategy)
    fill = jnp.asarray(fill_values(c, xl.dtype))
    out = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(shape, xl.dtype))(
        xl, grid, fill,
        **_attrs(interpolation, padding, align_corners, channels_last, grid.shape[-1]), **extra)
    return _from_layout(out, channels_last)


def native_backward(grad_output, x, grid, interpolation, padding, align_corners,
                    channels_last=False, output_mask=(True, True), deterministic=None,
                    strategy=None):
    """(grad_input, grad_grid), and grad_fill with a three-entry output_mask (the CPU's version
    3: a "constant" axis reads fill_values(C))."""
    xl = _to_layout(jnp.asarray(x), channels_last)
    gol = _to_layout(jnp.asarray(grad_output), channels_last)
    grid = jnp.asarray(grid)
    c = x.shape[1]
    mask = (*output_mask, False)[:3]
    results = [jax.ShapeDtypeStruct(s, xl.dtype) for s, m in zip(
        (xl.shape, grid.shape, (c,)), mask, strict=True) if m]
    target, extra = _target(BACKWARD, strategy)
    operands = [gol, xl, grid]
    if target != _native.BACKWARD_TARGET:  # version 3
        constant = 3 in np.atleast_1d(padding)
        operands.append(jnp.asarray(fill_values(c, xl.dtype) if constant
                                    else np.zeros(0, xl.dtype)))
        extra = dict(extra, fill_mask=bool(mask[2]))
    outs = list(jax.ffi.ffi_call(target, results)(
        *operands, **_attrs(interpolation, padding, align_corners, channels_last,
                            grid.shape[-1]),
        input_mask=bool(mask[0]), grid_mask=bool(mask[1]),
        **_backward_extra(deterministic), **extra))
    gi = _from_layout(outs.pop(0), channels_last) if mask[0] else None
    gg = outs.pop(0) if mask[1] else None
    if len(output_mask) == 2:
        return gi, gg
    return gi, gg, outs.pop(0) if mask[2] else None


def native_fill_backward(grad_output, grid, spatial, interpolation, padding, align_corners,
                         channels_last=False, mask=(True, True)):
    """The CPU's fill backward target of version 2 (grad_output NC* whatever the layout): the
    fill term's grid gradient and fill gradient, fill_values(C)."""
    gol = _to_layout(jnp.asarray(grad_output), channels_last)
    grid = jnp.asarray(grid)
    c = grad_output.shape[1]
    results = [jax.ShapeDtypeStruct(s, gol.dtype)
               for s, m in ((grid.shape, mask[0]), ((c,), mask[1])) if m]
    return jax.ffi.ffi_call(_contract.FILL_BACKWARD_TARGET, results)(
        gol, grid, jnp.asarray(fill_values(c, gol.dtype)),
        **_attrs(interpolation, padding, align_corners, channels_last, grid.shape[-1]),
        spatial=np.asarray(spatial, np.int64), grid_mask=bool(mask[0]), fill_mask=bool(mask[1]))


def torch_oracle(x, grid, grad_output, mode, padding, align_corners):
    """PyTorch's float64 output and gradients (output only when grad_output is None)."""
    tx = torch.tensor(np.asarray(x, np.float64), requires_grad=grad_output is not None)
    tg = torch.tensor(np.asarray(grid, np.float64), requires_grad=grad_output is not None)
    out = torch.nn.functional.grid_sample(tx, tg, mode=mode, padding_mode=padding,
                                          align_corners=align_corners)
    if grad_output is None:
        return out.numpy(), None, None
    out.backward(torch.tensor(np.asarray(grad_output, np.float64)))
    return out.detach().numpy(), tx.grad.numpy(), tg.grad.numpy()


def _reference(x, grid, grad_output, mode, padding, align_corners):
    codes = pad_codes(padding, grid.shape[-1])
    if 3 in codes:  # the public reference: "zeros" plus the fill term (forward only)
        assert grad_output is None
        out = jax_gridsample.grid_sample(
            x, grid, mode=mode, align_corners=align_corners, implementation="reference",
            padding_mode=tuple({v: k for k, v in CODES.items()}[c] for c in codes),
            fill_value=jnp.asarray(fill_values(x.shape[1]), x.dtype))
        return out, None, None
    out = grid_sample_reference(x, grid, MODES[mode], codes, align_corners)
    if grad_output is None:
        return out, None, None
    return (out,) + grid_sample_backward_reference(grad_output, x, grid, MODES[mode], codes,
                                                   align_corners, (True, True))


_reference_jit = jax.jit(_reference, static_argnums=(3, 4, 5))


def reference_oracle(x, grid, grad_output, mode, padding, align_corners, dtype=np.float64,
                     op_by_op=False):
    """The reference's output and gradients (output only when grad_output is None), computed in
    ``dtype`` (float64: the float64 oracle; another: that dtype's own arithmetic).

    Compiled once per shape and configuration, unless ``op_by_op``: then each operation runs on
    its own, rounded as written: the arithmetic docs/semantics.md specifies and the kernels
    follow bit for bit. (Compiled as one program, the positions are the same bits, but XLA may
    fuse bicubic's polynomials into multiply-adds and sums in another order: the last bit of a
    result can differ.)
    """
    x, grid = (jnp.asarray(np.asarray(a, np.float64), dtype) for a in (x, grid))
    if grad_output is not None:
        grad_output = jnp.asarray(np.asarray(grad_output, np.float64), dtype)
    reference = _reference if op_by_op else _reference_jit
    return tuple(None if a is None else np.asarray(a, np.float64)
                 for a in reference(x, grid, grad_output, mode, padding, align_corners))


def oracle(x, grid, grad_output, mode, padding, align_corners):
    """Float64 output and gradients: PyTorch's where it has the case, else the reference's."""
    if (grid.shape[-1] == 3 and mode == "bicubic") or padding not in TORCH_PADDINGS:
        return reference_oracle(x, grid, grad_output, mode, padding, align_corners)
    return torch_oracle(x, grid, grad_output, mode, padding, align_corners)


def random_case(dims, rng, dtype=np.float64, batch=2, channels=3, spatial=None, out_spatial=None,
                quantize=False):
    spatial = spatial or (4, 5, 6)[-dims:]
    out_spatial = out_spatial or (3, 4, 5)[-dims:]
    x = rng.standard_normal((batch, channels) + spatial)
    if quantize:  # multiples of 1/64: coordinate math is exact in float32 and float64 alike
        grid = rng.integers(-84, 85, (batch,) + out_spatial + (dims,)) / 64.0
    else:
        grid = rng.uniform(-1.3, 1.3, (batch,) + out_spatial + (dims,))
    grad_output = rng.standard_normal((batch, channels) + out_spatial)
    return tuple(np.asarray(a, dtype) for a in (x, grid, grad_output))


def assert_close(actual, expected, tol, what):
    actual = np.asarray(actual, np.float64)
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale, err_msg=what)


def _case_id(case):
    dims, mode, padding, align_corners = case
    return f"{dims}d-{mode}-{padding}-{'ac' if align_corners else 'noac'}"


def _seed(name: str) -> int:
    """A seed of the test's name, the same in every run (unlike hash(), salted per process)."""
    return zlib.crc32(name.encode())


# --- float64 parity with PyTorch and the reference -----------------------------------------

@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("case", ALL_CASES, ids=_case_id)
def test_float64_matches_oracles(case, channels_last):
    dims, mode, padding, align_corners = case
    rng = np.random.default_rng(_seed(_case_id(case)))
    x, grid, go = random_case(dims, rng)
    out = native_forward(x, grid, MODES[mode], pad_code(padding), align_corners, channels_last)
    gi, gg = native_backward(go, x, grid, MODES[mode], pad_code(padding), align_corners,
                             channels_last)
    expected = oracle(x, grid, go, mode, padding, align_corners)
    for name, a, e in zip(NAMES, (out, gi, gg), expected, strict=True):
        assert_close(a, e, 1e-10, f"{name} {_case_id(case)}")
    if mode == "nearest":
        assert not np.any(np.asarray(gg))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", ALL_CASES, ids=_case_id)
def test_low_precision_matches_float64_oracle(case, dtype):
    """Half types compute in float32; compare with the float64 oracle on the same values."""
    dims, mode, padding, align_corners = case
    rng = np.random.default_rng(_seed(_case_id(case) + dtype))
    x, grid, go = random_case(dims, rng, dtype=DTYPES[dtype], quantize=True)
    channels_last = bool(rng.integers(2))
    out = native_forward(x, grid, MODES[mode], pad_code(padding), align_corners, channels_last)
    gi, gg = native_backward(go, x, grid, MODES[mode], pad_code(padding), align_corners,
                             channels_last)
    assert out.dtype == gi.dtype == gg.dtype == jnp.dtype(DTYPES[dtype])
    expected = oracle(x, grid, go, mode, padding, align_corners)
    for name, a, e in zip(NAMES, (out, gi, gg), expected, strict=True):
        assert_close(a, e, TOL[dtype], f"{name} {dtype} {_case_id(case)}")


@pytest.mark.parametrize("padding", ["constant", "mixed-constant"])
@pytest.mark.parametrize("case", [c[:2] + c[3:] for c in ALL_CASES if c[2] == "zeros"],
                         ids=lambda c: f"{c[0]}d-{c[1]}-{'ac' if c[2] else 'noac'}")
def test_constant_forward_matches_oracle(case, padding):
    """The forward target's fill operand: each dtype (float64 in both layouts, the others in
    one) against the float64 reference's "zeros" plus fill term, with a different fill value
    per channel and grids that put many taps outside."""
    dims, mode, align_corners = case
    rng = np.random.default_rng(_seed(f"{case}{padding}"))
    for dtype, layouts in (("float64", (False, True)), ("float32", (bool(rng.integers(2)),)),
                           ("float16", (bool(rng.integers(2)),)),
                           ("bfloat16", (bool(rng.integers(2)),))):
        x, grid, _ = random_case(dims, rng, dtype=DTYPES[dtype], quantize=dtype != "float64")
        grid = (grid * 1.5).astype(DTYPES[dtype])
        expected = reference_oracle(x, grid, None, mode, padding, align_corners)[0]
        for channels_last in layouts:
            out = native_forward(x, grid, MODES[mode], pad_code(padding), align_corners,
                                 channels_last)
            assert_close(out, expected, TOL[dtype], f"{dtype} cl={channels_last}")


@pytest.mark.skipif(ON_CUDA, reason="the CPU's fill backward")
@pytest.mark.parametrize("padding", ["constant", "mixed-constant"])
@pytest.mark.parametrize("case", [c[:2] + c[3:] for c in ALL_CASES if c[2] == "zeros"],
                         ids=lambda c: f"{c[0]}d-{c[1]}-{'ac' if c[2] else 'noac'}")
def test_fill_backward_matches_reference(case, padding):
    """The fill term's gradients (one pass over grad_output) against the float64 reference's
    (_fill.fill_vjp): each dtype, both layouts for float64, each gradient alone too; chunks of
    points across tasks (more than 4096 points in one batch element). Version 2's fill backward
    target computes them alone; version 3's backward adds its grid part to the "zeros" grid
    gradient (bitwise the sum of the two version 2 targets' in float32 and float64, which XLA
    added) and returns the fill gradient, its input gradient that of "zeros"."""
    from jax_gridsample._fill import fill_vjp, term_params

    dims, mode, align_corners = case
    rng = np.random.default_rng(_seed(f"fill{case}{padding}"))
    codes = pad_codes(padding, dims)
    for dtype, layouts in (("float64", (False, True)), ("float32", (bool(rng.integers(2)),)),
                           ("bfloat16", (bool(rng.integers(2)),))):
        out_spatial = (70, 61) if dims == 2 else (17, 16, 17)
        x, grid, go = random_case(dims, rng, dtype=DTYPES[dtype], quantize=dtype != "float64",
                                  out_spatial=out_spatial)
        grid = (grid * 1.5).astype(DTYPES[dtype])
        params = term_params(x.shape, channels_last=False, interpolation=MODES[mode],
                             padding=codes, align_corners=align_corners)
        want = fill_vjp(*(jnp.asarray(np.asarray(a, np.float64)) for a in (
            go, fill_values(x.shape[1], DTYPES[dtype]), grid)), **params)
        for channels_last in layouts:
            got = native_fill_backward(go, grid, x.shape[2:], MODES[mode], codes, align_corners,
                                       channels_last)
            tol = TOL[dtype] * 10  # sums over every point
            for name, a, e in zip(("grid", "fill"), got, want, strict=True):
                assert_close(a, e, tol, f"{name} {dtype} cl={channels_last}")
            args = (go, x, grid, MODES[mode])
            gi, gg, gf = native_backward(*args, codes, align_corners, channels_last,
                                         output_mask=(True, True, True))
            zeros = tuple(0 if p == 3 else p for p in codes)
            zi, zg = native_backward(*args, zeros, align_corners, channels_last)
            np.testing.assert_array_equal(np.asarray(gi), np.asarray(zi))
            np.testing.assert_array_equal(np.asarray(gf), np.asarray(got[1]))
            if dtype != "bfloat16":  # there v3 adds in float32, XLA added in bfloat16
                np.testing.assert_array_equal(np.asarray(gg), np.asarray(zg + got[0]))
        for mask in ((True, False), (False, True)):
            (alone,) = native_fill_backward(go, grid, x.shape[2:], MODES[mode], codes,
                                            align_corners, mask=mask)
            np.testing.assert_array_equal(np.asarray(alone), np.asarray(
                native_fill_backward(go, grid, x.shape[2:], MODES[mode], codes,
                                     align_corners)[mask.index(True)]))


@pytest.mark.skipif(ON_CUDA, reason="the CPU's backward of version 3")
@pytest.mark.parametrize("dims,mode,channels_last", [(2, "bilinear", False), (2, "bicubic", True),
                                                     (3, "bilinear", False),
                                                     (3, "nearest", True)], ids=str)
def test_fill_gradients_in_the_kernel_tasks_are_the_separate_pass(dims, mode, channels_last):
    """Where each backward task holds a whole batch element (8 of them: one band, one channel
    block), the kernel runs the fill term's gradients block by block, while grad_output is in
    the cache; without the input gradient a separate pass runs them. Both give the same bits
    (the same sums in the same order), float32 and float64."""
    rng = np.random.default_rng(_seed(f"fused{dims}{mode}{channels_last}"))
    for dtype in (np.float32, np.float64):
        x, grid, go = random_case(dims, rng, dtype=dtype, batch=8,
                                  out_spatial=(70, 61) if dims == 2 else (17, 16, 17))
        args = (go, x, grid * 1.5, MODES[mode], (3,) * dims, False, channels_last)
        _, gg, gf = native_backward(*args, output_mask=(True, True, True))
        _, alone_gg, alone_gf = native_backward(*args, output_mask=(False, True, True))
        _, _, only_gf = native_backward(*args, output_mask=(False, False, True))
        np.testing.assert_array_equal(np.asarray(gg), np.asarray(alone_gg))
        for other in (alone_gf, only_gf):
            np.testing.assert_array_equal(np.asarray(gf), np.asarray(other))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_types_are_the_float32_kernel_rounded_once(dtype):
    """float16 / bfloat16 widen exactly to float32, run the float32 kernel, and round each
    result once: bitwise the float32 results rounded to the half type (forward, both
    gradients and each gradient alone), channels first and last."""
    rng = np.random.default_rng(5)
    for dims, mode, padding, channels_last in [(2, "bicubic", "reflection", False),
                                               (3, "bilinear", "border", True)]:
        x, grid, go = random_case(dims, rng, dtype=DTYPES[dtype], channels=4)
        wx, wgrid, wgo = (np.asarray(a, np.float32) for a in (x, grid, go))
        args = (MODES[mode], pad_code(padding), True, channels_last)
        expected = (native_forward(wx, wgrid, *args), *native_backward(wgo, wx, wgrid, *args))
        actual = (native_forward(x, grid, *args), *native_backward(go, x, grid, *args))
        actual += (native_backward(go, x, grid, *args, output_mask=(True, False))[0],
                   native_backward(go, x, grid, *args, output_mask=(False, True))[1])
        expected += expected[1:]
        for name, a, e in zip(NAMES + ("grad_input alone", "grad_grid alone"), actual,
                              expected, strict=True):
            assert a.dtype == jnp.dtype(DTYPES[dtype]), name
            np.testing.assert_array_equal(np.asarray(a), np.asarray(e).astype(DTYPES[dtype]),
                                          err_msg=f"{name} {dims}d {mode} {dtype}")


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("dims,mode,padding", [(2, "bilinear", "zeros"),
                                               (2, "bicubic", "reflection"),
                                               (2, "bicubic", "wrap"),
                                               (2, "nearest", "border"),
                                               (3, "bilinear", "wrap"),
                                               (3, "nearest", "reflection")])
def test_partitioned_backward(dims, mode, padding, channels_last, dtype):
    """Shapes large enough that the backward splits grad_input into bands of the last
    spatial axis (points whose taps straddle two bands add two grid-gradient partials; under
    wrap, those at the seam have taps in the first and the last band) and, in 3D, the
    channels into blocks."""
    rng = np.random.default_rng(7)
    if dims == 2:
        kw = dict(batch=1, channels=16, spatial=(12, 13), out_spatial=(64, 65))
    else:
        kw = dict(batch=2, channels=9, spatial=(5, 6, 7), out_spatial=(16, 16, 17))
    x, grid, go = random_case(dims, rng, dtype=DTYPES[dtype], quantize=True, **kw)
    out = native_forward(x, grid, MODES[mode], pad_code(padding), False, channels_last)
    gi, gg = native_backward(go, x, grid, MODES[mode], pad_code(padding), False, channels_last)
    expected = oracle(x, grid, go, mode, padding, False)
    tol = TOL[dtype] * (10 if dtype != "float64" else 1)  # long sums
    for name, a, e in zip(NAMES, (out, gi, gg), expected, strict=True):
        assert_close(a, e, tol, f"{name} {dtype}")


@pytest.mark.parametrize("padding", ["zeros", "border"])
@pytest.mark.parametrize("dims,batch,channels,spatial,out_spatial", [
    (2, 8, 40, (63, 65), (4, 5)), (3, 8, 40, (15, 13, 21), (4, 5, 3)),
    (2, 2, 32, (40, 40), (48, 48)), (3, 1, 11, (19, 29, 31), (10, 11, 9)),
    (2, 1, 3, (40, 41), (49, 47))],
    ids=["2d-passes", "3d-passes", "2d-channel-blocks", "3d-ranges", "2d-ranges"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_nearest_backward_staged(dims, batch, channels, spatial, out_spatial, padding,
                                 channels_last):
    """The nearest float32 backward's tasks that own ranges of plane elements. Passes: eight
    batch elements (so one task has all 40 channels), more than its staging copy holds at
    once, so it sums them in passes of 32 and 8; planes of 4095 elements (not a multiple of 8
    or 16). Channel blocks: two batch elements, enough points for bands, but 4 blocks of 8
    channels instead. Ranges: a 3D plane of 17081 elements, too large for 8 channels of it in
    one staging copy, so two ranges (split at element 8528) x two channel blocks (8 and 3)
    that share precomputed tap offsets; a 2D batch element with 3 channels, split into two
    ranges so that there are two tasks. Point counts not a multiple of 8. Channels last, the
    tasks add rows of all the channels (two ranges where those rows exceed the staging size:
    2d-passes, 3d-passes, 3d-ranges; 2d-ranges for two tasks)."""
    rng = np.random.default_rng(11)
    kw = dict(batch=batch, channels=channels, spatial=spatial, out_spatial=out_spatial)
    x, grid, go = random_case(dims, rng, dtype=np.float32, quantize=True, **kw)
    gi, gg = native_backward(go, x, grid, MODES["nearest"], pad_code(padding), False,
                             channels_last)
    _, expected_gi, _ = oracle(x, grid, go, "nearest", padding, False)
    assert_close(gi, expected_gi, TOL["float32"], "grad_input")
    assert not np.any(np.asarray(gg))


def test_layouts_agree_bitwise_forward():
    rng = np.random.default_rng(3)
    for dims, mode in itertools.product((2, 3), MODES):
        x, grid, _ = random_case(dims, rng, dtype=np.float32, channels=5)
        a = native_forward(x, grid, MODES[mode], 2, False, False)
        b = native_forward(x, grid, MODES[mode], 2, False, True)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# Channel counts at the strategies' thresholds and around the vector widths, with "zeros" and
# with "wrap" (whose seam sums run per channel); border and reflection change the per-point
# coordinates alone, so two counts each.
FORWARD_PATH_CHANNELS = [(channels, padding) for padding in ("zeros", "wrap")
                         for channels in (2, 3, 4, 8, 9, 32, 33)] + [
    (channels, padding) for padding in ("border", "reflection") for channels in (3, 33)]


@pytest.mark.parametrize("channels,padding", FORWARD_PATH_CHANNELS, ids=str)
@pytest.mark.parametrize("dims,mode,spatial,out_spatial", [
    (2, "bilinear", (9, 7), (13, 11)),
    (2, "bicubic", (9, 7), (13, 11)),
    (2, "nearest", (9, 7), (13, 11)),
    (3, "bilinear", (4, 5, 3), (5, 4, 7)),
    (2, "bilinear", (20, 30), (65, 67)),  # more points than one block of taps
    (2, "bilinear", (120, 110), (61, 60)),  # a plane larger than an L1 (52.8 KB)
], ids=["2d-bilinear", "2d-bicubic", "2d-nearest", "3d-bilinear", "2d-bilinear-large",
        "2d-bilinear-wide-plane"])
def test_forward_paths_agree_bitwise(dims, mode, spatial, out_spatial, channels, padding):
    """Float32 forward, the paths of the vector kernels. Channels first: a batch with at least as
    many elements as threads is sampled through a channels-last copy of each element (when its
    taps read at least as many elements as it has, 4 taps or more, 2 channels or more; for 2D
    bilinear 8 channels or more and planes larger than 16 KiB); else, and
    for one element alone, the gather path (2D bilinear: pairs of floats). Channels last:
    the same tile sampler reads the input in place. All give bitwise the same output, and match
    the float64 reference. The point counts are not multiples of 16 (partial groups)."""
    rng = np.random.default_rng(11)
    batch = 4
    x = rng.standard_normal((batch, channels) + spatial).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (batch,) + out_spatial + (dims,)).astype(np.float32)
    args = (MODES[mode], pad_code(padding), False)
    batched = np.asarray(native_forward(x, grid, *args))
    for n in range(batch):
        single = native_forward(x[n:n + 1], grid[n:n + 1], *args)
        np.testing.assert_array_equal(batched[n:n + 1], np.asarray(single))
    np.testing.assert_array_equal(batched, np.asarray(native_forward(x, grid, *args, True)))
    expected = oracle(x, grid, None, mode, padding, False)[0]
    assert_close(batched, expected, TOL["float32"], "output")


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("dims,batch,spatial,out_spatial", [(2, 2, (9, 7), (13, 11)),
                                                            (2, 2, (9, 7), (16, 12)),
                                                            (3, 2, (4, 5, 3), (5, 4, 7)),
                                                            (3, 1, (4, 5, 3), (4, 4, 8))],
                         ids=["2d", "2d-groups-of-16", "3d", "3d-one-element-groups-of-16"])
def test_forward_nonfinite_input_values(dims, batch, spatial, out_spatial, padding):
    """Float32 bilinear forward, channels first, of an input that holds infinities and NaNs:
    the pairs of floats are read without masks until a sum is not finite, then with masks (a
    float of a pair that is no tap has weight 0, and 0 * inf is NaN), which are made for the
    block only then, unless points past its last group of 16 needed them already ("2d" has
    such points; the "groups-of-16" cases have none, and fail when the masks are not made for
    the second reading). In 3D, two elements on two threads go through a channels-last copy
    instead; one element takes the pairs. Channel 2 has inf in its
    second column and NaN in its second-to-last row, floats that the pairs of points at the
    edges read without their being taps; channel 4 has one -inf; the others are finite. The
    output equals the channels-last path's bitwise (infinities and NaNs in the same places) and
    the float64 reference's."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((batch, 6) + spatial).astype(np.float32)
    x[:, 2, ..., 1] = np.inf
    x[:, 2, ..., -2, :] = np.nan
    x[-1, 4].flat[7] = -np.inf
    grid = rng.uniform(-1.2, 1.2, (batch,) + out_spatial + (dims,)).astype(np.float32)
    args = (MODES["bilinear"], pad_code(padding), False)
    first = np.asarray(native_forward(x, grid, *args))
    np.testing.assert_array_equal(first, np.asarray(native_forward(x, grid, *args, True)))
    expected = reference_oracle(x, grid, None, "bilinear", padding, False)[0]
    finite = np.isfinite(expected)
    assert 0 < finite[:, 2].mean() < 1  # channel 2: some sums read inf or NaN, some do not
    np.testing.assert_array_equal(first[~finite], expected[~finite])
    assert_close(first[finite], expected[finite], TOL["float32"], "output")


@pytest.mark.parametrize("padding", PADDINGS)
def test_forward_planes_beyond_the_l2(padding):
    """Float32 bilinear forward, channels first, of one element of three 512 x 512 planes (1 MiB
    each, more than a core's L2 together): the pairs of floats, in chunks of points. The same
    bits as the channels-last path, and the float64 reference's values."""
    rng = np.random.default_rng(14)
    x = rng.standard_normal((1, 3, 512, 512)).astype(np.float32)
    # Multiples of 1/1024: the pixel coordinates are exact in float32 (multiples of 1/4).
    grid = (rng.integers(-1126, 1127, (1, 37, 29, 2)) / 1024).astype(np.float32)
    args = (MODES["bilinear"], pad_code(padding), False)
    first = np.asarray(native_forward(x, grid, *args))
    np.testing.assert_array_equal(first, np.asarray(native_forward(x, grid, *args, True)))
    expected = oracle(x, grid, None, "bilinear", padding, False)[0]
    assert_close(first, expected, TOL["float32"], "output")


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("spatial", [(256, 256), (256, 257), (16, 64, 64), (17, 64, 64)],
                         ids=["2d-65536", "2d-65792", "3d-65536", "3d-69632"])
def test_nearest_forward_around_16_bit_offsets(spatial, padding):
    """Float32 nearest forward, channels first: planes of up to 65536 floats keep their tap
    offsets as 16 bits, larger ones as 32 (NarrowSafeOffsets). Planes at and just past that
    size, sampled at every corner (align_corners, so that a coordinate of 1 is the last pixel,
    whose offset is 65535 in a plane of 65536) and at random points, some outside (zeros
    padding then masks them), against the float64 reference and the channels-last path."""
    rng = np.random.default_rng(15)
    dims = len(spatial)
    x = rng.standard_normal((1, 2) + spatial).astype(np.float32)
    corners = np.array(list(itertools.product([-1.0, 1.0], repeat=dims)), np.float32)
    points = rng.integers(-1126, 1127, (61, dims)) / 1024
    grid = np.concatenate([corners, points]).astype(np.float32)
    grid = grid.reshape((1,) + (1,) * (dims - 1) + (-1, dims))
    args = (MODES["nearest"], pad_code(padding), True)
    first = np.asarray(native_forward(x, grid, *args))
    np.testing.assert_array_equal(first, np.asarray(native_forward(x, grid, *args, True)))
    expected = oracle(x, grid, None, "nearest", padding, True)[0]
    assert_close(first, expected, TOL["float32"], "output")
    # The corner that is the plane's last float, sampled as itself.
    assert first.reshape(2, -1)[0, 2**dims - 1] == x[0, 0].flat[-1]


@pytest.mark.parametrize("output_mask", [(True, True), (False, True)], ids=["both", "grid"])
@pytest.mark.parametrize("channels", [1, 3, 8, 9, 17, 32])
@pytest.mark.parametrize("dims,mode,padding", [(2, "bilinear", "zeros"),
                                               (2, "bicubic", "border"),
                                               (2, "nearest", "reflection"),
                                               (3, "bilinear", "reflection")])
def test_channels_last_backward_channel_counts(dims, mode, padding, channels, output_mask):
    """Float32 channels-last backward: its channel loops run 8 channels a vector, the last
    (channels % 8) under a mask, and sum the grid gradient's dot products over channels in 8
    lanes. Channel counts below, at and across multiples of 8, against the float64 reference
    and against the channels-first backward (which sums in another order)."""
    rng = np.random.default_rng(13)
    x, grid, go = random_case(dims, rng, dtype=np.float32, channels=channels, quantize=True)
    args = (MODES[mode], pad_code(padding), False)
    gi, gg = native_backward(go, x, grid, *args, True, output_mask=output_mask)
    gi_cf, gg_cf = native_backward(go, x, grid, *args, False, output_mask=output_mask)
    _, ref_gi, ref_gg = oracle(x, grid, go, mode, padding, False)
    assert_close(gg, ref_gg, TOL["float32"], "grad_grid")
    assert_close(gg, gg_cf, TOL["float32"], "grad_grid, channels first")
    if output_mask[0]:
        assert_close(gi, ref_gi, TOL["float32"], "grad_input")
        assert_close(gi, gi_cf, TOL["float32"], "grad_input, channels first")
    else:
        assert gi is None


@pytest.mark.parametrize("channels", [1, 3, 4, 7, 8])
@pytest.mark.parametrize("dims", [2, 3])
def test_channels_last_few_channels_detour(dims, channels):
    """Through the public API on the CPU, a channels-last backward with fewer than 8 channels
    (forward: 4) runs the channels-first kernel between XLA transposes (faster there); with
    more, the channels-last kernel. The detour gives bitwise the channels-first results.

    The cotangent is an argument: computed inside the program from a loss, XLA may round an
    elementwise function differently where it fuses it with the detour's transpose (jaxlib
    0.12's CPU cosine does), which would be XLA's difference, not the kernels'."""
    import jax_gridsample as gs

    rng = np.random.default_rng(17)
    layout = "NHWC" if dims == 2 else "NDHWC"
    x, grid, cotangent = random_case(dims, rng, dtype=np.float32, channels=channels)

    def forward_and_vjp(layout):
        def f(a, b, cotangent):
            out, pullback = jax.vjp(
                lambda a, b: gs.grid_sample(a, b, mode="bilinear", padding_mode="border",
                                            layout=layout, implementation="native"), a, b)
            return (out, *pullback(cotangent))
        return jax.jit(f)

    def last(a):
        return jnp.moveaxis(jnp.asarray(a), 1, -1)

    hlo = forward_and_vjp(layout).lower(last(x), grid, last(cotangent)).as_text()
    calls = [line for line in hlo.splitlines() if "custom_call" in line and "channels_last" in line]
    forward, backward = ([c for c in calls if name in c] for name in ("forward", "backward"))
    assert len(forward) == len(backward) == 1
    assert ("channels_last = false" in forward[0]) == (channels < 4)
    detour = channels < 8
    assert ("channels_last = false" in backward[0]) == detour
    _, gi_last, gg_last = forward_and_vjp(layout)(last(x), grid, last(cotangent))
    _, gi_first, gg_first = forward_and_vjp(None)(x, grid, cotangent)
    gi_moved = np.asarray(jnp.moveaxis(gi_last, -1, 1))
    if detour:
        np.testing.assert_array_equal(gi_moved, np.asarray(gi_first))
        np.testing.assert_array_equal(np.asarray(gg_last), np.asarray(gg_first))
    else:
        assert_close(gi_moved, np.asarray(gi_first, np.float64), TOL["float32"], "grad_input")
        assert_close(gg_last, np.asarray(gg_first, np.float64), TOL["float32"], "grad_grid")


@pytest.mark.parametrize("output_mask", [(True, False), (False, True)])
def test_single_output(output_mask):
    rng = np.random.default_rng(5)
    x, grid, go = random_case(2, rng)
    gi, gg = native_backward(go, x, grid, 0, 0, False, output_mask=output_mask)
    ref_gi, ref_gg = native_backward(go, x, grid, 0, 0, False)
    if output_mask[0]:
        assert gg is None
        np.testing.assert_array_equal(np.asarray(gi), np.asarray(ref_gi))
    else:
        assert gi is None
        np.testing.assert_array_equal(np.asarray(gg), np.asarray(ref_gg))


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("shapes", [
    ((0, 3, 4, 5), (0, 2, 3, 2)),   # N = 0
    ((2, 0, 4, 5), (2, 2, 3, 2)),   # C = 0
    ((2, 3, 4, 5), (2, 0, 3, 2)),   # empty output grid
    ((1, 2, 3, 4, 5), (1, 0, 2, 2, 3)),
])
def test_empty(shapes, channels_last):
    xs, gs = shapes
    x = np.ones(xs)
    grid = np.zeros(gs)
    out = native_forward(x, grid, 0, 0, False, channels_last)
    assert out.shape == (xs[0], xs[1]) + gs[1:-1]
    go = np.ones(out.shape)
    gi, gg = native_backward(go, x, grid, 0, 0, False, channels_last)
    assert gi.shape == x.shape and gg.shape == grid.shape
    assert not np.any(np.asarray(gi)) and not np.any(np.asarray(gg))


@pytest.mark.parametrize("shapes, channels_last", [
    (((2, 0, 2**40, 1), (2, 64, 64, 2)), False),   # C = 0: no band of 2^40 rows
    (((2, 0, 2**40, 1), (2, 64, 64, 2)), True),
    (((1, 0, 2**20, 2**20, 2**20), (1, 4, 4, 4, 3)), False),  # C = 0: no plane of 2^60 elements
    (((1, 3, 2, 2, 2), (1, 0, 2**29, 2**29, 3)), False),  # no point in 2^58 columns
    (((1, 3, 2, 2, 2), (1, 0, 2**29, 2**29, 3)), True),
], ids=["2d-c0-nchw", "2d-c0-nhwc", "3d-c0-nchw", "3d-no-points-nchw", "3d-no-points-nhwc"])
def test_empty_with_huge_axes(shapes, channels_last):
    """Empty operands with huge other axes: no work or memory in proportion to those axes.
    The operands come from numpy, in their layout: XLA aborts making or transposing some of
    them with jnp, and does not finish compiling a program that returns a channels-last
    (1, 2^20, 2^20, 2^20, 0) gradient, so the 3D C = 0 case is channels first only."""
    xs, gs = shapes
    n, c, spatial = xs[0], xs[1], xs[2:]
    x = jax.device_put(np.zeros((n,) + spatial + (c,) if channels_last else xs, np.float32))
    grid = jax.device_put(np.ones(gs, np.float32))
    out_shape = (n,) + gs[1:-1] + (c,) if channels_last else (n, c) + gs[1:-1]
    out = _call_forward(x, grid, out_shape=out_shape, channels_last=channels_last)
    go = jax.device_put(np.ones(out.shape, np.float32))
    results = [jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(gs, grid.dtype)]
    for mode in MODES.values():
        gi, gg = _call_backward(go, x, grid, results, interpolation=np.int64(mode),
                                channels_last=channels_last)
        assert gi.shape == x.shape and gg.shape == grid.shape
        assert not np.any(np.asarray(gi)) and not np.any(np.asarray(gg))


# --- determinism ------------------------------------------------------------------------------

def _determinism_problem():
    rng = np.random.default_rng(11)
    x, grid, go = random_case(2, rng, dtype=np.float32, batch=1, channels=16, spatial=(9, 10),
                              out_spatial=(64, 64))
    return x, grid, go


def _results_bytes():
    """The forward's and the backward's results of the determinism problem, as bytes."""
    x, grid, go = _determinism_problem()
    results = []
    for mode, padding in (("bilinear", "zeros"), ("bicubic", "border")):
        out = native_forward(x, grid, MODES[mode], pad_code(padding), False)
        gi, gg = native_backward(go, x, grid, MODES[mode], pad_code(padding), False,
                                 deterministic=True)
        results.append(tuple(np.asarray(r).tobytes() for r in (out, gi, gg)))
    if not ON_CUDA:  # the fill value's gradients: a sum over tasks in a fixed order
        results.append(tuple(np.asarray(r).tobytes() for r in native_backward(
            go, x, grid, MODES["bilinear"], (3, 1), False, output_mask=(True, True, True))))
    return results


def test_kernels_are_bitwise_deterministic():
    first = _results_bytes()
    for _ in range(3):
        assert _results_bytes() == first


def _threaded_case(seed: int):
    """Forward and both gradients of a 2D bilinear batch large enough for several chunks."""
    rng = np.random.default_rng(seed)
    x, grid, go = random_case(2, rng, dtype=np.float32, batch=4, channels=8, spatial=(20, 24),
                              out_spatial=(32, 32))
    out = native_forward(x, grid, MODES["bilinear"], PADDINGS["zeros"], False)
    gi, gg = native_backward(go, x, grid, MODES["bilinear"], PADDINGS["zeros"], False)
    return [np.asarray(a).tobytes() for a in (out, gi, gg)]


@pytest.mark.skipif(ON_CUDA, reason="CPU thread-pool property")
def test_concurrent_calls_match_sequential():
    """Python threads calling the kernels at once (XLA runs them concurrently, so their parallel
    loops meet the pool helpers that linger between loops) get the sequential bits, and none
    waits forever."""
    seeds = list(range(20, 24))
    expected = [_threaded_case(seed) for seed in seeds]
    with ThreadPoolExecutor(len(seeds)) as threads:
        for _ in range(15):
            futures = [threads.submit(_threaded_case, seed) for seed in seeds]
            assert [f.result(timeout=120) for f in futures] == expected


def _run_python(script: str, *args: str, text: bool = False) -> subprocess.CompletedProcess:
    """Runs `python -c script args...` on the package under test (its folder first on
    PYTHONPATH), from the tests folder, so that a source checkout's package is not imported."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(_native.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root,
                                                       os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          timeout=300, env=env, text=text,
                          cwd=os.path.dirname(os.path.abspath(__file__)))


_SUBPROCESS = """
import os, pickle, sys
os.sched_setaffinity(0, {0})
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
sys.path.insert(0, sys.argv[1])
import test_native_parity as t
sys.stdout.buffer.write(pickle.dumps(t._results_bytes()))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
@pytest.mark.skipif(ON_CUDA, reason="CPU thread-pool property")
def test_kernels_independent_of_thread_count():
    """One CPU (so a one-thread pool, where a forward may take another strategy: strategies.h
    copies to channels last for a batch of at least as many elements as threads) in a
    subprocess gives the same bits as this process, forward and backward."""
    proc = _run_python(_SUBPROCESS, os.path.dirname(__file__))
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert pickle.loads(proc.stdout) == _results_bytes()


# --- strategies (ffi/cpu/strategies.h), forced through the test targets -------------------------

FORWARD_STRATEGIES = {"portable": 0, "gather": 1, "tiles": 2, "tiles_via_copy": 3}
AVX2 = _native.cpu_instruction_set() == "avx2"
VECTOR = _native.cpu_instruction_set() in ("avx2", "neon")  # the vector kernels (vec8.h) run


def forward_can_take(strategy, channels_last):
    """strategies.cc's ForwardCanTake for float32 (every plane offset fits int32 here)."""
    return {"portable": True,
            "gather": VECTOR and not channels_last,
            "tiles": VECTOR and channels_last,
            "tiles_via_copy": VECTOR and not channels_last}[strategy]


def _strategy_cases(channels):
    """Every rank x mode x padding (and per-axis mixes) x align_corners x layout, float32,
    `channels` channels, 117 points (partial groups of 16): batch element 0 on a finite grid,
    element 1 on the same grid with non-finite and huge coordinates at its first points."""
    rng = np.random.default_rng(12)
    cases = []
    for dims, mode, padding, align_corners, channels_last in itertools.product(
            (2, 3), MODES, (*CODES, *MIXED), (False, True), (False, True)):
        x, grid, _ = random_case(dims, rng, dtype=np.float32, channels=channels,
                                 out_spatial=(13, 9, 1)[:dims])
        flat = grid[1].reshape(-1)
        flat[:8] = [np.nan, np.inf, -np.inf, 1e30, -3e9, 0.5, 2.0**31, -1e10]
        cases.append(((dims, mode, padding, align_corners, channels_last), x, grid))
    return cases


@pytest.mark.skipif(ON_CUDA, reason="CPU strategies")
def test_forward_strategies():
    """Each forward strategy on every case it can take, forced: the float64 oracle's values on
    finite grids, and on special coordinates too, bitwise the portable strategy's output (one
    summation order for every strategy). A strategy that cannot take a case is refused with an
    error naming the attribute. 13 channels: a vector and a tail of 5 for the tiles."""
    cases = _strategy_cases(13)
    calls = [(i, name) for i, (case, _, _) in enumerate(cases) for name in FORWARD_STRATEGIES
             if forward_can_take(name, case[4])]

    @jax.jit  # one program for all the calls
    def forwards(operands):
        out = []
        for i, name in calls:
            _, mode, padding, align_corners, channels_last = cases[i][0]
            x, grid = operands[i]
            out.append(native_forward(x, grid, MODES[mode], pad_code(padding), align_corners,
                                      channels_last, strategy=FORWARD_STRATEGIES[name]))
        return out

    results = {}
    for (i, name), out in zip(calls, forwards([(x, g) for _, x, g in cases]), strict=True):
        results.setdefault(i, {})[name] = np.asarray(out)
    assert len({name for _, name in calls}) == (4 if VECTOR else 1)
    for i, ((dims, mode, padding, align_corners, channels_last), x, grid) in enumerate(cases):
        what = f"{dims}d {mode} {padding} align_corners={align_corners} cl={channels_last}"
        by_name = results[i]
        expected = oracle(x[:1], grid[:1], None, mode, padding, align_corners)[0]
        for name, out in by_name.items():
            assert_close(out[:1], expected, TOL["float32"], f"{name}, {what}")
        assert np.all(np.isfinite(by_name["portable"])), what
        for name, out in by_name.items():
            np.testing.assert_array_equal(out, by_name["portable"],
                                          err_msg=f"{name} vs portable, {what}")
    # Refused: a strategy the case's layout excludes (or this CPU lacks), and an unknown one.
    for (_, mode, padding, align_corners, channels_last), x, grid in cases[:2]:
        refused = [name for name in FORWARD_STRATEGIES if not forward_can_take(name, channels_last)]
        for strategy in [FORWARD_STRATEGIES[name] for name in refused] + [7, -2]:
            with pytest.raises(Exception, match=f"attribute strategy {strategy} cannot"):
                jax.block_until_ready(native_forward(x, grid, MODES[mode], pad_code(padding),
                                                     align_corners, channels_last,
                                                     strategy=strategy))
    # The error names the call's dtype, also where the kernel computes in float32.
    (_, mode, padding, align_corners, _), x, grid = cases[0]
    with pytest.raises(Exception, match=r"cannot compute this forward \(float16, channels first"):
        jax.block_until_ready(native_forward(x[:1].astype(np.float16), grid[:1].astype(np.float16),
                                             MODES[mode], pad_code(padding), align_corners,
                                             strategy=FORWARD_STRATEGIES["tiles"]))


BACKWARD_STRATEGIES = {"portable": 0, "nearest_ranges": 1, "channels_last_avx2": 2}


def backward_can_take(strategy, dims, mode, channels_last):
    """strategies.cc's BackwardCanTake for float32 (every plane offset fits int32 here)."""
    return {"portable": True,
            "nearest_ranges": VECTOR and mode == "nearest" and not channels_last,
            "channels_last_avx2": AVX2 and channels_last}[strategy]


@pytest.mark.skipif(ON_CUDA, reason="CPU strategies")
def test_backward_strategies():
    """Each backward strategy on every case it can take (those of test_forward_strategies, with
    19 channels: vectors and a tail, in three channel blocks), forced, both gradients and the
    grid gradient alone: the float64 oracle's values on finite grids, and the same values
    either way; on special coordinates too, both gradients bitwise the portable strategy's (one
    summation order for every strategy). Refusals as for the forward."""
    cases = [case for case in _strategy_cases(19) if not has_constant(case[0][2])]
    rng = np.random.default_rng(13)
    grad_outputs = [rng.standard_normal(x.shape[:2] + g.shape[1:-1]).astype(np.float32)
                    for _, x, g in cases]
    calls = [(i, name, mask) for i, (case, _, _) in enumerate(cases)
             for name in BACKWARD_STRATEGIES if backward_can_take(name, *case[:2], case[4])
             for mask in ((True, True), (False, True)) if case[1] != "nearest" or mask[0]]

    @jax.jit
    def backwards(operands):
        out = []
        for i, name, mask in calls:
            _, mode, padding, align_corners, channels_last = cases[i][0]
            out.append(native_backward(*operands[i], MODES[mode], pad_code(padding),
                                       align_corners, channels_last, mask,
                                       strategy=BACKWARD_STRATEGIES[name]))
        return out

    results = {}
    outs = backwards([(go, x, g) for go, (_, x, g) in zip(grad_outputs, cases, strict=True)])
    for (i, name, mask), (gi, gg) in zip(calls, outs, strict=True):
        entry = results.setdefault(i, {}).setdefault(name, {})
        entry["grid_only" if not mask[0] else "both"] = (
            None if gi is None else np.asarray(gi), np.asarray(gg))
    assert len({name for _, name, _ in calls}) == (3 if AVX2 else 2 if VECTOR else 1)
    for i, ((dims, mode, padding, align_corners, channels_last), x, grid) in enumerate(cases):
        what = f"{dims}d {mode} {padding} align_corners={align_corners} cl={channels_last}"
        by_name = results[i]
        _, egi, egg = oracle(x[:1], grid[:1], grad_outputs[i][:1], mode, padding,
                             align_corners)
        for name, entry in by_name.items():
            for key, (gi, gg) in entry.items():
                where = f"{name} ({key}), {what}"
                gi0, gg0 = by_name["portable"][key]
                assert np.all(np.isfinite(gg)), where
                if gi is not None:
                    assert np.all(np.isfinite(gi)), where
                    np.testing.assert_array_equal(gi, gi0, err_msg=f"grad_input, {where}")
                np.testing.assert_array_equal(gg, gg0, err_msg=f"grad_grid, {where}")
                # The grid gradient alone is one task over all channels: another summation
                # order than the channel blocks' of both gradients.
                assert_close(gg, entry["both"][1], TOL["float32"], f"grad_grid, {where}")
                if gi is not None:
                    assert_close(gi[:1], egi, TOL["float32"], f"grad_input, {where}")
                assert_close(gg[:1], egg, TOL["float32"], f"grad_grid, {where}")
    (_, mode, padding, align_corners, _), x, grid = cases[0]
    refused = ["nearest_ranges", "channels_last_avx2"]
    for strategy in [BACKWARD_STRATEGIES[name] for name in refused] + [7, -2]:
        with pytest.raises(Exception, match=f"attribute strategy {strategy} cannot"):
            jax.block_until_ready(native_backward(grad_outputs[0], x, grid, MODES[mode],
                                                  pad_code(padding), align_corners,
                                                  strategy=strategy))
    with pytest.raises(Exception, match=r"cannot compute this backward \(bfloat16, channels"):
        jax.block_until_ready(native_backward(*(jnp.asarray(a, jnp.bfloat16) for a in
                                                (grad_outputs[0][:1], x[:1], grid[:1])),
                                              MODES[mode], pad_code(padding), align_corners,
                                              strategy=BACKWARD_STRATEGIES["nearest_ranges"]))


# --- non-finite and huge coordinates ----------------------------------------------------------

SPECIAL = [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e38, -3e38, 2.0**31, -(2.0**63), 1e10, 1.0,
           -1.0, 0.0]


# (mode, padding, dtype, rank, align_corners, channels_last): every pair of values of any two.
SPECIAL_CASES = [
    ("bilinear", "zeros", "float64", 2, True, False),
    ("bilinear", "zeros", "float32", 2, False, False),
    ("bilinear", "border", "float64", 2, False, True),
    ("bilinear", "border", "float32", 2, False, False),
    ("bilinear", "reflection", "float64", 3, False, True),
    ("bilinear", "reflection", "float32", 2, False, False),
    ("nearest", "zeros", "float64", 3, True, True),
    ("nearest", "zeros", "float32", 2, False, True),
    ("nearest", "border", "float64", 2, False, True),
    ("nearest", "border", "float32", 2, True, True),
    ("nearest", "reflection", "float64", 3, False, False),
    ("nearest", "reflection", "float32", 2, False, False),
    ("bicubic", "zeros", "float64", 3, True, False),
    ("bicubic", "zeros", "float32", 3, False, False),
    ("bicubic", "border", "float64", 3, True, True),
    ("bicubic", "border", "float32", 3, True, True),
    ("bicubic", "reflection", "float64", 2, False, True),
    ("bicubic", "reflection", "float32", 2, True, False),
]


SPECIAL_OUT_SPATIAL = {2: (6, 10), 3: (2, 6, 6)}  # 60 and 72 points


def _special_points(dims, rng):
    """Every special value on each axis in turn (the others moderate), on all axes at once, and
    in pairs of different ones; then moderate points, as many as SPECIAL_OUT_SPATIAL has."""
    special = np.array(SPECIAL)
    rows = []
    for axis in range(dims):
        points = rng.uniform(-3, 3, (len(special), dims))
        points[:, axis] = special
        rows.append(points)
    rows.append(np.repeat(special[:, None], dims, 1))
    rows.append(np.stack([np.roll(special, 1 + axis) for axis in range(dims)], -1))
    count = sum(len(r) for r in rows)
    rows.append(rng.uniform(-3, 3, (int(np.prod(SPECIAL_OUT_SPATIAL[dims])) - count, dims)))
    return np.concatenate(rows)


@pytest.mark.parametrize("mode, padding, dtype, dims, align_corners, channels_last",
                         SPECIAL_CASES, ids=["-".join(map(str, c)) for c in SPECIAL_CASES])
def test_nonfinite_and_huge_coordinates(mode, padding, dtype, dims, align_corners,
                                        channels_last):
    """Non-finite and huge coordinates: finite results, and the reference's in the same
    dtype. The second batch element takes the points in reverse order."""
    np_dtype = DTYPES[dtype]
    rng = np.random.default_rng(0)
    points = _special_points(dims, rng)
    out_spatial = SPECIAL_OUT_SPATIAL[dims]
    grid = np.stack([points, points[::-1]]).reshape((2,) + out_spatial + (dims,))
    grid = grid.astype(np_dtype)
    # Two batch elements of 4 channels: float32 takes the tile sampler's paths too.
    x = rng.standard_normal((2, 4) + (5, 6, 7)[-dims:]).astype(np_dtype)
    go = rng.standard_normal((2, 4) + out_spatial).astype(np_dtype)
    out = native_forward(x, grid, MODES[mode], pad_code(padding), align_corners, channels_last)
    gi, gg = native_backward(go, x, grid, MODES[mode], pad_code(padding), align_corners,
                             channels_last)
    expected = reference_oracle(x, grid, go, mode, padding, align_corners, dtype=np_dtype,
                                op_by_op=True)
    tol = 1e-9 if dtype == "float64" else 1e-4
    for name, a, e in zip(NAMES, (out, gi, gg), expected, strict=True):
        a = np.asarray(a, np.float64)
        assert np.all(np.isfinite(a)), f"{name} not finite"
        assert_close(a, e, tol, name)


# Reflection takes coordinates whose position has no fractional bits (from 2^23 in float32, 2^52
# in float64) as -1 (docs/semantics.md step 2) and reflects the others exactly (step 3).
HUGE_FINITE = [1e10, -1e10, 3e9, 1e30, -3e38, 2.0**31, 1e8, -7e5]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("align_corners", [False, True], ids=["noac", "ac"])
@pytest.mark.parametrize("dims, mode", [(d, m) for d in (2, 3) for m in MODES
                                        if not (d == 3 and m == "bicubic")])
def test_huge_reflection_coordinates_match_reference(dims, mode, align_corners, dtype):
    """Every axis in turn holds the huge coordinates (the others moderate), then moderate points
    up to the grid of test_nonfinite_and_huge_coordinates (so that the two share the
    reference's operations); both layouts against the jnp reference of the same dtype."""
    np_dtype = DTYPES[dtype]
    rng = np.random.default_rng(21)
    x = rng.standard_normal((2, 8) + (5, 6, 7)[-dims:]).astype(np_dtype)
    rows = []
    for axis in range(dims):
        g = rng.uniform(-1, 1, (len(HUGE_FINITE), dims))
        g[:, axis] = HUGE_FINITE
        rows.append(g)
    out_spatial = SPECIAL_OUT_SPATIAL[dims]
    count = int(np.prod(out_spatial)) - sum(len(r) for r in rows)
    points = np.concatenate(rows + [rng.uniform(-1, 1, (count, dims))])
    grid = np.stack([points, points[::-1]]).reshape((2,) + out_spatial + (dims,)).astype(np_dtype)
    go = rng.standard_normal((2, 8) + out_spatial).astype(np_dtype)
    expected = reference_oracle(x, grid, go, mode, "reflection", align_corners, dtype=np_dtype,
                                op_by_op=True)
    tol = 1e-9 if dtype == "float64" else 1e-4
    for channels_last in (False, True):
        out = native_forward(x, grid, MODES[mode], PADDINGS["reflection"], align_corners,
                             channels_last)
        gi, gg = native_backward(go, x, grid, MODES[mode], PADDINGS["reflection"],
                                 align_corners, channels_last)
        for name, a, e in zip(NAMES, (out, gi, gg), expected, strict=True):
            assert_close(a, e, tol, f"{name}, channels_last={channels_last}")


# The cases: (rank, mode, grid value per axis, None where ordinary), x y [z] order.
WITHOUT_FRACTION_CASES = [(2, "nearest", (1e30, None)), (2, "bicubic", (1e30, np.inf)),
                          (3, "nearest", (None, None, -1e30)), (3, "bilinear", (-1e30, None, None))]


def _without_fraction_case(dims, values, align_corners, dtype, rng):
    """Inputs of small integers and ordinary coordinates that are multiples of 1/4 on axes whose
    positions are then multiples of 1/2 (4 and 8 pixels; 5 and 9 with align_corners), so that
    every weight, product and sum is exact in float32 (the order of a sum cannot change its
    bits); the special values at some points."""
    spatial = ((9, 5, 9) if align_corners else (8, 4, 8))[-dims:]
    x = rng.integers(-8, 9, (2, 3) + spatial).astype(dtype)
    out_spatial = (2, 3, 4)[-dims:]
    grid = rng.integers(-6, 7, (2,) + out_spatial + (dims,)) / 4.0
    flat = grid.reshape(-1, dims)
    for point in (0, 5, 11, len(flat) - 1):
        for axis, value in enumerate(values):
            if value is not None:
                flat[point, axis] = value
    go = rng.integers(-8, 9, (2, 3) + out_spatial).astype(dtype)
    return x, grid.astype(dtype), go


@pytest.mark.skipif(ON_CUDA, reason="CPU strategies")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reflection_without_fractional_bits_same_bits_everywhere(dtype):
    """The issue's reflection cases of coordinates without fractional bits (1e30 in x of 2D
    nearest, (1e30, inf) in 2D bicubic, -1e30 in z of 3D nearest and in x of 3D bilinear), both
    align_corners and layouts: every CPU strategy (forced; float32), the reference compiled
    (channels first), and PyTorch's float64 with those coordinates at -1 give the same bits,
    forward and both gradients (the replaced coordinates' gradient 0), on exact data."""
    np_dtype = DTYPES[dtype]
    rng = np.random.default_rng(31)
    calls, expectations = [], []
    for (dims, mode, values), align_corners in itertools.product(WITHOUT_FRACTION_CASES,
                                                                 (False, True)):
        x, grid, go = _without_fraction_case(dims, values, align_corners, np_dtype, rng)
        replaced = ~(np.abs(grid) < 1e6)
        at_minus_one = np.where(replaced, -1.0, grid.astype(np.float64))
        out, gi, gg = torch_oracle(x, at_minus_one, go, mode, "reflection", align_corners)
        expectations.append((out, gi, np.where(replaced, 0.0, gg)))
        for channels_last in (False, True):
            forward = [None] + [FORWARD_STRATEGIES[name] for name in FORWARD_STRATEGIES
                                if dtype == "float32" and forward_can_take(name, channels_last)]
            backward = [None] + [BACKWARD_STRATEGIES[name] for name in BACKWARD_STRATEGIES
                                 if dtype == "float32"
                                 and backward_can_take(name, dims, mode, channels_last)]
            calls.append((len(expectations) - 1, dims, mode, align_corners, channels_last,
                          forward, backward, x, grid, go))

    @jax.jit
    def run(operands):
        results = []
        for (_, _, mode, ac, cl, forward, backward, *_), (x, grid, go) in zip(
                calls, operands, strict=True):
            args = (MODES[mode], PADDINGS["reflection"], ac, cl)
            outs = [native_forward(x, grid, *args, strategy=s) for s in forward]
            grads = [native_backward(go, x, grid, *args, strategy=s) for s in backward]
            if not cl:  # the reference's layouts are transposes around the same math
                outs.append(grid_sample_reference(x, grid, *args[:3]))
                grads.append(grid_sample_backward_reference(go, x, grid, *args[:3], (True, True)))
            results.append((outs, grads))
        return results

    results = run([(jnp.asarray(x), jnp.asarray(g), jnp.asarray(go))
                   for *_, x, g, go in calls])
    for (i, dims, mode, ac, cl, *_), (outs, grads) in zip(calls, results, strict=True):
        out, gi, gg = expectations[i]
        what = f"{dims}d {mode} align_corners={ac} channels_last={cl} {dtype}"
        for k, o in enumerate(outs):
            np.testing.assert_array_equal(np.asarray(o, np.float64), out, err_msg=f"{what} #{k}")
        for k, (a, b) in enumerate(grads):
            np.testing.assert_array_equal(np.asarray(a, np.float64), gi, err_msg=f"{what} #{k}")
            np.testing.assert_array_equal(np.asarray(b, np.float64), gg, err_msg=f"{what} #{k}")


# --- handler validation -----------------------------------------------------------------------

def _call_forward(x, grid, out_shape=None, dtype=None, target=_native.FORWARD_TARGET, fill=None,
                  **attrs):
    """Version 2 (the fill operand: C zeros unless given), or version 1 by its target."""
    kw = dict(interpolation=np.int64(0), padding=np.zeros(max(grid.ndim - 2, 1), np.int64),
              align_corners=False, channels_last=False)
    kw.update(attrs)
    if out_shape is None:
        out_shape = x.shape[:2] + grid.shape[1:-1]
    operands = (x, grid)
    if target == _native.FORWARD_TARGET:
        channels = x.shape[-1] if kw["channels_last"] else x.shape[1]
        operands += (jnp.zeros((channels,), x.dtype) if fill is None else fill,)
    out = jax.ffi.ffi_call(target,
                           jax.ShapeDtypeStruct(out_shape, dtype or x.dtype))(*operands, **kw)
    return jax.block_until_ready(out)


def _call_backward(go, x, grid, results, **attrs):
    kw = dict(interpolation=np.int64(0), padding=np.zeros(grid.ndim - 2, np.int64),
              align_corners=False, channels_last=False, input_mask=True, grid_mask=True,
              **_backward_extra())
    kw.update(attrs)
    out = jax.ffi.ffi_call(_native.BACKWARD_TARGET, results)(go, x, grid, **kw)
    return jax.block_until_ready(out)


def _call_backward_v3(fill, results, **attrs):
    """The CPU's version 3 backward on X, G and a zero grad_output, with ``fill``."""
    kw = dict(interpolation=np.int64(0), padding=np.zeros(2, np.int64), align_corners=False,
              channels_last=False, input_mask=True, grid_mask=True, fill_mask=False)
    kw.update(attrs)
    out = jax.ffi.ffi_call(_native.CPU_BACKWARD_TARGET, results)(
        jnp.zeros((1, 2, 3, 4), jnp.float32), X, G, fill, **kw)
    return jax.block_until_ready(out)


X = jnp.zeros((1, 2, 4, 5), jnp.float32)
G = jnp.zeros((1, 3, 4, 2), jnp.float32)
GI, GG = jax.ShapeDtypeStruct(X.shape, X.dtype), jax.ShapeDtypeStruct(G.shape, G.dtype)
GF = jax.ShapeDtypeStruct((2,), jnp.float32)


@pytest.mark.parametrize("call,match", [
    (lambda: _call_forward(X, G, interpolation=np.int64(3)), "interpolation"),
    (lambda: _call_forward(X, G, padding=np.array([0, -1])),
     r"padding\[1\] must be 0 \(zeros\), 1 \(border\), 2 \(reflection\), 3 \(constant\) or 4 "),
    (lambda: _call_forward(X, G, fill=jnp.zeros(3, jnp.float32), padding=np.array([3, 0])),
     r"fill has shape \(3\), expected \(2\)"),
    (lambda: _call_forward(X, G, fill=jnp.zeros(2, jnp.float64), padding=np.array([0, 3])),
     "fill dtype float64 differs"),
    # version 2's backward takes no fill value: "constant" is the forward's only
    (lambda: _call_backward(jnp.zeros((1, 2, 3, 4), jnp.float32), X, G,
                            [jax.ShapeDtypeStruct(G.shape, G.dtype)], input_mask=False,
                            padding=np.array([3, 0])), r"padding\[0\] must be .* or 4 \(wrap\)"),
    (lambda: _call_forward(X, G, padding=np.array([0, 0, 0])), "one mode per grid component"),
    (lambda: _call_forward(X, G, padding=np.int64(0)), "expected array"),
    # the fill backward: a "constant" axis, the spatial sizes of the grid's rank, its results
    (lambda: native_fill_backward(np.zeros((1, 2, 3, 4), np.float32), G, (4, 5), 0, (0, 1),
                                  False), "has no 3 \\(constant\\)"),
    (lambda: native_fill_backward(np.zeros((1, 2, 3, 4), np.float32), G, (4, 5, 6), 0, (3, 1),
                                  False), "attribute spatial \\(3 sizes\\)"),
    (lambda: native_fill_backward(np.zeros((1, 2, 3, 5), np.float32), G, (4, 5), 0, (3, 1),
                                  False), r"grad_output has shape \(1, 2, 3, 5\)"),
    # version 3's backward (the CPU's): the fill value's gradient needs a "constant" axis and
    # its result, the fill value one per channel
    (lambda: _call_backward_v3(jnp.zeros(0, jnp.float32), [GI, GG, GF], fill_mask=True),
     "fill_mask asks .* has no 3 \\(constant\\)"),
    (lambda: _call_backward_v3(jnp.zeros(2, jnp.float32), [GI, GG], fill_mask=True,
                               padding=np.array([3, 0])),
     "expected 3 result\\(s\\) for input_mask=true, grid_mask=true and fill_mask=true, got 2"),
    (lambda: _call_backward_v3(jnp.zeros(3, jnp.float32), [GI, GG], padding=np.array([3, 0])),
     r"fill has shape \(3\), expected \(2\)"),
    (lambda: _call_backward_v3(jnp.zeros(2, jnp.float32),
                               [GI, GG, jax.ShapeDtypeStruct((3,), jnp.float32)],
                               fill_mask=True, padding=np.array([3, 0])),
     r"grad_fill has shape \(3\), expected \(2\)"),
    # version 1: one code for every axis, and no wrap
    (lambda: _call_forward(X, G, padding=np.int64(4), target=_contract.FORWARD_TARGET_V1),
     r"padding must be 0 \(zeros\), 1 \(border\), 2 \(reflection\), got 4"),
    (lambda: _call_forward(X, jnp.zeros((1, 3, 4, 3), jnp.float32)), "grid last dimension"),
    (lambda: _call_forward(X, jnp.zeros((1, 3, 4, 5, 3), jnp.float32), out_shape=(1, 2, 3, 4, 5)),
     "rank"),
    (lambda: _call_forward(X, jnp.zeros((2, 3, 4, 2), jnp.float32), out_shape=(2, 2, 3, 4)),
     "batch"),
    (lambda: _call_forward(X, G, out_shape=(1, 2, 3, 5)), "output has shape"),
    (lambda: _call_forward(X, G.astype(jnp.float16)), "grid dtype"),
    (lambda: _call_forward(X, G, dtype=jnp.float16), "output dtype"),
    (lambda: _call_forward(X.astype(jnp.int32), G.astype(jnp.int32)), "dtype"),
    (lambda: _call_forward(jnp.zeros((1, 2, 0, 5), jnp.float32), G), "spatial"),
    (lambda: _call_forward(jnp.zeros((1, 2, 4), jnp.float32), jnp.zeros((1, 3, 2), jnp.float32),
                           out_shape=(1, 2, 3)), "rank"),
    (lambda: _call_backward(jnp.zeros((1, 2, 3, 4), jnp.float32), X, G,
                            [jax.ShapeDtypeStruct(X.shape, X.dtype)]), "result"),
    (lambda: _call_backward(jnp.zeros((1, 2, 3, 5), jnp.float32), X, G,
                            [jax.ShapeDtypeStruct(X.shape, X.dtype),
                             jax.ShapeDtypeStruct(G.shape, G.dtype)]), "grad_output"),
    (lambda: _call_backward(jnp.zeros((1, 2, 3, 4), jnp.float32), X, G,
                            [jax.ShapeDtypeStruct((1, 2, 4, 4), X.dtype),
                             jax.ShapeDtypeStruct(G.shape, G.dtype)]), "grad_input"),
    (lambda: _call_backward(jnp.zeros((1, 2, 3, 4), jnp.float32), X, G,
                            [jax.ShapeDtypeStruct(G.shape, jnp.float64)], input_mask=False),
     "grad_grid"),
    # a shape whose non-zero dimensions multiply to 2^62 or more, though it holds no element
    # (backward calls with a non-empty result: XLA drops a call whose results are all empty)
    (lambda: _call_backward(jnp.zeros((1, 0, 2, 2, 2), jnp.float32),
                            jnp.zeros((1, 0) + (2**22,) * 3, jnp.float32),
                            jnp.zeros((1, 2, 2, 2, 3), jnp.float32),
                            [jax.ShapeDtypeStruct((1, 2, 2, 2, 3), jnp.float32)],
                            input_mask=False),
     r"input shape \(1, 0, 4194304, 4194304, 4194304\) is too large"),
    (lambda: _call_backward(jnp.zeros((1, 1, 0, 2**61), jnp.float32), X[:, :1],
                            jnp.zeros((1, 0, 2**61, 2), jnp.float32),
                            [jax.ShapeDtypeStruct((1, 1, 4, 5), jnp.float32)], grid_mask=False),
     r"grid shape \(1, 0, 2305843009213693952, 2\) is too large"),
    (lambda: _call_backward(jnp.zeros((1, 2**12, 0, 2**50), jnp.float32),
                            jnp.zeros((1, 2**12, 1, 1), jnp.float32),
                            jnp.zeros((1, 0, 2**50, 2), jnp.float32),
                            [jax.ShapeDtypeStruct((1, 2**12, 1, 1), jnp.float32)],
                            grid_mask=False),
     r"output shape \(1, 4096, 0, 1125899906842624\) is too large"),
], ids=["interpolation", "padding", "fill-shape", "fill-dtype", "backward-v2-constant",
        "padding-length", "padding-scalar", "fill-backward-no-constant",
        "fill-backward-spatial", "fill-backward-grad-output", "backward-v3-fill-mask",
        "backward-v3-result-count", "backward-v3-fill-shape", "backward-v3-grad-fill-shape",
        "padding-v1-wrap", "grid-last-dim", "rank-mismatch", "batch", "output-shape",
        "grid-dtype", "output-dtype", "int-dtype", "zero-spatial", "rank-3", "result-count",
        "grad-output-shape", "grad-input-shape", "grad-grid-dtype", "input-too-large",
        "grid-too-large", "output-too-large"])
def test_handler_rejects_bad_arguments(call, match):
    with pytest.raises(Exception, match=match):
        call()


# MODULE: the compiled module of the platform under test (JAX's default device runs it).
_WITHOUT_KERNELS = """
import sys
sys.modules["jax_gridsample.MODULE"] = None  # makes `import MODULE` fail
import jax.numpy as jnp
import numpy as np
import jax_gridsample as gs
status = gs.native_status()["PLATFORM"]
assert "could not be imported" in status, status
x, g = jnp.ones((1, 2, 4, 5)), jnp.zeros((1, 3, 3, 2))
auto, reference = gs.grid_sample(x, g), gs.grid_sample(x, g, implementation="reference")
np.testing.assert_array_equal(auto, reference)
try:
    gs.grid_sample(x, g, implementation="native")
except NotImplementedError as exc:
    assert "could not be imported" in str(exc), exc
else:
    raise AssertionError("implementation='native' ran without the compiled module")
print("ok")
"""


def test_missing_compiled_module_falls_back_to_the_reference():
    """Without its compiled module the package imports, 'auto' runs the reference, 'native'
    says why."""
    script = _WITHOUT_KERNELS.replace("MODULE", f"_{_PLATFORM}_kernels").replace(
        "PLATFORM", _PLATFORM)
    proc = _run_python(script, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
