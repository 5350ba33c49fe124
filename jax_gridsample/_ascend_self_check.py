"""The self-check that decides whether "auto" trusts aclnn on an Ascend device.

The aclnn path was written against CANN's documentation and sources, not run on an NPU, so on
first use on a device (the first lowering with ``implementation="auto"`` that would send a call
to aclnn) a few small cases run there through aclnn and through the jax.numpy reference, and are
compared: 2D and 3D, bilinear and nearest, the forward, each gradient alone and both together,
default and deterministic. Deterministic backwards must also give the same bits twice on a case
where thousands of points scatter into four pixels (a kernel that adds them with atomics in
whatever order would not). "auto" then uses aclnn only for what passed: a failure of the
forward or the default backward sends every call to the reference, one of the deterministic
backward only deterministic calls; one warning names the first problem, and
``jax_gridsample.native_status()["ascend"]`` reports the outcome.

``implementation="native"`` never runs the check. ``JAX_GRIDSAMPLE_ASCEND_SELF_CHECK=off`` skips
it ("auto" then trusts aclnn for every call it covers);
``jax_gridsample.ascend_self_check(rerun=True)`` runs it again now.
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import jax
import numpy as np

from . import _ascend

ENV_VAR = "JAX_GRIDSAMPLE_ASCEND_SELF_CHECK"
# Largest max|aclnn - reference| / max|reference| accepted (float32 on the same device).
TOLERANCE = 1e-4
# (spatial rank, mode, padding, align_corners) of the cases, and their shapes.
CASES = ((2, "bilinear", "border", False), (2, "nearest", "reflection", True),
         (3, "bilinear", "zeros", True), (3, "nearest", "border", False))
SHAPES = {2: ((2, 3, 5, 6), (2, 4, 5, 2)), 3: ((1, 2, 3, 4, 5), (1, 2, 3, 4, 3))}
MASKS = ((True, True), (True, False), (False, True))
# Many points, few pixels: the scatter of the input gradient collides everywhere.
COLLISION = ((1, 1, 2, 2), (1, 48, 48, 2))


def enabled() -> bool:
    """Whether "auto" waits for the self-check (JAX_GRIDSAMPLE_ASCEND_SELF_CHECK, default on)."""
    value = os.environ.get(ENV_VAR, "on").strip().lower()
    if value in ("on", "1", "true", ""):
        return True
    if value in ("off", "0", "false"):
        return False
    raise ValueError(f"{ENV_VAR}={value!r}: expected 'on' or 'off'")


@dataclasses.dataclass(frozen=True)
class SelfCheck:
    """The outcome on one device: how many results were compared, and the first problem of the
    forward and default backward (``failure``) and of the deterministic backward."""

    device: str
    compared: int
    failure: str | None = None
    deterministic_failure: str | None = None

    def trusts(self, deterministic: bool) -> bool:
        return self.failure is None and not (deterministic and self.deterministic_failure)

    def summary(self) -> str:
        if self.failure is not None:
            return (f"failed on {self.device} ({self.failure}); \"auto\" runs the reference "
                    "there")
        if self.deterministic_failure is not None:
            return (f"passed on {self.device} except the deterministic backward "
                    f"({self.deterministic_failure}); \"auto\" runs deterministic backwards on "
                    "the reference there")
        return f"passed on {self.device} ({self.compared} results compared)"


@dataclasses.dataclass(frozen=True)
class _Call:
    name: str
    k: int
    mode: str
    padding: str
    align_corners: bool
    mask: tuple[bool, bool] | None = None  # None: the forward
    deterministic: bool = False


def _calls() -> list[_Call]:
    calls = []
    for k, mode, padding, ac in CASES:
        base = f"{k}d-{mode}-{padding}-{'ac' if ac else 'noac'}"
        calls.append(_Call(f"{base} forward", k, mode, padding, ac))
        for deterministic in (False, True):
            for mask in MASKS:
                which = {(True, True): "both gradients", (True, False): "input gradient",
                         (False, True): "grid gradient"}[mask]
                kind = "deterministic " if deterministic else ""
                calls.append(_Call(f"{base} {kind}backward, {which}", k, mode, padding, ac,
                                   mask, deterministic))
    return calls


def _grid(rng, grid_shape, input_shape, align_corners) -> np.ndarray:
    """Coordinates in about [-1.2, 1.2] whose pixel positions stay 0.15 or more away from
    integers and half-integers, so that floors and nearest's rounding cannot differ between two
    correct implementations."""
    coords = []
    for size in reversed(input_shape[2:]):  # the grid holds (x, y[, z])
        scale, shift = ((size - 1) / 2, (size - 1) / 2) if align_corners else (size / 2,
                                                                              (size - 1) / 2)
        u = rng.uniform(-1.2 * scale + shift, 1.2 * scale + shift, grid_shape[:-1])
        u = np.floor(u) + rng.uniform(0.15, 0.35, u.shape) + 0.5 * rng.integers(0, 2, u.shape)
        coords.append((u - shift) / scale)
    return np.stack(coords, axis=-1)


def _data(k: int, align_corners: bool, seed: int):
    rng = np.random.default_rng(seed)
    input_shape, grid_shape = SHAPES[k]
    x = rng.uniform(-1, 1, input_shape).astype(np.float32)
    g = _grid(rng, grid_shape, input_shape, align_corners).astype(np.float32)
    go = rng.uniform(-1, 1, input_shape[:2] + grid_shape[1:-1]).astype(np.float32)
    return x, g, go


def _apply(call: _Call, implementation: str, x, g, go):
    from . import grid_sample, grid_sample_backward

    kw = dict(mode=call.mode, padding_mode=call.padding, align_corners=call.align_corners,
              implementation=implementation, deterministic=call.deterministic)
    if call.mask is None:
        return [grid_sample(x, g, **kw)]
    grads = grid_sample_backward(go, x, g, output_mask=call.mask, **kw)
    return [r for r in grads if r is not None]


def _avals(call: _Call, x, g, go):
    operands = (x, g) if call.mask is None else (go, x, g)
    return [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in operands]


def _run(calls, implementation, data, device):
    def program(data):
        return [_apply(c, implementation, *data[(c.k, c.align_corners)]) for c in calls]

    on_device = jax.device_put(data, device)
    return jax.device_get(jax.jit(program)(on_device))


def _scaled_error(got, expected) -> float:
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    if got.shape != expected.shape or not np.all(np.isfinite(got)):
        return float("inf")
    scale = max(float(np.abs(expected).max(initial=0.0)), 1e-6)
    return float(np.abs(got - expected).max(initial=0.0)) / scale


def _compare(calls, native, reference) -> tuple[int, str | None, str | None]:
    compared, failure, deterministic_failure = 0, None, None
    for call, got, expected in zip(calls, native, reference, strict=True):
        for g, e in zip(got, expected, strict=True):
            compared += 1
            error = _scaled_error(g, e)
            if error <= TOLERANCE:
                continue
            problem = f"{call.name}: error {error:.3g} > {TOLERANCE:g}"
            if call.deterministic:
                deterministic_failure = deterministic_failure or problem
            else:
                failure = failure or problem
    return compared, failure, deterministic_failure


def _reproducible(kernel, platform: str, device) -> str | None:
    """The deterministic input gradient of the collision case, twice: None if bitwise equal."""
    from . import grid_sample_backward

    input_shape, grid_shape = COLLISION
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, input_shape).astype(np.float32)
    g = rng.uniform(-0.9, 0.9, grid_shape).astype(np.float32)
    go = rng.uniform(-1, 1, input_shape[:2] + grid_shape[1:-1]).astype(np.float32)
    avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (go, x, g)]
    if kernel.rejects(platform, True, avals, interpolation=0, channels_last=False,
                      deterministic=True) is not None:
        return None
    step = jax.jit(lambda go, x, g: grid_sample_backward(
        go, x, g, output_mask=(True, False), implementation="native", deterministic=True)[0])
    operands = jax.device_put((go, x, g), device)
    first, second = (np.asarray(step(*operands)) for _ in range(2))
    if first.tobytes() == second.tobytes():
        return None
    return ("two runs of a deterministic backward with many colliding points differ "
            f"(max difference {float(np.abs(first - second).max()):.3g})")


def run(kernel, platform: str) -> SelfCheck:
    """Run the self-check of ``kernel`` (an ``_ascend.AscendKernel``) on ``platform``'s first
    device; warn once if anything failed."""
    device = kernel.device(platform)
    name = _ascend.device_name(device)
    data = {(k, ac): _data(k, ac, seed) for seed, (k, _, _, ac) in enumerate(CASES)}
    calls = [c for c in _calls() if kernel.rejects(
        platform, c.mask is not None, _avals(c, *data[(c.k, c.align_corners)]),
        interpolation={"bilinear": 0, "nearest": 1}[c.mode], channels_last=False,
        deterministic=c.deterministic) is None]
    default = [c for c in calls if not c.deterministic]
    deterministic = [c for c in calls if c.deterministic]
    try:
        # The default calls first: older CANN keeps the determinism a kernel first ran with.
        native = _run(default, "native", data, device) + _run(deterministic, "native", data,
                                                               device)
        reference = _run(default + deterministic, "reference", data, device)
        compared, failure, deterministic_failure = _compare(default + deterministic, native,
                                                            reference)
        deterministic_failure = deterministic_failure or _reproducible(kernel, platform, device)
    except Exception as exc:  # noqa: BLE001 - an aclnn or runtime error fails the check
        text = str(exc).strip().splitlines()
        result = SelfCheck(name, 0, f"an aclnn call failed: {text[-1][:300] if text else exc!r}")
    else:
        result = SelfCheck(name, compared, failure, deterministic_failure)
    if result.failure or result.deterministic_failure:
        warnings.warn(f"jax_gridsample: the aclnn self-check {result.summary()}. Run "
                      "benchmarks/ascend.py for the details and please send us its report; "
                      f"{ENV_VAR}=off trusts aclnn regardless.", RuntimeWarning, stacklevel=2)
    return result

