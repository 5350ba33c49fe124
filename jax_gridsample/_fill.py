"""The fill value of "constant" padding, as a term added to the "zeros" result.

Along a "zeros" or "constant" axis, a tap outside the input reads the fill value (0 for
"zeros"). Sampled with "zeros" instead, it reads 0, so what is missing is the fill value times
the tap's weight; summed over a point's taps, that is ``fill × (1 − W)``, where ``W`` is the sum
of the weights of the taps that read the input. The weights are a product over the axes, and an
axis that reads no fill value (border, reflection, wrap) reads the input with taps whose weights
sum to 1, so ``W`` is the product over the fill axes of each axis's share inside: 1 minus the
weights of its taps outside, exactly 1 for an axis with none. It depends on the grid alone. The
term is 0 where ``1 − W`` is, so that a point that reads no fill value does not depend on it,
even on a NaN or infinite one (``FillTerm`` in ffi/common/grid_sample_math.h).

So every implementation computes "constant" as "zeros" plus this term: the native CPU and CUDA
forwards add it themselves, the reference and aclnn's lowering with ``add_fill`` here, from the
same per-axis taps as the reference. ``fill_vjp`` gives its gradients (with respect to the fill
value and the grid; the input gradient does not see it) wherever the backward kernel does not
(the CPU's computes them itself: ffi/cpu/fill_gradients.h).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._enums import Padding
from ._reference import axis_taps, compute_dtype


def _axis_shares(grid, spatial, interpolation, padding, align_corners):
    """Per fill axis j: (its share of weight inside, its derivative with respect to grid
    component j), each ``(N, *So)`` in the compute dtype: 1 and 0 minus its outside taps'
    weights and their derivatives, in tap order as the kernels do (gs::SubtractOutsideWeight)."""
    k = grid.shape[-1]
    ctype = compute_dtype(grid.dtype)
    shares = {}
    for j in range(k):  # grid component j indexes spatial axis k-1-j (x -> W, y -> H, z -> D)
        if padding[j] not in (Padding.ZEROS, Padding.CONSTANT):
            continue
        size = spatial[k - 1 - j]
        taps = axis_taps(grid[..., j].astype(ctype), size, interpolation, Padding.ZEROS,
                         align_corners)
        inside = (taps.position >= 0) & (taps.position <= size - 1)
        total = jnp.ones(grid.shape[:-1], ctype)
        derivative = jnp.zeros(grid.shape[:-1], ctype)
        for i in range(inside.shape[-1]):
            total = total - jnp.where(inside[..., i], 0, taps.weight[..., i])
            derivative = derivative - jnp.where(inside[..., i], 0, taps.dweight[..., i])
        shares[j] = total, derivative * taps.coord_grad
    return shares


def _product(shares, grid, skip=None):
    """The product of the axes' shares inside, x first (the axis ``skip`` left out); 1 for none."""
    weight = jnp.ones(grid.shape[:-1], compute_dtype(grid.dtype))
    for j, (total, _) in shares.items():
        if j != skip:
            weight = weight * total
    return weight


def inside_weight(grid: jax.Array, spatial: tuple[int, ...], interpolation: int,
                  padding: tuple[int, ...], align_corners: bool) -> jax.Array:
    """``W`` of every output point, ``(N, *So)`` in the compute dtype (1 without a fill axis):
    the product of the fill axes' shares inside, x first."""
    return _product(_axis_shares(grid, spatial, interpolation, padding, align_corners), grid)


def fill_term(fill: jax.Array, grid: jax.Array, spatial: tuple[int, ...], channels: int,
              interpolation: int, padding: tuple[int, ...], align_corners: bool,
              channels_last: bool) -> jax.Array:
    """``fill × (1 − W)``, 0 where ``1 − W`` is, in the output's shape and layout and the
    compute dtype; ``fill`` has shape () or (C,)."""
    outside = 1 - inside_weight(grid, spatial, interpolation, padding, align_corners)
    fill = jnp.broadcast_to(fill.astype(outside.dtype), (channels,))
    if channels_last:
        outside = outside[..., None]
    else:
        fill = fill.reshape(fill.shape + (1,) * (grid.ndim - 2))
        outside = outside[:, None]
    return _term(fill, outside)


def _term(fill, weight):
    """``fill × weight``, 0 where ``weight`` is 0 (gs::FillTerm). The fill value is masked
    rather than the product, so that no derivative multiplies a NaN or infinite one by 0."""
    return jnp.where(weight == 0, 0, fill).astype(weight.dtype) * weight


def add_fill(output: jax.Array, fill: jax.Array, grid: jax.Array, **params) -> jax.Array:
    """The "zeros" ``output`` of a call with its fill term added, in the output's dtype (the
    reference passes its sums unrounded, so that a half type is rounded once)."""
    term = fill_term(fill, grid, **params)
    return (output.astype(term.dtype) + term).astype(output.dtype)


def fill_vjp(grad_output: jax.Array, fill: jax.Array, grid: jax.Array, *, spatial, channels,
             interpolation, padding, align_corners, channels_last):
    """The fill term's gradients ``(grid_grad, fill_grad)`` for ``grad_output``: ``grid_grad``
    in the compute dtype, for the caller to add to the "zeros" grid gradient before rounding.

    Explicit, so that XLA computes ``W`` and its derivatives once per point and makes one pass
    over ``grad_output`` for each of the two sums (``fill_grad[c] = sum grad_output[c] (1 -
    W)``; the grid's ``-(sum_c fill[c] grad_output[c]) dW/dc``), instead of recomputing ``W``
    per element of ``grad_output``.
    """
    ctype = compute_dtype(grid.dtype)
    shares = _axis_shares(grid, spatial, interpolation, padding, align_corners)
    weight = _product(shares, grid)
    gout = grad_output.astype(ctype)
    fill_c = jnp.broadcast_to(fill.astype(ctype), (channels,))
    # Reductions XLA's CPU backend runs fast: over the leading and trailing axes, and over the
    # middle of three (not of four or five: channels first, the points are flattened for it).
    if channels_last:
        fill_grad = jnp.sum(gout * (1 - weight)[..., None], axis=tuple(range(gout.ndim - 1)))
        weighted = jnp.sum(gout * fill_c, axis=-1)  # sum_c fill[c] grad_output[c]
    else:
        fill_grad = jnp.sum(gout * (1 - weight)[:, None], axis=(0, *range(2, gout.ndim)))
        flat = gout.reshape(gout.shape[:2] + (int(np.prod(gout.shape[2:])),))
        weighted = jnp.sum(flat * fill_c[:, None], axis=1).reshape(weight.shape)
    if fill.ndim == 0:
        fill_grad = jnp.sum(fill_grad)
    components = [_term(-weighted, _product(shares, grid, skip=j) * shares[j][1]) if j in shares
                  else jnp.zeros(grid.shape[:-1], ctype) for j in range(grid.shape[-1])]
    grid_grad = jnp.stack(components, -1)
    return grid_grad, fill_grad.astype(fill.dtype)


def term_params(input_shape, *, channels_last: bool, interpolation: int,
                padding: tuple[int, ...], align_corners: bool, **_) -> dict:
    """The fill term's parameters of a call from the input's shape and the call's parameters
    (the primitives' ``params`` will do; the rest of them is ignored)."""
    spatial = input_shape[1:-1] if channels_last else input_shape[2:]
    channels = input_shape[-1] if channels_last else input_shape[1]
    return dict(spatial=tuple(int(s) for s in spatial), channels=int(channels),
                channels_last=channels_last, interpolation=int(interpolation),
                padding=tuple(int(p) for p in padding), align_corners=align_corners)
