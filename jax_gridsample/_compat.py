"""Every shim over differences between the JAX versions we support lives here."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import jax.numpy as jnp
from jax import lax
from jax._src.dispatch import apply_primitive
from jax._src.interpreters.mlir import lower_per_platform
from jax._src.interpreters.partial_eval import dce_rules
from jax._src.lib import version as JAXLIB_VERSION
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


# The lowering rules of each primitive registered through register_partitioned_lowering, by
# platform (None: the default rule). Filled at import, and when JAX learns of a plugin's platform.
_PARTITIONED_RULES: dict[Primitive, dict[str | None, Callable]] = {}


def register_partitioned_lowering(primitive, rule, platform=None) -> None:
    """Register a lowering that wraps ``custom_partitioning`` for ``platform`` (None: all others).

    It needs the device assignment while lowering, so it must not go through jax's
    per-primitive lowering cache. jax lowers an uncacheable primitive with a context whose
    ``avals_out`` is a tuple, which its ``lower_per_platform`` then concatenates to a list when
    the primitive has rules for two or more of the platforms being lowered for (a multi-platform
    ``jax.export``): "TypeError: can only concatenate list (not "tuple") to list" (jax 0.10.2;
    jax 0.6.0 passes a list). So jax is given one rule per primitive, for every platform, and
    that rule runs jax's own ``lower_per_platform`` over this module's per-platform rules with
    ``avals_out`` as a list.
    """
    from jax._src import dispatch

    dispatch.prim_requires_devices_during_lowering.add(primitive)
    rules = _PARTITIONED_RULES.get(primitive)
    if rules is None:
        rules = _PARTITIONED_RULES[primitive] = {}

        def per_platform(ctx, *args, **params):
            specific = {p: r for p, r in rules.items() if p is not None}
            return lower_per_platform(ctx.replace(avals_out=list(ctx.avals_out)),
                                      str(primitive), specific, rules.get(None), frozenset(),
                                      *args, **params)

        try:
            mlir.register_lowering(primitive, per_platform, cacheable=False)
        except TypeError:  # jax without the `cacheable` flag: it had no lowering cache either
            mlir.register_lowering(primitive, per_platform)
    rules[platform] = rule


# jaxlib 0.6.0 to 0.7.1 abort the process ("Could not convert JSON string to proto") compiling
# for the CPU a computation whose root is an FFI call with attributes (ours) and that holds a
# dot XLA emits itself, such as affine_grid's small einsum: the dot emitter reads the root's
# backend_config as the CPU backend's JSON proto, and an FFI call's is an MLIR dictionary.
# Fixed in jaxlib 0.7.2.
CPU_FFI_ROOT_BUG = JAXLIB_VERSION < (0, 7, 2)


def guard_cpu_ffi_results(results):
    """On the jaxlibs with CPU_FFI_ROOT_BUG, each of an FFI call's results passed through an
    identity XLA's CPU simplifier keeps (reduce_precision to the dtype's own exponent and
    mantissa: the same bits, but for bfloat16 NaN payloads, which become the quiet NaN), so
    that the call is never a computation's root. It fuses into a consumer; only as the root
    does it cost a pass over the result."""
    if not CPU_FFI_ROOT_BUG:
        return results

    def guard(x):
        info = jnp.finfo(x.dtype)
        return lax.reduce_precision(x, exponent_bits=info.nexp, mantissa_bits=info.nmant)

    return [guard(x) for x in results]


__all__ = [
    "CPU_FFI_ROOT_BUG",
    "JAXLIB_VERSION",
    "NOT_MAPPED",
    "SHARDING_RULE_FACTOR_KINDS",
    "Primitive",
    "ad",
    "apply_primitive",
    "batching",
    "dce_rules",
    "guard_cpu_ffi_results",
    "mlir",
    "register_partitioned_lowering",
    "use_abstract_mesh",
]
