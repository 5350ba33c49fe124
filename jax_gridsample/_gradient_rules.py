"""The backward primitive's DCE and jvp rules (for any primitive with an ``output_mask``)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax

from ._compat import ad


def output_mask_dce(used_outputs, eqn):
    """DCE by ``output_mask``: drop the outputs nobody uses, so only the needed gradients are
    computed (the primitive's results are those its ``output_mask`` asks for, in order)."""
    if not any(used_outputs):
        return [False] * len(eqn.invars), None
    used = iter(used_outputs)
    mask = tuple(bool(wanted and next(used)) for wanted in eqn.params["output_mask"])
    if mask == eqn.params["output_mask"]:
        return [True] * len(eqn.invars), eqn
    new_eqn = eqn.replace(
        params=dict(eqn.params, output_mask=mask),
        outvars=[v for v, u in zip(eqn.outvars, used_outputs, strict=True) if u],
    )
    return [True] * len(eqn.invars), new_eqn


def jvp_of_reference(primitive, reference: Callable):
    """A jvp rule for gradients of gradients: the values from the primitive itself (the native
    kernel where there is one), the tangents from differentiating ``reference``, its explicit
    jax.numpy version (whose weights are polynomials of the coordinates between the kinks)."""
    def rule(primals, tangents, **params):
        outputs = primitive.bind(*primals, **params)
        tangents = [ad.instantiate_zeros(t) for t in tangents]
        _, output_tangents = jax.jvp(functools.partial(reference, **params), tuple(primals),
                                     tuple(tangents))
        return outputs, output_tangents

    return rule
