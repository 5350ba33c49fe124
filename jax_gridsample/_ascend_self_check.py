"""The self-check that decides which calls "auto" trusts aclnn with on an Ascend device.

The aclnn path was written against CANN's documentation and sources, not run on an NPU, so on
first use on a device (the first lowering with ``implementation="auto"`` that would send a call
to aclnn, or :func:`jax_gridsample.ascend_prepare`) one small call of every kind "auto" would
send there runs through aclnn: every dtype, every mode (bicubic included), forward and
backward, and both of CANN's routes (C <= 2048 and C > 2048) where the routing sends both.
Each result is compared with a host oracle: the jax.numpy reference on the CPU backend in
float64, on the same (rounded) operands, within a tolerance per dtype (:data:`TOLERANCES`).
The plugin's own compiled reference is compared with the oracle too, and reported as broken
when it differs (that is not aclnn's fault, but it is what "auto" falls back to).

"auto" then sends aclnn only the kinds that passed; one warning names the first problem, and
``jax_gridsample.native_status()["ascend"]`` reports the outcome. With
``JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1`` the deterministic backward must also give the same
bits on :data:`REPRODUCIBILITY_RUNS` runs of a case where thousands of points scatter into four
pixels; without it, deterministic backwards run on the reference anyway (docs/ascend.md).

Each process checks its own first local device and takes the path it reports: no collective.
``implementation="native"`` never runs the check. ``JAX_GRIDSAMPLE_ASCEND_SELF_CHECK=off`` skips
it ("auto" then trusts aclnn for every call it covers); ``ascend_self_check(rerun=True)`` runs
it again. The outcome is cached on disk with the probe's (``_ascend_cache.py``).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import sys
import time
import warnings

import jax
import numpy as np

from . import _ascend
from ._compat import enable_x64, outside_mesh

ENV_VAR = "JAX_GRIDSAMPLE_ASCEND_SELF_CHECK"
# Largest max|result - oracle| / max|oracle| accepted, per dtype: a few roundings of the dtype
# (float16 and bfloat16 results are rounded once more than the oracle's, and a grid gradient
# sums many products).
TOLERANCES = {"float64": 1e-9, "float32": 1e-4, "float16": 1e-2, "bfloat16": 6e-2}
DTYPES = tuple(TOLERANCES)
MODES = {2: ("bilinear", "nearest", "bicubic"), 3: ("bilinear", "nearest")}
PADDINGS = ("zeros", "border", "reflection")
# (input shape, grid shape) per rank and route: C <= 2048 and C > 2048 (AICore and AICPU).
SHAPES = {(2, False): ((2, 3, 5, 6), (2, 4, 5, 2)),
          (3, False): ((1, 2, 3, 4, 5), (1, 2, 3, 4, 3)),
          (2, True): ((1, _ascend.AICORE_MAX_CHANNELS + 1, 3, 4), (1, 2, 3, 2)),
          (3, True): ((1, _ascend.AICORE_MAX_CHANNELS + 1, 2, 3, 3), (1, 2, 2, 2, 3))}
REPRODUCIBILITY_RUNS = 5
# Many points, few pixels: the scatter of the input gradient collides everywhere.
COLLISION = ((1, 1, 2, 2), (1, 48, 48, 2))
# The estimate of the check's time printed when it starts and documented in docs/ascend.md:
# three programs compiled (aclnn, the device's reference, the host oracle) and each kind's
# calls in them.
SECONDS_FIXED = 10.0
SECONDS_PER_KIND = 1.0


def enabled() -> bool:
    """Whether "auto" waits for the self-check (JAX_GRIDSAMPLE_ASCEND_SELF_CHECK, default on)."""
    value = os.environ.get(ENV_VAR, "on").strip().lower()
    if value in ("on", "1", "true", ""):
        return True
    if value in ("off", "0", "false"):
        return False
    raise ValueError(f"{ENV_VAR}={value!r}: expected 'on' or 'off'")


@dataclasses.dataclass(frozen=True)
class Kind:
    """One kind of call "auto" may send to aclnn."""

    backward: bool
    k: int
    dtype: str
    mode: str
    wide: bool  # C > 2048: CANN's other route

    @property
    def name(self) -> str:
        return (f"{self.k}d {self.mode} {self.dtype} {'backward' if self.backward else 'forward'}"
                f"{', C > 2048' if self.wide else ''}")


def kind_of(backward: bool, avals_in, interpolation: int) -> Kind:
    """The kind of a call (its operands' avals, channels-first)."""
    input, grid = avals_in[-2], avals_in[-1]
    k = len(grid.shape) - 2
    return Kind(bool(backward), k, str(np.dtype(input.dtype)),
                ("bilinear", "nearest", "bicubic")[int(interpolation)],
                input.shape[1] > _ascend.AICORE_MAX_CHANNELS)


@dataclasses.dataclass(frozen=True)
class SelfCheck:
    """The outcome on one device: how many results were compared, the kinds that failed (name ->
    problem), whether the device's own reference is broken, whether the deterministic backward
    reproduced (checked only with the start-up level), and how long it took."""

    device: str
    compared: int
    failed: dict = dataclasses.field(default_factory=dict)
    reference_failure: str | None = None
    deterministic_failure: str | None = None
    seconds: float = 0.0
    from_cache: bool = False  # found in the on-disk cache (_ascend_cache.py)

    @property
    def call_errors(self) -> bool:
        """Whether a call raised (perhaps for a passing reason: such an outcome is not cached)."""
        return any(why.startswith("an aclnn call failed") for why in
                   [*self.failed.values(), self.deterministic_failure or ""])

    def stored(self) -> dict:
        """What the on-disk cache keeps of it (not the device's name)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("device", "from_cache")}

    @property
    def failure(self) -> str | None:
        """The first failed kind's problem, or None."""
        return next((f"{name}: {why}" for name, why in self.failed.items()), None)

    def trusts(self, kind: Kind, deterministic: bool) -> bool:
        return kind.name not in self.failed and not (deterministic and self.deterministic_failure)

    def summary(self) -> str:
        parts = []
        if self.failed:
            parts.append(f"{len(self.failed)} kinds failed, first {self.failure}; \"auto\" runs "
                         "those on the reference")
        if self.deterministic_failure is not None:
            parts.append(f"the deterministic backward is not reproducible "
                         f"({self.deterministic_failure}); \"auto\" runs deterministic backwards "
                         "on the reference")
        if self.reference_failure is not None:
            parts.append(f"the plugin's compiled jax.numpy reference is broken "
                         f"({self.reference_failure})")
        outcome = "passed" if not self.failed and self.deterministic_failure is None else "failed"
        detail = f"{self.compared} results compared in {self.seconds:.1f} s"
        if self.from_cache:
            detail += ", from the on-disk cache"
        return "; ".join([f"{outcome} on {self.device} ({detail})", *parts])


def kinds(kernel, platform: str) -> list[Kind]:
    """Every kind "auto" would send to aclnn on ``platform`` (what the routing does not keep on
    the reference), in a fixed order."""
    found = []
    for backward, k, dtype, wide in itertools.product((False, True), (2, 3), DTYPES,
                                                      (False, True)):
        for mode in MODES[k]:
            kind = Kind(backward, k, dtype, mode, wide)
            avals = _avals(kind)
            if kernel.rejects(platform, backward, avals, interpolation=_interpolation(mode),
                              channels_last=False, deterministic=False) is None:
                found.append(kind)
    return found


def estimated_seconds(count: int) -> float:
    """The estimate of the check's time for ``count`` kinds (docs/ascend.md)."""
    return SECONDS_FIXED + SECONDS_PER_KIND * count


def _interpolation(mode: str) -> int:
    return ("bilinear", "nearest", "bicubic").index(mode)


def _avals(kind: Kind) -> list:
    input_shape, grid_shape = SHAPES[(kind.k, kind.wide)]
    dtype = np.dtype(jax.numpy.dtype(kind.dtype))
    x = jax.ShapeDtypeStruct(input_shape, dtype)
    g = jax.ShapeDtypeStruct(grid_shape, dtype)
    if not kind.backward:
        return [x, g]
    return [jax.ShapeDtypeStruct(input_shape[:2] + grid_shape[1:-1], dtype), x, g]


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


def _case(index: int, kind: Kind) -> tuple[dict, list[np.ndarray]]:
    """The keyword arguments and operands of one kind's call (padding and align_corners
    cycle over the kinds)."""
    rng = np.random.default_rng(index)
    input_shape, grid_shape = SHAPES[(kind.k, kind.wide)]
    align_corners = index % 2 == 1
    dtype = jax.numpy.dtype(kind.dtype)
    x = rng.uniform(-1, 1, input_shape).astype(dtype)
    g = _grid(rng, grid_shape, input_shape, align_corners).astype(dtype)
    operands = [x, g]
    if kind.backward:
        operands.insert(0, rng.uniform(-1, 1, input_shape[:2] + grid_shape[1:-1]).astype(dtype))
    kwargs = dict(mode=kind.mode, padding_mode=PADDINGS[index % 3], align_corners=align_corners)
    return kwargs, operands


def _apply(kind: Kind, kwargs: dict, operands, implementation: str) -> list:
    from . import grid_sample, grid_sample_backward

    if not kind.backward:
        return [grid_sample(*operands, implementation=implementation, **kwargs)]
    return list(grid_sample_backward(*operands, implementation=implementation, **kwargs))


def _run(cases, implementation: str, device, dtype=None) -> list:
    """One program of every case's call on ``device``; the results on the host."""
    def program(operands):
        return [_apply(kind, kwargs, ops, implementation)
                for (kind, kwargs, _), ops in zip(cases, operands, strict=True)]

    operands = [[op if dtype is None else op.astype(dtype) for op in ops]
                for _, _, ops in cases]
    with outside_mesh(), jax.transfer_guard("allow"):
        on_device = jax.device_put(operands, device)
        return jax.device_get(jax.jit(program)(on_device))


def _oracle(cases) -> list:
    """The host oracle: the reference on the CPU backend in float64."""
    with enable_x64():
        return _run(cases, "reference", jax.local_devices(backend="cpu")[0], np.float64)


def _scaled_error(got, expected) -> float:
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    if got.shape != expected.shape or not np.all(np.isfinite(got)):
        return float("inf")
    scale = max(float(np.abs(expected).max(initial=0.0)), 1e-6)
    return float(np.abs(got - expected).max(initial=0.0)) / scale


def _problem(kind: Kind, got, expected) -> str | None:
    tolerance = TOLERANCES[kind.dtype]
    error = max(_scaled_error(g, e) for g, e in zip(got, expected, strict=True))
    return None if error <= tolerance else f"error {error:.3g} > {tolerance:g}"


def _error_text(exc: BaseException) -> str:
    return f"an aclnn call failed: {_ascend.last_line(exc, 300)}"


def _reproducible(kernel, platform: str, device) -> str | None:
    """The deterministic input gradient of the collision case, REPRODUCIBILITY_RUNS times: None
    if every run gives the same bits."""
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
    with outside_mesh(), jax.transfer_guard("allow"):
        operands = jax.device_put((go, x, g), device)
        runs = [np.asarray(jax.device_get(step(*operands)))
                for _ in range(REPRODUCIBILITY_RUNS)]
    differing = sum(run.tobytes() != runs[0].tobytes() for run in runs[1:])
    if differing == 0:
        return None
    spread = max(float(np.abs(run - runs[0]).max()) for run in runs[1:])
    return (f"{differing} of {REPRODUCIBILITY_RUNS - 1} later runs of a deterministic backward "
            f"with many colliding points differ from the first (by up to {spread:.3g})")


def run(kernel, platform: str, checked: list[Kind]) -> SelfCheck:
    """Run the self-check of ``kernel`` (an ``_ascend.AscendKernel``) for the kinds ``checked``
    (:func:`kinds`) on this process's first device of ``platform``; print one line when it
    starts, warn once if anything failed."""
    started = time.monotonic()
    device = kernel.device(platform)
    name = _ascend.device_name(device)
    cases = []
    for index, kind in enumerate(checked):
        kwargs, operands = _case(index, kind)
        cases.append((kind, kwargs, operands))
    print(f"jax_gridsample: checking aclnn on {name}: {len(cases)} kinds of call, about "
          f"{estimated_seconds(len(cases)):.0f} s (docs/ascend.md, \"The self-check\")",
          file=sys.stderr, flush=True)
    try:
        native, errors = _run(cases, "native", device), {}
    except Exception as exc:  # noqa: BLE001 - an aclnn or runtime error fails every kind
        native, errors = None, {kind.name: _error_text(exc) for kind, _, _ in cases}
    try:
        reference = _run(cases, "reference", device)
    except Exception as exc:  # noqa: BLE001 - reported as the reference's failure
        reference, reference_failure = None, _error_text(exc).replace("an aclnn call", "it")
    else:
        reference_failure = None
    oracle = _oracle(cases)
    failed, compared = dict(errors), 0
    for index, (kind, _, _) in enumerate(cases):
        if kind.name in errors:
            continue
        compared += len(oracle[index])
        problem = _problem(kind, native[index], oracle[index])
        if problem is not None:
            failed[kind.name] = problem
        if reference is not None and reference_failure is None:
            wrong = _problem(kind, reference[index], oracle[index])
            if wrong is not None:
                reference_failure = f"{kind.name}: {wrong}"
    deterministic_failure = None
    if _ascend.deterministic_level()[0] == 1:
        try:
            deterministic_failure = _reproducible(kernel, platform, device)
        except Exception as exc:  # noqa: BLE001 - a failed run is not a reproducible one
            deterministic_failure = _error_text(exc)
    result = SelfCheck(name, compared, failed, reference_failure, deterministic_failure,
                       time.monotonic() - started)
    if failed or deterministic_failure or reference_failure:
        warnings.warn(f"jax_gridsample: the aclnn self-check {result.summary()}. Run "
                      "`python -m jax_gridsample --full` for the details and please send us "
                      "its report; "
                      f"{ENV_VAR}=off trusts aclnn regardless.", RuntimeWarning, stacklevel=2)
    return result
