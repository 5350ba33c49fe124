"""Ascend NPUs: the aclnn FFI targets (``_ascend_kernels``), what decides where a call runs, and
when the lowerings are registered.

JAX runs on Ascend through a PJRT plugin. The public one names its platform ``"ASCEND"`` (the
name its custom-call handler is registered under) and registers its backend as ``"ascend"``.
The FFI targets are registered for :data:`ASCEND_PLATFORM` at import: without the plugin the
registration just waits in jaxlib's queue and changes nothing. Lowerings can only be registered
for platforms JAX knows (``mlir.register_lowering`` raises otherwise), and JAX only learns of a
plugin when it discovers plugins, lazily, before the first computation; so
:func:`on_platform_known` registers them once that happened (now, or from the plugin-discovery
callback), for whichever of the two spellings JAX knows.

Where a call runs is decided on first use on a device, by asking CANN itself: the probe target
runs the first phase (``GetWorkspaceSize``, no launch) of each entry point for each dtype and
mode on the device's own thread (``ffi/ascend/probe.h``), so that what the installed CANN release
rejects runs on the reference. On top come the limits CANN documents but does not check
(:func:`documented_limit`). Whether "auto" trusts what remains is the self-check's call
(``_ascend_self_check.py``).

The compiled module needs no CANN at build or import time: the CANN libraries are dlopen'ed on
the first call (see ``ffi/ascend/aclnn_api.h`` and ``docs/ascend.md``).
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
from collections.abc import Callable, Sequence

import jax
import numpy as np

from ._contract import ASCEND_BACKWARD_TARGET as BACKWARD_TARGET
from ._contract import ASCEND_FORWARD_TARGET as FORWARD_TARGET
from ._native import load_and_register

ASCEND_PLATFORM = "ASCEND"
"""The Ascend PJRT plugin's platform name (FFI registration); JAX's backend name is its
lower-case form."""

# Called at lowering time in a program of its own (the support probe), never in a user's
# program, so never in an exported artifact: not part of the versioned contract (_contract.py).
PROBE_TARGET = "jax_gridsample_ascend_probe"


_MODULE, _STATUS = load_and_register("_ascend_kernels",
                                     (FORWARD_TARGET, BACKWARD_TARGET, PROBE_TARGET),
                                     ASCEND_PLATFORM)


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
    return next((name for name in lowering_platform_names() if _known(name)), None)


def status() -> str:
    """The three things the Ascend path needs, each said separately, then what the first use
    found.

    "available (...)" only when the handlers are built, the CANN libraries load and JAX knows an
    Ascend platform; otherwise what holds and what does not, e.g. "handlers built; CANN
    libraries not found (...); no Ascend platform known to JAX (no Ascend PJRT plugin)". Once a
    call was lowered for a device: its chip, CANN's version and the self-check's outcome.
    """
    if _MODULE is None:
        return f"handlers not built: {_STATUS}"
    found, where = _libraries()
    platform = _known_platform()
    parts = ["handlers built",
             f"CANN libraries {where}" if found else f"CANN libraries not found ({where})",
             f"Ascend platform {platform!r} known to JAX" if platform
             else "no Ascend platform known to JAX (no Ascend PJRT plugin)"]
    text = "; ".join(parts)
    text = f"available ({text})" if found and platform else text
    return "; ".join([text, *KERNEL.first_use_summaries()])


# --- FFI attributes ---------------------------------------------------------------------------

def forward_attributes(*, interpolation, padding, align_corners, channels_last, deterministic,
                       **_):
    """The attributes of the forward target."""
    return dict(interpolation=np.int64(interpolation), padding=np.int64(padding),
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
    """Why CANN's documentation (not its parameter checks) keeps a call off aclnn, or None.

    ``shapes``: the operands' shapes, ``(input, grid)`` or ``(grad_output, input, grid)``. The
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
        return None
    for shape in shapes:
        if _elements(shape) > _INT32_MAX or _elements(shape, 1) > _INT32_MAX:
            return "the aclnn backward kernels index in 32 bits (an operand has 2^31 elements)"
    if deterministic and not (family in ("atlas-a2-a3", "ascend950") and dtype != "float64"
                              and input_shape[1] <= AICORE_MAX_CHANNELS):
        return ("CANN documents a deterministic backward for its AICore kernels only (Atlas "
                "A2/A3 and 950, not float64, C <= 2048)")
    return None


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
                f"{len(_MODULE.probe_cases())} probed kinds of call rejected")


def device_name(device: jax.Device) -> str:
    """``platform:id``, as messages name a device (``str(device)`` differs across jax releases)."""
    return f"{device.platform}:{device.id}"


