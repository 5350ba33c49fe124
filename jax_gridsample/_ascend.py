"""Ascend NPUs: the aclnn FFI targets (``_ascend_kernels``), what decides where a call runs, and
the platform names they are registered under.

JAX runs on Ascend through a PJRT plugin, and picks a lowering rule by the plugin's own platform
string (``_raw_platform``, else ``platform``: jax/_src/interpreters/pxla.py), which a plugin may
spell "ascend", "ASCEND", "npu" or "NPU". The lowering rules live in this package's own table
(``_compat.register_partitioned_lowering``), so they are registered under every spelling at
import, whether or not JAX knows the platform yet; so are the FFI targets (jaxlib queues a
registration until a plugin of that name registers its handler). The device a first use asks
is found by a case-insensitive match on the backend's name or its devices' ``.platform``.

Where a call runs is decided on first use on a device, by asking CANN itself: the probe target
runs the first phase (``GetWorkspaceSize``, no launch) of each entry point for each dtype and
mode on the device's own thread (``ffi/ascend/probe.h``), so that what the installed CANN release
rejects runs on the reference. On top come the limits CANN documents, or shows in its sources,
but does not check in that phase (:func:`documented_limit`), and determinism, which CANN gives
only process-wide (:func:`deterministic_level`). Whether "auto" trusts what remains is the
self-check's call (``_ascend_self_check.py``).

The compiled module needs no CANN at build or import time: the CANN libraries are dlopen'ed on
the first call (see ``ffi/ascend/aclnn_api.h`` and ``docs/ascend.md``).
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
import warnings
from collections.abc import Sequence

import jax
import numpy as np

from . import _ascend_cache
from ._contract import ASCEND_BACKWARD_TARGET as BACKWARD_TARGET
from ._contract import ASCEND_FORWARD_TARGET as FORWARD_TARGET
from ._enums import Padding
from ._native import load_and_register
from ._validate import is_static

PLATFORM_NAMES = ("ascend", "ASCEND", "npu", "NPU")
"""Every spelling of the Ascend platform a PJRT plugin may use: the lowering rules and the FFI
targets are registered under each."""

STATUS_KEY = "ascend"
"""The key of ``native_status()`` that reports the Ascend path."""

# Called at lowering time in a program of its own (the support probe), never in a user's
# program, so never in an exported artifact: not part of the versioned contract (_contract.py).
PROBE_TARGET = "jax_gridsample_ascend_probe"


_MODULE, _STATUS, _REFUSED = load_and_register("_ascend_kernels",
                                               (FORWARD_TARGET, BACKWARD_TARGET, PROBE_TARGET),
                                               PLATFORM_NAMES)


def available() -> bool:
    """Whether the Ascend handlers are built and registered (CANN itself is loaded on use)."""
    return _MODULE is not None


def _libraries() -> tuple[bool, str]:
    """Whether the CANN libraries load (loading them now if need be), and from where or, in the
    loader's first sentence, why not."""
    try:
        return True, _MODULE.load_libraries()
    except RuntimeError as exc:
        return False, str(exc).removeprefix("grid_sample (ascend): ").split(". ")[0]


def _known_platform() -> str | None:
    return next((name for name in PLATFORM_NAMES if _known(name)), None)


def status() -> str:
    """The three things the Ascend path needs, each said separately, then what the first use
    found.

    "available (...)" only when the handlers are built, the CANN libraries load and JAX knows an
    Ascend platform; otherwise what holds and what does not, e.g. "handlers built; CANN
    libraries not found (...); no Ascend platform known to JAX (no Ascend PJRT plugin)". Once a
    call was lowered for a device: its chip, CANN's version and the self-check's outcome.
    """
    if _MODULE is None and _REFUSED:
        return f"the Ascend PJRT plugin refused the handlers' registration: {_STATUS}"
    if _MODULE is None:
        return f"handlers not built: {_STATUS}"
    found, where = _libraries()
    platform = _known_platform()
    parts = ["handlers built",
             f"CANN libraries {where}" if found else f"CANN libraries not found ({where})",
             f"Ascend platform {platform!r} known to JAX" if platform
             else "no Ascend platform known to JAX (no Ascend PJRT plugin)"]
    parts += [f"the plugin for {name!r} refused the registration ({why})"
              for name, why in _REFUSED.items()]
    text = "; ".join(parts)
    text = f"available ({text})" if found and platform else text
    return "; ".join([text, *KERNEL.first_use_summaries()])


