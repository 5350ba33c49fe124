"""XLA FFI handlers calling CANN's aclnn grid sampler (compiled with nanobind; CANN dlopen'ed)."""

from typing import Any

LIBRARIES_ENV_VAR: str
DEFAULT_LIBRARIES: str

def registrations() -> dict[str, Any]:
    """Returns {ffi_target_name: PyCapsule of the XLA FFI handler}."""

def library_status() -> str:
    """Whether the CANN libraries were loaded yet, and from where."""

def load_libraries() -> str:
    """Load the CANN libraries now (normally on first use); raises RuntimeError if missing."""
