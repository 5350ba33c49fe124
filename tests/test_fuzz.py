"""Differential fuzz: the native kernels against the jnp reference, and both against PyTorch.

Random cases from a seeded generator: small shapes (now and then one axis of up to 256 pixels),
zero-sized batch, channels and output grids among them, 2D and 3D, both layouts, every mode,
padding (one for every axis or a tuple of one per axis; "constant" with a random scalar or
per-channel fill value, or none) and align_corners, float16, bfloat16, float32 and float64, and
grids that hold NaN,
infinities, +-1e30, the largest finite values, exact edges, mirrors (span multiples) and their
neighbours, denormals, and positions around the guard's limits (docs/semantics.md step 2). Per
case, through the public API: for the native kernels the forward, ``jax.grad`` with respect to
both operands (and the fill value) and ``grid_sample_backward`` with each output mask (a
three-entry one, with the fill gradient, among them); for the reference (the oracle) the forward
and the full backward (fill gradient included). The fill value is an operand of the compiled
program, so it is traced. Checks:

- the native results are the same bits when the compiled cases run a second time;
- every result is finite;
- native and reference: nearest's forward bit for bit, everything else (``jax.grad`` and each
  masked backward included) to the dtype's rounding (docs/semantics.md, "Bit for bit");
- both implementations against PyTorch's float64 (on the same dtype-rounded values) for the
  cases PyTorch defines: grids of ordinary coordinates (multiples of 1/16 within [-3, 3],
  exact in every dtype's arithmetic), one of zeros, border and reflection on every axis, and
  every rank and mode but 3D bicubic.

``test_fuzz`` runs a fixed seed in the default suite (about 20 seconds on two cores);
``test_fuzz_long`` (``-m slow``) thousands of cases. Cases are compiled in chunks, one program
per chunk, which costs far less than a program per case. Runs alone:
``pytest tests/test_fuzz.py`` (``-m slow`` for the long run).
"""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch

import jax_gridsample as gs

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection", "constant", "wrap")
# How often each is drawn for every axis: "constant" less often, as the reference's fill term (in
# jax.numpy) costs more compile time than a case of any other padding.
PADDING_WEIGHTS = (0.2, 0.2, 0.2, 0.15, 0.25)
TORCH_PADDINGS = ("zeros", "border", "reflection")  # on every axis: the ones PyTorch has
DTYPES = (np.float16, ml_dtypes.bfloat16, np.float32, np.float64)
# Relative tolerance per dtype: one rounding of the half types (the reference and the kernels
# sum in different orders, in float32), a few float32 / float64 roundings for the others.
TOLERANCE = {np.float16: 2e-3, ml_dtypes.bfloat16: 1.6e-2, np.float32: 2e-5, np.float64: 1e-12}
# The native kernels' output masks. Where an axis is "constant", the one mask asks for all three
# gradients, fill gradient included, as the reference's full backward ("all") does: the
# reference's fill term (in jax.numpy) is where the compile time would go, and
# test_native_parity.py checks the kernels' other three-entry masks. Elsewhere, two entries
# (test_padding_oracles.py checks the fill gradient of "zeros" and two-entry masks with a fill).
OUTPUT_MASKS = {"both": (True, True), "input": (True, False), "grid": (False, True)}
CONSTANT_MASKS = {"all": (True, True, True)}
FULL_MASK = (True, True, True)
IMPLEMENTATIONS = ("native", "reference")

DEFAULT_CASES = 32
LONG_CASES = int(os.environ.get("JAX_GRIDSAMPLE_FUZZ_CASES", "2000"))
CHUNK = 16  # cases per compiled program


@dataclasses.dataclass
class Case:
    dims: int
    mode: str
    padding: str | tuple[str, ...]  # one for every axis, or one per axis (x, y[, z])
    align_corners: bool
    channels_last: bool
    dtype: type
    ordinary: bool  # a grid PyTorch defines the result of
    x: np.ndarray  # in the case's layout
    grid: np.ndarray
    grad_output: np.ndarray  # in the case's layout
    fill: np.ndarray | None  # "constant"'s fill value, shape () or (C,); None: not given

    def kwargs(self, implementation: str) -> dict:
        layout = None if not self.channels_last else ("NHWC" if self.dims == 2 else "NDHWC")
        return dict(mode=self.mode, padding_mode=self.padding, align_corners=self.align_corners,
                    layout=layout, implementation=implementation)

    @property
    def constant(self) -> bool:
        """Whether an axis is "constant"."""
        return _has_constant(self.padding)

    def __str__(self) -> str:
        fill = "" if self.fill is None else f" fill_value={self.fill.tolist()}"
        return (f"{self.dims}d {self.mode} {self.padding}{fill} "
                f"align_corners={self.align_corners} channels_last={self.channels_last} "
                f"{np.dtype(self.dtype).name} x{self.x.shape} grid{self.grid.shape}")


