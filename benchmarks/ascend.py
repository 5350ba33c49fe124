"""Hardware acceptance of the Ascend NPU path (CANN aclnn): parity, edge cases and timings.

Not a test. Run it once on a machine with CANN, a JAX PJRT plugin for Ascend and an NPU, after
sourcing CANN's ``set_env.sh`` and installing this package:

    python benchmarks/ascend.py [--json ascend_acceptance.json] [--quick] [--cases REGEX]
                                [--repeats 10] [--no-timing] [--no-torch]

(``--quick``: 30 float32 parity cases instead of 840, for a first look; ``--cases``: only the
parity cases whose name matches, e.g. ``'2d-bilinear.*float16'``; ``--no-torch``: no
``torch_npu`` timings, should importing it next to the JAX plugin misbehave.) It takes a few
minutes and checks, with ``implementation="native"`` (aclnn) on the NPU:

1. parity: ``grid_sample`` and ``grid_sample_backward`` for every combination of 2D/3D, mode,
   padding, align_corners, dtype (float32, float16, bfloat16, float64), output mask and
   ``deterministic``, against ``implementation="reference"`` on the NPU and against the float64
   reference on the host CPU, with per-dtype tolerances; deterministic backwards must be bitwise
   reproducible. Combinations the package routes to the reference (``"native"`` raises
   ``NotImplementedError``) are listed as routed, not checked;
2. empty tensors (no output points, C=0, N=0): the right shapes and exactly zero gradients;
3. NaN coordinates: no crash, the points with finite coordinates match the reference, and what
   aclnn gives at the NaN points (reported, not judged);
4. timings of realistic shapes: aclnn vs the reference lowering vs ``torch_npu``'s
   ``torch.nn.functional.grid_sample`` where ``torch_npu`` is installed (timed last).

Please send back the printed output and the JSON file (default ``ascend_acceptance.json``:
versions, ``native_status()``, the device and SoC, every case's result, the timings); it is
written after each phase, so a crash still leaves what ran before it. Exit status 1 means a
check failed (or nothing ran on aclnn at all), 0 that all passed. Without an Ascend device
visible to JAX it prints one line and exits 0.

The check functions take the devices as arguments, so they also run with both devices being
the CPU (where ``"native"`` means whatever kernel the CPU lowering calls).
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
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jax_gridsample
from jax_gridsample import _ascend

ASCEND_PLATFORMS = ("ascend", "npu")  # device.platform spellings, compared case-insensitively

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
# (name, input shape, output spatial shape) of the timings; bilinear, zeros padding.
TIMING_SHAPES = (
    ("2d", (8, 32, 128, 128), (128, 128)),
    ("3d", (2, 16, 32, 32, 32), (32, 32, 32)),
)
TIMING_DTYPES = ("float32", "float16")


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
              align_corners: bool) -> np.ndarray:
    """A float64 grid with coordinates in about [-1.5, 1.5] whose pixel coordinates stay at
    least 0.15 away from integers and half-integers (also after reflection and clamping), so
    that nearest's rounding, the floors and the clamps cannot flip between precisions."""
    sizes = tuple(reversed(input_shape[2:]))  # the grid holds (x, y[, z]): W, H[, D]
    points = tuple(grid_shape[:-1])
    coords = []
    for size in sizes:
        lo = _unnormalize(-GRID_RANGE, size, align_corners)
        hi = _unnormalize(GRID_RANGE, size, align_corners)
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
    combination (the output mask and ``deterministic`` share the data)."""
    input_shape, grid_shape = shapes or SHAPES[dim]
    seed = zlib.crc32(f"{dim}-{mode}-{padding}-{align_corners}-{dtype}".encode())
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


# --- parity ---------------------------------------------------------------------------------

def _group(case: dict) -> str:
    ac = "ac" if case["align_corners"] else "noac"
    return f"{case['dim']}d-{case['mode']}-{case['padding']}-{ac}-{case['dtype']}"


def _case(dim: int, mode: str, padding: str, align_corners: bool, dtype: str, op: str,
          mask: tuple[bool, bool] | None = None, deterministic: bool | None = None) -> dict:
    case = dict(dim=dim, mode=mode, padding=padding, align_corners=align_corners, dtype=dtype,
                op=op, output_mask=None if mask is None else list(mask),
                deterministic=deterministic)
    name = f"{_group(case)}-fwd"
    if op == "backward":
        name = f"{_group(case)}-bwd-{MASK_NAMES[mask]}-{'det' if deterministic else 'nondet'}"
    return dict(name=name, **case)


def covered_cases(quick: bool = False, pattern: str | None = None) -> list[dict]:
    """The parity cases: one dict per call (forward, or backward with an output mask and a
    ``deterministic`` flag), named like ``2d-bilinear-zeros-noac-float32-bwd-both-det``.

    ``quick``: float32 only, one align_corners per mode x padding x dimension (alternating),
    the forward and the deterministic backward of both gradients. ``pattern``: a regular
    expression the name must contain. Whether aclnn runs a case is the package's decision
    (check_case reports "routed" for the rest).
    """
    cases = []
    for dim, modes in MODES.items():
        for mode_index, mode in enumerate(modes):
            for pad_index, padding in enumerate(PADDINGS):
                for align_corners in (False, True):
                    if quick and align_corners != bool((mode_index + pad_index + dim) % 2):
                        continue
                    for dtype in ("float32",) if quick else DTYPES:
                        combo = (dim, mode, padding, align_corners, dtype)
                        cases.append(_case(*combo, "forward"))
                        for mask in ((True, True),) if quick else MASKS:
                            for det in (True,) if quick else (False, True):
                                cases.append(_case(*combo, "backward", mask, det))
    if pattern:
        regex = re.compile(pattern)
        cases = [c for c in cases if regex.search(c["name"])]
    return cases


def check_case(case: dict, device: jax.Device, host_device: jax.Device) -> dict:
    """Run one case with implementation="native" on ``device``; compare with
    implementation="reference" on ``device`` and with the float64 reference on ``host_device``.

    Returns the case plus "status" ("pass", "fail" or "routed": native raised
    NotImplementedError), "errors" (per output: scaled error vs the host float64 result and vs
    the device reference), "max_error_host", "max_error_reference", "tolerance", "seconds",
    and where they apply "deterministic_identical", "problems" and "error" (an exception).
    Passing needs every output present with the right shape and dtype, within the tolerance of
    the host result, and a deterministic backward bitwise equal across two runs.
    """
    _require_x64()
    t0 = time.perf_counter()
    result = dict(case, tolerance=TOLERANCES[case["dtype"]], errors={}, problems=[])
    x, g, go = make_data(case["dim"], case["mode"], case["padding"], case["align_corners"],
                         case["dtype"])
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
        result.update(status="routed", reason=str(exc), seconds=time.perf_counter() - t0)
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
        identical = all(
            (a is None and b is None) or (a is not None and b is not None
                                          and a.tobytes() == b.tobytes())
            for a, b in zip(got, again, strict=True))
        result["deterministic_identical"] = identical
        if not identical:
            result["problems"].append("deterministic backward differs between two runs")

    errors = result["errors"].values()
    result["max_error_host"] = max((e["host"] for e in errors), default=None)
    refs = [e["reference"] for e in errors if e["reference"] is not None]
    result["max_error_reference"] = max(refs, default=None)
    result.update(status="fail" if result["problems"] else "pass",
                  seconds=time.perf_counter() - t0)
    return result


# --- empty tensors and NaN coordinates -------------------------------------------------------

EMPTY_CASES = (  # (name, input shape, grid shape)
    ("2d no output points", (2, 3, 5, 6), (2, 0, 5, 2)),
    ("2d C=0", (2, 0, 5, 6), (2, 4, 5, 2)),
    ("2d N=0", (0, 3, 5, 6), (0, 4, 5, 2)),
    ("3d no output points", (2, 3, 3, 4, 5), (2, 2, 0, 4, 3)),
    ("3d C=0", (2, 0, 3, 4, 5), (2, 2, 3, 4, 3)),
    ("3d N=0", (0, 3, 3, 4, 5), (0, 2, 3, 4, 3)),
)


def check_empty(device: jax.Device, host_device: jax.Device,
                dtypes: Sequence[str] = ("float32", "float16")) -> dict:
    """Empty calls (no output points, C=0, N=0) with implementation="native": the forward and
    both gradients must have the right shapes and dtype, and the gradients must be exactly
    zero (aclnn writes nothing on empty tensors; the handler must zero them). Returns
    {"status", "checks": [per call: name, dtype, status, problems]}."""
    _require_x64()
    checks = []
    for (name, input_shape, grid_shape), dtype in (
            (c, d) for c in EMPTY_CASES for d in dtypes):
        case = dict(mode="bilinear", padding="zeros", align_corners=False)
        check = dict(name=name, dtype=dtype, input_shape=list(input_shape),
                     grid_shape=list(grid_shape), problems=[])
        rng = np.random.default_rng(0)
        np_dtype = jnp.dtype(dtype)
        x = rng.uniform(-1, 1, input_shape).astype(np_dtype)
        g = make_grid(rng, grid_shape, input_shape, False).astype(np_dtype)
        go = rng.uniform(-1, 1, _output_shape(input_shape, grid_shape)).astype(np_dtype)
        dev = _put((x, g, go), device)
        try:
            out = _forward(case, *dev[:2], "native")
            grads = _backward(case, *dev, "native", (True, True))
        except NotImplementedError as exc:
            checks.append(dict(check, status="routed", reason=str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - a crash is a failed check
            checks.append(dict(check, status="fail", error=_error_text(exc)))
            continue
        host = _put((x, g, go), host_device, np.float64)
        expected_out = _forward(case, *host[:2], "reference")
        for label, got, shape in (("output", out, expected_out.shape),
                                  ("grad_input", grads[0], x.shape),
                                  ("grad_grid", grads[1], g.shape)):
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


def _time_jax(device: jax.Device, x: np.ndarray, g: np.ndarray, implementation: str,
              repeats: int, warmup: int) -> dict[str, float | str]:
    kw = dict(mode="bilinear", padding_mode="zeros", align_corners=False,
              implementation=implementation)

    def loss(x, g):
        return jax_gridsample.grid_sample(x, g, **kw).astype(jnp.float32).sum()

    forward = jax.jit(lambda x, g: jax_gridsample.grid_sample(x, g, **kw))
    both = jax.jit(jax.grad(loss, argnums=(0, 1)))
    xd, gd = _put((x, g), device)
    times: dict[str, float | str] = {}
    for key, fn in (("forward", forward), ("forward+backward", both)):
        try:
            times[key] = _median_ms(lambda fn=fn: jax.block_until_ready(fn(xd, gd)),
                                    repeats, warmup)
        except NotImplementedError:
            times[key] = "routed"
        except Exception as exc:  # noqa: BLE001 - reported in the table
            times[key] = _error_text(exc)
    return times


def _torch_npu() -> tuple[Any, str | None]:
    """(torch, None) when ``import torch_npu`` works, else (None, why not)."""
    try:
        import torch
        import torch_npu  # noqa: F401 - registers the "npu" device with torch
    except Exception as exc:  # noqa: BLE001 - any failure means no torch_npu column
        return None, f"not installed ({type(exc).__name__}: {exc})"[:200]
    return torch, None


def _time_torch(torch: Any, device_index: int, x: np.ndarray, g: np.ndarray, repeats: int,
                warmup: int) -> dict[str, float | str]:
    import torch.nn.functional as F

    dev = f"npu:{device_index}"
    dtype = getattr(torch, str(x.dtype))
    xt = torch.from_numpy(x.astype(np.float32)).to(dev).to(dtype)
    gt = torch.from_numpy(g.astype(np.float32)).to(dev).to(dtype)

    def forward():
        F.grid_sample(xt, gt, mode="bilinear", padding_mode="zeros", align_corners=False)
        torch.npu.synchronize()

    def both():
        xr, gr = xt.detach().requires_grad_(), gt.detach().requires_grad_()
        out = F.grid_sample(xr, gr, mode="bilinear", padding_mode="zeros", align_corners=False)
        out.float().sum().backward()
        torch.npu.synchronize()

    times: dict[str, float | str] = {}
    for key, fn in (("forward", forward), ("forward+backward", both)):
        try:
            times[key] = _median_ms(fn, repeats, warmup)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            times[key] = _error_text(exc)
    return times


def _timing_data(input_shape: Sequence[int], out_spatial: Sequence[int], dtype: str
                 ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    grid_shape = (input_shape[0], *out_spatial, len(input_shape) - 2)
    x = rng.uniform(-1, 1, input_shape).astype(jnp.dtype(dtype))
    g = rng.uniform(-1.1, 1.1, grid_shape).astype(jnp.dtype(dtype))
    return x, g


def time_cases(device: jax.Device, shapes: Sequence[tuple] = TIMING_SHAPES,
               dtypes: Sequence[str] = TIMING_DTYPES, repeats: int = 10, warmup: int = 2,
               torch: bool = True) -> list[dict]:
    """Median milliseconds (after ``warmup`` calls, each call waited for) of bilinear, zeros
    padding grid_sample, forward and jax.grad of the sum, with implementation="native" and
    "reference" on ``device``, then (when ``torch``) :func:`time_torch`.
    ``shapes``: (name, input shape, output spatial shape). One dict per shape and dtype:
    name, dtype, shapes, "native"/"reference"/"torch_npu" -> {"forward", "forward+backward"}
    (ms, "routed", or an error text; "torch_npu" may be a string such as "not installed")."""
    rows = []
    for name, input_shape, out_spatial in shapes:
        for dtype in dtypes:
            x, g = _timing_data(input_shape, out_spatial, dtype)
            row = dict(name=name, dtype=dtype, input_shape=list(input_shape),
                       grid_shape=list(g.shape), out_spatial=list(out_spatial),
                       torch_npu="not run")
            for impl in ("native", "reference"):
                row[impl] = _time_jax(device, x, g, impl, repeats, warmup)
            rows.append(row)
    if torch:
        time_torch(rows, device, repeats, warmup)
    return rows


def time_torch(rows: Sequence[dict], device: jax.Device, repeats: int = 10, warmup: int = 2
               ) -> None:
    """Fill in each row's "torch_npu" timings (torch_npu's F.grid_sample on the same NPU), or
    "not installed (...)" when ``import torch_npu`` fails. Run after the JAX timings: torch_npu
    shares the NPU and CANN runtime with the JAX plugin in this process."""
    torch_mod, why_not = _torch_npu()
    index = getattr(device, "local_hardware_id", None)
    index = device.id if index is None else index
    for row in rows:
        if torch_mod is None:
            row["torch_npu"] = why_not
            continue
        x, g = _timing_data(row["input_shape"], row["out_spatial"], row["dtype"])
        row["torch_npu"] = _time_torch(torch_mod, index, x, g, repeats, warmup)


# --- the report -----------------------------------------------------------------------------

def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2g}" if v < 1e-2 or v >= 1e3 else f"{v:.3g}"
    return str(v)


def print_parity_table(results: Sequence[dict], out=sys.stdout) -> None:
    """One row per dimension x mode x forward/backward x dtype: counts and largest errors;
    then every failed case and the routed combinations."""
    rows: dict[tuple, list[dict]] = {}
    for r in results:
        key = (r["dim"], r["mode"], "fwd" if r["op"] == "forward" else "bwd", r["dtype"])
        rows.setdefault(key, []).append(r)
    print(f"{'case':<26}{'pass':>5}{'fail':>5}{'routed':>7}{'vs host f64':>13}"
          f"{'vs NPU ref':>12}{'tol':>8}  result", file=out)
    for (dim, mode, op, dtype), group in rows.items():
        counts = {s: sum(r["status"] == s for r in group) for s in ("pass", "fail", "routed")}
        host = [r["max_error_host"] for r in group if r.get("max_error_host") is not None]
        ref = [r["max_error_reference"] for r in group
               if r.get("max_error_reference") is not None]
        verdict = "FAIL" if counts["fail"] else "pass" if counts["pass"] else "routed"
        print(f"{f'{dim}d {mode} {op} {dtype}':<26}{counts['pass']:>5}{counts['fail']:>5}"
              f"{counts['routed']:>7}{_fmt(max(host, default=None)):>13}"
              f"{_fmt(max(ref, default=None)):>12}{TOLERANCES[dtype]:>8g}  {verdict}", file=out)
    failed = [r for r in results if r["status"] == "fail"]
    for r in failed[:40]:
        why = r.get("error") or "; ".join(r["problems"])
        print(f"FAIL {r['name']}: {why[:300]}", file=out)
    if len(failed) > 40:
        print(f"... and {len(failed) - 40} more failures (see the JSON file)", file=out)
    routed: dict[str, list[dict]] = {}
    for r in results:
        if r["status"] == "routed":
            routed.setdefault(f"{r['dim']}d {r['mode']} {r['op']}", []).append(r)
    for key, group in routed.items():
        dtypes = sorted({r["dtype"] for r in group})
        reasons = sorted({r["reason"][:200] for r in group})
        print(f"routed to reference: {key}, {len(group)} cases ({', '.join(dtypes)}): "
              f"{' | '.join(reasons)}", file=out)


def print_checks(title: str, result: dict, out=sys.stdout) -> None:
    """The empty or NaN checks: one line each."""
    print(f"{title}: {result['status'].upper()}", file=out)
    for c in result["checks"]:
        detail = c.get("error") or "; ".join(c.get("problems", [])) or c.get("reason", "")
        report = "; ".join(f"{k}: {_fmt(v)}" for k, v in c.get("report", {}).items())
        print(f"  {c['status']:<6} {c['name']} {c.get('dtype', '')} {detail} {report}".rstrip(),
              file=out)


def _cell(v: Any) -> str:
    return _fmt(v) if isinstance(v, float) else str(v)[:13]


def _ratio(v: Any, base: Any) -> str:
    ok = isinstance(v, float) and isinstance(base, float) and base > 0
    return f"{v / base:.2f}" if ok else "-"


def print_timing_table(rows: Sequence[dict], out=sys.stdout) -> None:
    """Median ms per implementation, and how many times slower the others are than aclnn."""
    print(f"{'timing (median ms)':<30}{'aclnn':>9}{'reference':>11}{'ref/aclnn':>11}"
          f"{'torch_npu':>15}{'torch/aclnn':>13}", file=out)
    for row in rows:
        for key in ("forward", "forward+backward"):
            native = row["native"].get(key)
            ref = row["reference"].get(key)
            torch = row["torch_npu"] if isinstance(row["torch_npu"], str) \
                else row["torch_npu"].get(key)
            torch = "not installed" if isinstance(torch, str) and \
                torch.startswith("not installed") else torch

            label = f"{row['name']} {row['dtype']} {key}"
            print(f"{label:<30}{_cell(native):>9}{_cell(ref):>11}{_ratio(ref, native):>11}"
                  f"{_cell(torch):>15}{_ratio(torch, native):>13}", file=out)
    torch_notes = {row["torch_npu"] for row in rows if isinstance(row["torch_npu"], str)}
    for note in sorted(torch_notes):
        print(f"  torch_npu: {note}", file=out)
    errors = {f"{row['name']} {row['dtype']} {impl}": row[impl]
              for row in rows for impl in ("native", "reference", "torch_npu")}
    for label, times in errors.items():
        values = times.values() if isinstance(times, dict) else []
        for text in values:
            if isinstance(text, str) and text != "routed":
                print(f"  {label}: {text[:300]}", file=out)


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


def environment(device: jax.Device | None) -> dict:
    """Versions, native_status(), the device and SoC, and the CANN-related environment."""
    dists = sorted({(d.metadata["Name"] or "", d.version)
                    for d in importlib.metadata.distributions()
                    if re.search(r"ascend|npu|cann|pjrt|jax", d.metadata["Name"] or "", re.I)})
    soc = getattr(_ascend, "soc_name", None)
    try:
        soc_name = soc() if callable(soc) else None
    except Exception as exc:  # noqa: BLE001 - reported
        soc_name = f"error: {_error_text(exc)}"
    env = dict(
        python=sys.version.split()[0], machine=platform.machine(), system=platform.platform(),
        jax=jax.__version__, jaxlib=_version("jaxlib"),
        jax_gridsample=getattr(jax_gridsample, "__version__", None) or _version("jax_gridsample"),
        torch=_version("torch"), torch_npu=_version("torch_npu"),
        distributions={name: version for name, version in dists},
        native_status=jax_gridsample.native_status(), soc_name=soc_name,
        env={k: v for k, v in os.environ.items()
             if k in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH",
                      "JAX_GRIDSAMPLE_ACLNN_LIBS", "ASCEND_RT_VISIBLE_DEVICES", "JAX_PLATFORMS")},
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


def main(argv: Sequence[str] | None = None) -> int:
    """Detect the NPU, run every phase, print the tables, write the JSON; 1 if a check failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default="ascend_acceptance.json", help="report file")
    parser.add_argument("--quick", action="store_true",
                        help="float32, one case per mode x padding x dimension")
    parser.add_argument("--cases", metavar="REGEX", help="only parity cases whose name matches")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per median")
    parser.add_argument("--no-timing", action="store_true", help="skip the timings")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch_npu timings")
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)

    npus, platforms = ascend_devices()
    if not npus:
        print(f"no Ascend NPU visible to JAX (platforms: {', '.join(platforms) or 'none'}): "
              "nothing to check")
        return 0
    device = npus[0]
    try:
        host = jax.devices("cpu")[0]
    except RuntimeError as exc:
        print(f"JAX has no CPU backend ({exc}), which the float64 host reference needs: run "
              "with JAX_PLATFORMS unset or including cpu")
        return 1
    started = time.perf_counter()
    report: dict[str, Any] = dict(environment=environment(device), argv=list(argv or sys.argv[1:]))
    print(f"device: {device} ({device.device_kind}); SoC {report['environment']['soc_name']}; "
          f"jax {jax.__version__}, jax_gridsample {report['environment']['jax_gridsample']}")
    ascend_status = report["environment"]["native_status"].get("ascend", "")
    print(f"native_status()['ascend']: {ascend_status[:300]}", flush=True)
    _write(args.json, report)

    cases = covered_cases(args.quick, args.cases)
    results = []
    for i, case in enumerate(cases):
        results.append(check_case(case, device, host))
        if (i + 1) % 50 == 0 or i + 1 == len(cases):
            print(f"  parity {i + 1}/{len(cases)} ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr, flush=True)
    report["parity"] = results
    _write(args.json, report)
    print_parity_table(results)

    report["empty"] = check_empty(device, host)
    _write(args.json, report)
    print_checks("empty tensors", report["empty"])

    report["nan"] = check_nan(device, host)
    _write(args.json, report)
    print_checks("NaN coordinates (finite points judged; the rest reported)", report["nan"])

    if not args.no_timing:
        report["timings"] = time_cases(device, repeats=args.repeats, torch=False)
        _write(args.json, report)
        if not args.no_torch:
            time_torch(report["timings"], device, repeats=args.repeats)
        print_timing_table(report["timings"])

    failed = [r["name"] for r in results if r["status"] == "fail"]
    failed += [f"empty: {c['name']} {c['dtype']}" for c in report["empty"]["checks"]
               if c["status"] == "fail"]
    failed += [f"nan: {c['name']}" for c in report["nan"]["checks"] if c["status"] == "fail"]
    ran = sum(r["status"] != "routed" for r in results)
    report["summary"] = dict(cases=len(results), ran_on_aclnn=ran, failed=failed,
                             seconds=time.perf_counter() - started)
    _write(args.json, report)
    verdict = "FAIL" if failed or not ran else "PASS"
    print(f"{verdict}: {len(results)} parity cases, {ran} ran natively, {len(failed)} checks "
          f"failed; {report['summary']['seconds']:.0f} s; report written to {args.json}")
    if not ran:
        print("nothing ran on aclnn: every case was routed to the reference (see native_status)")
    return 1 if failed or not ran else 0


if __name__ == "__main__":
    sys.exit(main())
