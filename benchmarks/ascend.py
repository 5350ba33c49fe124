"""Hardware acceptance of the Ascend NPU path (CANN aclnn): what users run, on their NPU.

Not a test. Run it once on a machine with CANN, a JAX PJRT plugin for Ascend and an NPU, after
sourcing CANN's ``set_env.sh`` and installing this package:

    python benchmarks/ascend.py [--json ascend_acceptance.json] [--quick] [--cases REGEX]
                                [--repeats 10] [--no-timing] [--no-torch]

(``--quick``: float32 parity cases only, one align_corners per mode x padding, for a first look;
``--cases``: only the parity and route cases whose name matches, e.g. ``'2d-bilinear.*float16'``;
``--no-torch``: no ``torch_npu`` timings.) It prints CANN's version, the chip (SoC name and
family), whether ``JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1`` was set at start-up,
``native_status()``, how many cases each phase will run and the run time estimated from those
counts (:func:`estimate`), then runs, with ``implementation="native"`` (aclnn) on
the NPU, against ``implementation="reference"`` on the NPU and the float64 reference on the
host CPU:

 1. self-check: ``jax_gridsample.ascend_self_check()``, what "auto" runs on first use;
 2. parity: ``grid_sample`` and the default (non-deterministic) ``grid_sample_backward`` for
    every 2D/3D x mode x padding x align_corners x dtype x output mask; what the package routes
    to the reference (``"native"`` raises ``NotImplementedError``) is listed as routed;
 3. routes: shapes that reach CANN's other kernels: more than 2048 channels (the AICPU
    backward), large planes and volumes, a batch larger than an NPU's core count;
 4. chain: a forward, a second grid_sample on its result and the gradients of all three
    operands under one ``jax.jit``, dispatched several times without waiting (stream order);
 5. coordinates: grids of exact pixel centres and exact midpoints, where floors and nearest's
    rounding decide (reported, not judged);
 6. empty tensors: each result starts as a copy of a non-zero operand (the handlers' targets
    called directly), so a result nobody writes shows; exact zeros expected;
 7. NaN coordinates: no crash, the finite points match (the NaN points' values reported);
 8. timings of realistic shapes, their results checked too: aclnn, the reference lowering and
    ``torch_npu`` (timed in a process of its own, ``ascend_torch_npu.py``, so that importing it
    cannot change this process's CANN libraries or options);
 9. speed: SLOW where aclnn's median is more than :data:`SPEED_MARGIN` above the reference's
    on the same NPU (a finding to report, not a failure), else PASS;
10. deterministic: the deterministic backwards of the parity and route cases, each run twice
    and bitwise equal;
11. reproducibility: a backward with many points scattering into few pixels, run twice: the
    deterministic one must give the same bits (the default one is reported: it ran with the
    default cases);
12. workspace: how many calls took their aclnn workspace from the per-stream cache, and its
    buffers.

CANN's deterministic backward runs only in a process started with
``JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1`` (the handlers apply it before their first aclnn
call; CANN honours no per-call switch). Without it ``deterministic=True`` runs on the reference
and ``"native"`` refuses it: that known limitation makes the deterministic sections (and the
self-check's deterministic part, should it fail) EXPECTED, not FAIL, and the overall verdict
can still pass; run the script again with the variable set to check CANN's deterministic
backward. With it set, every aclnn backward of the process is deterministic, the default cases
and timings too (the script says so). Each section ends with a line
``VERDICT <section>: PASS|FAIL|EXPECTED|SLOW|ROUTED|REPORTED|SKIPPED (...)`` and the last line
is ``VERDICT overall: PASS|FAIL (...)``: paste those back to us. Please also send the JSON file
(default ``ascend_acceptance.json``; written after each phase, so a crash still leaves what ran
before it; it has each phase's seconds next to its estimate). Exit status 1 means a check
failed (or nothing ran on aclnn at all); EXPECTED and SLOW do not fail. Without an Ascend
device visible to JAX it prints one line and exits 0.

The check functions take the devices (and the kernel) as arguments, so they also run with both
devices being the CPU, where the tests install the Ascend handlers on a simulated CANN.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jax_gridsample
from jax_gridsample import _ascend

ASCEND_PLATFORMS = ("ascend", "npu")  # device.platform spellings, compared case-insensitively
START_UP_DETERMINISM = "JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC"

MODES = {2: ("bilinear", "nearest", "bicubic"), 3: ("bilinear", "nearest")}
PADDINGS = ("zeros", "border", "reflection")
DTYPES = ("float32", "float16", "bfloat16", "float64")
MASKS = ((True, True), (True, False), (False, True))
MASK_NAMES = {(True, True): "both", (True, False): "input", (False, True): "grid"}
# Largest error allowed against the float64 host result, as a fraction of the largest magnitude
# of the expected value: about a few roundings of each dtype.
TOLERANCES = {"float64": 1e-10, "float32": 1e-5, "float16": 3e-3, "bfloat16": 3e-2}
# (input shape, grid shape) of the parity cases: small, with odd sizes, and different per axis.
SHAPES = {2: ((2, 3, 5, 6), (2, 4, 5, 2)), 3: ((2, 3, 3, 4, 5), (2, 2, 3, 4, 3))}
# |normalized coordinate| up to this: beyond 1, so that every padding mode matters, and far
# enough (with align_corners=False, over half a pixel) that border and reflection differ.
GRID_RANGE = 1.5
# Shapes that reach CANN's other kernels: (name, input shape, grid shape, mode, padding,
# align_corners, dtypes). Each runs the forward and the backward of both gradients, default and
# deterministic (CANN's deterministic backward has no more than 2048 channels: routed).
ROUTE_SHAPES = (
    ("wide-c", (2, 2056, 5, 6), (2, 4, 5, 2), "bilinear", "zeros", False, ("float32",)),
    ("wide-c-3d", (1, 2056, 3, 4, 5), (1, 2, 3, 4, 3), "nearest", "border", True,
     ("float32",)),
    ("large-plane", (1, 4, 1000, 1500), (1, 96, 128, 2), "bilinear", "reflection", False,
     ("float32", "float16")),
    ("large-volume", (1, 2, 96, 128, 160), (1, 16, 16, 16, 3), "bilinear", "zeros", True,
     ("float32", "float16")),
    ("batch-64", (64, 3, 16, 17), (64, 8, 9, 2), "bicubic", "border", False,
     ("float32", "float16")),
    ("batch-64-3d", (64, 2, 4, 5, 6), (64, 3, 3, 3, 3), "bilinear", "zeros", False,
     ("float32", "float16")),
)
# The jitted chain: (name, input shape, first grid shape, second grid shape, mode, padding,
# align_corners); CHAIN_RUNS programs dispatched back to back, each on data of its own.
CHAIN_SHAPES = (
    ("2d", (4, 16, 64, 64), (4, 48, 48, 2), (4, 32, 32, 2), "bilinear", "border", False),
    ("3d", (2, 8, 16, 16, 16), (2, 12, 12, 12, 3), (2, 8, 8, 8, 3), "bilinear", "zeros", True),
)
CHAIN_RUNS = 3
# The input's (W, H, D) for exact coordinates, by align_corners: sizes (align_corners=False) or
# sizes - 1 (True) that are powers of two, so that pixel centres and midpoints have normalized
# coordinates that float32 holds exactly and every way of unnormalizing them is exact too.
EXACT_SIZES = {False: (8, 4, 2), True: (9, 5, 3)}
# Many points, few pixels: (name, input shape, grid shape, dtype).
COLLISION_SHAPES = (
    ("2d", (2, 8, 3, 3), (2, 128, 128, 2), "float32"),
    ("2d", (2, 8, 3, 3), (2, 128, 128, 2), "float16"),
    ("3d", (1, 4, 2, 2, 2), (1, 24, 24, 24, 3), "float32"),
)
EMPTY_CASES = (  # (name, input shape, grid shape)
    ("2d no output points", (2, 3, 5, 6), (2, 0, 5, 2)),
    ("2d C=0", (2, 0, 5, 6), (2, 4, 5, 2)),
    ("2d N=0", (0, 3, 5, 6), (0, 4, 5, 2)),
    ("3d no output points", (2, 3, 3, 4, 5), (2, 2, 0, 4, 3)),
    ("3d C=0", (2, 0, 3, 4, 5), (2, 2, 3, 4, 3)),
    ("3d N=0", (0, 3, 3, 4, 5), (0, 2, 3, 4, 3)),
)
EMPTY_DTYPES = ("float32", "float16")
# (name, input shape, output spatial shape) of the timings; bilinear, zeros padding.
TIMING_SHAPES = (
    ("2d", (8, 32, 128, 128), (128, 128)),
    ("3d", (2, 16, 32, 32, 32), (32, 32, 32)),
)
TIMING_DTYPES = ("float32", "float16")
TIMING_GRID_RANGE = 1.1
TIMING_WARMUP = 2
TORCH_WORKER = Path(__file__).with_name("ascend_torch_npu.py")
TORCH_TIMEOUT_S = 1800
# aclnn is SLOW where its median is above the reference's (same device, same data) by more
# than this fraction: one median of a noisy machine is no finer than that.
SPEED_MARGIN = 0.10
# The run-time estimate: seconds per unit of each phase, compiling included (every case is a
# few small programs compiled for the NPU and the host), times how many units the phase has
# (:func:`estimate`). Assumed, not yet measured on an NPU: the report records each phase's
# actual seconds next to its estimate, so that a run can correct them.
SECONDS_EACH = {
    "self-check": 30.0,  # the run: about 30 small aclnn and reference programs
    "parity": 1.0,  # per case: aclnn's program, the NPU reference's and the host's
    "routes": 4.0,  # per case: the same on large shapes
    "chain": 15.0,  # per shape: two jitted chains (aclnn, host reference), CHAIN_RUNS runs
    "coordinates": 2.0,  # per grid: forward and backward, aclnn and host reference
    "empty": 3.0,  # per case and dtype: three direct calls and the API's forward and backward
    "nan": 2.0,  # per grid: forward and backward, aclnn and host reference
    "default collisions": 3.0,  # per shape: one program run twice, the host reference
    "timings": 10.0,  # per row: four programs compiled, the host reference of two
    "timed call": 0.02,  # per timed or warm-up call of those four programs
    "torch_npu": 20.0,  # per row, in its own process (importing torch_npu included)
    "deterministic": 1.5,  # per case: as a parity case, aclnn's run twice
    "deterministic collisions": 3.0,  # per shape
    "refused": 0.05,  # per deterministic call "native" refuses without the start-up level
}


# --- determinism: the start-up level ------------------------------------------------------

EXPECTED_DETERMINISM = (
    f"a known limitation: CANN's deterministic backward runs only in a process started with "
    f"{START_UP_DETERMINISM}=1, and without it deterministic=True runs on the reference; start "
    f"Python with {START_UP_DETERMINISM}=1 and run this script again to check it")


def deterministic_level() -> int | None:
    """The determinism level the handlers apply from start-up (1), or None (unset, or a value
    they refuse): without it CANN's deterministic backward never runs, so the deterministic
    sections are EXPECTED."""
    return _ascend.deterministic_level()[0]


def _expected_refusal(deterministic: bool | None, reason: str) -> bool:
    """Whether "native" refusing a call is the known limitation: a deterministic backward
    without the start-up level (a refusal for any other reason is "routed")."""
    return bool(deterministic) and deterministic_level() is None and START_UP_DETERMINISM in reason


# --- data ---------------------------------------------------------------------------------

def _require_x64() -> None:
    if not jax.config.jax_enable_x64:
        raise RuntimeError("the checks need float64: call "
                           "jax.config.update('jax_enable_x64', True) first")


def _unnormalize(x: np.ndarray | float, size: int, align_corners: bool) -> Any:
    if align_corners:
        return (np.asarray(x) + 1) / 2 * (size - 1)
    return ((np.asarray(x) + 1) * size - 1) / 2


def _normalize(u: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return 2 * u / (size - 1) - 1
    return (2 * u + 1) / size - 1


def make_grid(rng: np.random.Generator, grid_shape: Sequence[int], input_shape: Sequence[int],
              align_corners: bool, grid_range: float = GRID_RANGE) -> np.ndarray:
    """A float64 grid with coordinates in about [-grid_range, grid_range] whose pixel
    coordinates stay at least 0.15 away from integers and half-integers (also after reflection
    and clamping), so that nearest's rounding, the floors and the clamps cannot flip between
    precisions."""
    sizes = tuple(reversed(input_shape[2:]))  # the grid holds (x, y[, z]): W, H[, D]
    points = tuple(grid_shape[:-1])
    coords = []
    for size in sizes:
        lo = _unnormalize(-grid_range, size, align_corners)
        hi = _unnormalize(grid_range, size, align_corners)
        u = rng.uniform(lo, hi, points)
        frac = rng.uniform(0.15, 0.35, points) + 0.5 * rng.integers(0, 2, points)
        coords.append(_normalize(np.floor(u) + frac, size, align_corners))
    return np.stack(coords, axis=-1)


def _output_shape(input_shape: Sequence[int], grid_shape: Sequence[int]) -> tuple[int, ...]:
    return (input_shape[0], input_shape[1], *grid_shape[1:-1])


def make_data(dim: int, mode: str, padding: str, align_corners: bool, dtype: str,
              shapes: tuple[Sequence[int], Sequence[int]] | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input, grid, grad_output) as numpy arrays of ``dtype``, from a seed fixed by the
    combination and the shapes (the output mask and ``deterministic`` share the data)."""
    input_shape, grid_shape = shapes or SHAPES[dim]
    seed = zlib.crc32(f"{dim}-{mode}-{padding}-{align_corners}-{dtype}-{shapes}".encode())
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, input_shape)
    g = make_grid(rng, grid_shape, input_shape, align_corners)
    go = rng.uniform(-1, 1, _output_shape(input_shape, grid_shape))
    np_dtype = jnp.dtype(dtype)
    return x.astype(np_dtype), g.astype(np_dtype), go.astype(np_dtype)