def _special_values(dtype, spatial) -> np.ndarray:
    """Values a grid may hold beyond ordinary coordinates, for axes of the sizes given."""
    info = ml_dtypes.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    values = [np.nan, np.inf, -np.inf, 1e30, -1e30, float(info.max), -float(info.max),
              tiny, -tiny, 1e-40, 0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 5.0, -5.0]
    edge = np.asarray(1.0, dtype)
    values += [float(np.nextafter(edge, np.asarray(2.0, dtype))),
               float(np.nextafter(edge, np.asarray(0.0, dtype)))]
    for size in spatial:  # around the guard's limits: |u| = S + 8 and 2^23 (float32)
        values += [2 * (size + 8) / size, -2 * (size + 8) / size - 1,
                   2.0**24 / size, -(2.0**24) / size, 2.0**53 / size]
    return np.array(values)


def _has_constant(padding) -> bool:
    return "constant" in ((padding,) if isinstance(padding, str) else padding)


def _draw_padding(rng: np.random.Generator, dims: int) -> str | tuple[str, ...]:
    """One mode for every axis (four times in five), else a tuple of one per axis holding at
    most one of zeros and constant (both read the fill value; mixed, they are a ValueError)."""
    if rng.random() < 0.8:
        return str(rng.choice(PADDINGS, p=PADDING_WEIGHTS))
    modes = [str(m) for m in rng.choice(PADDINGS, dims)]
    if "zeros" in modes and "constant" in modes:
        one = str(rng.choice(("zeros", "constant")))
        modes = [one if m in ("zeros", "constant") else m for m in modes]
    return tuple(modes)


def _draw_fill(rng: np.random.Generator, padding, channels: int, dtype) -> np.ndarray | None:
    """A fill value where an axis is "constant": none (the default 0), a scalar or one per
    channel."""
    if not _has_constant(padding):
        return None
    kind = rng.choice(("none", "scalar", "channels"), p=(0.2, 0.4, 0.4))
    if kind == "none":
        return None
    shape = () if kind == "scalar" else (channels,)
    return np.asarray(rng.uniform(-3, 3, shape)).astype(dtype)


def _draw_case(rng: np.random.Generator) -> Case:
    dims = int(rng.choice((2, 3)))
    mode = str(rng.choice(MODES))
    padding = _draw_padding(rng, dims)
    align_corners, channels_last = bool(rng.integers(2)), bool(rng.integers(2))
    dtype = DTYPES[rng.integers(len(DTYPES))]
    n = int(rng.choice((0, 1, 2), p=(0.1, 0.5, 0.4)))
    c = int(rng.choice((0, 1, 2, 3, 5), p=(0.1, 0.3, 0.2, 0.2, 0.2)))
    spatial = tuple(int(s) for s in rng.integers(1, 7, dims))
    if rng.random() < 0.3:  # one long axis: where rounding by the span could show
        long_axis = int(rng.integers(dims))
        spatial = tuple(int(rng.integers(7, 257)) if a == long_axis else s
                        for a, s in enumerate(spatial))
    out_spatial = tuple(int(s) for s in rng.integers(0, 5, dims))
    if rng.random() < 0.8:
        out_spatial = tuple(max(s, 1) for s in out_spatial)
    ordinary = rng.random() < 0.4
    grid = rng.integers(-48, 49, (n,) + out_spatial + (dims,)) / 16.0
    if not ordinary:
        flat = grid.reshape(-1)
        special = _special_values(dtype, spatial)
        picks = rng.random(flat.size) < 0.4
        flat[picks] = rng.choice(special, int(picks.sum()))
        uniform = rng.random(flat.size) < 0.3
        flat[uniform] = rng.uniform(-1.6, 1.6, int(uniform.sum()))
    with np.errstate(over="ignore"):
        grid = grid.astype(dtype)
    x = rng.standard_normal((n, c) + spatial).astype(dtype)
    go = rng.standard_normal((n, c) + out_spatial).astype(dtype)
    if channels_last:
        x, go = np.moveaxis(x, 1, -1), np.moveaxis(go, 1, -1)
    fill = _draw_fill(rng, padding, c, dtype)
    return Case(dims, mode, padding, align_corners, channels_last, dtype, ordinary, x, grid, go,
                fill)


def _results(case: Case, x, grid, go, fill) -> dict:
    """What the fuzz compares, as a flat dict of arrays (or tuples, None where masked off): for
    the native kernels the forward, ``jax.grad`` and the backward with each output mask; for the
    reference, the oracle, the forward and the full backward (its masks and ``jax.grad`` run the
    same code, and its compilation is where the fuzz's time goes). ``fill``: the fill value
    (traced) or None."""
    out = {}
    extra = {} if fill is None else {"fill_value": fill}
    for impl in IMPLEMENTATIONS:
        kwargs = case.kwargs(impl)
        out[impl, "forward"] = gs.grid_sample(x, grid, **kwargs, **extra)
        if impl == "reference":
            masks = {"all": FULL_MASK if case.constant else FULL_MASK[:2]}
        else:
            masks = CONSTANT_MASKS if case.constant else OUTPUT_MASKS
        for name, mask in masks.items():
            out[impl, name] = gs.grid_sample_backward(go, x, grid, output_mask=mask, **kwargs,
                                                      **extra)
    kwargs = case.kwargs("native")

    def loss(x, grid, *fill):  # its gradient with respect to the output is go
        extra = {"fill_value": fill[0]} if fill else {}
        return jnp.sum(gs.grid_sample(x, grid, **kwargs, **extra) * go)

    operands = (x, grid) if fill is None else (x, grid, fill)
    out["native", "grad"] = jax.grad(loss, argnums=tuple(range(len(operands))))(*operands)
    return out


