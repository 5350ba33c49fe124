"""Every shim over differences between the JAX versions we support lives here."""

from __future__ import annotations

try:  # jax >= 0.4.36
    from jax.extend.core import Primitive
except ImportError:  # pragma: no cover - older jax
    from jax.core import Primitive  # type: ignore[no-redef]

from jax._src.dispatch import apply_primitive
from jax._src.interpreters.partial_eval import dce_rules
from jax.interpreters import ad, batching, mlir

# The batch dimension of an operand that vmap does not map over (None in recent jax).
NOT_MAPPED = getattr(batching, "not_mapped", None)

__all__ = ["NOT_MAPPED", "dce_rules", "Primitive", "ad", "apply_primitive", "batching", "mlir"]
