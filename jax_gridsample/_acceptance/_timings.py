"""The hardware acceptance's timings: the native kernel against the reference lowering on the
same device (their results checked too), torch's grid_sample in a process of its own, and the
speed verdict."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jax_gridsample

from ._data import TOLERANCES, error_text, make_grid, put, scaled_error
from ._plan import Plan

TIMING_GRID_RANGE = 1.1
TORCH_WORKER = "jax_gridsample._acceptance._torch_worker"
TORCH_TIMEOUT_S = 1800
# The native kernel is SLOW where its median is above the reference's (same device, same data)
# by more than this fraction: one median of a noisy machine is no finer than that.
SPEED_MARGIN = 0.10
TIMED = dict(mode="bilinear", padding_mode="zeros", align_corners=False)


def median_ms(fn: Callable[[], Any], repeats: int, warmup: int) -> float:
    """The median of ``repeats`` calls of ``fn`` after ``warmup`` ones, in milliseconds."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _timed_programs(implementation: str) -> dict[str, Callable]:
    kw = dict(TIMED, implementation=implementation)

    def loss(x, g):
        return jax_gridsample.grid_sample(x, g, **kw).astype(jnp.float32).sum()

    return {"forward": jax.jit(lambda x, g: jax_gridsample.grid_sample(x, g, **kw)),
            "forward+backward": jax.jit(jax.grad(loss, argnums=(0, 1)))}


def time_jax(device: jax.Device, x: np.ndarray, g: np.ndarray, implementation: str,
             repeats: int, warmup: int) -> tuple[dict[str, float | str], dict[str, Any]]:
    """Median ms of the forward and of jax.grad of the sum ("routed" or an error's text where
    they did not run), and each program's result (its first call's)."""
    xd, gd = put((x, g), device)
    times: dict[str, float | str] = {}
    results: dict[str, Any] = {}
    for key, fn in _timed_programs(implementation).items():
        try:
            results[key] = jax.device_get(fn(xd, gd))
            times[key] = median_ms(lambda fn=fn: jax.block_until_ready(fn(xd, gd)),
                                   repeats, warmup)
        except NotImplementedError:
            times[key] = "routed"
        except Exception as exc:  # noqa: BLE001 - reported in the table
            times[key] = error_text(exc)
    return times, results