def _put(arrays: Iterable[np.ndarray], device: jax.Device, dtype: Any = None) -> list:
    return [jax.device_put(a if dtype is None else np.asarray(a).astype(dtype), device)
            for a in arrays]


def _np64(a: Any) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def scaled_error(got: Any, expected: Any) -> float:
    """max |got - expected| / max |expected| (1 where expected is all zero); inf on a shape
    mismatch or a non-finite difference."""
    if got is None or expected is None:
        return float("inf")
    g, e = _np64(got), _np64(expected)
    if g.shape != e.shape:
        return float("inf")
    if g.size == 0:
        return 0.0
    diff = np.abs(g - e)
    if not np.all(np.isfinite(diff)):
        return float("inf")
    scale = float(np.abs(e).max())
    return float(diff.max()) / (scale if scale > 0 else 1.0)


def _identical(first: Sequence[Any], second: Sequence[Any]) -> bool:
    return all((a is None and b is None) or (a is not None and b is not None
                                             and np.asarray(a).tobytes() == np.asarray(b).tobytes())
               for a, b in zip(first, second, strict=True))


def _max_difference(first: Sequence[Any], second: Sequence[Any]) -> float:
    return max((float(np.abs(_np64(a) - _np64(b)).max(initial=0.0))
                for a, b in zip(first, second, strict=True) if a is not None and b is not None),
               default=0.0)


# --- the calls ------------------------------------------------------------------------------

def _kwargs(case: dict, implementation: str, deterministic: bool = False) -> dict:
    return dict(mode=case["mode"], padding_mode=case["padding"],
                align_corners=case["align_corners"], implementation=implementation,
                deterministic=deterministic)


def _forward(case: dict, x, g, implementation: str) -> np.ndarray:
    out = jax_gridsample.grid_sample(x, g, **_kwargs(case, implementation))
    return np.asarray(jax.block_until_ready(out))


def _backward(case: dict, x, g, go, implementation: str, mask: Sequence[bool],
              deterministic: bool = False) -> list[np.ndarray | None]:
    """(grad_input, grad_grid) for the cotangent ``go``, None where masked off."""
    grads = jax_gridsample.grid_sample_backward(
        go, x, g, output_mask=tuple(mask), **_kwargs(case, implementation, deterministic))
    grads = jax.block_until_ready(grads)
    return [None if r is None else np.asarray(r) for r in grads]


def _error_text(exc: BaseException, case: dict | None = None) -> str:
    """The exception in one string; for a 161002 where the oldest chips document a limit, a
    note saying so."""
    text = f"{type(exc).__name__}: {exc}"
    text = text if len(text) < 2000 else text[:2000] + " ..."
    limited = case is not None and (case["dtype"] == "bfloat16" or (
        case["dtype"] == "float64" and case["dim"] == 2 and case["op"] == "backward"))
    if limited and "161002" in text:
        text += (" [note: Atlas training products (the oldest chips) take no bfloat16 and no "
                 "float64 2D backward; this may be that documented limit]")
    return text


def _ac(align_corners: bool) -> str:
    return "ac" if align_corners else "noac"


# --- parity and route cases -------------------------------------------------------------------

def _group(case: dict) -> str:
    prefix = f"{case['route']}-" if case.get("route") else ""
    return (f"{prefix}{case['dim']}d-{case['mode']}-{case['padding']}-"
            f"{_ac(case['align_corners'])}-{case['dtype']}")


def _case(dim: int, mode: str, padding: str, align_corners: bool, dtype: str, op: str,
          mask: tuple[bool, bool] | None = None, deterministic: bool | None = None,
          route: str | None = None, shapes: tuple | None = None) -> dict:
    case = dict(dim=dim, mode=mode, padding=padding, align_corners=align_corners, dtype=dtype,
                op=op, output_mask=None if mask is None else list(mask),
                deterministic=deterministic, route=route,
                input_shape=None if shapes is None else list(shapes[0]),
                grid_shape=None if shapes is None else list(shapes[1]))
    name = f"{_group(case)}-fwd"
    if op == "backward":
        name = f"{_group(case)}-bwd-{MASK_NAMES[mask]}-{'det' if deterministic else 'nondet'}"
    return dict(name=name, **case)


def _matching(cases: list[dict], pattern: str | None) -> list[dict]:
    if not pattern:
        return cases
    regex = re.compile(pattern)
    return [c for c in cases if regex.search(c["name"])]


def _combinations(quick: bool) -> Iterable[tuple[int, str, str, bool]]:
    """(dim, mode, padding, align_corners) for every dimension, mode and padding: both
    align_corners, or (``quick``) one, alternating."""
    for dim, modes in MODES.items():
        for mode_index, mode in enumerate(modes):
            for pad_index, padding in enumerate(PADDINGS):
                for align_corners in (False, True):
                    if not quick or align_corners == bool((mode_index + pad_index + dim) % 2):
                        yield dim, mode, padding, align_corners


def covered_cases(quick: bool = False, pattern: str | None = None) -> list[dict]:
    """The parity cases: one dict per call (forward, or backward with an output mask and a
    ``deterministic`` flag), named like ``2d-bilinear-zeros-noac-float32-bwd-both-det``.

    ``quick``: float32 only, one align_corners per mode x padding x dimension (alternating),
    the forward and the backward of both gradients, default and deterministic. ``pattern``: a
    regular expression the name must contain. Whether aclnn runs a case is the package's
    decision (check_case reports "routed" for the rest).
    """
    cases = []
    for dim, mode, padding, align_corners in _combinations(quick):
        for dtype in ("float32",) if quick else DTYPES:
            combo = (dim, mode, padding, align_corners, dtype)
            cases.append(_case(*combo, "forward"))
            for det in (False, True):
                for mask in ((True, True),) if quick else MASKS:
                    cases.append(_case(*combo, "backward", mask, det))
    return _matching(cases, pattern)


def route_cases(quick: bool = False, pattern: str | None = None) -> list[dict]:
    """The cases of :data:`ROUTE_SHAPES`: per shape and dtype (``quick``: float32), the forward
    and the backward of both gradients, default and deterministic; named like
    ``wide-c-2d-bilinear-zeros-noac-float32-bwd-both-nondet``."""
    cases = []
    for route, input_shape, grid_shape, mode, padding, align_corners, dtypes in ROUTE_SHAPES:
        for dtype in dtypes[:1] if quick else dtypes:
            combo = (len(input_shape) - 2, mode, padding, align_corners, dtype)
            where = dict(route=route, shapes=(input_shape, grid_shape))
            cases.append(_case(*combo, "forward", **where))
            for det in (False, True):
                cases.append(_case(*combo, "backward", (True, True), det, **where))
    return _matching(cases, pattern)