def _run(cases: list[Case]) -> list[dict]:
    """The cases' results, compiled as one program, run twice: the native ones must repeat."""
    program = jax.jit(lambda operands: [_results(case, *ops)
                                        for case, ops in zip(cases, operands, strict=True)])
    operands = [(jnp.asarray(c.x), jnp.asarray(c.grid), jnp.asarray(c.grad_output),
                 None if c.fill is None else jnp.asarray(c.fill)) for c in cases]
    first = jax.tree.map(np.asarray, program(operands))
    second = jax.tree.map(np.asarray, program(operands))
    for case, a, b in zip(cases, first, second, strict=True):
        for key in a:
            if key[0] == "native":
                for u, v in zip(jax.tree.leaves(a[key]), jax.tree.leaves(b[key]), strict=True):
                    assert u.tobytes() == v.tobytes(), f"native {key[1]} not repeatable: {case}"
    return first


def _close(actual, expected, tol, what):
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, what
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale, err_msg=what)


def _to_nchw(a, case):
    return np.moveaxis(a, -1, 1) if case.channels_last else a


def _torch(case: Case):
    """PyTorch's float64 output and gradients on the case's (dtype-rounded) values."""
    x = torch.tensor(_to_nchw(case.x, case).astype(np.float64), requires_grad=True)
    grid = torch.tensor(case.grid.astype(np.float64), requires_grad=True)
    out = torch.nn.functional.grid_sample(x, grid, mode=case.mode, padding_mode=case.padding,
                                          align_corners=case.align_corners)
    out.backward(torch.tensor(_to_nchw(case.grad_output, case).astype(np.float64)))
    return out.detach().numpy(), x.grad.numpy(), grid.grad.numpy()


def _check(case: Case, results: dict) -> None:
    tol = TOLERANCE[case.dtype]
    for key, value in results.items():
        for leaf in jax.tree.leaves(value):
            assert leaf.dtype == case.dtype, f"{key}: {leaf.dtype}, {case}"
            assert np.all(np.isfinite(leaf.astype(np.float64))), f"{key} not finite: {case}"
    native, reference = ({k[1]: v for k, v in results.items() if k[0] == impl}
                         for impl in IMPLEMENTATIONS)
    if case.mode == "nearest":
        np.testing.assert_array_equal(native["forward"], reference["forward"],
                                      err_msg=f"nearest forward: {case}")
    _close(native["forward"], reference["forward"], tol, f"native vs reference forward: {case}")
    full = reference["all"]
    if case.constant:
        fill_shape = () if case.fill is None else case.fill.shape
        assert full[2].shape == fill_shape, f"fill gradient shape {full[2].shape}: {case}"
    for name in ("both", "all", "grad", "input", "grid"):
        if name not in native:  # "all" where an axis is "constant", the others elsewhere
            continue
        names = ("input", "grid", "fill")[:len(native[name])]  # two, or three with the fill's
        for what, actual, expected in zip(names, native[name], full, strict=False):
            if actual is not None:
                _close(actual, expected, tol,
                       f"native {name} {what} gradient vs reference: {case}")
    if not case.constant:
        assert native["input"][1] is None and native["grid"][0] is None
    assert len(native["grad"]) == (2 if case.fill is None else 3)
    if case.ordinary and case.padding in TORCH_PADDINGS \
            and not (case.dims == 3 and case.mode == "bicubic") and case.x.size \
            and case.grid.size:
        out, gi, gg = _torch(case)
        for impl, res in (("native", native), ("reference", reference)):
            _close(_to_nchw(res["forward"], case), out, tol, f"{impl} vs torch output: {case}")
            both_gi, both_gg = res["both" if impl == "native" else "all"][:2]
            _close(_to_nchw(both_gi, case), gi, tol, f"{impl} vs torch input grad: {case}")
            _close(both_gg, gg, tol, f"{impl} vs torch grid grad: {case}")


def _fuzz(seed: int, count: int) -> None:
    rng = np.random.default_rng(seed)
    cases = [_draw_case(rng) for _ in range(count)]
    for start in range(0, count, CHUNK):
        chunk = cases[start:start + CHUNK]
        for case, results in zip(chunk, _run(chunk), strict=True):
            _check(case, results)


def test_fuzz():
    _fuzz(seed=48, count=DEFAULT_CASES)


@pytest.mark.slow
def test_fuzz_long():
    _fuzz(seed=4848, count=LONG_CASES)