# --- determinism: a process setting ------------------------------------------------------------

DETERMINISTIC_ENV_VAR = "JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC"


def deterministic_level() -> tuple[int | None, str | None]:
    """The start-up level of CANN's deterministic kernels, as the handlers read it (once).

    ``(1, None)`` with ``JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1``, ``(None, None)`` without it,
    ``(None, why)`` for a value the handlers refuse (they then fail every call). CANN picks its
    deterministic backward from the process's option, never per call (ffi/ascend/determinism.h),
    so a deterministic backward runs on aclnn only with the level set at start-up.
    """
    if _MODULE is None:
        return None, None
    level, error = _MODULE.deterministic_level()
    if level < 0:
        return None, error
    return (1 if level == 1 else None), None


# --- FFI attributes ---------------------------------------------------------------------------

def forward_attributes(*, interpolation, padding, align_corners, channels_last, deterministic,
                       **_):
    """The attributes of the forward target."""
    return dict(interpolation=np.int64(interpolation), padding=np.int64(padding[0]),
                align_corners=bool(align_corners), channels_last=bool(channels_last),
                deterministic=bool(deterministic))


def backward_attributes(*, output_mask, **params):
    """The attributes of the backward target: the forward's plus the output mask."""
    return dict(forward_attributes(**params), input_mask=bool(output_mask[0]),
                grid_mask=bool(output_mask[1]))


# --- the chip and what CANN documents but does not check -------------------------------------

def chip_family(soc: str | None) -> str:
    """Which documented product family a SoC name (``aclrtGetSocName``) belongs to.

    "atlas-a2-a3" (Ascend910B1..B4, B2C, B4-1; Ascend910_93xx), "ascend950", "atlas-training"
    (Ascend910A, Ascend910B without a digit, Ascend910ProA/ProB/PremiumA), "unsupported" (the
    Ascend310 inference chips, for which the grid sampler is not documented) or "unknown".
    """
    if not soc:
        return "unknown"
    if soc.startswith("Ascend950"):
        return "ascend950"
    if soc.startswith("Ascend910_93") or re.match(r"Ascend910B\d", soc):
        return "atlas-a2-a3"
    if soc.startswith("Ascend910"):
        return "atlas-training"
    if soc.startswith("Ascend310"):
        return "unsupported"
    return "unknown"


_INT32_MAX = 2**31 - 1
# The AICore backward kernels take at most this many channels; wider calls go to AICPU kernels
# (ops-cv aclnn_grid_sampler2d_backward.cpp:47, grid_sampler3d_grad.cpp AICORE_CHANNEL_LIMIT).
AICORE_MAX_CHANNELS = 2048


def _elements(shape: Sequence[int], first: int = 0) -> int:
    return math.prod(shape[first:])


