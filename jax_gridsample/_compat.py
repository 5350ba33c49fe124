"""Every shim over differences between the JAX versions we support lives here."""

from __future__ import annotations

import inspect

from jax._src.dispatch import apply_primitive
from jax._src.interpreters.partial_eval import dce_rules
from jax.experimental.custom_partitioning import custom_partitioning
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

try:  # jax >= 0.6.1
    from jax.sharding import use_abstract_mesh
except ImportError:  # pragma: no cover - jax 0.6.0
    from jax._src.mesh import use_abstract_mesh

# The batch dimension of an operand that vmap does not map over (None in recent jax).
NOT_MAPPED = getattr(batching, "not_mapped", None)

# Whether custom_partitioning's Shardy rules take factor kinds such as need_replication
# (jax >= 0.6.1).
SHARDING_RULE_FACTOR_KINDS = "need_replication_factors" in inspect.signature(
    custom_partitioning.def_partition).parameters


def register_partitioned_lowering(primitive, rule, platform=None) -> None:
    """Register a lowering that wraps ``custom_partitioning``: it needs the device assignment
    while lowering, so it must not go through jax's per-primitive lowering cache."""
    from jax._src import dispatch

    dispatch.prim_requires_devices_during_lowering.add(primitive)
    try:
        mlir.register_lowering(primitive, rule, platform=platform, cacheable=False)
    except TypeError:  # jax without the `cacheable` flag: it had no lowering cache either
        mlir.register_lowering(primitive, rule, platform=platform)


__all__ = [
    "NOT_MAPPED",
    "SHARDING_RULE_FACTOR_KINDS",
    "Primitive",
    "ad",
    "apply_primitive",
    "batching",
    "dce_rules",
    "mlir",
    "register_partitioned_lowering",
    "use_abstract_mesh",
]
