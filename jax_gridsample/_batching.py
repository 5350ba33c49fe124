"""Batching rules: a vmapped axis is folded into an existing axis of the op, never looped over.

- input and grid both batched: the vmapped axis folds into N.
- input batched, grid shared: it folds into C (every channel sees the same grid).
- grid batched, input shared: it folds into the output's first spatial axis.
The forward's fill value (one per channel) folds with the input into C; where the fold does not
go into C, a batched fill value cannot ride along (the kernels take one per channel), so that
call samples "constant" as "zeros" and adds the fill term (``_fill.py``) per batch itself.
The backward uses the same folds where they are exact: folding into C sums the grid gradient over
the folded channels, so it is used only when the grid gradient is not requested (and folding into
the spatial extent likewise only without the input gradient); otherwise the shared operands are
broadcast and the axis folds into N. When only one of input and grid is mapped, the two gradients
are bound as two calls, each with its own fold, so that a program needing only one of them
(DCE under jit) copies nothing. Under "constant", a batched fill value or its gradient asked for
(a sum over the points, per batch) leaves the fill term's gradients to jax.numpy, vmapped.
Where the fill term is added apart from the kernel, half types compute in float32 and round once,
as a call without vmap does.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ._compat import NOT_MAPPED as _NOT_MAPPED
from ._enums import Padding
from ._fill import add_fill, fill_vjp, term_params
from ._primitives import grid_sample_backward_p, grid_sample_p, zeros_for_constant
from ._reference import compute_dtype
from ._validate import output_shape


def _size(args, dims) -> int:
    return next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not _NOT_MAPPED)


def _front(x, dim, size):
    """Move the vmapped axis to the front, broadcasting an unbatched operand."""
    if dim is _NOT_MAPPED:
        return jnp.broadcast_to(x, (size,) + x.shape)
    return jnp.moveaxis(x, dim, 0)


def _merge(x, at: int):
    """x has the vmapped axis at ``at``; merge it with the axis after it."""
    shape = x.shape
    return x.reshape(shape[:at] + (shape[at] * shape[at + 1],) + shape[at + 2:])


def _fold(x, dim, size, at: int):
    """Move the vmapped axis of x to just before axis ``at`` of the unbatched shape, then merge."""
    return _merge(jnp.moveaxis(_front(x, dim, size), 0, at), at)


def _split(x, at: int, size: int):
    """Inverse of _merge: split axis ``at`` into (size, rest); the vmapped axis is ``at``."""
    shape = x.shape
    return x.reshape(shape[:at] + (size, shape[at] // size) + shape[at + 1:])


def _unbatched_shape(x, dim) -> tuple[int, ...]:
    return x.shape if dim is _NOT_MAPPED else x.shape[:dim] + x.shape[dim + 1:]


def _channel_axis(rank: int, channels_last: bool) -> int:
    return rank - 1 if channels_last else 1


def _output_spatial_axis(channels_last: bool) -> int:
    """The first spatial axis of the output (and of grad_output)."""
    return 1 if channels_last else 2


def forward_batcher(args, dims, *, channels_last, padding, **params):
    fill, input, grid = args
    fill_dim, input_dim, grid_dim = dims
    size = _size(args, dims)
    rank = input.ndim - (input_dim is not _NOT_MAPPED)

    def bind(f, x, g, padding=padding):
        return grid_sample_p.bind(f, x, g, channels_last=channels_last, padding=padding, **params)

    if size == 0:
        shape = output_shape(_unbatched_shape(input, input_dim), _unbatched_shape(grid, grid_dim),
                             channels_last)
        return jnp.zeros((0,) + shape, input.dtype), 0

    if input_dim is not _NOT_MAPPED and grid_dim is _NOT_MAPPED:  # shared grid: fold into C
        at = _channel_axis(rank, channels_last)
        out = bind(_fold(fill, fill_dim, size, 0), _fold(input, input_dim, size, at), grid)
        return _split(out, at, size), at
    if fill_dim is not _NOT_MAPPED:
        return _with_batched_fill(args, dims, size, channels_last, padding, **params)
    if input_dim is not _NOT_MAPPED:  # both batched: fold into N
        out = bind(fill, _fold(input, input_dim, size, 0), _fold(grid, grid_dim, size, 0))
        return _split(out, 0, size), 0
    at = _output_spatial_axis(channels_last)  # shared input: fold into the output's extent
    out = bind(fill, input, _fold(grid, grid_dim, size, 1))
    return _split(out, at, size), at


def _with_batched_fill(args, dims, size, channels_last, padding, *, interpolation, align_corners,
                       **params):
    """A batched fill value where the fold does not go into C: "zeros" batched as above, plus the
    fill term of each batch."""
    fill, input, grid = args
    fill_dim, input_dim, grid_dim = dims
    wide = compute_dtype(input.dtype)
    if Padding.CONSTANT in padding and wide != input.dtype:
        # a half type: its float32 computation on the same values, rounded once, after the fill
        # term (docs/semantics.md, "Types"), as without vmap
        out, at = _with_batched_fill(tuple(a.astype(wide) for a in args), dims, size,
                                     channels_last, padding, interpolation=interpolation,
                                     align_corners=align_corners, **params)
        return out.astype(input.dtype), at
    zeros = zeros_for_constant(padding)
    unbatched_fill = jnp.zeros(fill.shape[-1:], fill.dtype)
    kw = dict(channels_last=channels_last, padding=zeros, interpolation=interpolation,
              align_corners=align_corners, **params)
    if input_dim is _NOT_MAPPED and grid_dim is _NOT_MAPPED:  # only the fill value is batched
        out, at = grid_sample_p.bind(unbatched_fill, input, grid, **kw), _NOT_MAPPED
    else:
        out, at = forward_batcher((unbatched_fill, input, grid),
                                  (_NOT_MAPPED, input_dim, grid_dim), **kw)
    if Padding.CONSTANT not in padding:
        return _front(out, at, size), 0
    x_shape = _unbatched_shape(input, input_dim)
    term = functools.partial(add_fill, **term_params(
        x_shape, channels_last=channels_last, interpolation=interpolation, padding=padding,
        align_corners=align_corners))
    out = jax.vmap(term)(_front(out, at, size), _front(fill, fill_dim, size),
                         _front(grid, grid_dim, size))
    return out, 0


def backward_batcher(args, dims, *, channels_last, output_mask, padding, **params):
    fill, grad_output, input, grid = args
    fill_dim, gout_dim, input_dim, grid_dim = dims
    size = _size(args, dims)
    rank = input.ndim - (input_dim is not _NOT_MAPPED)
    kw = dict(channels_last=channels_last, padding=padding, **params)

    def bind(f, go, x, g):
        return grid_sample_backward_p.bind(f, go, x, g, output_mask=output_mask, **kw)

    if size == 0:
        return [jnp.zeros((0,) + _unbatched_shape(x, d), x.dtype)
                for x, d, wanted in ((input, input_dim, output_mask[0]),
                                     (grid, grid_dim, output_mask[1]),
                                     (fill, fill_dim, output_mask[2])) if wanted], \
            [0] * sum(output_mask)

    if Padding.CONSTANT in padding and (fill_dim is not _NOT_MAPPED or output_mask[2]):
        return _fill_gradients_apart(args, dims, size, output_mask=output_mask, **kw)

    if output_mask[:2] == (True, True) and (input_dim is _NOT_MAPPED) != (grid_dim is _NOT_MAPPED):
        # One of input and grid is shared: each gradient has its own copy-free fold, so bind
        # them separately; under jit, DCE then drops whichever is not used.
        input_grad, input_at = backward_batcher(args, dims, output_mask=(True, False, False), **kw)
        grid_grad, grid_at = backward_batcher(args, dims, output_mask=(False, True, False), **kw)
        return input_grad + grid_grad, input_at + grid_at

    def unfold(outputs, input_at, grid_at):
        axes = [input_at] * output_mask[0] + [grid_at] * output_mask[1]
        return [_split(o, at, size) for o, at in zip(outputs, axes, strict=True)], axes

    # The fill value is not batched here (nor its gradient asked for): one per channel.
    if grid_dim is _NOT_MAPPED and not output_mask[1]:  # shared grid: fold into C
        at = _channel_axis(rank, channels_last)
        outputs = bind(_fold(fill, fill_dim, size, 0), _fold(grad_output, gout_dim, size, at),
                       _fold(input, input_dim, size, at), grid)
        return unfold(outputs, at, None)
    if input_dim is _NOT_MAPPED and not output_mask[0]:  # shared input: fold into the extent
        at = _output_spatial_axis(channels_last)
        outputs = bind(fill, _fold(grad_output, gout_dim, size, at), input,
                       _fold(grid, grid_dim, size, 1))
        return unfold(outputs, None, 1)
    outputs = bind(fill, *(_fold(a, d, size, 0) for a, d in zip(args[1:], dims[1:], strict=True)))
    return unfold(outputs, 0, 0)


def _fill_gradients_apart(args, dims, size, *, output_mask, padding, **params):
    """A batched fill value, or its gradient asked for, under "constant": the fill term's
    gradients are per batch (the folds above would mix the batches' fill values, or sum its
    gradient over them), so the "zeros" gradients are batched as above and the fill term's
    computed per batch in jax.numpy (vmapped, no loop), as the lowering of a kernel without the
    fill value does."""
    fill, grad_output, input, grid = args
    fill_dim, gout_dim, input_dim, grid_dim = dims
    wide = compute_dtype(grid.dtype)
    if output_mask[1] and wide != grid.dtype:
        # a half type: the grid gradient rounded once, after the fill term's part, as without
        # vmap (each gradient is the float32 computation on the same values, rounded to the
        # dtype that input, grid and fill value share)
        outputs, axes = _fill_gradients_apart(tuple(a.astype(wide) for a in args), dims, size,
                                              output_mask=output_mask, padding=padding, **params)
        return [o.astype(grid.dtype) for o in outputs], axes
    zeros_mask = (*output_mask[:2], False)
    grads, axes = [], []
    if any(zeros_mask):
        zeros_args = (jnp.zeros(fill.shape[-1:], fill.dtype), grad_output, input, grid)
        zeros_dims = (_NOT_MAPPED, gout_dim, input_dim, grid_dim)
        zeros_params = dict(output_mask=zeros_mask, padding=zeros_for_constant(padding), **params)
        if all(d is _NOT_MAPPED for d in zeros_dims):  # only the fill value is batched
            grads = grid_sample_backward_p.bind(*zeros_args, **zeros_params)
            axes = [_NOT_MAPPED] * len(grads)
        else:
            grads, axes = backward_batcher(zeros_args, zeros_dims, **zeros_params)
    grads = [_front(g, at, size) for g, at in zip(grads, axes, strict=True)]
    input_grad = grads.pop(0) if output_mask[0] else None
    grid_grad = grads.pop(0) if output_mask[1] else None
    fill_grad = None
    if output_mask[1] or output_mask[2]:  # the fill term's gradients
        x_shape = _unbatched_shape(input, input_dim)
        term = functools.partial(fill_vjp, **term_params(x_shape, padding=padding, **params))
        grid_part, fill_grad = jax.vmap(term)(*(_front(a, d, size) for a, d in (
            (grad_output, gout_dim), (fill, fill_dim), (grid, grid_dim))))
        if grid_grad is not None:
            grid_grad = (grid_grad + grid_part).astype(grid_grad.dtype)
    outputs = [g for g, wanted in zip((input_grad, grid_grad, fill_grad), output_mask,
                                      strict=True) if wanted]
    return outputs, [0] * len(outputs)