def documented_limit(backward: bool, k: int, interpolation: int, dtype: str, family: str,
                     shapes: Sequence[Sequence[int]], deterministic: bool) -> str | None:
    """Why CANN's documentation or sources (not its first phase) keep a call off aclnn, or None.

    ``shapes``: the operands' shapes, ``(fill, input, grid)`` or ``(fill, grad_output, input,
    grid)``. The
    rules and their sources are in docs/ascend.md, "Which calls run on aclnn"; what CANN itself
    rejects is asked of it (:class:`Capabilities`).
    """
    if family == "unsupported":
        return "the aclnn grid sampler is not documented for Atlas inference products"
    if k == 3 and interpolation == 2:
        return "aclnn has no 3D bicubic (tricubic)"
    input_shape = shapes[-2]
    if not backward:
        if _elements(input_shape, 2) >= _INT32_MAX:
            return "the aclnn forward takes H*W (D*H*W) below INT32_MAX"
        if k == 2 and dtype == "bfloat16" and family == "atlas-training":
            return ("CANN sends a bfloat16 2D forward on Atlas training products to its AICPU "
                    "kernel, which has no bfloat16 (its first phase succeeds, the launch fails)")
        return None
    # ops-cv aclnn_grid_sampler2d_backward.cpp:174-193 and :290-299: the 950 keeps C > 2048
    # on AICore, other chips do not.
    wide = input_shape[1] > AICORE_MAX_CHANNELS and family != "ascend950"
    if k == 2 and interpolation == 2 and (dtype == "float64" or family == "atlas-training"
                                          or wide):
        return ("CANN sends a 2D bicubic backward in float64, on Atlas training products or "
                "with C > 2048 (but on the 950) to its AICPU kernel, which has no bicubic (its "
                "first phase succeeds, the launch fails)")
    if not all(map(is_static, shapes)):
        return ("a symbolic batch (jax.export): the aclnn backward's 32-bit limit on an "
                "operand's elements cannot be checked before the call")
    for shape in shapes:
        if _elements(shape) > _INT32_MAX or _elements(shape, 1) > _INT32_MAX:
            return "the aclnn backward kernels index in 32 bits (an operand has 2^31 elements)"
    if deterministic and not (family in ("atlas-a2-a3", "ascend950") and dtype != "float64"
                              and input_shape[1] <= AICORE_MAX_CHANNELS):
        return ("CANN documents a deterministic backward for its AICore kernels only (Atlas "
                "A2/A3 and 950, not float64, C <= 2048)")
    return None


def compute_dtype(backward: bool, k: int, dtype: str, family: str) -> str:
    """The dtype a call is sent to aclnn in: float32 for the float16 and bfloat16 2D backward on
    Atlas A2/A3, whose half-type tiling uses one core there (ops-cv
    grid_sampler2_d_grad_tiling.cpp:585-586, ``coreNum = 1`` unless float32 or register-based),
    as CANN itself casts its 3D backward (aclnn_grid_sampler3d_backward.cpp:291-302); the
    call's own dtype otherwise. Rounded back once, by the lowering."""
    if backward and k == 2 and dtype in ("float16", "bfloat16") and family == "atlas-a2-a3":
        return "float32"
    return dtype


# --- what the installed CANN takes: the probe --------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What the installed CANN answered on a device (the probe, ``ffi/ascend/probe.h``).

    ``rejected`` maps ``(backward, k, dtype, interpolation, wide)`` (``wide``: more channels
    than the AICore kernels take) to CANN's status and message, for the cases whose first phase
    failed; ``error`` is set when the probe itself could not run (no CANN, no stream, ...), and
    then nothing runs on aclnn.
    """

    device: str
    soc_name: str = ""
    cann_version: str = ""
    rejected: dict = dataclasses.field(default_factory=dict)
    error: str | None = None
    asked: bool = True  # False: there was no device to ask (a cross-platform export, say)
    from_cache: bool = False  # found in the on-disk cache (_ascend_cache.py)

    @property
    def family(self) -> str:
        return chip_family(self.soc_name)

    def rejects(self, backward: bool, k: int, dtype: str, interpolation: int,
                channels: int) -> str | None:
        """CANN's own answer for a call: None if its first phase took it."""
        if self.error is not None:
            return f"the aclnn support probe failed on {self.device}: {self.error}"
        key = (bool(backward), int(k), dtype, int(interpolation),
               int(channels) > AICORE_MAX_CHANNELS)
        if key not in self.rejected:
            return None
        status, message = self.rejected[key]
        return f"CANN's first phase rejects it ({status}: {message or 'no message'})"

    def summary(self) -> str:
        if self.error is not None:
            return f"aclnn support probe on {self.device} failed: {self.error}"
        return (f"{self.device}: chip {self.soc_name or 'unknown'}, CANN "
                f"{self.cann_version or 'version unknown'}, {len(self.rejected)} of "
                f"{len(_MODULE.probe_cases())} probed kinds of call rejected"
                f"{' (from the on-disk cache)' if self.from_cache else ''}")


