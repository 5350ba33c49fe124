"""Ascend NPUs: the aclnn FFI targets (``_ascend_kernels``) and where they lower.

JAX runs on Ascend through a PJRT plugin. The public one names its platform ``"ASCEND"`` (the
name its custom-call handler is registered under) and registers its backend as ``"ascend"``.
The FFI targets are registered for :data:`ASCEND_PLATFORM` at import: without the plugin the
registration just waits in jaxlib's queue and changes nothing. Lowerings can only be registered
for platforms JAX knows (``mlir.register_lowering`` raises otherwise), and JAX only learns of a
plugin when it discovers plugins, lazily, before the first computation; so
:func:`on_platform_known` registers them once that happened (now, or from the plugin-discovery
callback), for whichever of the two spellings JAX knows.

The compiled module needs no CANN at build or import time: the CANN libraries are dlopen'ed on
the first call (see ``ffi/ascend/aclnn_api.h`` and ``docs/ascend.md``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np

from ._contract import ASCEND_BACKWARD_TARGET as BACKWARD_TARGET
from ._contract import ASCEND_FORWARD_TARGET as FORWARD_TARGET
from ._native import load_and_register

ASCEND_PLATFORM = "ASCEND"
"""The Ascend PJRT plugin's platform name (FFI registration); JAX's backend name is its
lower-case form."""


_MODULE, _STATUS = load_and_register("_ascend_kernels", (FORWARD_TARGET, BACKWARD_TARGET),
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
    """The three things the Ascend path needs, each said separately.

    "available (...)" only when the handlers are built, the CANN libraries load and JAX knows an
    Ascend platform; otherwise what holds and what does not, e.g. "handlers built; CANN
    libraries not found (...); no Ascend platform known to JAX (no Ascend PJRT plugin)".
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
    return f"available ({text})" if found and platform else text


def soc_name() -> str | None:
    """The chip's name as CANN's ``aclrtGetSocName`` gives it (e.g. ``"Ascend910B2"``), or None
    when the handlers are not built, CANN does not load or cannot tell."""
    return (_MODULE.soc_name() or None) if _MODULE is not None else None


# --- FFI attributes and what the aclnn kernels cover -----------------------------------------

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


_DTYPES = ("float32", "float16", "bfloat16", "float64")
_INT32_MAX = 2**31 - 1
_DETERMINISTIC_MAX_CHANNELS = 2048


def aclnn_rejects(backward: bool, k: int, interpolation: int, dtype: str, family: str,
                  plane: int, channels: int, deterministic: bool) -> str | None:
    """Why CANN's aclnn grid sampler would reject (or not honour) a call, or None if it runs it.

    The rules of the aclnnGridSampler2D/3D[Backward] pages and ops-cv's op code (docs/ascend.md
    lists them with their sources); where the two differ, the stricter. An unknown chip gets
    the Atlas training products' rules, the strictest of the chips the pages list.
    """
    if family == "unsupported":
        return "the aclnn grid sampler is not documented for this chip"
    modern = family in ("atlas-a2-a3", "ascend950")
    if dtype not in _DTYPES:
        return f"aclnn takes {', '.join(_DTYPES)}, not {dtype}"
    if dtype == "bfloat16" and not modern:
        return "bfloat16 needs an Atlas A2/A3 or Ascend 950 chip"
    if k == 3 and interpolation == 2:
        return "aclnn has no 3D bicubic"
    if not backward:
        if interpolation == 2 and (dtype == "float64" or not modern):
            return "the 2D bicubic forward runs on AICore only (float16/32, bfloat16 on A2/A3/950)"
        if plane >= _INT32_MAX:
            return "the forward takes H*W (D*H*W) below INT32_MAX"
        return None
    if interpolation == 2:
        return ("the 2D bicubic backward is new in ops-cv (older CANN releases reject it, and "
                "the runtime does not say which release it is)")
    if k == 2 and dtype == "float64" and not modern:
        return "no float64 2D backward on Atlas training products"
    if deterministic and (dtype == "float64" or channels > _DETERMINISTIC_MAX_CHANNELS):
        return "CANN's deterministic backward needs a non-float64 dtype and C <= 2048"
    return None


def supports(backward: bool, avals_in, *, interpolation, channels_last, deterministic=False,
             **_) -> bool:
    """Whether aclnn runs this call on this chip; "auto" lowers the rest to the reference.

    aclnn takes channels-first tensors only; for the rest see :func:`aclnn_rejects`.
    """
    if channels_last:
        return False
    input, grid = avals_in[-2], avals_in[-1]
    return aclnn_rejects(
        backward, len(grid.shape) - 2, int(interpolation), str(np.dtype(input.dtype)),
        chip_family(soc_name()), math.prod(input.shape[2:]), input.shape[1],
        bool(deterministic)) is None


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
