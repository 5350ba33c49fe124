"""The public functions grid_sample and grid_sample_backward."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ._enums import Padding
from ._fill import term_params
from ._primitives import grid_sample_backward_op, grid_sample_op
from ._validate import (
    check_bool,
    check_fill_value,
    check_grad_output,
    check_implementation,
    check_output_mask,
    check_sample_args,
    parse_interpolation,
    parse_padding,
    reads_fill,
)


def _params(input, grid, mode, padding_mode, align_corners, implementation, layout,
            deterministic, fill_value) -> tuple[tuple, jax.Array | None, dict]:
    """The primitives' parameters, the fill value (None: no "constant" axis) and the fill
    term's parameters (_fill.py: "constant" is "zeros" plus that term, in every
    implementation; the native CPU and CUDA forwards add it themselves)."""
    channels_last = check_sample_args(input, grid, layout)
    interpolation = parse_interpolation(mode)
    padding = parse_padding(padding_mode, grid.shape[-1])
    fill = check_fill_value(fill_value, padding, input, channels_last)
    align_corners = check_bool(align_corners, "align_corners")
    params = dict(
        interpolation=int(interpolation),
        padding=tuple(int(p) for p in padding),
        align_corners=align_corners,
        channels_last=channels_last,
        implementation=check_implementation(implementation),
        deterministic=check_bool(deterministic, "deterministic"),
    )
    fill_params = term_params(input.shape, **params)
    return tuple(sorted(params.items())), fill, fill_params


def grid_sample(
    input: jax.Array,
    grid: jax.Array,
    *,
    mode: str | int = "bilinear",
    padding_mode: str | int | tuple = "zeros",
    align_corners: bool = False,
    implementation: str = "auto",
    layout: str | None = None,
    deterministic: bool = False,
    fill_value: float | jax.Array | None = None,
) -> jax.Array:
    """Sample ``input`` at the normalized coordinates in ``grid`` (PyTorch's grid_sample).

    Parameters
    ----------
    input : jax.Array
        ``(N, C, H, W)`` or ``(N, C, D, H, W)``; ``(N, H, W, C)`` / ``(N, D, H, W, C)`` with
        ``layout="NHWC"`` / ``"NDHWC"``. float16, bfloat16, float32 or float64.
    grid : jax.Array
        ``(N, Ho, Wo, 2)`` holding ``(x, y)`` or ``(N, Do, Ho, Wo, 3)`` holding ``(x, y, z)``,
        normalized so that -1 and 1 are the input's extreme pixels; same dtype as ``input``.
    mode : str or int
        ``"bilinear"`` (0), ``"nearest"`` (1) or ``"bicubic"`` (2); the integers are aclnn's codes.
        Bicubic on a 5D input is tricubic (the 1D cubic convolution on each axis).
    padding_mode : str, int or tuple
        What a tap outside the input reads: ``"zeros"`` (0) 0, ``"border"`` (1) the nearest
        edge pixel, ``"reflection"`` (2) the pixel mirrored at the edges, ``"constant"`` (3)
        ``fill_value``, ``"wrap"`` (4) the pixel its index modulo the axis size names (a
        periodic image). A tuple gives one mode per spatial axis in the grid's component order,
        ``(x, y)`` or ``(x, y, z)``, e.g. ``("wrap", "border")`` for an equirectangular panorama;
        it holds at most one of ``"zeros"`` and ``"constant"``. 0-2 are aclnn's codes.
    align_corners : bool
        If True, -1 and 1 are the centres of the corner pixels; otherwise their outer edges.
    implementation : str
        ``"auto"`` (the best available on the platform), ``"reference"`` (the jax.numpy
        reference) or ``"native"`` (a native kernel; an error where none exists).
    layout : str, optional
        ``"NCHW"``/``"NCDHW"`` (default) or channels-last ``"NHWC"``/``"NDHWC"`` for both
        ``input`` and the result.
    deterministic : bool
        Make the backward give the same bits on every run where it would not by default: the
        reference's input gradient then sums without a scatter (a scatter-add, which XLA:GPU
        runs with atomics, otherwise), the CUDA kernels reduce in a fixed order instead of with
        atomics, and on Ascend aclnn runs it only where CANN's deterministic kernels were set
        for the process at start-up (``JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1``; without it the
        deterministic reference runs there; see ``docs/ascend.md``). On the CPU every
        implementation is deterministic either way, and the forward is everywhere.
        Gradients of gradients are not covered.
    fill_value : float or jax.Array, optional
        The value a tap outside the input reads along the ``"constant"`` axes: a scalar or one
        value per channel, shape ``(C,)``; cast to ``input``'s dtype, differentiable. Default 0
        (then ``"constant"`` equals ``"zeros"``). A ``ValueError`` without a ``"constant"`` axis.

    Returns
    -------
    jax.Array
        ``(N, C, Ho, Wo)`` or ``(N, C, Do, Ho, Wo)`` (channels last with a channels-last layout),
        in ``input``'s dtype; differentiable with respect to ``input``, ``grid`` and
        ``fill_value``.

    Notes
    -----
    A NaN, infinite or far-out coordinate never reads out of bounds: zeros and constant padding
    sample the fill value, border the nearest edge (NaN: the first pixel), reflection and wrap
    the position of the coordinate -1 for NaN, infinity or a position too large to have a
    fractional part (``2**23`` pixels or more in float32, ``2**52`` in float64); a coordinate
    so replaced has a zero gradient. ``docs/semantics.md`` has the exact rules.

    Empty arrays (``N``, ``C`` or the grid's points 0) give empty outputs and zero gradients;
    each array of a call (input, grid, output) must have fewer than ``2**62`` elements with its
    zero-sized dimensions counted as 1 (a ``ValueError`` otherwise). A host buffer the native
    CPU kernel cannot allocate fails the call with ``RESOURCE_EXHAUSTED``, naming the buffer.

    Examples
    --------
    >>> images = jnp.ones((8, 3, 64, 64))
    >>> grid = affine_grid(jnp.tile(jnp.eye(2, 3), (8, 1, 1)), images.shape)  # identity warp
    >>> grid_sample(images, grid, padding_mode="border").shape
    (8, 3, 64, 64)
    """
    params, fill, fill_params = _params(input, grid, mode, padding_mode, align_corners,
                                        implementation, layout, deterministic, fill_value)
    channels = fill_params["channels"]
    fill = jnp.zeros((channels,), input.dtype) if fill is None else \
        jnp.broadcast_to(fill, (channels,))
    return grid_sample_op(input, grid, fill, params)


def grid_sample_backward(
    grad_output: jax.Array,
    input: jax.Array,
    grid: jax.Array,
    *,
    mode: str | int = "bilinear",
    padding_mode: str | int | tuple = "zeros",
    align_corners: bool = False,
    output_mask: Any = (True, True),
    implementation: str = "auto",
    layout: str | None = None,
    deterministic: bool = False,
    fill_value: float | jax.Array | None = None,
) -> tuple[jax.Array | None, ...]:
    """Gradients of :func:`grid_sample` (aclnnGridSampler2DBackward / 3DBackward in JAX form).

    Parameters
    ----------
    grad_output : jax.Array
        Cotangent of the output, shaped like ``grid_sample(input, grid)``.
    input, grid, mode, padding_mode, align_corners, implementation, layout, deterministic
        As in :func:`grid_sample`.
    output_mask : tuple of two or three bool
        Which of ``(input_grad, grid_grad)`` to compute, or of ``(input_grad, grid_grad,
        fill_grad)``; one not asked for is returned as None and not computed.
    fill_value : float or jax.Array, optional
        As in :func:`grid_sample`.

    Returns
    -------
    tuple
        ``(input_grad, grid_grad)``, shaped like ``input`` and ``grid``, or None where masked off;
        with a three-entry ``output_mask``, also ``fill_grad``, shaped like ``fill_value`` (a
        scalar when it is one or not given): the sum over the batch and the points of
        ``grad_output`` times the weight of the taps that read the fill value (zero without a
        ``"zeros"`` or ``"constant"`` axis).
        The conventions are PyTorch's: the border clamp has derivative 0 at the edges, nearest
        gives a zero grid gradient, bicubic's grid gradient carries only the unnormalize factor.

    Notes
    -----
    NaN, infinite and far-out coordinates are handled as in :func:`grid_sample` (never read out
    of bounds; see ``docs/semantics.md``).

    Examples
    --------
    >>> images, grid = jnp.ones((2, 3, 8, 8)), jnp.zeros((2, 4, 4, 2))
    >>> d_input, d_grid = grid_sample_backward(jnp.ones((2, 3, 4, 4)), images, grid)
    >>> d_input.shape, d_grid.shape
    ((2, 3, 8, 8), (2, 4, 4, 2))
    """
    params, fill, fill_params = _params(input, grid, mode, padding_mode, align_corners,
                                        implementation, layout, deterministic, fill_value)
    check_grad_output(grad_output, input, grid, dict(params)["channels_last"])
    mask = check_output_mask(output_mask)
    want_fill = len(mask) == 3 and mask[2]
    channels = fill_params["channels"]

    def backward(fill, params, mask):
        fill_c = jnp.zeros((channels,), input.dtype) if fill is None else \
            jnp.broadcast_to(fill, (channels,))
        return grid_sample_backward_op(grad_output, input, grid, fill_c, params, mask)

    input_grad, grid_grad, fill_grad = backward(
        fill, params, (mask[0], mask[1], want_fill and fill is not None))
    if want_fill and fill is None and reads_fill(fill_params["padding"]):
        # "zeros" is "constant" with the fill value 0: its gradient from such a call (alone,
        # so that the other gradients stay those of "zeros")
        fill = jnp.zeros((), input.dtype)
        constant = tuple(int(Padding.CONSTANT) if p == Padding.ZEROS else p
                         for p in fill_params["padding"])
        fill_grad = backward(fill, tuple(sorted(dict(params, padding=constant).items())),
                             (False, False, True))[2]
    if len(mask) == 2:
        return input_grad, grid_grad
    if not want_fill:
        return input_grad, grid_grad, None
    if fill_grad is None:  # no tap reads a fill value
        return input_grad, grid_grad, jnp.zeros((), input.dtype)
    if fill.ndim == 0:
        fill_grad = jnp.sum(fill_grad).astype(fill.dtype)
    return input_grad, grid_grad, fill_grad


__all__ = ["grid_sample", "grid_sample_backward"]