def find_local_device(platforms: Sequence[str]) -> tuple[str, jax.Device] | None:
    """(backend name, this process's first device) of the first backend whose name, or whose
    devices' ``.platform``, is one of ``platforms`` up to case (a plugin may spell it "ASCEND"
    or "npu"); None when there is none."""
    from jax._src import xla_bridge

    wanted = {platform.lower() for platform in platforms}
    for name in xla_bridge.backends():
        devices = jax.local_devices(backend=name)
        if devices and wanted & {name.lower(), devices[0].platform.lower()}:
            return name, devices[0]
    return None


def local_device(platform: str) -> jax.Device:
    """This process's first device of ``platform`` (:func:`find_local_device`)."""
    found = find_local_device((platform,))
    if found is None:
        raise RuntimeError(f"this process has no {platform!r} device")
    return found[1]


def last_line(exc: BaseException, limit: int = 500) -> str:
    """An exception's last line (XLA's runtime errors end with the handler's message)."""
    lines = str(exc).strip().splitlines()
    return (lines[-1] if lines else repr(exc))[:limit]


def device_name(device: jax.Device) -> str:
    """``platform:id``, as messages name a device (``str(device)`` differs across jax releases)."""
    return f"{device.platform}:{device.id}"


def device_ordinal(device: jax.Device) -> int:
    """The ordinal the handlers' reports are keyed by (XLA's device ordinal)."""
    ordinal = getattr(device, "local_hardware_id", None)
    return device.id if ordinal is None else int(ordinal)


def run_probe(probe_target: str, extra_attributes: dict, device: jax.Device) -> Capabilities:
    """Run the probe target once on ``device`` and read its report."""
    name = device_name(device)
    call = jax.ffi.ffi_call(probe_target, jax.ShapeDtypeStruct((1,), np.uint8))
    try:
        anchor = jax.device_put(np.zeros((1,), np.uint8), device)  # runs the call there
        jax.block_until_ready(jax.jit(lambda _: call(**extra_attributes))(anchor))
    except Exception as exc:  # noqa: BLE001 - any failure: nothing runs on aclnn there
        return Capabilities(name, error=last_line(exc))
    report = _MODULE.probe_report(device_ordinal(device))
    if report is None:
        return Capabilities(name, error="the probe ran but left no report")
    rejected = {}
    for (backward, k, dtype, interpolation, channels), (status, message) in zip(
            _MODULE.probe_cases(), report["results"], strict=True):
        if status != 0:
            key = (backward, k, dtype, interpolation, channels > AICORE_MAX_CHANNELS)
            rejected[key] = (status, message)
    return Capabilities(name, report["soc_name"], report["cann_version"], rejected)


# --- the kernel: targets, routing and the first-use caches ------------------------------------

