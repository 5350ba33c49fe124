"""The quick check of one platform: its native kernels (``implementation="native"``) against
the float64 host oracle (the jnp reference in float64 on the CPU), forward and both gradients,
2D and 3D, each mode and each padding its kernel takes, on small shapes, in seconds.

A case passes only where the native kernel ran: the jitted program must call the platform's
FFI targets (so that a missing or broken native module cannot pass on the reference) and its
results must match the oracle's. Off the CPU the jnp reference on the device (what "auto"
falls back to) is checked against the oracle too.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

import jax
import numpy as np

import jax_gridsample

from ._data import TOLERANCES, ac, error_text, make_data, put, sample_kwargs, scaled_error
from ._platforms import Platform

DTYPE = "float32"
MODES = MappingProxyType({2: ("bilinear", "nearest", "bicubic"), 3: ("bilinear", "nearest")})
# (input shape, grid shape): small, with odd sizes, different per axis
SHAPES = MappingProxyType({2: ((2, 3, 5, 6), (2, 4, 5, 2)),
                           3: ((2, 3, 3, 4, 5), (2, 2, 3, 4, 3))})
OUTPUTS = ("output", "grad_input", "grad_grid")
UNAVAILABLE = "no native grid_sample kernel is available"


def quick_cases(paddings: Sequence[str]) -> list[dict]:
    """Every mode x padding in 2D and in 3D (bicubic: 2D), align_corners alternating."""
    cases = []
    for dim, modes in MODES.items():
        for m, mode in enumerate(modes):
            for p, padding in enumerate(paddings):
                align_corners = bool((m + p + dim) % 2)
                cases.append(dict(name=f"{dim}d-{mode}-{padding}-{ac(align_corners)}",
                                  dim=dim, mode=mode, padding=padding,
                                  align_corners=align_corners))
    return cases


def _program(case: dict, implementation: str, sample: Callable) -> Callable:
    """jit of (output, grad_input, grad_grid) of ``sample`` for a cotangent."""
    kw = sample_kwargs(case["mode"], case["padding"], case["align_corners"], implementation)

    def forward_backward(x, g, go):
        out, vjp = jax.vjp(lambda x, g: sample(x, g, **kw), x, g)
        return (out, *vjp(go))

    return jax.jit(forward_backward)


def _calls(text: str, target: str) -> bool:
    return re.search(rf"@{re.escape(target)}\b", text) is not None


def check_case(case: dict, device: jax.Device, host_device: jax.Device,
               targets: Sequence[str], sample: Callable = jax_gridsample.grid_sample,
               device_reference: bool = True) -> dict:
    """One case: ``sample`` (default grid_sample) with implementation="native" on ``device``,
    whose jitted program must call each of ``targets``, against the float64 reference on
    ``host_device`` (and, with ``device_reference``, the reference on ``device`` against it).

    Returns the case plus "status" ("pass"; "fail", with "problems" or "error"; "routed": the
    package sends it to the reference, with "reason"; "unavailable": no native kernel),
    "errors" (per output: the native and device reference's scaled errors) and "seconds"."""
    t0 = time.perf_counter()
    result: dict[str, Any] = dict(case, errors={}, problems=[])
    x, g, go = make_data(case["dim"], case["mode"], case["padding"], case["align_corners"],
                         DTYPE, SHAPES[case["dim"]])
    dev = put((x, g, go), device)
    try:
        lowered = _program(case, "native", sample).lower(*dev)
        missing = [t for t in targets if not _calls(lowered.as_text(), t)]
        if missing:
            result["problems"].append(f"the native kernel did not run: the jitted program "
                                      f"calls no {', '.join(missing)}")
        got = [np.asarray(r) for r in jax.block_until_ready(lowered.compile()(*dev))]
    except NotImplementedError as exc:
        status = "unavailable" if UNAVAILABLE in str(exc) else "routed"
        return dict(result, status=status, reason=str(exc), seconds=time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - a kernel or runtime error is a failed check
        return dict(result, status="fail", error=error_text(exc),
                    seconds=time.perf_counter() - t0)
    oracle = _program(case, "reference", jax_gridsample.grid_sample)(
        *put((x, g, go), host_device, np.float64))
    reference = [None] * len(OUTPUTS)
    if device_reference:
        try:
            reference = _program(case, "reference", jax_gridsample.grid_sample)(*dev)
        except Exception as exc:  # noqa: BLE001 - a failed reference is a failed check
            result["problems"].append(f"the jnp reference on {device} failed: "
                                      f"{error_text(exc)[:300]}")
    tol = TOLERANCES[DTYPE]
    for name, out, exp, ref in zip(OUTPUTS, got, oracle, reference, strict=True):
        err = scaled_error(out, exp)
        err_ref = None if ref is None else scaled_error(ref, exp)
        result["errors"][name] = dict(native=err, reference=err_ref)
        if str(out.dtype) != DTYPE or out.shape != np.shape(exp):
            result["problems"].append(f"{name} is {out.dtype}{list(out.shape)}, expected "
                                      f"{DTYPE}{list(np.shape(exp))}")
        if not err <= tol:
            result["problems"].append(f"{name}: error {err:.3g} > tolerance {tol:g}")
        if err_ref is not None and not err_ref <= tol:
            result["problems"].append(f"{name} of the jnp reference on {device}: error "
                                      f"{err_ref:.3g} > tolerance {tol:g}")
    return dict(result, status="fail" if result["problems"] else "pass",
                seconds=time.perf_counter() - t0)


def _plugin(platform: Platform) -> tuple[list[dict], str | None]:
    """The plugin contract's verdicts, and what is not met (None: all of it is)."""
    if platform.plugin_check is None:
        return [], None
    try:
        verdicts = list(platform.plugin_check())
    except Exception as exc:  # noqa: BLE001 - reported
        return [], f"the plugin check could not run: {error_text(exc)[:300]}"
    bad = [v for v in verdicts if v.status in ("FAIL", "SKIP")]
    problem = None
    if bad:
        problem = "plugin contract not met: " + "; ".join(
            f"{v.requirement}: {v.detail}" for v in bad if v.status == "FAIL")[:600]
    return [dataclasses.asdict(v) for v in verdicts], problem


def check_platform(platform: Platform, device: jax.Device, host_device: jax.Device,
                   cases: Sequence[dict] | None = None,
                   sample: Callable = jax_gridsample.grid_sample) -> dict:
    """The quick check of ``platform`` on ``device``: the plugin contract where it has one,
    then every case (default :func:`quick_cases` of its paddings) with :func:`check_case`.

    Returns "platform", "device", "verdict" ("PASS" or "FAIL"), "detail", "line" (``<name>:
    <verdict> (<detail>)``), "cases", "plugin" and "seconds". PASS needs the native kernel
    available, the plugin contract met, no case failed and at least one run natively."""
    t0 = time.perf_counter()
    report: dict[str, Any] = dict(platform=platform.name, device=str(device), cases=[],
                                  plugin=[])
    if not platform.available():
        status = jax_gridsample.native_status().get(platform.name, "not built")
        return _verdict(report, "FAIL", f"native kernel unavailable: {status}; \"auto\" would "
                                        "run the jnp reference", t0)
    report["plugin"], plugin_problem = _plugin(platform)
    cases = quick_cases(platform.quick_paddings) if cases is None else cases
    on_host = device.platform == host_device.platform
    report["cases"] = results = [
        check_case(case, device, host_device, platform.targets, sample, not on_host)
        for case in cases]
    by_status: dict[str, list[dict]] = {}
    for r in results:
        by_status.setdefault(r["status"], []).append(r)
    failed = by_status.get("fail", []) + by_status.get("unavailable", [])
    ran = by_status.get("pass", []) + by_status.get("fail", [])
    routed = by_status.get("routed", [])
    worst = max((e["native"] for r in ran for e in r["errors"].values()), default=None)
    problems = [plugin_problem] if plugin_problem else []
    if failed:
        first = failed[0]
        why = first.get("error") or first.get("reason") or "; ".join(first["problems"])
        problems.append(f"{len(failed)} of {len(results)} cases failed, first {first['name']}: "
                        f"{why[:400]}")
    elif not ran:
        problems.append(f"nothing ran on {platform.kernel_name}: every case was routed to the "
                        f"reference ({routed[0]['reason'][:300] if routed else 'no cases'})")
    where = f"on {device.platform}:{device.id}"
    if problems:
        return _verdict(report, "FAIL", f"{'; '.join(problems)} ({where})", t0)
    detail = f"{len(ran)} cases {where}, max scaled error {worst:.1e}"
    if routed:
        detail += (f"; {len(routed)} routed to the reference: "
                   f"{', '.join(r['name'] for r in routed[:6])}"
                   + (" ..." if len(routed) > 6 else ""))
    return _verdict(report, "PASS", detail, t0)


def _verdict(report: dict, word: str, detail: str, started: float) -> dict:
    return dict(report, verdict=word, detail=detail, line=f"{report['platform']}: {word} "
                f"({detail})", seconds=time.perf_counter() - started)


def unchecked(platform: Platform, word: str, reason: str) -> dict:
    """The report of a platform whose kernel was not checked: ``word`` ("SKIPPED" or "FAIL")
    and why."""
    return dict(platform=platform.name, device=None, cases=[], plugin=[], verdict=word,
                detail=reason, line=f"{platform.name}: {word} ({reason})", seconds=0.0)
