"""Argument checks run at trace time: ValueError for shapes and values, TypeError for types."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._enums import Interpolation, Padding

IMPLEMENTATIONS = ("auto", "reference", "native")
_LAYOUTS = {4: ("NCHW", "NHWC"), 5: ("NCDHW", "NDHWC")}
_FLOATING = ("float16", "bfloat16", "float32", "float64")


def _parse_enum(value: Any, enum_type: type, argument: str):
    names = ", ".join(repr(member.name.lower()) for member in enum_type)
    codes = ", ".join(str(int(member)) for member in enum_type)
    if isinstance(value, str):
        try:
            return enum_type[value.upper()]
        except KeyError:
            raise ValueError(
                f"{argument}={value!r} is not supported; expected one of {names} "
                f"(or the integer codes {codes})"
            ) from None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"{argument} must be a string ({names}) or an integer code ({codes}), "
            f"got {type(value).__name__} {value!r}"
        )
    try:
        return enum_type(int(value))
    except ValueError:
        raise ValueError(
            f"{argument}={int(value)} is not a valid code; expected one of {codes} ({names})"
        ) from None


def parse_interpolation(mode: Any) -> Interpolation:
    """'bilinear' | 'nearest' | 'bicubic' or the aclnn codes 0 | 1 | 2."""
    return _parse_enum(mode, Interpolation, "mode")


def parse_padding(padding_mode: Any, k: int) -> tuple[Padding, ...]:
    """One mode for every spatial axis, or a tuple of k (x, y[, z]); returns k modes, x first.

    A mode is 'zeros' | 'border' | 'reflection' | 'constant' | 'wrap' or its code 0 .. 4. A
    tuple holds at most one of 'zeros' and 'constant' (both read a fill value, which is one).
    """
    if not isinstance(padding_mode, (tuple, list)):
        return (_parse_enum(padding_mode, Padding, "padding_mode"),) * k
    if len(padding_mode) != k:
        raise ValueError(
            f"padding_mode={tuple(padding_mode)!r} has {len(padding_mode)} entries; a tuple needs "
            f"one per spatial axis of the grid ({k}: {'(x, y)' if k == 2 else '(x, y, z)'})"
        )
    modes = tuple(_parse_enum(m, Padding, f"padding_mode[{i}]")
                  for i, m in enumerate(padding_mode))
    if Padding.ZEROS in modes and Padding.CONSTANT in modes:
        raise ValueError(
            f"padding_mode={tuple(padding_mode)!r} mixes 'zeros' and 'constant'; both read the "
            "fill value (0 for 'zeros'), so use 'constant' on every such axis"
        )
    return modes


def reads_fill(padding: tuple[int, ...]) -> bool:
    """Whether a tap outside the input reads the fill value along some axis ('zeros' or
    'constant')."""
    return any(p in (Padding.ZEROS, Padding.CONSTANT) for p in padding)


def check_fill_value(fill_value: Any, padding: tuple[int, ...], input: Any,
                     channels_last: bool) -> Any:
    """``fill_value`` as an array of the input's dtype, shape () or (C,); None where no axis
    is 'constant' and none was given (a scalar 0 where one is and none was given)."""
    import jax.numpy as jnp

    constant = Padding.CONSTANT in padding
    if fill_value is None:
        return jnp.zeros((), input.dtype) if constant else None
    if not constant:
        raise ValueError(
            f"fill_value is given, but padding_mode {tuple(p.name.lower() for p in padding)} has "
            "no 'constant' axis; use padding_mode='constant' (or a tuple with 'constant')"
        )
    if isinstance(fill_value, (str, bytes)) or not (
        hasattr(fill_value, "dtype") or isinstance(fill_value, (int, float, np.number))
    ) or isinstance(fill_value, (bool, np.bool_)):
        raise TypeError(
            f"fill_value must be a real number or an array of shape () or (C,), got "
            f"{type(fill_value).__name__} {fill_value!r}"
        )
    dtype = np.dtype(fill_value.dtype if hasattr(fill_value, "dtype")
                     else np.asarray(fill_value).dtype)
    if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
        raise TypeError(f"fill_value must have a real (integer or floating) dtype, got {dtype}")
    shape = tuple(np.shape(fill_value))
    channels = input.shape[-1] if channels_last else input.shape[1]
    if shape not in ((), (channels,)):
        raise ValueError(
            f"fill_value must be a scalar or have shape (C,) = ({channels},), one value per "
            f"channel of input shape {tuple(input.shape)}; got shape {shape}"
        )
    return jnp.asarray(fill_value).astype(input.dtype)


def check_bool(value: Any, argument: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{argument} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def check_implementation(implementation: Any) -> str:
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(
            f"implementation={implementation!r} is not supported; expected one of "
            + ", ".join(repr(i) for i in IMPLEMENTATIONS)
        )
    return implementation


def check_output_mask(output_mask: Any) -> tuple[bool, ...]:
    """Two booleans (input_grad, grid_grad), or three with fill_grad last."""
    if (
        isinstance(output_mask, (str, bytes))
        or not isinstance(output_mask, Sequence)
        or len(output_mask) not in (2, 3)
        or not all(isinstance(m, (bool, np.bool_)) for m in output_mask)
    ):
        raise ValueError(
            f"output_mask must be two booleans (input_grad, grid_grad) or three "
            f"(input_grad, grid_grad, fill_grad), got {output_mask!r}"
        )
    return tuple(bool(m) for m in output_mask)


def _check_floating(x: Any, argument: str) -> None:
    if np.dtype(x.dtype).name not in _FLOATING:
        raise TypeError(
            f"{argument} must have a floating dtype (float16, bfloat16, float32, float64), "
            f"got {np.dtype(x.dtype).name}"
        )


def parse_layout(layout: Any, rank: int) -> bool:
    """Return whether ``layout`` is channels-last for an input of the given rank."""
    first, last = _LAYOUTS[rank]
    if layout is None or layout == first:
        return False
    if layout == last:
        return True
    raise ValueError(f"layout={layout!r} is not valid for a rank-{rank} input; expected "
                     f"{first!r} (channels first, the default) or {last!r} (channels last)")


# Every array of a call has fewer elements than this with its zero-sized dimensions counted as 1
# (numpy's rule for array sizes), so that no size or index the native kernels form overflows
# int64, even for an empty array; the native handlers check it again.
ELEMENT_LIMIT = 2**62


def is_static(shape) -> bool:
    """Whether every dimension of ``shape`` is known (none symbolic, as jax.export allows)."""
    return all(isinstance(d, (int, np.integer)) for d in shape)


def _check_element_limit(shape: tuple[int, ...], argument: str) -> None:
    if not is_static(shape):
        return  # a symbolic batch (jax.export): the native handlers check the real sizes
    if math.prod(int(d) for d in shape if d > 1) >= ELEMENT_LIMIT:
        raise ValueError(f"{argument} shape {tuple(shape)} is too large: the product of its "
                         f"non-zero dimensions must be below 2**62")


def check_sample_args(input: Any, grid: Any, layout: Any) -> bool:
    """Check input and grid of grid_sample; return whether the layout is channels-last."""
    for x, name in ((input, "input"), (grid, "grid")):
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            raise TypeError(f"{name} must be an array, got {type(x).__name__}")
    if input.ndim not in (4, 5):
        raise ValueError(
            f"input must have rank 4 (N, C, H, W) or 5 (N, C, D, H, W), got shape {input.shape}"
        )
    channels_last = parse_layout(layout, input.ndim)
    k = input.ndim - 2
    for x, name in ((input, "input"), (grid, "grid")):
        if not is_static(x.shape[1:]):
            raise ValueError(
                f"{name} shape {tuple(x.shape)} has a symbolic dimension after the batch: under "
                f"jax.export's shape polymorphism only the batch (the first dimension) may be "
                f"symbolic; export with the other dimensions known"
            )
    if grid.ndim != input.ndim:
        raise ValueError(
            f"grid must have the same rank as input ({input.ndim}), got grid shape {grid.shape} "
            f"for input shape {input.shape}"
        )
    if grid.shape[-1] != k:
        raise ValueError(
            f"grid's last dimension must be {k} for a rank-{input.ndim} input "
            f"({'(x, y)' if k == 2 else '(x, y, z)'}), got grid shape {grid.shape}"
        )
    if grid.shape[0] != input.shape[0]:
        raise ValueError(
            f"input and grid must have the same batch size, got input shape {input.shape} "
            f"and grid shape {grid.shape}"
        )
    spatial = input.shape[1:-1] if channels_last else input.shape[2:]
    if min(spatial) == 0:
        raise ValueError(f"input must have non-zero spatial sizes, got input shape {input.shape}")
    _check_floating(input, "input")
    _check_floating(grid, "grid")
    if np.dtype(input.dtype) != np.dtype(grid.dtype):
        raise TypeError(
            f"input and grid must have the same dtype, got input {np.dtype(input.dtype).name} "
            f"and grid {np.dtype(grid.dtype).name}"
        )
    _check_element_limit(input.shape, "input")
    _check_element_limit(grid.shape, "grid")
    _check_element_limit(output_shape(input.shape, grid.shape, channels_last), "output")
    return channels_last


def output_shape(input_shape, grid_shape, channels_last: bool) -> tuple[int, ...]:
    n, spatial_out = input_shape[0], tuple(grid_shape[1:-1])
    channels = input_shape[-1] if channels_last else input_shape[1]
    return (n,) + spatial_out + (channels,) if channels_last else (n, channels) + spatial_out


def check_grad_output(grad_output: Any, input: Any, grid: Any, channels_last: bool) -> None:
    if not hasattr(grad_output, "shape") or not hasattr(grad_output, "dtype"):
        raise TypeError(f"grad_output must be an array, got {type(grad_output).__name__}")
    expected = output_shape(input.shape, grid.shape, channels_last)
    if tuple(grad_output.shape) != expected:
        raise ValueError(
            f"grad_output must have shape {expected} (the output's shape for input "
            f"{tuple(input.shape)} and grid {tuple(grid.shape)}), got {tuple(grad_output.shape)}"
        )
    if np.dtype(grad_output.dtype) != np.dtype(input.dtype):
        raise TypeError(
            f"grad_output must have the input's dtype {np.dtype(input.dtype).name}, "
            f"got {np.dtype(grad_output.dtype).name}"
        )


def check_affine_args(theta: Any, size: Any) -> tuple[int, ...]:
    """Check affine_grid's theta (N, 2, 3) / (N, 3, 4) against size; return size as a tuple."""
    if not hasattr(theta, "shape") or not hasattr(theta, "dtype"):
        raise TypeError(f"theta must be an array, got {type(theta).__name__}")
    _check_floating(theta, "theta")
    try:
        size = tuple(int(s) for s in size)
    except TypeError:
        raise TypeError(f"size must be a sequence of ints, got {size!r}") from None
    if len(size) not in (4, 5):
        raise ValueError(
            f"size must be (N, C, H, W) or (N, C, D, H, W), got {size} of length {len(size)}"
        )
    k = len(size) - 2
    if min(size) <= 0:
        raise ValueError(f"size must be positive, got {size}")
    expected = (size[0], k, k + 1)
    if tuple(theta.shape) != expected:
        raise ValueError(
            f"theta must have shape {expected} (N, {k}, {k + 1}) for size {size}, "
            f"got {tuple(theta.shape)}"
        )
    return size
