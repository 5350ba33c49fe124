"""The gradients of "constant" padding's fill term as a JAX primitive.

``_fill.fill_vjp`` computes them in jax.numpy: that is the lowering on every platform, but for
the CPU with the native kernels, where ``ffi/cpu/grid_sample_fill_backward_cpu.cc`` makes one
pass over ``grad_output`` (XLA needs two). Its operands are ``(fill, grad_output, grid)``, the
fill value of each channel first (shape ``(C,)``), and it returns what ``output_mask`` asks of
(the grid's part, the fill value's), partitioned like the op: the grid's part is a sum over the
channels, the fill value's over the batch and the points. vmap runs the jax.numpy version on
the batched operands (no loop).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from . import _native
from ._compat import NOT_MAPPED as _NOT_MAPPED
from ._compat import (
    Primitive,
    ad,
    apply_primitive,
    batching,
    guard_cpu_ffi_results,
    register_dce_rule,
    register_partitioned_lowering,
)
from ._contract import FILL_BACKWARD_TARGET
from ._fill import fill_vjp
from ._gradient_rules import jvp_of_reference, output_mask_dce
from ._sharding import fill_backward_signature, lower_partitioned

fill_backward_p = Primitive("jax_gridsample_fill_backward")
fill_backward_p.multiple_results = True


def fill_gradients(grad_output: jax.Array, fill: jax.Array, grid: jax.Array, *,
                   output_mask: tuple[bool, bool], implementation: str, **params):
    """``(grid_grad or None, fill_grad or None)`` of the fill term, ``fill_grad`` shaped like
    ``fill`` (() or (C,)); ``params``: ``_fill.term_params``'s."""
    if not any(output_mask):
        return None, None
    fill_c = jnp.broadcast_to(fill, (params["channels"],)).astype(grid.dtype)
    grads = iter(fill_backward_p.bind(fill_c, grad_output, grid, output_mask=tuple(output_mask),
                                      implementation=implementation, **params))
    grid_grad = next(grads) if output_mask[0] else None
    fill_grad = next(grads) if output_mask[1] else None
    if fill_grad is not None and fill.ndim == 0:
        fill_grad = jnp.sum(fill_grad).astype(fill.dtype)
    return grid_grad, fill_grad


def _abstract(fill, grad_output, grid, *, output_mask, **_):
    return [aval for aval, wanted in zip((grid, fill), output_mask, strict=True) if wanted]


def _reference(fill, grad_output, grid, *, output_mask, implementation, **params):
    del implementation
    grads = fill_vjp(grad_output, fill, grid, **params)
    return [g for g, wanted in zip(grads, output_mask, strict=True) if wanted]


def _lowering(native: bool):
    def rule(ctx, *args, output_mask, implementation, channels_last, **params):
        dims = len(ctx.avals_in[-1].shape) - 2
        sig = fill_backward_signature(dims, channels_last, output_mask)
        use_native = native and implementation != "reference" and _native.cpu_available()

        def fn(fill, grad_output, grid):  # on the local shapes
            if not use_native:
                return tuple(_reference(fill, grad_output, grid, output_mask=output_mask,
                                        implementation=implementation,
                                        channels_last=channels_last, **params))
            avals = _abstract(fill, grad_output, grid, output_mask=output_mask)
            results = jax.ffi.ffi_call(FILL_BACKWARD_TARGET, avals)(
                grad_output, grid, fill, interpolation=np.int64(params["interpolation"]),
                padding=np.asarray(params["padding"], np.int64),
                align_corners=bool(params["align_corners"]), channels_last=bool(channels_last),
                spatial=np.asarray(params["spatial"], np.int64), grid_mask=bool(output_mask[0]),
                fill_mask=bool(output_mask[1]))
            return tuple(guard_cpu_ffi_results(results))

        return lower_partitioned(fn, ctx, *args, channels_last=channels_last,
                                 output_mask=output_mask, sig=sig)

    return rule


def _batcher(args, dims, **params):
    """The jax.numpy version on the batched operands (the vmapped axis first)."""
    size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not _NOT_MAPPED)
    moved = [jnp.broadcast_to(a, (size,) + a.shape) if d is _NOT_MAPPED else jnp.moveaxis(a, d, 0)
             for a, d in zip(args, dims, strict=True)]
    outs = jax.vmap(functools.partial(_reference, **params))(*moved)
    return outs, [0] * len(outs)


fill_backward_p.def_abstract_eval(_abstract)
fill_backward_p.def_impl(functools.partial(apply_primitive, fill_backward_p))
batching.primitive_batchers[fill_backward_p] = _batcher
ad.primitive_jvps[fill_backward_p] = jvp_of_reference(fill_backward_p, _reference)
register_dce_rule(fill_backward_p, output_mask_dce)
register_partitioned_lowering(fill_backward_p, _lowering(native=False))
register_partitioned_lowering(fill_backward_p, _lowering(native=True), platform="cpu")
