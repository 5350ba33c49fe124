"""Every shim over differences between the JAX versions we support (0.6.0 on) lives here.

Each is chosen by the release that made the difference (``JAX_VERSION``, ``JAXLIB_VERSION``),
found in that release's sources, so that a jax that differs in another way fails loudly rather
than taking a fallback. Written the same way for every release, and so not shimmed:
``jnp.meshgrid``, which returns a tuple since jax 0.11.1 (a list before).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax._src.dispatch import apply_primitive
from jax._src.interpreters.mlir import lower_per_platform
from jax._src.interpreters.partial_eval import dce_rules
from jax._src.lib import version as JAXLIB_VERSION
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

JAX_VERSION = jax.__version_info__
"""The installed jax's release, as a tuple of ints (``(0, 12, 0, 1)``)."""

# jax 0.7.2 made use_abstract_mesh public; before, only jax._src.mesh has it.
if JAX_VERSION >= (0, 7, 2):
    from jax.sharding import use_abstract_mesh
else:
    from jax._src.mesh import use_abstract_mesh

# jax 0.6.1 made shard_map public (jax.experimental's warns from jax 0.8.0 on); jax 0.7.1 added
# jax.set_mesh. The tests use both.
if JAX_VERSION >= (0, 6, 1):
    from jax import shard_map
else:
    from jax.experimental.shard_map import shard_map


def set_mesh(mesh):
    """``jax.set_mesh(mesh)`` (jax 0.7.1 on), or a context that does nothing where there is
    none: before it, a mesh of explicit axes had nothing to enter."""
    return jax.set_mesh(mesh) if JAX_VERSION >= (0, 7, 1) else contextlib.nullcontext()


def enable_x64():
    """A context with float64 on: ``jax.enable_x64(True)`` (public from jax 0.8.0), before
    that ``jax.experimental.enable_x64()``."""
    if JAX_VERSION >= (0, 8, 0):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64 as experimental_enable_x64

    return experimental_enable_x64(True)


# jax 0.11.2 moved the concrete mesh's context (jax.set_mesh's device_context) from
# jax._src.config to jax._src.mesh, where "no mesh" is empty_concrete_mesh instead of None.
if JAX_VERSION >= (0, 11, 2):
    from jax._src.mesh import device_context as _DEVICE_CONTEXT
    from jax._src.mesh import empty_concrete_mesh as _NO_CONCRETE_MESH
else:
    from jax._src.config import device_context as _DEVICE_CONTEXT

    _NO_CONCRETE_MESH = None


@contextlib.contextmanager
def outside_mesh():
    """A context without the caller's mesh (``jax.set_mesh``, ``use_abstract_mesh``): for
    programs of one device run while the caller's is being lowered."""
    from jax._src.mesh import empty_abstract_mesh

    previous = _DEVICE_CONTEXT.swap_local(_NO_CONCRETE_MESH)
    try:
        with use_abstract_mesh(empty_abstract_mesh):
            yield
    finally:
        _DEVICE_CONTEXT.set_local(previous)


# The batch dimension vmap gives an operand it does not map over: None in every release
# (jax.interpreters.batching.not_mapped, its name until jax 0.10.2).
NOT_MAPPED = None

# jax 0.7.2: custom_partitioning's Shardy rules take factor kinds such as need_replication.
SHARDING_RULE_FACTOR_KINDS = JAX_VERSION >= (0, 7, 2)

# jax 0.7.0: mlir.register_lowering takes `cacheable` (its lowering cache came with it).
LOWERING_CACHE = JAX_VERSION >= (0, 7, 0)


# jax 0.12.0: a DCE rule takes (used_outputs, live_inputs, eqn); before, (used_outputs, eqn).
DCE_RULES_TAKE_LIVE_INPUTS = JAX_VERSION >= (0, 12, 0)


def register_dce_rule(primitive, rule) -> None:
    """Register ``rule(used_outputs, eqn) -> (used_inputs, new_eqn or None)`` as the primitive's
    DCE rule, in the signature the installed jax calls."""
    if not DCE_RULES_TAKE_LIVE_INPUTS:
        dce_rules[primitive] = rule
        return

    def with_live_inputs(used_outputs, live_inputs, eqn):
        del live_inputs  # which input Refs are read later: our primitives take no Refs
        return rule(used_outputs, eqn)

    dce_rules[primitive] = with_live_inputs


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

        if LOWERING_CACHE:
            mlir.register_lowering(primitive, per_platform, cacheable=False)
        else:
            mlir.register_lowering(primitive, per_platform)
    rules[platform] = rule


def import_jax_export():
    """``jax.export``, imported at first use rather than with the package.

    jax 0.6.0 and 0.6.1's ``jax.export`` imports absl-py, which those releases do not declare
    (jax 0.6.2 no longer imports it): imported with the package, it would make a minimal install
    fail at ``import jax_gridsample``. There, exporting needs absl-py, and this says so.
    """
    try:
        from jax import export
    except ModuleNotFoundError as exc:
        if exc.name != "absl":
            raise
        raise ModuleNotFoundError(
            f"jax {jax.__version__}'s jax.export needs absl-py, which this jax does not "
            "install: pip install absl-py (or jax 0.6.2 or newer)", name="absl") from exc
    return export


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
    "DCE_RULES_TAKE_LIVE_INPUTS",
    "JAXLIB_VERSION",
    "JAX_VERSION",
    "LOWERING_CACHE",
    "NOT_MAPPED",
    "SHARDING_RULE_FACTOR_KINDS",
    "Primitive",
    "ad",
    "apply_primitive",
    "batching",
    "guard_cpu_ffi_results",
    "import_jax_export",
    "mlir",
    "register_dce_rule",
    "register_partitioned_lowering",
    "set_mesh",
    "shard_map",
    "use_abstract_mesh",
]