def _check_timed(results: dict[str, Any], host_device: jax.Device, x: np.ndarray,
                 g: np.ndarray, dtype: str) -> dict:
    """The native results of a timing row against the float64 host reference."""
    check: dict[str, Any] = dict(errors={}, problems=[])
    if not results:
        return dict(check, status="routed")
    expected = {key: jax.device_get(fn(*put((x, g), host_device, np.float64)))
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


def timing_data(input_shape: Sequence[int], out_spatial: Sequence[int], dtype: str
                ) -> tuple[np.ndarray, np.ndarray]:
    """(input, grid) of a timing row."""
    rng = np.random.default_rng(1)
    grid_shape = (input_shape[0], *out_spatial, len(input_shape) - 2)
    x = rng.uniform(-1, 1, input_shape).astype(jnp.dtype(dtype))
    g = make_grid(rng, grid_shape, input_shape, False, TIMING_GRID_RANGE)
    return x, g.astype(jnp.dtype(dtype))


def time_cases(device: jax.Device, host_device: jax.Device, plan: Plan, repeats: int = 10,
               warmup: int | None = None) -> list[dict]:
    """Median milliseconds (after ``warmup`` calls, each call waited for) of bilinear, zeros
    padding grid_sample, forward and jax.grad of the sum, with implementation="native" and
    "reference" on ``device``, for each of ``plan.timing_shapes`` and ``plan.timing_dtypes``;
    the native results are checked against the float64 reference on ``host_device``. One dict
    per shape and dtype: name, dtype, shapes, "native"/"reference" -> {"forward",
    "forward+backward"} (ms, "routed", or an error text), "check" (status, errors, problems)
    and "torch" ("not run" until :func:`time_torch`)."""
    warmup = plan.timing_warmup if warmup is None else warmup
    rows = []
    for name, input_shape, out_spatial in plan.timing_shapes:
        for dtype in plan.timing_dtypes:
            x, g = timing_data(input_shape, out_spatial, dtype)
            row: dict[str, Any] = dict(name=name, dtype=dtype, input_shape=list(input_shape),
                                       grid_shape=list(g.shape), out_spatial=list(out_spatial),
                                       torch="not run")
            row["native"], results = time_jax(device, x, g, "native", repeats, warmup)
            row["check"] = _check_timed(results, host_device, x, g, dtype)
            errors = [v for v in row["native"].values() if v != "routed" and isinstance(v, str)]
            if errors:
                row["check"]["problems"] += errors
                row["check"]["status"] = "fail"
            row["reference"], _ = time_jax(device, x, g, "reference", repeats, warmup)
            rows.append(row)
    return rows


def time_torch(rows: Sequence[dict], device: jax.Device, device_type: str, repeats: int = 10,
               warmup: int = 2) -> None:
    """Fill in each row's "torch" timings: torch's F.grid_sample on the same device
    (``device_type`` "npu", through torch_npu, or "cuda") and data, run by ``_torch_worker`` in
    a process of its own (so that importing torch_npu, which loads CANN's combined opapi
    library and sets CANN's options for its process, cannot change this one's); a string ("not
    installed (...)", an error) where it could not run."""
    index = getattr(device, "local_hardware_id", None)
    index = device.id if index is None else index
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for i, row in enumerate(rows):
            x, g = timing_data(row["input_shape"], row["out_spatial"], row["dtype"])
            path = os.path.join(tmp, f"case{i}.npz")
            np.savez(path, x=x, g=g)
            cases.append(dict(data=path, **TIMED))
        request = os.path.join(tmp, "request.json")
        with open(request, "w") as f:
            json.dump(dict(device_type=device_type, device_index=index, repeats=repeats,
                           warmup=warmup, cases=cases), f)
        answer = _run_torch_worker(request)
    for i, row in enumerate(rows):
        row["torch"] = answer["error"] if "error" in answer else answer["times"][i]
        if "module" in answer:
            row["torch_module"] = answer["module"]


def _run_torch_worker(request: str) -> dict:
    try:
        proc = subprocess.run([sys.executable, "-m", TORCH_WORKER, request],
                              capture_output=True, text=True, timeout=TORCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return dict(error=f"the torch process did not finish in {TORCH_TIMEOUT_S} s")
    except OSError as exc:
        return dict(error=f"the torch process did not start: {exc}")
    lines = proc.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
        if proc.returncode == 0 and ("error" in answer or "times" in answer):
            return answer
    except (IndexError, ValueError):
        pass
    tail = " | ".join(proc.stderr.strip().splitlines()[-3:])[-400:]
    return dict(error=f"the torch process exited with status {proc.returncode}: {tail}")


# --- the speed verdict -------------------------------------------------------------------------

def slower(native: Any, reference: Any, margin: float = SPEED_MARGIN) -> bool:
    """Whether the native median is above the reference's by more than ``margin``; False where
    either did not run."""
    timed = isinstance(native, float) and isinstance(reference, float) and reference > 0
    return timed and native > reference * (1 + margin)


def speed_findings(rows: Sequence[dict], margin: float = SPEED_MARGIN) -> list[dict]:
    """Per timed program (row x forward / forward+backward) where the native kernel and the
    reference both have a median: the two, their ratio, and "slow" (:func:`slower`)."""
    findings = []
    for row in rows:
        for key in ("forward", "forward+backward"):
            native, ref = row["native"].get(key), row["reference"].get(key)
            if isinstance(native, float) and isinstance(ref, float) and ref > 0:
                findings.append(dict(name=f"{row['name']} {row['dtype']} {key}",
                                     native_ms=native, reference_ms=ref, ratio=native / ref,
                                     slow=slower(native, ref, margin)))
    return findings


def speed_verdict(findings: Sequence[dict], kernel: str = "aclnn",
                  margin: float = SPEED_MARGIN) -> tuple[str, str]:
    """SLOW naming the programs where the native median (``kernel``: its name) is slower than
    the reference's by more than the margin, else PASS; REPORTED when nothing could be
    compared. SLOW is a finding to report (the overall verdict does not fail on it)."""
    if not findings:
        return "REPORTED", f"nothing to compare: {kernel} or the reference has no timing"
    slow = [f for f in findings if f["slow"]]
    if not slow:
        return "PASS", (f"{kernel}'s median within {margin:.0%} of the reference's on the same "
                        f"device, or faster, in all {len(findings)} timed programs")
    names = ", ".join(f"{f['name']} {f['native_ms']:.3g} ms vs {f['reference_ms']:.3g} ms "
                      f"({f['ratio']:.2f}x)" for f in slow[:8])
    more = f" and {len(slow) - 8} more" if len(slow) > 8 else ""
    return "SLOW", (f"{kernel}'s median more than {margin:.0%} above the reference's on the "
                    f"same device in {len(slow)} of {len(findings)} timed programs: "
                    f"{names}{more}; a finding to report, not a failure")