def _device_ordinal(device: jax.Device) -> int:
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
        return Capabilities(name, error=str(exc).strip().splitlines()[-1][:500])
    report = _MODULE.probe_report(_device_ordinal(device))
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
        """The device the probe and the self-check run on: the platform's first."""
        return jax.devices(platform)[0]

    def capabilities(self, platform: str) -> Capabilities:
        """The probe's answers for ``platform`` (run on first use, then kept)."""
        with self._lock:
            if platform not in self._capabilities:
                try:
                    device = self.device(platform)
                except RuntimeError as exc:  # no device: a cross-platform jax.export, say
                    self._capabilities[platform] = Capabilities(
                        platform, error=f"no {platform} device to ask ({exc})")
                else:
                    self._capabilities[platform] = run_probe(
                        self.probe_target, self.extra_attributes, device)
            return self._capabilities[platform]

    def rejects(self, platform: str, backward: bool, avals_in, *, interpolation,
                channels_last, deterministic=False, padding=0, align_corners=False,
                **_) -> str | None:
        """Why a call does not run on aclnn on this platform, or None if it does."""
        if channels_last:
            return "aclnn takes channels-first tensors only"
        input, grid = avals_in[-2], avals_in[-1]
        if padding == 0 and align_corners and all(s == 1 for s in input.shape[2:]):
            # No grid value makes aclnn read nothing for a NaN or infinite coordinate there
            # (_reference.grid_for_aclnn): every finite one lands on the pixel.
            return "a one-pixel input with zeros padding and align_corners=True"
        dtype = str(np.dtype(input.dtype))
        if dtype not in ("float32", "float16", "bfloat16", "float64"):
            return f"aclnn takes float32, float16, bfloat16 and float64, not {dtype}"
        k = len(grid.shape) - 2
        capabilities = self.capabilities(platform)
        why = capabilities.rejects(backward, k, dtype, int(interpolation), input.shape[1])
        return why or documented_limit(
            backward, k, int(interpolation), dtype, capabilities.family,
            [a.shape for a in avals_in], bool(deterministic))

    def self_check(self, platform: str, rerun: bool = False):
        """The self-check's outcome for ``platform`` (run on first use, or now with ``rerun``)."""
        from . import _ascend_self_check

        with self._lock:
            if rerun or platform not in self._self_checks:
                self._self_checks[platform] = _ascend_self_check.run(self, platform)
            return self._self_checks[platform]

    def trusted(self, platform: str, *, backward: bool = False, deterministic: bool = False,
                **_) -> bool:
        """Whether "auto" sends a call aclnn covers to it: what the self-check found."""
        from . import _ascend_self_check

        if not _ascend_self_check.enabled():
            return True
        return self.self_check(platform).trusts(backward and deterministic)

    def first_use_summaries(self) -> list[str]:
        """What the probe and the self-check found, per platform they ran for."""
        with self._lock:
            probes = [f"probe: {c.summary()}" for c in self._capabilities.values()]
            checks = [f"self-check: {s.summary()}" for s in self._self_checks.values()]
        return probes + checks


KERNEL = AscendKernel()
"""The production targets (the device's stream from the runtime)."""


def self_check(rerun: bool = False) -> dict:
    """Run (or, with ``rerun``, run again) the aclnn self-check on the first device of the Ascend
    platform JAX knows, and return its outcome.

    Parameters
    ----------
    rerun : bool
        Run it again even if it ran already in this process (later compilations follow the new
        outcome; programs compiled before keep theirs).

    Returns
    -------
    dict
        ``device``, ``compared`` (how many results were compared), ``failure`` (the first
        problem of the forward or the default backward, or None) and
        ``deterministic_failure`` (the first problem of the deterministic backward, or None).
        ``implementation="auto"`` uses aclnn for what passed (see docs/ascend.md).
    """
    platform = _known_platform()
    if platform is None:
        raise RuntimeError("no Ascend platform known to JAX (no Ascend PJRT plugin): there is "
                           "no device to run the aclnn self-check on")
    return dataclasses.asdict(KERNEL.self_check(platform, rerun=rerun))


def soc_name() -> str | None:
    """The chip's name as CANN's ``aclrtGetSocName`` gives it (e.g. ``"Ascend910B2"``), or None
    when the handlers are not built, CANN does not load or cannot tell."""
    return (_MODULE.soc_name() or None) if _MODULE is not None else None


def cann_version() -> str | None:
    """CANN's version as ``aclsysGetCANNVersion`` gives it, or None when it cannot tell."""
    return (_MODULE.cann_version() or None) if _MODULE is not None else None


def workspace_paths() -> dict | None:
    """How many calls took their workspace from XLA's scratch allocator, from the per-stream
    cache or needed none, and the cache's buffers (``ffi/ascend/workspace.h``); None without
    the handlers."""
    return _MODULE.workspace_paths() if _MODULE is not None else None


# --- lowering registration once JAX knows the plugin's platform ---------------------------

def lowering_platform_names() -> tuple[str, ...]:
    """The spellings of the Ascend platform JAX may lower for (backend name first)."""
    return (ASCEND_PLATFORM.lower(), ASCEND_PLATFORM)


def _known(name: str) -> bool:
    from jax._src import xla_bridge

    try:
        return bool(xla_bridge.is_known_platform(name))
    except Exception:  # noqa: BLE001 - a JAX without the query: treat as unknown
        return False


def on_platform_known(register: Callable[[str], None]) -> None:
    """Call ``register(name)`` once for each Ascend platform name JAX knows, now or later.

    Later means: when JAX discovers PJRT plugins (before its first computation), through
    ``xla_bridge.register_plugin_callbacks``. Without an Ascend plugin nothing is called.
    """
    done: set[str] = set()

    def attempt(**_):
        for name in lowering_platform_names():
            if name not in done and _known(name):
                done.add(name)
                register(name)

    attempt()
    try:
        from jax._src import xla_bridge

        xla_bridge.register_plugin_callbacks(attempt)
    except Exception:  # noqa: BLE001 - an older/newer JAX without the hook: import-time only
        pass

