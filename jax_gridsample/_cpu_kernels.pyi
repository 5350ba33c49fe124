"""Native CPU XLA FFI handlers of jax_gridsample (compiled with nanobind)."""

from typing import Any

def registrations() -> dict[str, Any]:
    """Returns {ffi_target_name: PyCapsule of the XLA FFI handler}."""
