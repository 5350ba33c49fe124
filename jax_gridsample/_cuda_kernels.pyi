"""Native CUDA XLA FFI handlers of jax_gridsample (compiled with nanobind and nvcc)."""

from typing import Any

def registrations() -> dict[str, Any]:
    """Returns {ffi_target_name: PyCapsule of the XLA FFI handler}."""

def backward_workspace_bytes(k: int, n: int, c: int, plane: int, points: int,
                             interpolation: int, storage_bytes: int, input_mask: bool,
                             deterministic: bool) -> int:
    """Bytes of the uint8 workspace result the backward target needs for one call."""

def device_count() -> int:
    """Number of CUDA devices the CUDA runtime sees (0 without a driver or device)."""

def cuda_runtime_version() -> int:
    """CUDA runtime version the module was built with (e.g. 13000)."""