def check_case(case: dict, device: jax.Device, host_device: jax.Device) -> dict:
    """Run one case with implementation="native" on ``device``; compare with
    implementation="reference" on ``device`` and with the float64 reference on ``host_device``.

    Returns the case plus "status" ("pass", "fail", "routed": native raised
    NotImplementedError, or "expected": it refused a deterministic backward for want of the
    start-up level), "errors" (per output: scaled error vs the host float64 result and vs the
    device reference), "max_error_host", "max_error_reference", "tolerance",
    "seconds", and where they apply "deterministic_identical", "problems", "reason" and "error"
    (an exception). Passing needs every output present with the right shape and dtype, within
    the tolerance of the host result, and a deterministic backward bitwise equal across two
    runs.
    """
    _require_x64()
    t0 = time.perf_counter()
    result = dict(case, tolerance=TOLERANCES[case["dtype"]], errors={}, problems=[])
    shapes = (case["input_shape"], case["grid_shape"]) if case.get("input_shape") else None
    x, g, go = make_data(case["dim"], case["mode"], case["padding"], case["align_corners"],
                         case["dtype"], shapes)
    dev = _put((x, g, go), device)
    host = _put((x, g, go), host_device, np.float64)
    backward = case["op"] == "backward"
    mask = tuple(case["output_mask"]) if backward else None
    names = ["grad_input", "grad_grid"] if backward else ["output"]
    try:
        if backward:
            got = _backward(case, *dev, "native", mask, bool(case["deterministic"]))
        else:
            got = [_forward(case, *dev[:2], "native")]
    except NotImplementedError as exc:
        status = "expected" if _expected_refusal(case["deterministic"], str(exc)) else "routed"
        result.update(status=status, reason=str(exc), seconds=time.perf_counter() - t0)
        return result
    except Exception as exc:  # noqa: BLE001 - an aclnn or runtime error is a failed check
        result.update(status="fail", error=_error_text(exc, case),
                      seconds=time.perf_counter() - t0)
        return result

    if backward:
        expected = _backward(case, *host, "reference", (True, True))
        try:
            reference = _backward(case, *dev, "reference", (True, True))
        except Exception as exc:  # noqa: BLE001 - reported; the host result decides
            reference = [None, None]
            result["reference_error"] = _error_text(exc)
        wanted = list(mask)
    else:
        expected = [_forward(case, *host[:2], "reference")]
        try:
            reference = [_forward(case, *dev[:2], "reference")]
        except Exception as exc:  # noqa: BLE001 - reported; the host result decides
            reference = [None]
            result["reference_error"] = _error_text(exc)
        wanted = [True]

    tol = result["tolerance"]
    for name, want, out, exp, ref in zip(names, wanted, got, expected, reference, strict=True):
        if not want:
            if out is not None:
                result["problems"].append(f"{name} was masked off but returned")
            continue
        if out is None:
            result["problems"].append(f"{name} missing")
            continue
        if out.shape != exp.shape or str(out.dtype) != case["dtype"]:
            result["problems"].append(f"{name} is {out.dtype}{list(out.shape)}, expected "
                                      f"{case['dtype']}{list(exp.shape)}")
        err_host = scaled_error(out, exp)
        err_ref = None if ref is None else scaled_error(out, ref)
        result["errors"][name] = dict(host=err_host, reference=err_ref)
        if not err_host <= tol:
            result["problems"].append(f"{name}: error {err_host:.3g} > tolerance {tol:g}")

    if backward and case["deterministic"]:
        again = _backward(case, *dev, "native", mask, True)
        identical = _identical(got, again)
        result["deterministic_identical"] = identical
        if not identical:
            result["problems"].append("deterministic backward differs between two runs (max "
                                      f"difference {_max_difference(got, again):.3g})")

    errors = result["errors"].values()
    result["max_error_host"] = max((e["host"] for e in errors), default=None)
    refs = [e["reference"] for e in errors if e["reference"] is not None]
    result["max_error_reference"] = max(refs, default=None)
    result.update(status="fail" if result["problems"] else "pass",
                  seconds=time.perf_counter() - t0)
    return result