@dataclasses.dataclass(eq=False)
class AscendKernel:
    """The aclnn FFI targets and what decides whether a call runs on them.

    ``extra_attributes`` are added to every call (the tests pass the simulator's stream this
    way, to the test-only twins of the targets). The probe and the self-check run once per
    platform, on first use, and are kept here.
    """

    forward_target: str = FORWARD_TARGET
    backward_target: str = BACKWARD_TARGET
    probe_target: str = PROBE_TARGET
    extra_attributes: dict = dataclasses.field(default_factory=dict)
    _capabilities: dict = dataclasses.field(default_factory=dict, repr=False)
    _self_checks: dict = dataclasses.field(default_factory=dict, repr=False)
    _lock: threading.RLock = dataclasses.field(default_factory=threading.RLock, repr=False)

    def forward_attributes(self, **params) -> dict:
        return dict(forward_attributes(**params), **self.extra_attributes)

    def backward_attributes(self, **params) -> dict:
        return dict(backward_attributes(**params), **self.extra_attributes)

    def device(self, platform: str) -> jax.Device:
        """The device the probe and the self-check run on: this process's first of the
        platform (in a multi-process run each process asks its own)."""
        return local_device(platform)

    def _device(self, platform: str) -> tuple[str, jax.Device | None, str | None]:
        """(the key of the first-use caches, the device, why there is none): results are kept
        per device, whichever spelling of the platform asked."""
        try:
            device = self.device(platform)
        except RuntimeError as exc:  # no device: a cross-platform jax.export, say
            return platform, None, str(exc)
        return device_name(device), device, None

    def capabilities(self, platform: str) -> Capabilities:
        """The probe's answers for this process's device of ``platform`` (asked on first use,
        or found in the on-disk cache, then kept)."""
        key, device, missing = self._device(platform)
        with self._lock:
            if key in self._capabilities:
                return self._capabilities[key]
            if device is None:
                found = Capabilities(platform, error=f"no {platform} device to ask ({missing})",
                                     asked=False)
            else:
                found = self._cached_probe(key, device)
                if found.error is not None:
                    warnings.warn(
                        f"jax_gridsample: the aclnn support probe failed on {found.device} "
                        f"({found.error}), so \"auto\" runs the jax.numpy reference there; "
                        "jax_gridsample.native_status()['ascend'] says what the Ascend path has "
                        "and lacks.", RuntimeWarning, stacklevel=3)
            self._capabilities[key] = found
            return found

    def _installation(self, device: jax.Device) -> dict | None:
        """The on-disk cache's key fields for ``device`` (None: CANN cannot tell its version
        or chip from the host, so nothing is cached)."""
        soc, cann = soc_name(), cann_version()
        if not soc or not cann:
            return None
        return _ascend_cache.installation(device.platform, soc, cann)

    def _cached_probe(self, name: str, device: jax.Device) -> Capabilities:
        installation = self._installation(device)
        key = dict(installation or {}, probe_cases=[list(c) for c in _MODULE.probe_cases()])
        stored = _ascend_cache.load("probe", key) if installation else None
        if stored is not None:
            rejected = {tuple(k): tuple(v) for k, v in stored["rejected"]}
            return Capabilities(name, stored["soc_name"], stored["cann_version"], rejected,
                                from_cache=True)
        found = run_probe(self.probe_target, self.extra_attributes, device)
        if installation and found.error is None:
            _ascend_cache.store("probe", key, {
                "soc_name": found.soc_name, "cann_version": found.cann_version,
                "rejected": [[list(k), list(v)] for k, v in found.rejected.items()]})
        return found

    def rejects(self, platform: str, backward: bool, avals_in, *, interpolation,
                channels_last, deterministic=False, padding=(0, 0), align_corners=False,
                **_) -> str | None:
        """Why a call does not run on aclnn on this platform, or None if it does."""
        level, level_error = deterministic_level()
        if level_error is not None:
            return level_error
        if channels_last:
            return "aclnn takes channels-first tensors only"
        # "constant" runs as "zeros" on aclnn, its fill term in XLA (_fill.py)
        padding = tuple(Padding.ZEROS if p == Padding.CONSTANT else p for p in padding)
        if len(set(padding)) != 1:
            return "aclnn takes one padding mode for every axis, not one per axis"
        if padding[0] == Padding.WRAP:
            return "aclnn has no wrap padding"
        input, grid = avals_in[-2], avals_in[-1]
        if padding[0] == 0 and align_corners and all(s == 1 for s in input.shape[2:]):
            # No grid value makes aclnn read nothing for a NaN or infinite coordinate there
            # (_reference.grid_for_aclnn): every finite one lands on the pixel.
            return "a one-pixel input with zeros padding and align_corners=True"
        dtype = str(np.dtype(input.dtype))
        if dtype not in ("float32", "float16", "bfloat16", "float64"):
            return f"aclnn takes float32, float16, bfloat16 and float64, not {dtype}"
        k = len(grid.shape) - 2
        if backward and deterministic and level is None:
            return (f"CANN's deterministic backward is a process setting: start Python with "
                    f"{DETERMINISTIC_ENV_VAR}=1 (docs/ascend.md, \"Determinism\")")
        capabilities = self.capabilities(platform)
        dtype = compute_dtype(backward, k, dtype, capabilities.family)
        why = capabilities.rejects(backward, k, dtype, int(interpolation), input.shape[1])
        return why or documented_limit(
            backward, k, int(interpolation), dtype, capabilities.family,
            [a.shape for a in avals_in], bool(deterministic))

    def compute_dtype(self, platform: str, backward: bool, avals_in, **_) -> np.dtype:
        """The dtype a call this kernel covers is sent to aclnn in (:func:`compute_dtype`)."""
        input, grid = avals_in[-2], avals_in[-1]
        family = self.capabilities(platform).family
        return np.dtype(compute_dtype(backward, len(grid.shape) - 2,
                                      str(np.dtype(input.dtype)), family))

    def self_check(self, platform: str, rerun: bool = False):
        """The self-check's outcome on this process's device of ``platform`` (run on first use
        or found in the on-disk cache, or run now with ``rerun``)."""
        from . import _ascend_self_check as check

        key, device, missing = self._device(platform)
        if device is None:
            raise RuntimeError(f"no {platform} device to run the aclnn self-check on ({missing})")
        with self._lock:
            if rerun or key not in self._self_checks:
                installation = self._installation(device)
                kinds = check.kinds(self, platform)
                cache_key = dict(installation or {}, kinds=[k.name for k in kinds],
                                 tolerances=check.TOLERANCES,
                                 level=deterministic_level()[0], runs=check.REPRODUCIBILITY_RUNS)
                stored = None if rerun or not installation else _ascend_cache.load(
                    "self-check", cache_key)
                if stored is not None:
                    outcome = check.SelfCheck(key, from_cache=True, **stored)
                else:
                    outcome = check.run(self, platform, kinds)
                    if installation and not outcome.call_errors:
                        _ascend_cache.store("self-check", cache_key, outcome.stored())
                self._self_checks[key] = outcome
            return self._self_checks[key]

    def trusted(self, platform: str, *, backward: bool = False, avals_in=(),
                deterministic: bool = False, interpolation: int = 0, **_) -> bool:
        """Whether "auto" sends a call aclnn covers to it: whether its kind passed the
        self-check."""
        from . import _ascend_self_check as check

        if not check.enabled():
            return True
        kind = check.kind_of(backward, avals_in, interpolation)
        return self.self_check(platform).trusts(kind, backward and deterministic)

    def first_use_summaries(self) -> list[str]:
        """What the probe and the self-check found, per platform they ran for."""
        with self._lock:
            probes = [f"probe: {c.summary()}" for c in self._capabilities.values() if c.asked]
            checks = [f"self-check: {s.summary()}" for s in self._self_checks.values()]
        return probes + checks


