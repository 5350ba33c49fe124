"""The hardware acceptance's checks beyond the parity cases: the self-check, a jitted chain
(stream order), exact coordinates, empty tensors, NaN coordinates and many points scattering
into few pixels (reproducibility)."""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jax_gridsample

from ._cases import backward, expected_refusal, forward
from ._data import (
    TOLERANCES,
    ac,
    error_text,
    identical,
    make_data,
    make_grid,
    max_difference,
    normalize,
    np64,
    output_shape,
    put,
    sample_kwargs,
    scaled_error,
)
from ._plan import MASK_NAMES, MASKS, Plan

# The input's (W, H, D) for exact coordinates, by align_corners: sizes (align_corners=False) or
# sizes - 1 (True) that are powers of two, so that pixel centres and midpoints have normalized
# coordinates that float32 holds exactly and every way of unnormalizing them is exact too.
EXACT_SIZES = MappingProxyType({False: (8, 4, 2), True: (9, 5, 3)})


def overall(checks: Sequence[dict]) -> str:
    """A section's status from its checks': fail, else pass, else routed."""
    statuses = {c["status"] for c in checks}
    return "fail" if "fail" in statuses else "pass" if "pass" in statuses else "routed"


def native_outcome(check: dict, call: Callable[[], Any]) -> tuple[Any, dict | None]:
    """``(call(), None)``, or ``(None, check's outcome)`` when the call raised: "routed" on
    NotImplementedError (the platform sends it to the reference), "fail" on any other exception
    (a crash is a failed check)."""
    try:
        return call(), None
    except NotImplementedError as exc:
        return None, dict(check, status="routed", reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - a crash is a failed check
        return None, dict(check, status="fail", error=error_text(exc))


def read_all(pending: Sequence[Any]) -> list:
    """``jax.device_get`` of each of ``pending``; a failure is raised only once every one has
    finished, so that a failed call leaves none of its check's work running into the next."""
    results, failures = [], []
    for result in pending:
        try:
            results.append(jax.device_get(result))
        except Exception as exc:  # noqa: BLE001 - raised after the rest have finished
            failures.append(exc)
    if failures:
        raise failures[0]
    return results


# --- the self-check ---------------------------------------------------------------------------

def check_self_check(run: Callable[[], dict], level: int | None) -> dict:
    """The outcome of ``run`` (``jax_gridsample.ascend_self_check``): its dict plus "status"
    ("pass"; "fail", with "error" when it could not run; or "expected": only its deterministic
    part failed, without the start-up ``level`` that alone makes CANN's backward
    deterministic); its warning is not repeated."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            outcome = dict(run())
    except Exception as exc:  # noqa: BLE001 - reported
        return dict(status="fail", error=error_text(exc))
    if outcome.get("failure"):
        return dict(outcome, status="fail")
    if outcome.get("deterministic_failure"):
        return dict(outcome, status="fail" if level else "expected")
    return dict(outcome, status="pass")


# --- the jitted chain: stream order -----------------------------------------------------------

def _chain(implementation: str, mode: str, padding: str, align_corners: bool) -> Callable:
    """jit(grad) of sum(w * grid_sample(tanh(grid_sample(x, g1)), g2)) with respect to x, g1
    and g2, with the final samples as auxiliary output: two forwards, their backwards and XLA's
    own kernels in between, in one program."""
    kw = sample_kwargs(mode, padding, align_corners, implementation)

    def loss(x, g1, g2, w):
        y = jnp.tanh(jax_gridsample.grid_sample(x, g1, **kw))
        z = jax_gridsample.grid_sample(y, g2, **kw)
        return jnp.sum(z * w), z

    return jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))


def check_chain(device: jax.Device, host_device: jax.Device, plan: Plan,
                dtype: str = "float32") -> dict:
    """The chain of :func:`_chain` with implementation="native" on ``device``,
    ``plan.chain_runs`` times on data of its own each, all dispatched before any result is read
    (XLA's work and the kernels' must keep their order on the stream, and a workspace freed by
    one call must not be reused under a queued kernel) and all read before a failure is
    reported (:func:`read_all`), compared with the float64 reference on
    ``host_device``: the final samples and the three gradients within the dtype's tolerance.
    Returns {"status", "checks": [per shape: name, status, errors, problems]}."""
    runs, tol = plan.chain_runs, TOLERANCES[dtype]
    checks = []
    for name, input_shape, grid1_shape, grid2_shape, mode, padding, align_corners in \
            plan.chain_shapes:
        check = dict(name=f"{name}-{mode}-{padding}-{ac(align_corners)}-{dtype}",
                     dtype=dtype, runs=runs, errors={}, problems=[])
        data = []
        for run in range(runs):
            rng = np.random.default_rng(zlib.crc32(f"{name}-{run}".encode()))
            x = rng.uniform(-1, 1, input_shape)
            g1 = make_grid(rng, grid1_shape, input_shape, align_corners)
            g2 = make_grid(rng, grid2_shape, output_shape(input_shape, grid1_shape),
                           align_corners)
            w = rng.uniform(-1, 1, output_shape(input_shape, grid2_shape))
            data.append([a.astype(jnp.dtype(dtype)) for a in (x, g1, g2, w)])
        native = _chain("native", mode, padding, align_corners)

        def dispatch(native=native, data=data):
            return read_all([native(*put(d, device)) for d in data])  # dispatched without waiting

        got, outcome = native_outcome(check, dispatch)
        if outcome is not None:
            checks.append(outcome)
            continue
        reference = _chain("reference", mode, padding, align_corners)
        for run, ((gx, gg1, gg2), z) in enumerate(got):
            (ex, eg1, eg2), ez = reference(*put(data[run], host_device, np.float64))
            for label, a, e in (("output", z, ez), ("grad_input", gx, ex),
                                ("grad_grid1", gg1, eg1), ("grad_grid2", gg2, eg2)):
                err = scaled_error(a, e)
                check["errors"][label] = max(check["errors"].get(label, 0.0), err)
                if not err <= tol:
                    check["problems"].append(f"run {run + 1}: {label}: error {err:.3g} > "
                                             f"tolerance {tol:g}")
        checks.append(dict(check, status="fail" if check["problems"] else "pass"))
    return dict(status=overall(checks), checks=checks)


# --- exact coordinates: reported ---------------------------------------------------------------

def exact_grid(dim: int, align_corners: bool, half: bool) -> tuple[tuple[int, ...], np.ndarray]:
    """(input shape, grid) whose points sit exactly on pixel centres (``half`` False: integer
    pixel coordinates, from one before the first pixel to one after the last) or exactly
    midway between them (from 1.5 before to 1.5 after), every combination of the axes'."""
    sizes = EXACT_SIZES[align_corners][:dim]  # (W, H[, D])
    axes = []
    for size in sizes:
        u = np.arange(-2, size + 1) + 0.5 if half else np.arange(-1, size + 1).astype(float)
        axes.append(normalize(u, size, align_corners))
    mesh = np.meshgrid(*reversed(axes), indexing="ij")  # ([z,] y, x), the grid's point axes
    grid = np.stack(mesh[::-1], axis=-1)[None]
    return (1, 2, *reversed(sizes)), grid


def _differing_points(got: np.ndarray, expected: np.ndarray, tol: float,
                      channel_axis: int) -> str:
    """"same", or how many of the points differ by more than ``tol`` x the largest magnitude
    (a point differs when any of its channels or components does)."""
    g, e = np64(got), np64(expected)
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


def check_coordinates(device: jax.Device, host_device: jax.Device, plan: Plan,
                      dtype: str = "float32", quick: bool = False) -> dict:
    """Grids of exact pixel centres and exact midpoints (:func:`exact_grid`), for each
    dimension, mode, padding and align_corners (``quick``: one align_corners per mode x
    padding): the forward and both gradients with implementation="native", compared with the
    float64 reference point by point. There floor(i) and nearest's round-half-to-even decide,
    and implementations may differ by convention (PyTorch's is the reference's): reported, not
    judged; only an exception fails. Returns {"status" ("reported", "fail" or "routed"),
    "checks": [per grid: name, status, report, differs]}."""
    tol = TOLERANCES[dtype]
    checks = []
    for dim, mode, padding, align_corners in plan.combinations(quick):
        for half in (False, True):
            checks.append(_check_exact(device, host_device, dim, mode, padding, align_corners,
                                       half, dtype, tol))
    statuses = {c["status"] for c in checks}
    status = "fail" if "fail" in statuses else "reported" if "reported" in statuses else "routed"
    return dict(status=status, checks=checks)


def _check_exact(device: jax.Device, host_device: jax.Device, dim: int, mode: str,
                 padding: str, align_corners: bool, half: bool, dtype: str, tol: float) -> dict:
    case = dict(mode=mode, padding=padding, align_corners=align_corners)
    kind = "midpoints" if half else "centres"
    check = dict(name=f"{dim}d-{mode}-{padding}-{ac(align_corners)}-{kind}", dtype=dtype,
                 report={})
    input_shape, grid = exact_grid(dim, align_corners, half)
    rng = np.random.default_rng(dim)
    x = rng.uniform(-1, 1, input_shape)
    go = rng.uniform(-1, 1, output_shape(input_shape, grid.shape))
    dev = put((x, grid, go), device, jnp.dtype(dtype))
    results, outcome = native_outcome(check, lambda: (
        forward(case, *dev[:2], "native"), backward(case, *dev, "native", (True, True))))
    if outcome is not None:
        return outcome
    out, (gi, gg) = results
    host = put((x, grid, go), host_device, np.float64)
    expected_out = forward(case, *host[:2], "reference")
    expected_gi, expected_gg = backward(case, *host, "reference", (True, True))
    report = check["report"]
    report["output"] = _differing_points(out, expected_out, tol, 1)
    report["grad_grid"] = _differing_points(gg, expected_gg, tol, -1)
    err = scaled_error(gi, expected_gi)
    report["grad_input"] = "same" if err <= tol else f"error {err:.2g}"
    return dict(check, status="reported", differs=any(v != "same" for v in report.values()))


# --- empty tensors and NaN coordinates -------------------------------------------------------

def _prefilled_backward(kernel: Any, go: jax.Array, x: jax.Array, g: jax.Array,
                        mask: tuple[bool, bool]) -> list[np.ndarray]:
    """The kernel's backward target called directly, each result aliased to the operand of its
    shape (grad_input to input, grad_grid to grid), so that it starts as a copy of it.

    ``kernel``: an ``_ascend.AscendKernel`` or a ``_primitives.NativeKernel`` (the CPU's takes
    an empty fill operand, CUDA's returns a workspace after the gradients)."""
    wanted = [i for i in (0, 1) if mask[i]]
    results = [jax.ShapeDtypeStruct((x, g)[i].shape, x.dtype) for i in wanted]
    aliases = {1 + i: j for j, i in enumerate(wanted)}
    takes_fill = getattr(kernel, "backward_takes_fill", False)
    params = dict(interpolation=0, padding=(0,) * (x.ndim - 2), align_corners=False,
                  channels_last=False, deterministic=False)
    operands = [go, x, g] + ([jnp.zeros((0,), x.dtype)] if takes_fill else [])
    output_mask = (*mask, False) if takes_fill else mask
    workspace = getattr(kernel, "backward_workspace", None)
    if workspace is not None:
        nbytes = workspace(go, x, g, output_mask=output_mask, **params)
        results.append(jax.ShapeDtypeStruct((nbytes,), np.uint8))
    call = jax.ffi.ffi_call(kernel.backward_target, tuple(results),
                            input_output_aliases=aliases)
    attributes = kernel.backward_attributes(output_mask=output_mask, **params)
    out = jax.jit(lambda *operands: call(*operands, **attributes))(*operands)
    out = jax.block_until_ready(out)
    return [np.asarray(r) for r in out[:len(wanted)]]


def check_empty(device: jax.Device, host_device: jax.Device, kernel: Any, plan: Plan,
                dtypes: Sequence[str] | None = None) -> dict:
    """Empty calls (no output points, C=0, N=0): aclnn writes nothing on them, so the handlers
    must zero every result that has elements themselves (and so must any kernel).

    Per case and dtype: the backward target of ``kernel`` called directly for each output
    mask, every result starting as a copy of the non-zero operand of its shape, so that a result
    nobody writes shows; then the public API with implementation="native" (forward and both
    gradients). Every result must have the right shape and dtype, every gradient be exactly
    zero. Returns {"status", "checks": [per call: name, dtype, status, problems]}."""
    del host_device  # nothing to compare: the expected values are zeros
    checks = []
    for (name, input_shape, grid_shape), dtype in (
            (c, d) for c in plan.empty_cases
            for d in (plan.empty_dtypes if dtypes is None else dtypes)):
        case = dict(mode="bilinear", padding="zeros", align_corners=False)
        check = dict(name=name, dtype=dtype, input_shape=list(input_shape),
                     grid_shape=list(grid_shape), problems=[])
        rng = np.random.default_rng(0)
        np_dtype = jnp.dtype(dtype)
        x = rng.uniform(1, 2, input_shape).astype(np_dtype)
        g = rng.uniform(0.5, 0.9, grid_shape).astype(np_dtype)
        go = rng.uniform(1, 2, output_shape(input_shape, grid_shape)).astype(np_dtype)
        dev = put((x, g, go), device)
        calls, outcome = native_outcome(check, lambda dev=dev, case=case: (
            {mask: _prefilled_backward(kernel, dev[2], dev[0], dev[1], mask) for mask in MASKS},
            forward(case, *dev[:2], "native"), backward(case, *dev, "native", (True, True))))
        if outcome is not None:
            checks.append(outcome)
            continue
        direct, out, grads = calls
        expected_out = output_shape(input_shape, grid_shape)
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
            elif label != "output" and np.any(np64(got) != 0):
                bad = int(np.count_nonzero(np64(got) != 0))
                check["problems"].append(f"{label}: {bad} of {got.size} entries not zero")
        checks.append(dict(check, status="fail" if check["problems"] else "pass"))
    return dict(status=overall(checks), checks=checks)


def describe(values: np.ndarray) -> str:
    """What an array holds, in a few words: e.g. "4 NaN, 2 zero (of 6)"."""
    v = np64(values).ravel()
    if v.size == 0:
        return "empty"
    parts = [(int(np.isnan(v).sum()), "NaN"), (int(np.isinf(v).sum()), "inf"),
             (int((v == 0).sum()), "zero"), (int((np.isfinite(v) & (v != 0)).sum()), "finite")]
    return ", ".join(f"{n} {what}" for n, what in parts if n) + f" (of {v.size})"


def check_nan(device: jax.Device, host_device: jax.Device, plan: Plan,
              dtype: str = "float32") -> dict:
    """Grids with some NaN coordinates (x only, y only, all of a point's) through
    implementation="native": no crash; at points whose coordinates are all finite, the output
    and the grid gradient must match the float64 host reference. What comes out at the NaN
    points, and whether the input gradient (with the NaN points' cotangent zeroed) matches the
    reference, is reported but not judged (on Ascend it is CANN's behaviour, not ours).
    Returns {"status", "checks": [per combination: name, status, problems, report]}."""
    checks = []
    tol = TOLERANCES[dtype]
    for dim, modes in plan.modes.items():
        for mode in modes:
            for padding in plan.paddings:
                checks.append(_check_nan(device, host_device, plan, dim, mode, padding, dtype,
                                         tol))
    return dict(status=overall(checks), checks=checks)


def _check_nan(device: jax.Device, host_device: jax.Device, plan: Plan, dim: int, mode: str,
               padding: str, dtype: str, tol: float) -> dict:
    case = dict(dim=dim, mode=mode, padding=padding, align_corners=False, dtype=dtype)
    check = dict(name=f"{dim}d-{mode}-{padding}-noac-{dtype}-nan", problems=[], report={})
    x, g, go = make_data(dim, mode, padding, False, dtype, plan.shapes[dim])
    points = g.reshape(-1, dim)  # a view: the grid's points, flattened
    nan_points = np.zeros(points.shape[0], bool)
    for i in range(dim + 1):  # coordinate i alone NaN; the last point all NaN
        points[2 * i + 1, i if i < dim else slice(None)] = np.nan
        nan_points[2 * i + 1] = True
    finite = ~nan_points.reshape(g.shape[:-1])
    go_zeroed = go * np.expand_dims(finite, 1).astype(go.dtype)
    dev = put((x, g, go_zeroed), device)
    host = put((x, g, go_zeroed), host_device, np.float64)
    out, outcome = native_outcome(check, lambda: forward(case, *dev[:2], "native"))
    if outcome is not None:
        return outcome
    exp = forward(case, *host[:2], "reference")
    sel = np.broadcast_to(np.expand_dims(finite, 1), exp.shape)
    err = scaled_error(out[sel], exp[sel])
    check["report"]["output error at finite points"] = err
    if not err <= tol:
        check["problems"].append(f"output at finite points: error {err:.3g}")
    check["report"]["output at NaN points"] = describe(out[~sel])
    try:
        grads = backward(case, *dev, "native", (True, True))
    except NotImplementedError as exc:
        check["report"]["backward"] = f"routed: {exc}"
        grads = None
    except Exception as exc:  # noqa: BLE001 - a crash is a failed check
        check["problems"].append(f"backward: {error_text(exc)}")
        grads = None
    if grads is not None:
        exp_gi, exp_gg = backward(case, *host, "reference", (True, True))
        gi, gg = grads
        err = scaled_error(gg[finite], exp_gg[finite])
        check["report"]["grad_grid error at finite points"] = err
        if not err <= tol:
            check["problems"].append(f"grad_grid at finite points: error {err:.3g}")
        check["report"]["grad_grid at NaN points"] = describe(gg[~finite])
        check["report"]["grad_input error"] = scaled_error(gi, exp_gi)
        check["report"]["grad_input"] = describe(gi)
    return dict(check, status="fail" if check["problems"] else "pass")


# --- reproducibility: many points, few pixels -------------------------------------------------

def check_collisions(device: jax.Device, host_device: jax.Device, deterministic: bool,
                     plan: Plan, level: int | None = 1) -> dict:
    """The backward of both gradients (bilinear, zeros padding) on ``plan.collision_shapes``,
    where thousands of points scatter into a few pixels, run twice with the same operands:
    whether the two give the same bits, and their error against the float64 host reference
    (reported: accuracy is the parity cases' to judge). ``deterministic``: the two must be
    identical ("pass"/"fail"; "expected" where "native" refuses it for want of the start-up
    ``level``); otherwise it is only reported whether they are (a default backward may add
    with atomics). Returns {"status", "checks": [per shape: name, dtype, status, identical,
    max_difference, errors]}."""
    case = dict(mode="bilinear", padding="zeros", align_corners=False)
    checks = []
    for name, input_shape, grid_shape, dtype in plan.collision_shapes:
        check = dict(name=f"{name} {list(input_shape)} <- {list(grid_shape[:-1])} points",
                     dtype=dtype, deterministic=deterministic, problems=[])
        rng = np.random.default_rng(3)
        x = rng.uniform(-1, 1, input_shape)
        g = make_grid(rng, grid_shape, input_shape, False, grid_range=1.0)
        go = rng.uniform(-1, 1, output_shape(input_shape, grid_shape))
        dev = put((go, x, g), device, jnp.dtype(dtype))
        kw = sample_kwargs("bilinear", "zeros", False, "native", deterministic)
        step = jax.jit(lambda go, x, g, kw=kw: jax_gridsample.grid_sample_backward(
            go, x, g, output_mask=(True, True), **kw))
        try:
            first = [np.asarray(r) for r in jax.block_until_ready(step(*dev))]
            second = [np.asarray(r) for r in jax.block_until_ready(step(*dev))]
        except NotImplementedError as exc:
            expected = expected_refusal(deterministic, str(exc), level)
            checks.append(dict(check, status="expected" if expected else "routed",
                               reason=str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - a crash is a failed check
            checks.append(dict(check, status="fail", error=error_text(exc)))
            continue
        oracle = backward(case, *put((x, g, go), host_device, np.float64), "reference",
                          (True, True))
        same = identical(first, second)
        check.update(identical=same, max_difference=max_difference(first, second),
                     errors={label: scaled_error(a, e) for label, a, e in zip(
                         ("grad_input", "grad_grid"), first, oracle, strict=True)})
        if deterministic and not same:
            check["problems"].append("two runs of the deterministic backward differ (max "
                                     f"difference {check['max_difference']:.3g})")
        status = ("fail" if check["problems"] else "pass") if deterministic else "reported"
        checks.append(dict(check, status=status))
    statuses = {c["status"] for c in checks}
    status = next((s for s in ("fail", "pass", "reported", "expected") if s in statuses),
                  "routed")
    return dict(status=status, checks=checks)