def run_cases(cases: Sequence[dict], device: jax.Device, host_device: jax.Device,
              label: str = "cases") -> list[dict]:
    """check_case for each case, with a progress line on stderr every 50."""
    started = time.perf_counter()
    results = []
    for i, case in enumerate(cases):
        results.append(check_case(case, device, host_device))
        if (i + 1) % 50 == 0 or i + 1 == len(cases):
            print(f"  {label} {i + 1}/{len(cases)} ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr, flush=True)
    return results


def _not_reproducible(results: Iterable[dict]) -> list[str]:
    return [r["name"] for r in results if r.get("deterministic_identical") is False]


# --- the self-check ---------------------------------------------------------------------------

def check_self_check(run: Callable[[], dict]) -> dict:
    """The outcome of ``run`` (``jax_gridsample.ascend_self_check``): its dict plus "status"
    ("pass"; "fail", with "error" when it could not run; or "expected": only its deterministic
    part failed, without the start-up level that alone makes CANN's backward deterministic);
    its warning is not repeated."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            outcome = dict(run())
    except Exception as exc:  # noqa: BLE001 - reported
        return dict(status="fail", error=_error_text(exc))
    if outcome.get("failure"):
        return dict(outcome, status="fail")
    if outcome.get("deterministic_failure"):
        return dict(outcome, status="fail" if deterministic_level() else "expected")
    return dict(outcome, status="pass")


# --- the jitted chain: stream order -----------------------------------------------------------

def _chain(implementation: str, mode: str, padding: str, align_corners: bool) -> Callable:
    """jit(grad) of sum(w * grid_sample(tanh(grid_sample(x, g1)), g2)) with respect to x, g1
    and g2, with the final samples as auxiliary output: two forwards, their backwards and XLA's
    own kernels in between, in one program."""
    kw = dict(mode=mode, padding_mode=padding, align_corners=align_corners,
              implementation=implementation)

    def loss(x, g1, g2, w):
        y = jnp.tanh(jax_gridsample.grid_sample(x, g1, **kw))
        z = jax_gridsample.grid_sample(y, g2, **kw)
        return jnp.sum(z * w), z

    return jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))


def check_chain(device: jax.Device, host_device: jax.Device, shapes: Sequence[tuple] = None,
                runs: int | None = None, dtype: str = "float32") -> dict:
    """The chain of :func:`_chain` with implementation="native" on ``device``, ``runs`` times
    on data of its own each, all dispatched before any result is read (XLA's work and aclnn's
    must keep their order on the stream, and a workspace freed by one call must not be reused
    under a queued kernel), compared with the float64 reference on ``host_device``: the final
    samples and the three gradients within the dtype's tolerance.
    Returns {"status", "checks": [per shape: name, status, errors, problems]}."""
    _require_x64()
    shapes = CHAIN_SHAPES if shapes is None else shapes
    runs = CHAIN_RUNS if runs is None else runs
    tol = TOLERANCES[dtype]
    checks = []
    for name, input_shape, grid1_shape, grid2_shape, mode, padding, align_corners in shapes:
        check = dict(name=f"{name}-{mode}-{padding}-{_ac(align_corners)}-{dtype}",
                     dtype=dtype, runs=runs, errors={}, problems=[])
        data = []
        for run in range(runs):
            rng = np.random.default_rng(zlib.crc32(f"{name}-{run}".encode()))
            x = rng.uniform(-1, 1, input_shape)
            g1 = make_grid(rng, grid1_shape, input_shape, align_corners)
            g2 = make_grid(rng, grid2_shape, _output_shape(input_shape, grid1_shape),
                           align_corners)
            w = rng.uniform(-1, 1, _output_shape(input_shape, grid2_shape))
            data.append([a.astype(jnp.dtype(dtype)) for a in (x, g1, g2, w)])
        native = _chain("native", mode, padding, align_corners)
        try:
            pending = [native(*_put(d, device)) for d in data]  # dispatched without waiting
            got = [jax.device_get(p) for p in pending]
        except NotImplementedError as exc:
            checks.append(dict(check, status="routed", reason=str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - a crash is a failed check
            checks.append(dict(check, status="fail", error=_error_text(exc)))
            continue
        reference = _chain("reference", mode, padding, align_corners)
        for run, ((gx, gg1, gg2), z) in enumerate(got):
            (ex, eg1, eg2), ez = reference(*_put(data[run], host_device, np.float64))
            for label, a, e in (("output", z, ez), ("grad_input", gx, ex),
                                ("grad_grid1", gg1, eg1), ("grad_grid2", gg2, eg2)):
                err = scaled_error(a, e)
                check["errors"][label] = max(check["errors"].get(label, 0.0), err)
                if not err <= tol:
                    check["problems"].append(f"run {run + 1}: {label}: error {err:.3g} > "
                                             f"tolerance {tol:g}")
        checks.append(dict(check, status="fail" if check["problems"] else "pass"))
    return dict(status=_overall(checks), checks=checks)


# --- exact coordinates: reported ---------------------------------------------------------------

def exact_grid(dim: int, align_corners: bool, half: bool) -> tuple[tuple[int, ...], np.ndarray]:
    """(input shape, grid) whose points sit exactly on pixel centres (``half`` False: integer
    pixel coordinates, from one before the first pixel to one after the last) or exactly
    midway between them (from 1.5 before to 1.5 after), every combination of the axes'."""
    sizes = EXACT_SIZES[align_corners][:dim]  # (W, H[, D])
    axes = []
    for size in sizes:
        u = np.arange(-2, size + 1) + 0.5 if half else np.arange(-1, size + 1).astype(float)
        axes.append(_normalize(u, size, align_corners))
    mesh = np.meshgrid(*reversed(axes), indexing="ij")  # ([z,] y, x), the grid's point axes
    grid = np.stack(mesh[::-1], axis=-1)[None]
    return (1, 2, *reversed(sizes)), grid


def _differing_points(got: np.ndarray, expected: np.ndarray, tol: float,
                      channel_axis: int) -> str:
    """"same", or how many of the points differ by more than ``tol`` x the largest magnitude
    (a point differs when any of its channels or components does)."""
    g, e = _np64(got), _np64(expected)
    if g.shape != e.shape:
        return f"shape {list(g.shape)}, expected {list(e.shape)}"
    scale = max(float(np.abs(e).max(initial=0.0)), 1e-30)
    bad = ~(np.abs(g - e) <= tol * scale)  # NaN counts as differing
    per_point = bad.any(axis=channel_axis)
    if not per_point.any():
        return "same"
    worst = float(np.nanmax(np.where(bad, np.abs(g - e), 0.0))) / scale
    return (f"{int(per_point.sum())} of {per_point.size} points differ (largest error "
            f"{worst:.2g})")


def check_coordinates(device: jax.Device, host_device: jax.Device, dtype: str = "float32",
                      quick: bool = False) -> dict:
    """Grids of exact pixel centres and exact midpoints (:func:`exact_grid`), for each
    dimension, mode, padding and align_corners (``quick``: one align_corners per mode x
    padding): the forward and both gradients with implementation="native", compared with the
    float64 reference point by point. There floor(i) and nearest's round-half-to-even decide,
    and implementations may differ by convention (PyTorch's is the reference's): reported, not
    judged; only an exception fails. Returns {"status" ("reported", "fail" or "routed"),
    "checks": [per grid: name, status, report, differs]}."""
    _require_x64()
    tol = TOLERANCES[dtype]
    checks = []
    for dim, mode, padding, align_corners in _combinations(quick):
        for half in (False, True):
            checks.append(_check_exact(device, host_device, dim, mode, padding, align_corners,
                                       half, dtype, tol))
    statuses = {c["status"] for c in checks}
    status = "fail" if "fail" in statuses else "reported" if "reported" in statuses else "routed"
    return dict(status=status, checks=checks)


def _check_exact(device, host_device, dim, mode, padding, align_corners, half, dtype, tol):
    case = dict(mode=mode, padding=padding, align_corners=align_corners)
    kind = "midpoints" if half else "centres"
    check = dict(name=f"{dim}d-{mode}-{padding}-{_ac(align_corners)}-{kind}", dtype=dtype,
                 report={})
    input_shape, grid = exact_grid(dim, align_corners, half)
    rng = np.random.default_rng(dim)
    x = rng.uniform(-1, 1, input_shape)
    go = rng.uniform(-1, 1, _output_shape(input_shape, grid.shape))
    np_dtype = jnp.dtype(dtype)
    dev = _put((x, grid, go), device, np_dtype)
    try:
        out = _forward(case, *dev[:2], "native")
        gi, gg = _backward(case, *dev, "native", (True, True))
    except NotImplementedError as exc:
        return dict(check, status="routed", reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - a crash is a failed check
        return dict(check, status="fail", error=_error_text(exc))
    host = _put((x, grid, go), host_device, np.float64)
    expected_out = _forward(case, *host[:2], "reference")
    expected_gi, expected_gg = _backward(case, *host, "reference", (True, True))
    report = check["report"]
    report["output"] = _differing_points(out, expected_out, tol, 1)
    report["grad_grid"] = _differing_points(gg, expected_gg, tol, -1)
    err = scaled_error(gi, expected_gi)
    report["grad_input"] = "same" if err <= tol else f"error {err:.2g}"
    return dict(check, status="reported", differs=any(v != "same" for v in report.values()))


# --- empty tensors and NaN coordinates -------------------------------------------------------

def _prefilled_backward(kernel: Any, go, x, g, mask: tuple[bool, bool]) -> list:
    """The kernel's backward target called directly, each result aliased to the operand of its
    shape (grad_input to input, grad_grid to grid), so that it starts as a copy of it."""
    wanted = [i for i in (0, 1) if mask[i]]
    results = tuple(jax.ShapeDtypeStruct((x, g)[i].shape, x.dtype) for i in wanted)
    aliases = {1 + i: j for j, i in enumerate(wanted)}
    call = jax.ffi.ffi_call(kernel.backward_target, results, input_output_aliases=aliases)
    attributes = kernel.backward_attributes(
        output_mask=mask, interpolation=0, padding=(0,) * (x.ndim - 2), align_corners=False,
        channels_last=False, deterministic=False)
    out = jax.jit(lambda *operands: call(*operands, **attributes))(go, x, g)
    return [np.asarray(r) for r in jax.block_until_ready(out)]


def check_empty(device: jax.Device, host_device: jax.Device,
                dtypes: Sequence[str] | None = None, kernel: Any = None) -> dict:
    """Empty calls (no output points, C=0, N=0): aclnn writes nothing on them, so the handlers
    must zero every result that has elements themselves.

    Per case and dtype: the backward target of ``kernel`` (default: the package's Ascend
    kernel) called directly for each output mask, every result starting as a copy of the
    non-zero operand of its shape, so that a result nobody writes shows; then the public API
    with implementation="native" (forward and both gradients). Every result must have the
    right shape and dtype, every gradient be exactly zero. Returns {"status", "checks": [per
    call: name, dtype, status, problems]}."""
    _require_x64()
    kernel = _ascend.KERNEL if kernel is None else kernel
    checks = []
    for (name, input_shape, grid_shape), dtype in (
            (c, d) for c in EMPTY_CASES for d in (EMPTY_DTYPES if dtypes is None else dtypes)):
        case = dict(mode="bilinear", padding="zeros", align_corners=False)
        check = dict(name=name, dtype=dtype, input_shape=list(input_shape),
                     grid_shape=list(grid_shape), problems=[])
        rng = np.random.default_rng(0)
        np_dtype = jnp.dtype(dtype)
        x = rng.uniform(1, 2, input_shape).astype(np_dtype)
        g = rng.uniform(0.5, 0.9, grid_shape).astype(np_dtype)
        go = rng.uniform(1, 2, _output_shape(input_shape, grid_shape)).astype(np_dtype)
        dev = _put((x, g, go), device)
        try:
            direct = {mask: _prefilled_backward(kernel, dev[2], dev[0], dev[1], mask)
                      for mask in MASKS}
            out = _forward(case, *dev[:2], "native")
            grads = _backward(case, *dev, "native", (True, True))
        except NotImplementedError as exc:
            checks.append(dict(check, status="routed", reason=str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - a crash is a failed check
            checks.append(dict(check, status="fail", error=_error_text(exc)))
            continue
        expected_out = _output_shape(input_shape, grid_shape)
        results = [("output", out, expected_out), ("grad_input", grads[0], x.shape),
                   ("grad_grid", grads[1], g.shape)]
        for mask, direct_grads in direct.items():
            which = [i for i in (0, 1) if mask[i]]
            results += [(f"pre-filled {('grad_input', 'grad_grid')[i]} (mask "
                         f"{MASK_NAMES[mask]})", r, (x, g)[i].shape)
                        for i, r in zip(which, direct_grads, strict=True)]
        for label, got, shape in results:
            if got is None or got.shape != tuple(shape) or str(got.dtype) != dtype:
                desc = None if got is None else f"{got.dtype}{list(got.shape)}"
                check["problems"].append(f"{label} is {desc}, expected {dtype}{list(shape)}")
            elif label != "output" and np.any(_np64(got) != 0):
                bad = int(np.count_nonzero(_np64(got) != 0))
                check["problems"].append(f"{label}: {bad} of {got.size} entries not zero")
        checks.append(dict(check, status="fail" if check["problems"] else "pass"))
    return dict(status=_overall(checks), checks=checks)


def _describe(values: np.ndarray) -> str:
    """What an array holds, in a few words: e.g. "4 NaN, 2 zero" of its entries."""
    v = _np64(values).ravel()
    if v.size == 0:
        return "empty"
    parts = [(int(np.isnan(v).sum()), "NaN"), (int(np.isinf(v).sum()), "inf"),
             (int((v == 0).sum()), "zero"), (int((np.isfinite(v) & (v != 0)).sum()), "finite")]
    return ", ".join(f"{n} {what}" for n, what in parts if n) + f" (of {v.size})"


def check_nan(device: jax.Device, host_device: jax.Device, dtype: str = "float32") -> dict:
    """Grids with some NaN coordinates (x only, y only, all of a point's) through
    implementation="native": no crash; at points whose coordinates are all finite, the output
    and the grid gradient must match the float64 host reference. What comes out at the NaN
    points, and whether the input gradient (with the NaN points' cotangent zeroed) matches the
    reference, is reported but not judged: it is CANN's behaviour, not ours.
    Returns {"status", "checks": [per combination: name, status, problems, report]}."""
    _require_x64()
    checks = []
    tol = TOLERANCES[dtype]
    for dim, modes in MODES.items():
        for mode in modes:
            for padding in PADDINGS:
                case = dict(dim=dim, mode=mode, padding=padding, align_corners=False,
                            dtype=dtype)
                check = dict(name=f"{dim}d-{mode}-{padding}-noac-{dtype}-nan", problems=[],
                             report={})
                x, g, go = make_data(dim, mode, padding, False, dtype)
                points = g.reshape(-1, dim)  # a view: the grid's points, flattened
                nan_points = np.zeros(points.shape[0], bool)
                for i in range(dim + 1):  # coordinate i alone NaN; the last point all NaN
                    points[2 * i + 1, i if i < dim else slice(None)] = np.nan
                    nan_points[2 * i + 1] = True
                finite = ~nan_points.reshape(g.shape[:-1])
                go_zeroed = go * np.expand_dims(finite, 1).astype(go.dtype)
                dev = _put((x, g, go_zeroed), device)
                host = _put((x, g, go_zeroed), host_device, np.float64)
                try:
                    out = _forward(case, *dev[:2], "native")
                except NotImplementedError as exc:
                    checks.append(dict(check, status="routed", reason=str(exc)))
                    continue
                except Exception as exc:  # noqa: BLE001 - a crash is a failed check
                    checks.append(dict(check, status="fail", error=_error_text(exc)))
                    continue
                exp = _forward(case, *host[:2], "reference")
                sel = np.broadcast_to(np.expand_dims(finite, 1), exp.shape)
                err = scaled_error(out[sel], exp[sel])
                check["report"]["output error at finite points"] = err
                if not err <= tol:
                    check["problems"].append(f"output at finite points: error {err:.3g}")
                check["report"]["output at NaN points"] = _describe(out[~sel])
                try:
                    grads = _backward(case, *dev, "native", (True, True))
                except NotImplementedError as exc:
                    check["report"]["backward"] = f"routed: {exc}"
                    grads = None
                except Exception as exc:  # noqa: BLE001 - a crash is a failed check
                    check["problems"].append(f"backward: {_error_text(exc)}")
                    grads = None
                if grads is not None:
                    exp_gi, exp_gg = _backward(case, *host, "reference", (True, True))
                    gi, gg = grads
                    err = scaled_error(gg[finite], exp_gg[finite])
                    check["report"]["grad_grid error at finite points"] = err
                    if not err <= tol:
                        check["problems"].append(f"grad_grid at finite points: error {err:.3g}")
                    check["report"]["grad_grid at NaN points"] = _describe(gg[~finite])
                    check["report"]["grad_input error"] = scaled_error(gi, exp_gi)
                    check["report"]["grad_input"] = _describe(gi)
                checks.append(dict(check, status="fail" if check["problems"] else "pass"))
    return dict(status=_overall(checks), checks=checks)


def _overall(checks: Sequence[dict]) -> str:
    statuses = {c["status"] for c in checks}
    return "fail" if "fail" in statuses else "pass" if "pass" in statuses else "routed"


# --- reproducibility: many points, few pixels -------------------------------------------------

def check_collisions(device: jax.Device, host_device: jax.Device, deterministic: bool,
                     shapes: Sequence[tuple] | None = None) -> dict:
    """The backward of both gradients (bilinear, zeros padding) on :data:`COLLISION_SHAPES`,
    where thousands of points scatter into a few pixels, run twice with the same operands:
    whether the two give the same bits, and their error against the float64 host reference
    (reported: accuracy is the parity cases' to judge). ``deterministic``: the two must be
    identical ("pass"/"fail"; "expected" where "native" refuses it for want of the start-up
    level); otherwise it is only reported whether they are (a default backward adds with
    atomics). Returns {"status", "checks": [per shape: name, dtype, status,
    identical, max_difference, errors]}."""
    _require_x64()
    shapes = COLLISION_SHAPES if shapes is None else shapes
    case = dict(mode="bilinear", padding="zeros", align_corners=False)
    checks = []
    for name, input_shape, grid_shape, dtype in shapes:
        check = dict(name=f"{name} {list(input_shape)} <- {list(grid_shape[:-1])} points",
                     dtype=dtype, deterministic=deterministic, problems=[])
        rng = np.random.default_rng(3)
        x = rng.uniform(-1, 1, input_shape)
        g = make_grid(rng, grid_shape, input_shape, False, grid_range=1.0)
        go = rng.uniform(-1, 1, _output_shape(input_shape, grid_shape))
        dev = _put((go, x, g), device, jnp.dtype(dtype))
        step = jax.jit(lambda go, x, g: jax_gridsample.grid_sample_backward(
            go, x, g, output_mask=(True, True), **_kwargs(case, "native", deterministic)))
        try:
            first = [np.asarray(r) for r in jax.block_until_ready(step(*dev))]
            second = [np.asarray(r) for r in jax.block_until_ready(step(*dev))]
        except NotImplementedError as exc:
            status = "expected" if _expected_refusal(deterministic, str(exc)) else "routed"
            checks.append(dict(check, status=status, reason=str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - a crash is a failed check
            checks.append(dict(check, status="fail", error=_error_text(exc)))
            continue
        expected = _backward(case, *_put((x, g, go), host_device, np.float64), "reference",
                             (True, True))
        identical = _identical(first, second)
        check.update(identical=identical, max_difference=_max_difference(first, second),
                     errors={label: scaled_error(a, e) for label, a, e in zip(
                         ("grad_input", "grad_grid"), first, expected, strict=True)})
        if deterministic and not identical:
            check["problems"].append("two runs of the deterministic backward differ (max "
                                     f"difference {check['max_difference']:.3g})")
        status = ("fail" if check["problems"] else "pass") if deterministic else "reported"
        checks.append(dict(check, status=status))
    statuses = {c["status"] for c in checks}
    status = next((s for s in ("fail", "pass", "reported", "expected") if s in statuses),
                  "routed")
    return dict(status=status, checks=checks)


# --- timings --------------------------------------------------------------------------------

def _median_ms(fn: Callable[[], Any], repeats: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


_TIMED = dict(mode="bilinear", padding_mode="zeros", align_corners=False)


def _timed_programs(implementation: str) -> dict[str, Callable]:
    kw = dict(_TIMED, implementation=implementation)

    def loss(x, g):
        return jax_gridsample.grid_sample(x, g, **kw).astype(jnp.float32).sum()

    return {"forward": jax.jit(lambda x, g: jax_gridsample.grid_sample(x, g, **kw)),
            "forward+backward": jax.jit(jax.grad(loss, argnums=(0, 1)))}


def _time_jax(device: jax.Device, x: np.ndarray, g: np.ndarray, implementation: str,
              repeats: int, warmup: int) -> tuple[dict[str, float | str], dict[str, Any]]:
    """Median ms of the forward and of jax.grad of the sum, and each program's result (its
    first call's)."""
    xd, gd = _put((x, g), device)
    times: dict[str, float | str] = {}
    results: dict[str, Any] = {}
    for key, fn in _timed_programs(implementation).items():
        try:
            results[key] = jax.device_get(fn(xd, gd))
            times[key] = _median_ms(lambda fn=fn: jax.block_until_ready(fn(xd, gd)),
                                    repeats, warmup)
        except NotImplementedError:
            times[key] = "routed"
        except Exception as exc:  # noqa: BLE001 - reported in the table
            times[key] = _error_text(exc)
    return times, results


def _check_timed(results: dict[str, Any], host_device: jax.Device, x: np.ndarray,
                 g: np.ndarray, dtype: str) -> dict:
    """The native results of a timing row against the float64 host reference."""
    check = dict(errors={}, problems=[])
    if not results:
        return dict(check, status="routed")
    expected = {key: jax.device_get(fn(*_put((x, g), host_device, np.float64)))
                for key, fn in _timed_programs("reference").items() if key in results}
    tol = TOLERANCES[dtype]
    for key, got in results.items():
        got = list(got) if isinstance(got, tuple | list) else [got]
        exp = expected[key]
        exp = list(exp) if isinstance(exp, tuple | list) else [exp]
        labels = ["output"] if key == "forward" else ["grad_input", "grad_grid"]
        for label, a, e in zip(labels, got, exp, strict=True):
            err = scaled_error(a, e)
            check["errors"][f"{key} {label}"] = err
            if not err <= tol:
                check["problems"].append(f"{key} {label}: error {err:.3g} > tolerance {tol:g}")
    return dict(check, status="fail" if check["problems"] else "pass")


def _timing_data(input_shape: Sequence[int], out_spatial: Sequence[int], dtype: str
                 ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    grid_shape = (input_shape[0], *out_spatial, len(input_shape) - 2)
    x = rng.uniform(-1, 1, input_shape).astype(jnp.dtype(dtype))
    g = make_grid(rng, grid_shape, input_shape, False, TIMING_GRID_RANGE)
    return x, g.astype(jnp.dtype(dtype))


def time_cases(device: jax.Device, host_device: jax.Device,
               shapes: Sequence[tuple] | None = None, dtypes: Sequence[str] | None = None,
               repeats: int = 10, warmup: int | None = None) -> list[dict]:
    """Median milliseconds (after ``warmup`` calls, each call waited for) of bilinear, zeros
    padding grid_sample, forward and jax.grad of the sum, with implementation="native" and
    "reference" on ``device``; the native results are checked against the float64 reference
    on ``host_device``. ``shapes``: (name, input shape, output spatial shape). One dict per
    shape and dtype: name, dtype, shapes, "native"/"reference" -> {"forward",
    "forward+backward"} (ms, "routed", or an error text), "check" (status, errors, problems)
    and "torch_npu" ("not run" until :func:`time_torch`)."""
    _require_x64()
    warmup = TIMING_WARMUP if warmup is None else warmup
    rows = []
    for name, input_shape, out_spatial in TIMING_SHAPES if shapes is None else shapes:
        for dtype in TIMING_DTYPES if dtypes is None else dtypes:
            x, g = _timing_data(input_shape, out_spatial, dtype)
            row = dict(name=name, dtype=dtype, input_shape=list(input_shape),
                       grid_shape=list(g.shape), out_spatial=list(out_spatial),
                       torch_npu="not run")
            row["native"], results = _time_jax(device, x, g, "native", repeats, warmup)
            row["check"] = _check_timed(results, host_device, x, g, dtype)
            errors = [v for v in row["native"].values() if v != "routed" and isinstance(v, str)]
            if errors:
                row["check"]["problems"] += errors
                row["check"]["status"] = "fail"
            row["reference"], _ = _time_jax(device, x, g, "reference", repeats, warmup)
            rows.append(row)
    return rows


def time_torch(rows: Sequence[dict], device: jax.Device, repeats: int = 10,
               warmup: int | None = None) -> None:
    """Fill in each row's "torch_npu" timings: torch_npu's F.grid_sample on the same NPU and
    data, run by ``ascend_torch_npu.py`` in a process of its own (so that importing torch_npu,
    which loads CANN's combined opapi library and sets CANN's options for its process, cannot
    change this one's); a string ("not installed (...)", an error) where it could not run."""
    warmup = TIMING_WARMUP if warmup is None else warmup
    index = getattr(device, "local_hardware_id", None)
    index = device.id if index is None else index
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for i, row in enumerate(rows):
            x, g = _timing_data(row["input_shape"], row["out_spatial"], row["dtype"])
            path = os.path.join(tmp, f"case{i}.npz")
            np.savez(path, x=x, g=g)
            cases.append(dict(data=path, **_TIMED))
        request = os.path.join(tmp, "request.json")
        with open(request, "w") as f:
            json.dump(dict(device_index=index, repeats=repeats, warmup=warmup, cases=cases), f)
        answer = _run_torch_worker(request)
    for i, row in enumerate(rows):
        row["torch_npu"] = answer["error"] if "error" in answer else answer["times"][i]


def _run_torch_worker(request: str) -> dict:
    try:
        proc = subprocess.run([sys.executable, str(TORCH_WORKER), request], capture_output=True,
                              text=True, timeout=TORCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return dict(error=f"the torch_npu process did not finish in {TORCH_TIMEOUT_S} s")
    except OSError as exc:
        return dict(error=f"the torch_npu process did not start: {exc}")
    lines = proc.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
        if proc.returncode == 0 and ("error" in answer or "times" in answer):
            return answer
    except (IndexError, ValueError):
        pass
    tail = " | ".join(proc.stderr.strip().splitlines()[-3:])[-400:]
    return dict(error=f"the torch_npu process exited with status {proc.returncode}: {tail}")


# --- the report -----------------------------------------------------------------------------

def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2g}" if v < 1e-2 or v >= 1e3 else f"{v:.3g}"
    return str(v)


def print_parity_table(results: Sequence[dict], out=sys.stdout) -> None:
    """One row per (route,) dimension x mode x forward/backward x dtype: counts and largest
    errors; then every failed case and the routed combinations."""
    rows: dict[tuple, list[dict]] = {}
    for r in results:
        key = (r.get("route") or "", r["dim"], r["mode"],
               "fwd" if r["op"] == "forward" else "bwd", r["dtype"])
        rows.setdefault(key, []).append(r)
    print(f"{'case':<38}{'pass':>5}{'fail':>5}{'routed':>7}{'expected':>9}{'vs host f64':>13}"
          f"{'vs NPU ref':>12}{'tol':>8}  result", file=out)
    for (route, dim, mode, op, dtype), group in rows.items():
        counts = {s: sum(r["status"] == s for r in group)
                  for s in ("pass", "fail", "routed", "expected")}
        host = [r["max_error_host"] for r in group if r.get("max_error_host") is not None]
        ref = [r["max_error_reference"] for r in group
               if r.get("max_error_reference") is not None]
        verdict = next(word for status, word in (("fail", "FAIL"), ("pass", "pass"),
                                                 ("expected", "expected"), ("routed", "routed"))
                       if counts[status] or status == "routed")
        label = f"{route} {dim}d {mode} {op} {dtype}".strip()
        print(f"{label:<38}{counts['pass']:>5}{counts['fail']:>5}{counts['routed']:>7}"
              f"{counts['expected']:>9}{_fmt(max(host, default=None)):>13}"
              f"{_fmt(max(ref, default=None)):>12}{TOLERANCES[dtype]:>8g}  {verdict}", file=out)
    failed = [r for r in results if r["status"] == "fail"]
    for r in failed[:40]:
        why = r.get("error") or "; ".join(r["problems"])
        print(f"FAIL {r['name']}: {why[:300]}", file=out)
    if len(failed) > 40:
        print(f"... and {len(failed) - 40} more failures (see the JSON file)", file=out)
    for status, label in (("routed", "routed to reference"),
                          ("expected", "expected (no start-up determinism)")):
        grouped: dict[str, list[dict]] = {}
        for r in results:
            if r["status"] == status:
                prefix = f"{r['route']} " if r.get("route") else ""
                grouped.setdefault(f"{prefix}{r['dim']}d {r['mode']} {r['op']}", []).append(r)
        for key, group in grouped.items():
            dtypes = sorted({r["dtype"] for r in group})
            reasons = sorted({r["reason"][:200] for r in group})
            print(f"{label}: {key}, {len(group)} cases ({', '.join(dtypes)}): "
                  f"{' | '.join(reasons)}", file=out)


def print_checks(result: dict, out=sys.stdout) -> None:
    """The checks of a section (empty, NaN, chain, coordinates, reproducibility): one line
    each."""
    for c in result["checks"]:
        detail = c.get("error") or "; ".join(c.get("problems", [])) or c.get("reason", "")
        report = "; ".join(f"{k}: {_fmt(v)}" for k, v in c.get("report", {}).items())
        print(f"  {c['status']:<8} {c['name']} {c.get('dtype', '')} {detail} {report}".rstrip(),
              file=out)


def print_collisions(result: dict, out=sys.stdout) -> None:
    for c in result["checks"]:
        kind = "deterministic" if c["deterministic"] else "default"
        if "identical" in c:
            same = "same bits twice" if c["identical"] else \
                f"differs between two runs (max difference {_fmt(c['max_difference'])})"
            errors = ", ".join(f"{k} error {_fmt(v)}" for k, v in c["errors"].items())
            detail = f"{same}; {errors}"
        else:
            detail = c.get("error") or c.get("reason", "")
        print(f"  {c['status']:<8} {kind} backward, {c['name']} {c['dtype']}: {detail[:400]}",
              file=out)


def _cell(v: Any) -> str:
    return _fmt(v) if isinstance(v, float) else str(v)[:13]


def _ratio(v: Any, base: Any) -> str:
    ok = isinstance(v, float) and isinstance(base, float) and base > 0
    return f"{v / base:.2f}" if ok else "-"


def _slower(native: Any, reference: Any, margin: float | None = None) -> bool:
    """Whether aclnn's median is above the reference's by more than ``margin`` (default
    :data:`SPEED_MARGIN`); False where either did not run."""
    margin = SPEED_MARGIN if margin is None else margin
    timed = isinstance(native, float) and isinstance(reference, float) and reference > 0
    return timed and native > reference * (1 + margin)


def speed_findings(rows: Sequence[dict], margin: float | None = None) -> list[dict]:
    """Per timed program (row x forward / forward+backward) where aclnn and the reference both
    have a median: the two, their ratio, and "slow" (:func:`_slower`)."""
    findings = []
    for row in rows:
        for key in ("forward", "forward+backward"):
            native, ref = row["native"].get(key), row["reference"].get(key)
            if isinstance(native, float) and isinstance(ref, float) and ref > 0:
                findings.append(dict(name=f"{row['name']} {row['dtype']} {key}",
                                     aclnn_ms=native, reference_ms=ref, ratio=native / ref,
                                     slow=_slower(native, ref, margin)))
    return findings


def speed_verdict(findings: Sequence[dict], margin: float | None = None) -> tuple[str, str]:
    """SLOW naming the programs where aclnn's median is slower than the reference's by more
    than the margin, else PASS; REPORTED when nothing could be compared. SLOW is a finding to
    report (the overall verdict does not fail on it)."""
    margin = SPEED_MARGIN if margin is None else margin
    if not findings:
        return "REPORTED", "nothing to compare: aclnn or the reference has no timing"
    slow = [f for f in findings if f["slow"]]
    if not slow:
        return "PASS", (f"aclnn's median within {margin:.0%} of the reference's on the same "
                        f"device, or faster, in all {len(findings)} timed programs")
    names = ", ".join(f"{f['name']} {f['aclnn_ms']:.3g} ms vs {f['reference_ms']:.3g} ms "
                      f"({f['ratio']:.2f}x)" for f in slow[:8])
    more = f" and {len(slow) - 8} more" if len(slow) > 8 else ""
    return "SLOW", (f"aclnn's median more than {margin:.0%} above the reference's on the same "
                    f"device in {len(slow)} of {len(findings)} timed programs: {names}{more}; "
                    "a finding to report, not a failure")


def print_timing_table(rows: Sequence[dict], out=sys.stdout) -> None:
    """Median ms per implementation, how many times slower the others are than aclnn, and
    whether aclnn's results matched (SLOW: aclnn above the reference by more than the
    margin)."""
    print(f"{'timing (median ms)':<30}{'aclnn':>9}{'reference':>11}{'ref/aclnn':>11}"
          f"{'torch_npu':>15}{'torch/aclnn':>13}  result", file=out)
    for row in rows:
        for key in ("forward", "forward+backward"):
            native = row["native"].get(key)
            ref = row["reference"].get(key)
            torch = row["torch_npu"] if isinstance(row["torch_npu"], str) \
                else row["torch_npu"].get(key)
            torch = "not installed" if isinstance(torch, str) and \
                torch.startswith("not installed") else torch
            errors = [e for k, e in row["check"]["errors"].items() if k.startswith(key + " ")]
            result = "routed" if not errors else \
                f"{'pass' if max(errors) <= TOLERANCES[row['dtype']] else 'FAIL'} (error " \
                f"{_fmt(max(errors))})"
            label = f"{row['name']} {row['dtype']} {key}"
            slow = "; SLOW" if _slower(native, ref) else ""
            print(f"{label:<30}{_cell(native):>9}{_cell(ref):>11}{_ratio(ref, native):>11}"
                  f"{_cell(torch):>15}{_ratio(torch, native):>13}  {result}{slow}", file=out)
    torch_notes = {row["torch_npu"] for row in rows if isinstance(row["torch_npu"], str)}
    for note in sorted(torch_notes):
        print(f"  torch_npu: {note[:300]}", file=out)
    for row in rows:
        for problem in row["check"]["problems"]:
            print(f"  FAIL {row['name']} {row['dtype']}: {problem[:300]}", file=out)
        for impl in ("reference", "torch_npu"):
            times = row[impl]
            for text in times.values() if isinstance(times, dict) else []:
                if isinstance(text, str) and text != "routed":
                    print(f"  {row['name']} {row['dtype']} {impl}: {text[:300]}", file=out)


def _counts(results: Iterable[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return counts


def cases_verdict(results: Sequence[dict], why: bool = True) -> tuple[str, str]:
    """PASS/FAIL/EXPECTED/ROUTED and "n passed, m failed, k routed, j expected" for a list of
    case results; EXPECTED when nothing ran or failed but some were the known determinism
    limitation (``why``: its one-line reason appended)."""
    counts = _counts(results)
    word = next((w for s, w in (("fail", "FAIL"), ("pass", "PASS"), ("expected", "EXPECTED"))
                 if counts.get(s)), "ROUTED")
    detail = ", ".join(f"{counts[s]} {label}" for s, label in (
        ("pass", "passed"), ("fail", "failed"), ("routed", "routed"), ("expected", "expected"))
        if counts.get(s))
    not_reproducible = _not_reproducible(results)
    if not_reproducible:
        detail += f"; {len(not_reproducible)} not reproducible"
    if why and counts.get("expected"):
        detail += f"; {EXPECTED_DETERMINISM}"
    return word, detail or "no cases"


def checks_verdict(result: dict, why: bool = True) -> tuple[str, str]:
    return cases_verdict(result["checks"], why)


def determinism_hint(level: int | None) -> str:
    """What to tell a user whose deterministic backwards did not run on aclnn (no start-up
    level) or, with the level, gave different bits twice."""
    if level:
        return (f"HINT: with {START_UP_DETERMINISM}={level} set at start-up, deterministic "
                "backwards still differ between two runs: CANN did not honour its own "
                "determinism option here; please send us this report.")
    return (f"HINT: {START_UP_DETERMINISM}=1 was not set at start-up, so CANN's deterministic "
            "backward was not checked: deterministic=True ran on the reference (\"auto\") or "
            "was refused (\"native\"), as documented. To check it, start Python with "
            f"{START_UP_DETERMINISM}=1 and run this script again (every aclnn backward of that "
            "process is then deterministic).")


def _workspace_delta(before: dict | None, after: dict | None) -> dict | None:
    """The calls of this run by workspace path (``_ascend.workspace_paths()``'s counts, less
    those before it), and the cache's buffers now."""
    if before is None or after is None:
        return None
    delta = {k: after[k] - before[k] for k in ("stream_cache", "none")}
    return dict(delta, cached_buffers=after["cached_buffers"], cached_bytes=after["cached_bytes"])


def workspace_verdict(paths: dict | None) -> tuple[str, str]:
    if paths is None:
        return "REPORTED", "unknown: the Ascend handlers are not built"
    return "REPORTED", (f"the per-stream cache for {paths['stream_cache']} calls "
                        f"({paths['cached_buffers']} buffers, "
                        f"{paths['cached_bytes'] / 2**20:.1f} MiB), no workspace for "
                        f"{paths['none']}")


# --- the run-time estimate -------------------------------------------------------------------

def estimate(args: argparse.Namespace, level: int | None = None) -> list[dict]:
    """The phases of a run with ``args``, in order, each with how many units it runs (cases,
    grids, shapes, timing rows: counted from the same lists the sections run), the seconds
    assumed per unit (:data:`SECONDS_EACH`; a timing row adds its timed calls) and their
    product. Without the start-up ``level`` the deterministic phases cost "refused" per unit:
    "native" refuses those calls at once."""
    cases = covered_cases(args.quick, args.cases)
    routes = route_cases(args.quick, args.cases)
    rows = 0 if args.no_timing else len(TIMING_SHAPES) * len(TIMING_DTYPES)
    calls = 4 * (TIMING_WARMUP + args.repeats)  # per row: two programs, aclnn and reference
    each = SECONDS_EACH
    refused = "" if level else "refused without the start-up level"
    phases = [
        ("self-check", 1, "run", each["self-check"], ""),
        ("parity", sum(not c["deterministic"] for c in cases), "cases", each["parity"], ""),
        ("routes", sum(not c["deterministic"] for c in routes), "cases", each["routes"], ""),
        ("chain", len(CHAIN_SHAPES), "shapes", each["chain"], ""),
        ("coordinates", 2 * len(list(_combinations(args.quick))), "grids",
         each["coordinates"], ""),
        ("empty", len(EMPTY_CASES) * len(EMPTY_DTYPES), "cases", each["empty"], ""),
        ("nan", sum(len(modes) for modes in MODES.values()) * len(PADDINGS), "grids",
         each["nan"], ""),
        ("default collisions", len(COLLISION_SHAPES), "shapes", each["default collisions"], ""),
        ("timings", rows, "rows", each["timings"] + calls * each["timed call"],
         f"{each['timings']:g} s + {calls} timed calls x {each['timed call']:g} s"),
        ("torch_npu", 0 if args.no_torch else rows, "rows", each["torch_npu"], ""),
        ("deterministic", sum(bool(c["deterministic"]) for c in cases + routes), "cases",
         each["deterministic" if level else "refused"], refused),
        ("deterministic collisions", len(COLLISION_SHAPES), "shapes",
         each["deterministic collisions" if level else "refused"], refused),
    ]
    return [dict(phase=phase, count=count, unit=unit, seconds_each=seconds_each,
                 seconds=count * seconds_each, basis=basis)
            for phase, count, unit, seconds_each, basis in phases]


def print_estimate(phases: Sequence[dict], out=sys.stdout) -> None:
    """The estimate, one line per phase (count x seconds each = seconds), then the total."""
    print("run-time estimate: count x assumed seconds each (compiling included):", file=out)
    for p in phases:
        basis = f"  ({p['basis']})" if p["basis"] else ""
        print(f"  {p['phase']:<26}{p['count']:>5} {p['unit']:<6} x {p['seconds_each']:>6.3g} s "
              f"= {p['seconds']:>6.0f} s{basis}", file=out)
    total = sum(p["seconds"] for p in phases)
    print(f"estimated run time: about {total / 60:.0f} min ({total:.0f} s)", file=out, flush=True)


# --- environment, device detection and main ------------------------------------------------

def ascend_devices() -> tuple[list[jax.Device], list[str]]:
    """The Ascend devices JAX sees on any backend, and every platform it sees; a backend that
    is absent or fails to start is skipped."""
    names: list[str | None] = [None, *ASCEND_PLATFORMS, "ASCEND", "NPU"]
    with contextlib.suppress(Exception):
        from jax._src import xla_bridge

        names += list(xla_bridge.backends())
    devices: dict[tuple[str, int], jax.Device] = {}
    for name in names:
        try:
            found = jax.devices() if name is None else jax.devices(name)
        except Exception:  # noqa: BLE001 - an unknown or broken backend: skip it
            continue
        for d in found:
            devices[(d.platform, d.id)] = d
    platforms = sorted({p for p, _ in devices})
    npus = [d for (p, _), d in sorted(devices.items(), key=lambda kv: kv[0])
            if p.lower() in ASCEND_PLATFORMS]
    return npus, platforms


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _call(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported
        return f"error: {_error_text(exc)}"


def environment(device: jax.Device | None) -> dict:
    """Versions, CANN's version, the chip, the start-up determinism level, native_status(),
    the device and the CANN-related environment."""
    dists = sorted({(d.metadata["Name"] or "", d.version)
                    for d in importlib.metadata.distributions()
                    if re.search(r"ascend|npu|cann|pjrt|jax", d.metadata["Name"] or "", re.I)})
    soc_name = _call(_ascend.soc_name)
    level, level_error = _ascend.deterministic_level()
    env = dict(
        python=sys.version.split()[0], machine=platform.machine(), system=platform.platform(),
        jax=jax.__version__, jaxlib=_version("jaxlib"),
        jax_gridsample=getattr(jax_gridsample, "__version__", None) or _version("jax_gridsample"),
        torch=_version("torch"), torch_npu=_version("torch_npu"),
        distributions={name: version for name, version in dists},
        cann_version=_call(_ascend.cann_version), soc_name=soc_name,
        chip_family=_ascend.chip_family(soc_name if isinstance(soc_name, str) else None),
        start_up_determinism=os.environ.get(START_UP_DETERMINISM) or None,
        deterministic_level=level, deterministic_level_error=level_error,
        native_status=jax_gridsample.native_status(),
        env={k: v for k, v in os.environ.items()
             if k in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH",
                      "JAX_GRIDSAMPLE_ACLNN_LIBS", "ASCEND_RT_VISIBLE_DEVICES", "JAX_PLATFORMS",
                      START_UP_DETERMINISM, "JAX_GRIDSAMPLE_ASCEND_SELF_CHECK")},
    )
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        for name in ("version.cfg", "version.info"):
            path = os.path.join(os.environ.get(var, "/nonexistent"), name)
            with contextlib.suppress(OSError):
                with open(path) as f:
                    env.setdefault("cann_version_file", {path: f.read()[:2000]})
    if device is not None:
        client = getattr(device, "client", None)
        env["device"] = dict(platform=device.platform, device_kind=device.device_kind,
                             id=device.id, description=str(device),
                             platform_version=getattr(client, "platform_version", None))
    return env


def _write(path: str, report: dict) -> None:
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=str)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", default="ascend_acceptance.json", help="report file")
    p.add_argument("--quick", action="store_true",
                   help="float32, one align_corners per mode x padding x dimension")
    p.add_argument("--cases", metavar="REGEX",
                   help="only parity and route cases whose name matches")
    p.add_argument("--repeats", type=int, default=10, help="timed calls per median")
    p.add_argument("--no-timing", action="store_true", help="skip the timings")
    p.add_argument("--no-torch", action="store_true", help="skip the torch_npu timings")
    return p


class _Report:
    """The JSON report, written after each phase, and the verdict lines."""

    def __init__(self, path: str, out, env: dict, options: dict):
        self.path, self.out = path, out
        self.data: dict[str, Any] = dict(environment=env, options=options, verdicts={},
                                         seconds={})
        self.words: dict[str, str] = {}
        self._phase: str | None = None
        self._phase_started = time.perf_counter()

    def phase(self, name: str | None) -> None:
        """Start timing phase ``name`` (None: none), recording the last one's seconds (the
        phases of :func:`estimate`)."""
        now = time.perf_counter()
        if self._phase is not None:
            self.data["seconds"][self._phase] = now - self._phase_started
        self._phase, self._phase_started = name, now

    def __setitem__(self, key: str, value: Any) -> None:
        self.data[key] = value
        _write(self.path, self.data)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def section(self, title: str) -> None:
        print(f"\n== {title} ==", file=self.out, flush=True)

    def verdict(self, section: str, word: str, detail: str) -> None:
        line = f"VERDICT {section}: {word} ({detail})"
        self.data["verdicts"][section] = line
        self.words[section] = word
        print(line, file=self.out, flush=True)
        _write(self.path, self.data)


def _overall_verdict(report: _Report, ran: int) -> tuple[str, str, list[str]]:
    """The overall word and detail, and the failed sections: FAIL if a section failed or
    nothing ran on aclnn; EXPECTED sections (the known determinism limitation) and SLOW
    (a finding) are counted in the detail, and fail nothing."""
    words = report.words
    failed = [s for s, w in words.items() if w == "FAIL"]
    expected = [s for s, w in words.items() if w == "EXPECTED"]
    slow = [s for s, w in words.items() if w == "SLOW"]
    notes = []
    if expected:
        notes.append(f"{len(expected)} EXPECTED ({', '.join(expected)}): without "
                     f"{START_UP_DETERMINISM}=1 at start-up CANN's deterministic backward is not "
                     "run, a known limitation")
    if slow:
        notes.append(f"{', '.join(slow)} SLOW: aclnn slower than the reference, a finding to "
                     "report, not a failure")
    tail = "".join(f"; {n}" for n in notes)
    if failed:
        return "FAIL", f"failed: {', '.join(failed)}{tail}", failed
    if not ran:
        return "FAIL", ("nothing ran on aclnn: every parity case was routed to the reference "
                        f"(see native_status){tail}"), failed
    return "PASS", f"{len(words)} sections{tail}", failed


def run_acceptance(device: jax.Device, host_device: jax.Device, args: argparse.Namespace,
                   out=sys.stdout, kernel: Any = None,
                   self_check: Callable[[], dict] | None = None) -> int:
    """Every section, in order (default calls before deterministic ones), its verdict line
    printed and the JSON report written after each; 1 if a check failed or nothing ran on
    aclnn, else 0 (EXPECTED and SLOW sections fail nothing). ``kernel`` (its targets, for the
    empty checks) and ``self_check`` default to the package's Ascend kernel and
    ``jax_gridsample.ascend_self_check``."""
    _require_x64()
    started = time.perf_counter()
    kernel = _ascend.KERNEL if kernel is None else kernel
    self_check = jax_gridsample.ascend_self_check if self_check is None else self_check
    env = environment(device)
    report = _Report(args.json, out, env, vars(args))
    level = env["deterministic_level"]
    workspace_before = _call(_ascend.workspace_paths)
    print(f"device: {device} ({device.device_kind}); jax {jax.__version__}, jax_gridsample "
          f"{env['jax_gridsample']}", file=out)
    print(f"CANN: {env['cann_version'] or 'version unknown'}; chip: "
          f"{env['soc_name'] or 'unknown'} ({env['chip_family']})", file=out)
    if level:
        print(f"{START_UP_DETERMINISM}={level}: every aclnn backward of this process runs "
              "CANN's deterministic kernels, the default cases and timings too", file=out)
    elif env["deterministic_level_error"]:
        print(f"{START_UP_DETERMINISM}={env['start_up_determinism']}: the handlers refuse it "
              f"and run nothing ({env['deterministic_level_error']}); unset it or set it to 1",
              file=out)
    else:
        print(f"{START_UP_DETERMINISM} not set: deterministic=True runs on the reference, so "
              f"the deterministic sections are EXPECTED; start Python with "
              f"{START_UP_DETERMINISM}=1 to check CANN's deterministic backward", file=out)
    report["estimate"] = estimate(args, level)
    print_estimate(report["estimate"], out)

    report.section("self-check (what \"auto\" runs on first use)")
    report.phase("self-check")
    report["self_check"] = check_self_check(self_check)
    outcome = report["self_check"]
    if "error" in outcome:
        report.verdict("self-check", "FAIL", f"it could not run: {outcome['error'][:300]}")
    else:
        detail = f"{outcome.get('compared')} results compared"
        for key in ("failure", "deterministic_failure"):
            if outcome.get(key):
                detail += f"; {key.replace('_', ' ')}: {outcome[key][:300]}"
        if outcome["status"] == "expected":
            detail += f"; {EXPECTED_DETERMINISM}"
        report.verdict("self-check", outcome["status"].upper(), detail)
    print(f"native_status()['ascend']: "
          f"{jax_gridsample.native_status().get('ascend', '')[:600]}", file=out)

    # The default calls: every one before the first deterministic call.
    cases = covered_cases(args.quick, args.cases)
    routes = route_cases(args.quick, args.cases)
    report.section("parity: forward and default backward")
    report.phase("parity")
    report["parity"] = run_cases([c for c in cases if not c["deterministic"]], device,
                                 host_device, "parity")
    print_parity_table(report["parity"], out)
    report.verdict("parity", *cases_verdict(report["parity"]))

    report.section("routes: more than 2048 channels, large planes, batch above the core count")
    report.phase("routes")
    report["routes"] = run_cases([c for c in routes if not c["deterministic"]], device,
                                 host_device, "routes")
    print_parity_table(report["routes"], out)
    report.verdict("routes", *cases_verdict(report["routes"]))

    report.section("chain: grid_sample of grid_sample and all gradients under one jax.jit, "
                   f"{CHAIN_RUNS} dispatched before any is read")
    report.phase("chain")
    report["chain"] = check_chain(device, host_device)
    print_checks(report["chain"], out)
    report.verdict("chain", *checks_verdict(report["chain"]))

    report.section("coordinates: exact pixel centres and midpoints (reported, not judged)")
    report.phase("coordinates")
    report["coordinates"] = check_coordinates(device, host_device, quick=args.quick)
    checks = report["coordinates"]["checks"]
    print_checks(dict(checks=[c for c in checks if c.get("differs") or
                              c["status"] != "reported"]), out)
    differing = [c["name"] for c in checks if c.get("differs")]
    word = {"fail": "FAIL", "routed": "ROUTED"}.get(report["coordinates"]["status"], "REPORTED")
    same = sum(c["status"] == "reported" and not c["differs"] for c in checks)
    report.verdict("coordinates", word, f"{len(checks)} grids: {same} the same as the reference"
                   f", {len(differing)} differ" + (f": {', '.join(differing[:8])}"
                                                   + (" ..." if len(differing) > 8 else "")
                                                   if differing else ""))

    report.section("empty tensors (results pre-filled)")
    report.phase("empty")
    report["empty"] = check_empty(device, host_device, kernel=kernel)
    print_checks(report["empty"], out)
    report.verdict("empty", *checks_verdict(report["empty"]))

    report.section("NaN coordinates (finite points judged; the rest reported)")
    report.phase("nan")
    report["nan"] = check_nan(device, host_device)
    print_checks(report["nan"], out)
    report.verdict("nan", *checks_verdict(report["nan"]))

    report.phase("default collisions")
    report["collisions_default"] = check_collisions(device, host_device, deterministic=False)

    if args.no_timing:
        report.verdict("timings", "SKIPPED", "--no-timing")
        report.verdict("speed", "SKIPPED", "--no-timing")
    else:
        report.section("timings (aclnn's results checked too)")
        report.phase("timings")
        rows = time_cases(device, host_device, repeats=args.repeats)
        report["timings"] = rows
        if not args.no_torch:
            report.phase("torch_npu")
            time_torch(rows, device, repeats=args.repeats)
            report["timings"] = rows
        print_timing_table(rows, out)
        word, detail = cases_verdict([r["check"] for r in rows])
        report.verdict("timings", word, f"results of the timed calls: {detail}")
        report["speed"] = speed_findings(rows)
        report.verdict("speed", *speed_verdict(report["speed"]))

    # The deterministic calls.
    report.section("deterministic backward: parity and route cases, each run twice")
    report.phase("deterministic")
    report["deterministic"] = run_cases([c for c in cases + routes if c["deterministic"]],
                                        device, host_device, "deterministic")
    print_parity_table(report["deterministic"], out)
    report.verdict("deterministic", *cases_verdict(report["deterministic"]))

    report.section("reproducibility: many points scattering into few pixels, run twice")
    report.phase("deterministic collisions")
    report["collisions_deterministic"] = check_collisions(device, host_device,
                                                          deterministic=True)
    report.phase(None)
    default, deterministic = report["collisions_default"], report["collisions_deterministic"]
    print_collisions(default, out)
    print_collisions(deterministic, out)
    word, detail = checks_verdict(deterministic, why=False)
    ran = [c for c in default["checks"] if "identical" in c]
    differing = sum(not c["identical"] for c in ran)
    detail += (f"; default backward: {differing} of {len(ran)} differ between two runs"
               if ran else "")
    if any(c["status"] == "expected" for c in deterministic["checks"]):
        detail += f"; {EXPECTED_DETERMINISM}"
    report.verdict("reproducibility", word, f"deterministic backward: {detail}")
    if "EXPECTED" in report.words.values() or (level and (
            _not_reproducible(report["deterministic"])
            or any(c.get("identical") is False for c in deterministic["checks"]))):
        print(determinism_hint(level), file=out)

    report.section("workspace")
    report["workspace"] = _workspace_delta(workspace_before, _call(_ascend.workspace_paths)) \
        if isinstance(workspace_before, dict) else None
    report.verdict("workspace", *workspace_verdict(report["workspace"]))

    ran = sum(r["status"] != "routed" for r in report["parity"])
    word, detail, failed = _overall_verdict(report, ran)
    words = report.words
    report["summary"] = dict(
        parity_cases=len(report["parity"]), ran_on_aclnn=ran, failed_sections=failed,
        expected_sections=[s for s, w in words.items() if w == "EXPECTED"],
        slow_sections=[s for s, w in words.items() if w == "SLOW"],
        estimated_seconds=sum(p["seconds"] for p in report["estimate"]),
        seconds=time.perf_counter() - started)
    print(f"\nreport written to {args.json}; {report['summary']['seconds']:.0f} s (estimated "
          f"{report['summary']['estimated_seconds']:.0f} s)", file=out)
    report.verdict("overall", word, detail)
    return 1 if word == "FAIL" else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Detect the NPU and run every section (:func:`run_acceptance`); 1 if a check failed."""
    args = parser().parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    npus, platforms = ascend_devices()
    if not npus:
        print(f"no Ascend NPU visible to JAX (platforms: {', '.join(platforms) or 'none'}): "
              "nothing to check")
        return 0
    try:
        host = jax.devices("cpu")[0]
    except RuntimeError as exc:
        print(f"JAX has no CPU backend ({exc}), which the float64 host reference needs: run "
              "with JAX_PLATFORMS unset or including cpu")
        return 1
    return run_acceptance(npus[0], host, args)


if __name__ == "__main__":
    sys.exit(main())
