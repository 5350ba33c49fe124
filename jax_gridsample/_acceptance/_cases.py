"""The parity and route cases of the hardware acceptance: each one call (a forward, or a
backward with an output mask), run with implementation="native" on the device and compared with
the reference on the device and the float64 reference on the host."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence

import jax
import numpy as np

import jax_gridsample

from .._ascend import DETERMINISTIC_ENV_VAR
from ._data import (
    TOLERANCES,
    ac,
    error_text,
    identical,
    make_data,
    max_difference,
    put,
    sample_kwargs,
    scaled_error,
)
from ._plan import MASK_NAMES, MASKS, Plan


def expected_refusal(deterministic: bool | None, reason: str, level: int | None) -> bool:
    """Whether "native" refusing a call is the known Ascend limitation: a deterministic
    backward without the start-up level (a refusal for any other reason is "routed")."""
    return bool(deterministic) and level is None and DETERMINISTIC_ENV_VAR in reason


def _kwargs(case: dict, implementation: str, deterministic: bool = False) -> dict:
    return sample_kwargs(case["mode"], case["padding"], case["align_corners"], implementation,
                         deterministic)


def forward(case: dict, x: jax.Array, g: jax.Array, implementation: str) -> np.ndarray:
    """grid_sample of the case, waited for."""
    out = jax_gridsample.grid_sample(x, g, **_kwargs(case, implementation))
    return np.asarray(jax.block_until_ready(out))


def backward(case: dict, x: jax.Array, g: jax.Array, go: jax.Array, implementation: str,
             mask: Sequence[bool], deterministic: bool = False) -> list[np.ndarray | None]:
    """(grad_input, grad_grid) for the cotangent ``go``, None where masked off."""
    grads = jax_gridsample.grid_sample_backward(
        go, x, g, output_mask=tuple(mask), **_kwargs(case, implementation, deterministic))
    grads = jax.block_until_ready(grads)
    return [None if r is None else np.asarray(r) for r in grads]


def group(case: dict) -> str:
    """The name of a case less its call: e.g. ``2d-bilinear-zeros-noac-float32``."""
    prefix = f"{case['route']}-" if case.get("route") else ""
    return (f"{prefix}{case['dim']}d-{case['mode']}-{case['padding']}-"
            f"{ac(case['align_corners'])}-{case['dtype']}")


def make_case(dim: int, mode: str, padding: str, align_corners: bool, dtype: str, op: str,
              shapes: tuple, mask: tuple[bool, bool] | None = None,
              deterministic: bool | None = None, route: str | None = None) -> dict:
    """One case, named like ``2d-bilinear-zeros-noac-float32-bwd-both-det``."""
    case = dict(dim=dim, mode=mode, padding=padding, align_corners=align_corners, dtype=dtype,
                op=op, output_mask=None if mask is None else list(mask),
                deterministic=deterministic, route=route, input_shape=list(shapes[0]),
                grid_shape=list(shapes[1]))
    name = f"{group(case)}-fwd"
    if op == "backward":
        name = f"{group(case)}-bwd-{MASK_NAMES[mask]}-{'det' if deterministic else 'nondet'}"
    return dict(name=name, **case)


def _matching(cases: list[dict], pattern: str | None) -> list[dict]:
    if not pattern:
        return cases
    regex = re.compile(pattern)
    return [c for c in cases if regex.search(c["name"])]


def covered_cases(plan: Plan, quick: bool = False, pattern: str | None = None) -> list[dict]:
    """The parity cases: per dimension, mode, padding, align_corners and dtype the forward and
    the backward for each output mask, default and deterministic.

    ``quick``: float32 only, one align_corners per mode x padding x dimension (alternating),
    the backward of both gradients only. ``pattern``: a regular expression the name must
    contain. Whether the native kernel runs a case is the package's decision (check_case
    reports "routed" for the rest).
    """
    cases = []
    for dim, mode, padding, align_corners in plan.combinations(quick):
        for dtype in ("float32",) if quick else plan.dtypes:
            combo = (dim, mode, padding, align_corners, dtype)
            cases.append(make_case(*combo, "forward", plan.shapes[dim]))
            for det in (False, True):
                for mask in ((True, True),) if quick else MASKS:
                    cases.append(make_case(*combo, "backward", plan.shapes[dim], mask, det))
    return _matching(cases, pattern)


def route_cases(plan: Plan, quick: bool = False, pattern: str | None = None) -> list[dict]:
    """The cases of ``plan.route_shapes``: per shape and dtype (``quick``: the first), the
    forward and the backward of both gradients, default and deterministic; named like
    ``wide-c-2d-bilinear-zeros-noac-float32-bwd-both-nondet``."""
    cases = []
    for route, input_shape, grid_shape, mode, padding, align_corners, dtypes in \
            plan.route_shapes:
        for dtype in dtypes[:1] if quick else dtypes:
            combo = (len(input_shape) - 2, mode, padding, align_corners, dtype)
            where = dict(route=route, shapes=(input_shape, grid_shape))
            cases.append(make_case(*combo, "forward", **where))
            for det in (False, True):
                cases.append(make_case(*combo, "backward", mask=(True, True),
                                       deterministic=det, **where))
    return _matching(cases, pattern)


def check_case(case: dict, device: jax.Device, host_device: jax.Device,
               level: int | None = 1) -> dict:
    """Run one case with implementation="native" on ``device``; compare with
    implementation="reference" on ``device`` and with the float64 reference on ``host_device``.

    ``level``: the start-up determinism level (Ascend; None: a deterministic backward refused
    for want of it is "expected"). Returns the case plus "status" ("pass", "fail", "routed":
    native raised NotImplementedError, or "expected"), "errors" (per output: scaled error vs the
    host float64 result and vs the device reference), "max_error_host",
    "max_error_reference", "tolerance", "seconds", and where they apply
    "deterministic_identical", "problems", "reason" and "error" (an exception). Passing needs
    every output present with the right shape and dtype, within the tolerance of the host
    result, and a deterministic backward bitwise equal across two runs.
    """
    t0 = time.perf_counter()
    result = dict(case, tolerance=TOLERANCES[case["dtype"]], errors={}, problems=[])
    x, g, go = make_data(case["dim"], case["mode"], case["padding"], case["align_corners"],
                         case["dtype"], (case["input_shape"], case["grid_shape"]))
    dev = put((x, g, go), device)
    host = put((x, g, go), host_device, np.float64)
    is_backward = case["op"] == "backward"
    mask = tuple(case["output_mask"]) if is_backward else None
    names = ["grad_input", "grad_grid"] if is_backward else ["output"]
    try:
        if is_backward:
            got = backward(case, *dev, "native", mask, bool(case["deterministic"]))
        else:
            got = [forward(case, *dev[:2], "native")]
    except NotImplementedError as exc:
        expected = expected_refusal(case["deterministic"], str(exc), level)
        result.update(status="expected" if expected else "routed", reason=str(exc),
                      seconds=time.perf_counter() - t0)
        return result
    except Exception as exc:  # noqa: BLE001 - a kernel or runtime error is a failed check
        result.update(status="fail", error=error_text(exc, case),
                      seconds=time.perf_counter() - t0)
        return result

    if is_backward:
        oracle = backward(case, *host, "reference", (True, True))
        try:
            reference = backward(case, *dev, "reference", (True, True))
        except Exception as exc:  # noqa: BLE001 - reported; the host result decides
            reference = [None, None]
            result["reference_error"] = error_text(exc)
        wanted = list(mask)
    else:
        oracle = [forward(case, *host[:2], "reference")]
        try:
            reference = [forward(case, *dev[:2], "reference")]
        except Exception as exc:  # noqa: BLE001 - reported; the host result decides
            reference = [None]
            result["reference_error"] = error_text(exc)
        wanted = [True]

    tol = result["tolerance"]
    for name, want, out, exp, ref in zip(names, wanted, got, oracle, reference, strict=True):
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

    if is_backward and case["deterministic"]:
        again = backward(case, *dev, "native", mask, True)
        same = identical(got, again)
        result["deterministic_identical"] = same
        if not same:
            result["problems"].append("deterministic backward differs between two runs (max "
                                      f"difference {max_difference(got, again):.3g})")

    errors = result["errors"].values()
    result["max_error_host"] = max((e["host"] for e in errors), default=None)
    refs = [e["reference"] for e in errors if e["reference"] is not None]
    result["max_error_reference"] = max(refs, default=None)
    result.update(status="fail" if result["problems"] else "pass",
                  seconds=time.perf_counter() - t0)
    return result


def run_cases(cases: Sequence[dict], device: jax.Device, host_device: jax.Device,
              label: str = "cases", level: int | None = 1) -> list[dict]:
    """check_case for each case, with a progress line on stderr every 50."""
    started = time.perf_counter()
    results = []
    for i, case in enumerate(cases):
        results.append(check_case(case, device, host_device, level))
        if (i + 1) % 50 == 0 or i + 1 == len(cases):
            print(f"  {label} {i + 1}/{len(cases)} ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr, flush=True)
    return results


def not_reproducible(results: Sequence[dict]) -> list[str]:
    """The names of the cases whose deterministic backward gave different bits twice."""
    return [r["name"] for r in results if r.get("deterministic_identical") is False]