KERNEL = AscendKernel()
"""The production targets (the device's stream from the runtime)."""


def self_check(rerun: bool = False) -> dict:
    """Run (or, with ``rerun``, run again) the aclnn self-check on this process's first device
    of the Ascend platform JAX knows, and return its outcome.

    Parameters
    ----------
    rerun : bool
        Run it again even if it ran already in this process or is in the on-disk cache (later
        compilations follow the new outcome; programs compiled before keep theirs).

    Returns
    -------
    dict
        ``device``, ``compared`` (how many results were compared), ``failed`` (kind of call ->
        problem; "auto" runs those on the reference), ``failure`` (the first of them, or
        None), ``reference_failure`` (the plugin's
        compiled jax.numpy reference against the host's float64 oracle),
        ``deterministic_failure`` (checked with ``JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1``
        only), ``seconds`` and ``from_cache``. See docs/ascend.md, "The self-check".

    Raises
    ------
    RuntimeError
        Without an Ascend platform known to JAX (no Ascend PJRT plugin).

    Examples
    --------
    >>> jax_gridsample.ascend_self_check()["failed"]  # doctest: +SKIP
    {}
    """
    platform = _known_platform()
    if platform is None:
        raise RuntimeError("no Ascend platform known to JAX (no Ascend PJRT plugin): there is "
                           "no device to run the aclnn self-check on")
    return self_check_outcome(KERNEL.self_check(platform, rerun=rerun))


