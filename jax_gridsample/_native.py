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


# XLA's platform name for NVIDIA GPUs (targets are registered under it; JAX lowers for "cuda").
CUDA_PLATFORM = "CUDA"


def _register_cuda() -> tuple[object | None, str]:
    """Import ``_cuda_kernels`` and register its targets for the CUDA platform.

    Registration needs no GPU: without a CUDA backend JAX only records it. Returns the module
    (None when unavailable) and "registered" or the reason it is not.
    """
    try:
        from . import _cuda_kernels
    except ImportError as exc:  # built without nvcc, or a source checkout
        return None, ("the compiled module jax_gridsample._cuda_kernels could not be imported: "
                      f"{exc}")
    try:
        registrations = _cuda_kernels.registrations()
        missing = {FORWARD_TARGET, BACKWARD_TARGET} - set(registrations)
        if missing:
            return None, f"jax_gridsample._cuda_kernels does not provide {sorted(missing)}"
        for name, capsule in registrations.items():
            jax.ffi.register_ffi_target(name, capsule, platform=CUDA_PLATFORM,
                                        api_version=_FFI_API_VERSION)
    except Exception as exc:  # noqa: BLE001 - any failure means: fall back to the reference
        return None, f"registering the CUDA FFI targets failed: {type(exc).__name__}: {exc}"
    return _cuda_kernels, "registered"


# Computed once at import; read-only afterwards.
_STATUS: dict[str, str] = {"cpu": _register_cpu()}
_CUDA_MODULE, _CUDA_STATUS = _register_cuda()


def cpu_available() -> bool:
    """Whether the native CPU kernels are loaded and registered."""
    return _STATUS["cpu"] == "available"


def cuda_built() -> bool:
    """Whether ``_cuda_kernels`` was built (the package was installed with ``nvcc`` present)."""
    return _CUDA_MODULE is not None


def cuda_available() -> bool:
    """Whether the CUDA kernels are loaded and registered (a lowering for "cuda" may use them).

    True without a GPU too: the "cuda" lowering only runs where JAX has a CUDA backend.
    """
    return _CUDA_MODULE is not None


def cuda_status() -> str:
    """ "available", "compiled, no CUDA device", or why the CUDA kernels are not there."""
    if _CUDA_MODULE is None:
        return _CUDA_STATUS
    try:
        devices = _CUDA_MODULE.device_count()
    except Exception as exc:  # noqa: BLE001 - a status string, never an error
        return f"compiled; querying CUDA devices failed: {type(exc).__name__}: {exc}"
    return "available" if devices > 0 else "compiled, no CUDA device"


def native_status() -> dict[str, str]:
    """Platform -> "available", or the reason its native kernel is not available."""
    status = dict(_STATUS)
    status["cuda"] = cuda_status()
    # Ascend (aclnn; owned by _ascend.py): keyed by JAX's backend name, "ascend".
    from . import _ascend

    status[_ascend.ASCEND_PLATFORM.lower()] = _ascend.status()
    return status
