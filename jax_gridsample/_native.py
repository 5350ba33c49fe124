"""Loads the compiled native kernels and registers their XLA FFI targets.

Importing this module never fails and never prints: when the compiled module is missing or its
targets cannot be registered, the reason is recorded and :func:`native_status` reports it, and
the primitives fall back to the jnp reference.
"""

from __future__ import annotations

import jax

FORWARD_TARGET = "jax_gridsample_forward"
BACKWARD_TARGET = "jax_gridsample_backward"
_FFI_API_VERSION = 1


def _register_cpu() -> str:
    """Import ``_cpu_kernels`` and register its targets; return "available" or the reason not."""
    try:
        from . import _cpu_kernels
    except ImportError as exc:  # not built (e.g. a source checkout without a compiled module)
        return f"the compiled module jax_gridsample._cpu_kernels could not be imported: {exc}"
    try:
        registrations = _cpu_kernels.registrations()
        missing = {FORWARD_TARGET, BACKWARD_TARGET} - set(registrations)
        if missing:
            return f"jax_gridsample._cpu_kernels does not provide {sorted(missing)}"
        for name, capsule in registrations.items():
            jax.ffi.register_ffi_target(name, capsule, platform="cpu",
                                        api_version=_FFI_API_VERSION)
    except Exception as exc:  # noqa: BLE001 - any failure means: fall back to the reference
        return f"registering the CPU FFI targets failed: {type(exc).__name__}: {exc}"
    return "available"


# Computed once at import; read-only afterwards.
_STATUS: dict[str, str] = {"cpu": _register_cpu()}


def cpu_available() -> bool:
    """Whether the native CPU kernels are loaded and registered."""
    return _STATUS["cpu"] == "available"


def native_status() -> dict[str, str]:
    """Platform -> "available", or the reason its native kernel is not available."""
    status = dict(_STATUS)
    # Ascend (aclnn; owned by _ascend.py): keyed by JAX's backend name, "ascend".
    from . import _ascend

    status[_ascend.ASCEND_PLATFORM.lower()] = _ascend.status()
    return status