def self_check_outcome(check) -> dict:
    """A self-check's outcome as :func:`self_check` returns it: its fields and ``failure``."""
    return dict(dataclasses.asdict(check), failure=check.failure)


def prepare() -> dict:
    """Run the aclnn support probe and the self-check on this process's first Ascend device
    now, ahead of the first ``jax.jit``, and say what they found.

    Both otherwise run on the first lowering that could send a call to aclnn; their outcome is
    cached on disk (``JAX_GRIDSAMPLE_ASCEND_CACHE``), so a later process on the same
    installation reads it instead. In a multi-process run each process calls it for its own
    device.

    Returns
    -------
    dict
        ``device``, ``probe`` (the probe's summary) and ``self_check`` (its summary, or why it
        did not run: the probe failed, or ``JAX_GRIDSAMPLE_ASCEND_SELF_CHECK=off``).

    Raises
    ------
    RuntimeError
        Without an Ascend platform known to JAX (no Ascend PJRT plugin).

    Examples
    --------
    >>> jax_gridsample.ascend_prepare()["self_check"]  # doctest: +SKIP
    'passed on ascend:0 (72 results compared in 41.3 s)'
    """
    from . import _ascend_self_check

    platform = _known_platform()
    if platform is None:
        raise RuntimeError("no Ascend platform known to JAX (no Ascend PJRT plugin): there is "
                           "nothing to prepare")
    capabilities = KERNEL.capabilities(platform)
    if capabilities.error is not None:
        checked = f"not run: the probe failed ({capabilities.error})"
    elif not _ascend_self_check.enabled():
        checked = f"not run: {_ascend_self_check.ENV_VAR}=off (\"auto\" trusts aclnn)"
    else:
        checked = KERNEL.self_check(platform).summary()
    return {"device": capabilities.device, "probe": capabilities.summary(),
            "self_check": checked}


def soc_name() -> str | None:
    """The chip's name as CANN's ``aclrtGetSocName`` gives it (e.g. ``"Ascend910B2"``), or None
    when the handlers are not built, CANN does not load or cannot tell."""
    return (_MODULE.soc_name() or None) if _MODULE is not None else None


def cann_version() -> str | None:
    """CANN's version as ``aclsysGetCANNVersion`` gives it, or None when it cannot tell."""
    return (_MODULE.cann_version() or None) if _MODULE is not None else None


def workspace_paths() -> dict | None:
    """How many calls took their workspace from the per-stream cache or needed none, and the
    cache's buffers (``ffi/ascend/workspace.h``); None without the handlers."""
    return _MODULE.workspace_paths() if _MODULE is not None else None


def _known(name: str) -> bool:
    from jax._src import xla_bridge

    try:
        return bool(xla_bridge.is_known_platform(name))
    except Exception:  # noqa: BLE001 - a JAX without the query: treat as unknown
        return False
