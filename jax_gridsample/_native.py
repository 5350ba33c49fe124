"""Loads the compiled native kernels and registers their XLA FFI targets.

Importing this module never fails and never prints: when the compiled module is missing or its
targets cannot be registered, the reason is recorded and :func:`native_status` reports it, and
the primitives fall back to the jnp reference.
"""

from __future__ import annotations

import importlib
import math

import jax
import numpy as np

from ._contract import (
    ALIASES,
    BACKWARD_TARGET,
    BACKWARD_TARGET_V1,
    CPU_BACKWARD_TARGET,
    FILL_BACKWARD_TARGET,
    FORWARD_TARGET,
    FORWARD_TARGET_V1,
)
from ._validate import is_static

_FFI_API_VERSION = 1


def load_and_register(module: str, targets: tuple[str, ...], platforms: str | tuple[str, ...]):
    """Import ``jax_gridsample.<module>`` and register its FFI targets for each of
    ``platforms``, each also under its other names (``_contract.ALIASES``).

    Returns ``(module, "available", refused)``, or ``(None, reason, refused)`` when it is
    missing or incomplete or every platform refused; ``refused`` maps a platform to the error
    its registration raised (a PJRT plugin already loaded whose handler refused ours).
    Registering needs no device: without one for a platform, jaxlib queues the registration
    until a plugin for it registers its handler.
    """
    platforms = (platforms,) if isinstance(platforms, str) else tuple(platforms)
    try:
        compiled = importlib.import_module(f"{__package__}.{module}")
    except ImportError as exc:  # not built (no GPU or nvcc at install, or a source checkout)
        return None, (f"the compiled module jax_gridsample.{module} could not be imported: "
                      f"{exc}"), {}
    refused = {}
    try:
        registrations = compiled.registrations()
        missing = set(targets) - set(registrations)
        if missing:
            return None, f"jax_gridsample.{module} does not provide {sorted(missing)}", {}
    except Exception as exc:  # noqa: BLE001 - any failure means: fall back to the reference
        return None, f"jax_gridsample.{module} failed: {type(exc).__name__}: {exc}", {}
    for platform in platforms:
        try:
            for name, capsule in registrations.items():
                for alias in (name, *(a for a, target in ALIASES.items() if target == name)):
                    jax.ffi.register_ffi_target(alias, capsule, platform=platform,
                                                api_version=_FFI_API_VERSION)
        except Exception as exc:  # noqa: BLE001 - recorded, reported by native_status()
            refused[platform] = f"{type(exc).__name__}: {exc}"
    if len(refused) == len(platforms):
        why = "; ".join(f"{p}: {e}" for p, e in refused.items())
        return None, (f"registering the FFI targets of jax_gridsample.{module} failed "
                      f"({why})"), refused
    return compiled, "available", refused


# XLA's platform name for NVIDIA GPUs (targets are registered under it; JAX lowers for "cuda").
CUDA_PLATFORM = "CUDA"

# Computed once at import; read-only afterwards.
# Every version of the targets (_contract.py): artifacts call the older ones.
_TARGETS = (FORWARD_TARGET, BACKWARD_TARGET, FORWARD_TARGET_V1, BACKWARD_TARGET_V1)
_CPU_MODULE, _CPU_STATUS, _ = load_and_register(
    "_cpu_kernels", (*_TARGETS, CPU_BACKWARD_TARGET, FILL_BACKWARD_TARGET), "cpu")
_CUDA_MODULE, _CUDA_STATUS, _ = load_and_register("_cuda_kernels", _TARGETS, CUDA_PLATFORM)


def cpu_available() -> bool:
    """Whether the native CPU kernels are loaded and registered."""
    return _CPU_MODULE is not None


def cpu_instruction_set() -> str | None:
    """ "avx2", "neon" or "baseline": the instruction set the native float32 CPU kernels use
    on this machine (None without them)."""
    return None if _CPU_MODULE is None else _CPU_MODULE.instruction_set()


def cuda_available() -> bool:
    """Whether the CUDA kernels were built and registered.

    They are built where, at install, ``nvcc`` and an NVIDIA GPU were present, or where
    ``JAX_GRIDSAMPLE_CUDA=ON`` asked for them. True without a GPU too: the "cuda" lowering
    only runs where JAX has a CUDA backend.
    """
    return _CUDA_MODULE is not None


def cuda_backward_workspace_bytes(grad_output, input, grid, *, interpolation, channels_last,
                                  output_mask, deterministic, **_) -> int:
    """Bytes of the workspace result of one CUDA backward call (avals or arrays in)."""
    del grad_output
    if not is_static(input.shape):
        raise ValueError(
            f"input shape {tuple(input.shape)}: the CUDA kernels' backward needs a static batch "
            f"(its workspace's size depends on it, not in proportion); export it with the batch "
            f"known, or with implementation='auto' or 'reference' (the reference on CUDA)")
    spatial = input.shape[1:-1] if channels_last else input.shape[2:]
    channels = input.shape[-1] if channels_last else input.shape[1]
    return _CUDA_MODULE.backward_workspace_bytes(
        k=grid.shape[-1], n=input.shape[0], c=channels, plane=math.prod(spatial),
        points=math.prod(grid.shape[1:-1]), interpolation=int(interpolation),
        storage_bytes=np.dtype(input.dtype).itemsize, input_mask=bool(output_mask[0]),
        deterministic=bool(deterministic))


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
    """Platform -> "available", or the reason its native kernel is not available.

    Returns
    -------
    dict of str to str
        ``"cpu"``, ``"cuda"`` and ``"ascend"``, each ``"available"`` (Ascend's followed by
        what it found, in parentheses) or why not: the compiled module is missing, a
        registration failed, no device, ... Where a platform's kernels are not available,
        ``implementation="auto"`` runs the ``jax.numpy`` reference there and
        ``implementation="native"`` is an error.

    Examples
    --------
    >>> status = native_status()
    >>> sorted(status)
    ['ascend', 'cpu', 'cuda']
    >>> status["cpu"]  # doctest: +SKIP
    'available'
    """
    status = {"cpu": _CPU_STATUS, "cuda": cuda_status()}
    # Ascend (aclnn; owned by _ascend.py): one key for every spelling of the platform.
    from . import _ascend

    status[_ascend.STATUS_KEY] = _ascend.status()
    return status
