"""The FFI targets' stable contract: their names, versions, and the export checks they need.

A ``jax.export`` artifact names each FFI target it calls and carries that call's operands,
results and attributes. It runs wherever the package registers a target of that name with that
schema, so a released target never changes: its name and schema are version 1 for good, and
every version stays registered. The schema: ffi/common/ffi_contract.h binds the operands,
results and attributes every platform shares; the CUDA backward adds a ``deterministic``
attribute and a uint8 workspace result, the Ascend targets a ``deterministic`` attribute.

Version 2 of the CPU and CUDA targets (``jax_gridsample_{forward,backward}_v2``) takes
``padding`` as an int64 array, one code per grid component (x, y[, z]), where version 1 took
one int64 for every axis: per-axis modes and "wrap" (4) do not fit that. The forward takes a
third operand, the fill value of each channel, and the code 3 ("constant") beside 0, 1, 2 and
4; the backward computes the "zeros" gradients of a "constant" call, and
``jax_gridsample_fill_backward_v2`` (the CPU's) the fill term's. Everything else is version 1's.

Version 3 of the CPU backward (``jax_gridsample_backward_v3``) takes the fill value as a fourth
operand and the code 3, and returns the fill value's gradient as a third result where its
``fill_mask`` attribute asks: a "constant" call's gradients in one call, which reads
``grad_output`` once and leaves XLA no second kernel to run beside the first (the two would
contend for the same threads). The CUDA backward stays at version 2 (XLA computes the fill
term's gradients around it), as do the forwards.
Version 1's and 2's handlers stay registered, unchanged: artifacts exported before version 2 (3)
call them.
The Ascend targets stay at version 1: aclnn takes one of zeros, border and reflection for every
axis, which version 1's attribute holds.

The Ascend handlers no longer read that attribute: CANN picks its deterministic kernel from the
process's setting, never per call (ffi/ascend/determinism.h), so the per-call switch the
attribute once asked for never changed CANN's kernel. The attribute stays in the ``_v1``
schema, and an artifact exported earlier runs what it ran before: the target is unchanged, and
no new version is needed.

Adding a version of a target (a changed operand, result, attribute or meaning), say 2:

1. C++: bind the new schema under a new name ending in ``_v2`` (a new ``Bind...`` in
   ffi_contract.h and a handler for it) and add it to the module's ``registrations()``; keep the
   ``_v1`` handler and its registration as they are.
2. Python: point the lowering at the new name (the constants below) and its attributes
   (``_primitives.forward_attributes`` & co.); keep the old names in :data:`RELEASED_TARGETS`.
3. Artifacts: ``python tests/export_compat/make_artifacts.py v2`` writes those of the new
   version beside the old ones; tests/test_export_compat.py loads every version's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._compat import import_jax_export

if TYPE_CHECKING:
    from jax.export import DisabledSafetyCheck

CONTRACT_VERSION = 3
"""The newest version of the targets the lowerings call: the CPU backward's (the CPU and CUDA
forwards and the CUDA backward are at 2, the Ascend targets at 1)."""

# The targets the lowerings call: CPU and CUDA (one name, registered per platform), Ascend.
FORWARD_TARGET = "jax_gridsample_forward_v2"
CPU_BACKWARD_TARGET = "jax_gridsample_backward_v3"
BACKWARD_TARGET = "jax_gridsample_backward_v2"  # CUDA's; on the CPU, for artifacts
ASCEND_FORWARD_TARGET = "jax_gridsample_ascend_forward_v1"
ASCEND_BACKWARD_TARGET = "jax_gridsample_ascend_backward_v1"

# The gradients of "constant" padding's fill term, version 2 (the CPU only), beside version 2's
# backward: registered for the artifacts that call it, no longer lowered to.
FILL_BACKWARD_TARGET = "jax_gridsample_fill_backward_v2"

# Version 1 of the CPU and CUDA targets (one padding code for every axis): registered for the
# artifacts that call them, no longer lowered to.
FORWARD_TARGET_V1 = "jax_gridsample_forward_v1"
BACKWARD_TARGET_V1 = "jax_gridsample_backward_v1"

ALIASES = {
    # Version 1's names without the version suffix, which artifacts exported before targets
    # carried their version call.
    "jax_gridsample_forward": FORWARD_TARGET_V1,
    "jax_gridsample_backward": BACKWARD_TARGET_V1,
    "jax_gridsample_ascend_forward": ASCEND_FORWARD_TARGET,
    "jax_gridsample_ascend_backward": ASCEND_BACKWARD_TARGET,
}
"""Other names of a target: registered with the same handler, for artifacts that call them."""

RELEASED_TARGETS = (FORWARD_TARGET, CPU_BACKWARD_TARGET, BACKWARD_TARGET, FILL_BACKWARD_TARGET,
                    FORWARD_TARGET_V1, BACKWARD_TARGET_V1, ASCEND_FORWARD_TARGET,
                    ASCEND_BACKWARD_TARGET, *ALIASES)
"""Every target name an artifact exported by any released version may call."""


def export_safety_checks() -> list[DisabledSafetyCheck]:
    """The ``jax.export`` safety checks to disable for this package's FFI targets.

    ``jax.export`` refuses to serialize a custom call whose target has no compatibility
    guarantee. Ours have one: a target's name and attributes never change once released (a
    change ships as a new version beside the old), and every later version of the package
    registers every released target. Pass these as ``disabled_checks`` to ``jax.export.export``.
    The process that loads the artifact must import ``jax_gridsample`` (of this version or a
    later one) before calling it; ``implementation="reference"`` exports no custom call at all.

    Returns
    -------
    list of jax.export.DisabledSafetyCheck
        One ``DisabledSafetyCheck.custom_call`` per released target name (CPU, CUDA, Ascend).

    Examples
    --------
    >>> from jax import export
    >>> images, grid = jnp.ones((2, 3, 16, 16)), jnp.zeros((2, 8, 8, 2))
    >>> exported = export.export(jax.jit(grid_sample), platforms=("cpu", "cuda"),
    ...                          disabled_checks=export_safety_checks())(images, grid)
    >>> exported.platforms
    ('cpu', 'cuda')
    """
    check = import_jax_export().DisabledSafetyCheck
    return [check.custom_call(name) for name in RELEASED_TARGETS]
