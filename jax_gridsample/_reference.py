"""The jax.numpy reference: forward and an explicit backward, written for speed and clarity.

It is the implementation on every platform without a native kernel and the oracle the native
kernels are tested against. The per-axis coordinate math follows ``docs/semantics.md`` step by step
(the same steps as ``ffi/common/grid_sample_math.h``). Values are gathered as whole channel vectors
from a channels-last view, one gather for all taps, and coordinate math runs once per output point.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._enums import Interpolation, Padding

_CUBIC_A = -0.75
# Unnormalized coordinates farther than this outside [0, S-1] are replaced (semantics.md step 2).
_GUARD_MARGIN = 8.0


class AxisTaps(NamedTuple):
    """The taps of one spatial axis for every output point; arrays are ``(N, P, T)``."""

    position: jax.Array  # tap positions (floating point, after padding)
    weight: jax.Array  # interpolation weight of each tap
    dweight: jax.Array  # d weight / d (unnormalized coordinate)
    coord_grad: jax.Array  # (N, P): d (unnormalized coordinate) / d (grid value), with padding


def compute_dtype(dtype: jnp.dtype) -> jnp.dtype:
    """float64 stays float64; every other floating type computes in float32."""
    return jnp.dtype(jnp.float64) if jnp.dtype(dtype) == jnp.float64 else jnp.dtype(jnp.float32)


def _no_fraction_from(dtype: jnp.dtype) -> float:
    """From this magnitude on, a value of ``dtype`` (a compute dtype) has no fractional bits."""
    return 2.0**52 if jnp.dtype(dtype) == jnp.float64 else 2.0**23


def _rounded(x: jax.Array, nan_where_x_is: jax.Array) -> jax.Array:
    """``x`` rounded on its own, as the native kernels round it (docs/semantics.md, "Bit for bit").

    Compiled, XLA fuses a multiplication with the addition that uses its result into one fused
    multiply-add, rounded once. A select whose other operand is data keeps them apart; it changes
    nothing, as ``nan_where_x_is`` is NaN wherever ``x`` is.
    """
    return jnp.where(jnp.isnan(x), nan_where_x_is, x)


def _unnormalize(coord: jax.Array, size: int, align_corners: bool) -> tuple[jax.Array, float]:
    if align_corners:
        return (coord + 1) / 2 * (size - 1), (size - 1) / 2
    return (_rounded((coord + 1) * size, coord) - 1) / 2, size / 2


def _guard(
    u: jax.Array, size: int, padding: int, align_corners: bool
) -> tuple[jax.Array, jax.Array]:
    """Replace NaN, infinite and huge coordinates (semantics.md step 2); return (u, derivative)."""
    one, zero = jnp.ones_like(u), jnp.zeros_like(u)
    if padding in (Padding.ZEROS, Padding.CONSTANT):
        keep = jnp.abs(u) <= size + _GUARD_MARGIN
        return jnp.where(keep, u, -_GUARD_MARGIN), jnp.where(keep, one, zero)
    if padding == Padding.BORDER:  # NaN counts as -inf
        keep = (u >= -_GUARD_MARGIN) & (u <= size + _GUARD_MARGIN)
        clamped = jnp.clip(u, -_GUARD_MARGIN, size + _GUARD_MARGIN)
        return jnp.where(jnp.isnan(u), -_GUARD_MARGIN, clamped), jnp.where(keep, one, zero)
    # reflection and wrap: a coordinate without fractional bits counts as c = -1 (so do NaN and
    # infinities)
    keep = jnp.abs(u) < _no_fraction_from(u.dtype)
    return jnp.where(keep, u, 0.0 if align_corners else -0.5), jnp.where(keep, one, zero)


def _clip(u: jax.Array, size: int) -> tuple[jax.Array, jax.Array]:
    """Clamp to [0, S-1]; the derivative is 0 at and beyond either end (PyTorch's convention)."""
    inside = (u > 0) & (u < size - 1)
    return jnp.clip(u, 0, size - 1), inside.astype(u.dtype)


def _reflect(u: jax.Array, size: int, align_corners: bool) -> tuple[jax.Array, jax.Array]:
    """Reflect about the two mirror positions, then clip; return (position, derivative).

    The parity of the flips comes from the exact ``fmod(distance, 2 span)``, not from
    ``floor(distance / span)``: compiled, that division is a multiplication by ``1 / span``,
    which rounds (41 * (1 / 41) < 1), and even a true division can round up just below a
    multiple of ``span``.
    """
    if align_corners:
        if size == 1:
            return jnp.zeros_like(u), jnp.zeros_like(u)
        lo, hi = 0.0, size - 1.0
    else:
        lo, hi = -0.5, size - 0.5
    span = hi - lo
    shifted = u - lo
    sign = jnp.where(shifted < 0, -1.0, 1.0).astype(u.dtype)
    twice = jnp.fmod(jnp.abs(shifted), 2 * span)  # exact
    even = twice < span
    extra = jnp.where(even, twice, twice - span)  # exact: span <= twice < 2 span
    reflected = jnp.where(even, extra + lo, span - extra + lo)
    clipped, dclip = _clip(reflected, size)
    return clipped, jnp.where(even, sign, -sign) * dclip


def _pad(u: jax.Array, size: int, padding: int, align_corners: bool) -> tuple[jax.Array, jax.Array]:
    """Step 3: the padded coordinate and its derivative (wrap wraps the taps, not u)."""
    if padding == Padding.BORDER:
        return _clip(u, size)
    if padding == Padding.REFLECTION:
        return _reflect(u, size, align_corners)
    return u, jnp.ones_like(u)


def _wrap(position: jax.Array, size: int, padding: int) -> jax.Array:
    """A tap's position modulo ``size`` under wrap padding (exact: positions are integers);
    unchanged under the others."""
    return jnp.remainder(position, size) if padding == Padding.WRAP else position


def _cubic_weights(t: jax.Array) -> tuple[list[jax.Array], list[jax.Array]]:
    """Cubic convolution weights (A = -0.75) of the taps at offsets -1..2 and their d/dt."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    def dnear(x):
        return (3 * (a + 2) * x - 2 * (a + 3)) * x

    def dfar(x):
        return (3 * a * x - 10 * a) * x + 8 * a

    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    dweights = [dfar(t + 1), dnear(t), -dnear(1 - t), -dfar(2 - t)]
    return weights, dweights


def axis_taps(
    coord: jax.Array, size: int, interpolation: int, padding: int, align_corners: bool
) -> AxisTaps:
    """Taps, weights and derivatives of one axis, for normalized coordinates ``coord`` (N, P)."""
    u, du_dc = _unnormalize(coord, size, align_corners)
    u, dguard = _guard(u, size, padding, align_corners)
    if interpolation == Interpolation.BICUBIC:
        x0 = jnp.floor(u)
        weights, dweights = _cubic_weights(u - x0)
        positions = [_wrap(_pad(x0 + (k - 1), size, padding, align_corners)[0], size, padding)
                     for k in range(4)]
        coord_grad = du_dc * dguard
    else:
        u, dpad = _pad(u, size, padding, align_corners)
        coord_grad = du_dc * dguard * dpad
        if interpolation == Interpolation.NEAREST:
            positions = [_wrap(jnp.round(u), size, padding)]
            weights, dweights = [jnp.ones_like(u)], [jnp.zeros_like(u)]
            coord_grad = jnp.zeros_like(u)
        else:
            x0 = jnp.floor(u)
            positions = [_wrap(x0, size, padding), _wrap(x0 + 1, size, padding)]
            weights = [x0 + 1 - u, u - x0]
            dweights = [-jnp.ones_like(u), jnp.ones_like(u)]
    return AxisTaps(
        jnp.stack(positions, -1), jnp.stack(weights, -1), jnp.stack(dweights, -1), coord_grad
    )


class Taps(NamedTuple):
    """All taps of every output point, as the tensor product of the axes' taps."""

    index: jax.Array  # (N, P*T) flat spatial index, 0 where the tap is out of range
    valid: jax.Array  # (N, P, T) whether the tap reads the input
    weight: jax.Array  # (N, P, T) product of the axes' weights, 0 where not valid
    axes: tuple[AxisTaps, ...]  # per axis in grid order (x, y[, z])


def _outer(arrays: list[jax.Array], combine) -> jax.Array:
    """Tensor product over the last axis of ``(N, P, T_a)`` arrays, slowest axis first."""
    k = len(arrays)
    result = None
    for a, arr in enumerate(arrays):
        shape = arr.shape[:2] + tuple(arr.shape[2] if b == a else 1 for b in range(k))
        piece = arr.reshape(shape)
        result = piece if result is None else combine(result, piece)
    return result.reshape(result.shape[:2] + (int(np.prod(result.shape[2:])),))


def compute_taps(
    grid: jax.Array,
    spatial: tuple[int, ...],
    interpolation: int,
    padding: tuple[int, ...],
    align_corners: bool,
) -> Taps:
    """Coordinate math for every output point. ``grid`` is (N, P, k) in the compute dtype;
    ``padding`` has one mode per grid component (x, y[, z]), or is one for all of them."""
    k = len(spatial)
    padding = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * k
    # grid component j indexes spatial axis k-1-j (x -> W, y -> H, z -> D).
    axes = tuple(
        axis_taps(grid[..., j], spatial[k - 1 - j], interpolation, padding[j], align_corners)
        for j in range(k)
    )
    slow_to_fast = axes[::-1]  # D, H, W
    strides = np.cumprod((1,) + spatial[:0:-1])[::-1]  # strides of D, H, W in a flat index
    index_dtype = jnp.int32 if int(np.prod(spatial)) < 2**31 else jnp.int64
    valid_axes, index_axes = [], []
    for taps, size, stride in zip(slow_to_fast, spatial, strides, strict=True):
        pos = taps.position
        ok = (pos >= 0) & (pos <= size - 1)
        valid_axes.append(ok)
        index_axes.append(jnp.where(ok, pos, 0).astype(index_dtype) * index_dtype(stride))
    valid = _outer(valid_axes, jnp.logical_and)
    index = jnp.where(valid, _outer(index_axes, jnp.add), 0)
    weight = jnp.where(valid, _outer([t.weight for t in slow_to_fast], jnp.multiply), 0)
    n, p, t = index.shape
    return Taps(index.reshape(n, p * t), valid, weight, axes)


def _channels_last(x: jax.Array, channels_last: bool) -> jax.Array:
    """(N, C, *S) or (N, *S, C) -> (N, prod(S), C)."""
    if not channels_last:
        x = jnp.moveaxis(x, 1, -1)
    return x.reshape(x.shape[0], int(np.prod(x.shape[1:-1])), x.shape[-1])


def _restore_layout(x: jax.Array, spatial: tuple[int, ...], channels_last: bool) -> jax.Array:
    """(N, prod(S), C) -> the requested layout."""
    x = x.reshape((x.shape[0],) + tuple(spatial) + (x.shape[-1],))
    return x if channels_last else jnp.moveaxis(x, -1, 1)


def _spatial_shapes(input_shape, grid_shape, channels_last):
    k = grid_shape[-1]
    spatial = tuple(input_shape[1:-1]) if channels_last else tuple(input_shape[2:])
    return spatial, tuple(grid_shape[1:1 + k])


def _flat_points(grid: jax.Array) -> jax.Array:
    """(N, *So, k) -> (N, P, k)."""
    return grid.reshape(grid.shape[0], int(np.prod(grid.shape[1:-1])), grid.shape[-1])


def _gather(values: jax.Array, index: jax.Array) -> jax.Array:
    """values (N, M, C), index (N, Q) in range -> (N, Q, C): one row gather per batch."""
    return jax.vmap(lambda v, i: v.at[i].get(mode="promise_in_bounds"))(values, index)


def _scatter_add(index: jax.Array, updates: jax.Array, rows: int) -> jax.Array:
    """index (Q,) in [0, rows), updates (Q, C) -> (rows, C): each row the sum of its updates.

    One scatter-add: XLA:GPU adds the updates of a row with atomics, in no fixed order.
    """
    return jnp.zeros((rows, updates.shape[-1]), updates.dtype).at[index].add(
        updates, mode="promise_in_bounds")


def _sums_in_fixed_order(index: jax.Array, updates: jax.Array, rows: int) -> jax.Array:
    """What ``_scatter_add`` computes, with no scatter: the same bits on every run.

    The updates are sorted by (row, position), summed by a segmented scan (a fixed tree of
    additions: each element adds its row's earlier elements and restarts at a new row), and each
    row gathers the scan's value at its last element (binary search; 0 for a row none hits).
    """
    if index.shape[0] == 0:
        return jnp.zeros((rows, updates.shape[-1]), updates.dtype)
    position = jnp.arange(index.shape[0], dtype=index.dtype)
    row, order = jax.lax.sort((index, position), num_keys=2)
    starts = jnp.concatenate([jnp.ones(1, bool), row[1:] != row[:-1]])

    def add_within_rows(earlier, later):
        (later_starts, later_sums), (earlier_starts, earlier_sums) = later, earlier
        sums = jnp.where(later_starts[:, None], later_sums, earlier_sums + later_sums)
        return earlier_starts | later_starts, sums

    _, running = jax.lax.associative_scan(add_within_rows, (starts, updates[order]))
    rows_index = jnp.arange(rows, dtype=index.dtype)
    last = jnp.maximum(jnp.searchsorted(row, rows_index, side="right") - 1, 0)
    return jnp.where((row[last] == rows_index)[:, None], running[last], 0)


def grid_sample_reference(
    input: jax.Array,
    grid: jax.Array,
    interpolation: int,
    padding: tuple[int, ...] | int,
    align_corners: bool,
    channels_last: bool = False,
    rounded: bool = True,
) -> jax.Array:
    """The forward: (N, C, *S) x (N, *So, k) -> (N, C, *So) (or channels-last both sides).

    ``padding``: one mode per grid component (x, y[, z]) or one for all, never "constant"
    (which ``_fill`` adds to "zeros"). ``rounded=False`` returns the sums in the compute dtype,
    for a caller that adds the fill term before the one rounding to the input's dtype.
    """
    spatial, out_spatial = _spatial_shapes(input.shape, grid.shape, channels_last)
    n, ctype = input.shape[0], compute_dtype(input.dtype)
    taps = compute_taps(
        _flat_points(grid).astype(ctype),
        spatial, interpolation, padding, align_corners,
    )
    values = _gather(_channels_last(input, channels_last), taps.index)
    p, t = taps.valid.shape[1:]
    values = values.reshape(n, p, t, values.shape[-1]).astype(ctype)
    values = jnp.where(taps.valid[..., None], values, 0)
    out = jnp.sum(values * taps.weight[..., None], axis=2)
    return _restore_layout(out.astype(input.dtype) if rounded else out, out_spatial, channels_last)


def grid_sample_backward_reference(
    grad_output: jax.Array,
    input: jax.Array,
    grid: jax.Array,
    interpolation: int,
    padding: tuple[int, ...] | int,
    align_corners: bool,
    output_mask: tuple[bool, bool],
    channels_last: bool = False,
    deterministic: bool = False,
    rounded: bool = True,
) -> tuple[jax.Array | None, jax.Array | None]:
    """Explicit backward with PyTorch's gradient conventions; returns (grad_input, grad_grid).

    An output whose ``output_mask`` entry is False is returned as None and not computed.
    ``deterministic`` sums grad_input in a fixed order without a scatter (``_sums_in_fixed_order``).
    ``rounded=False`` returns grad_grid in the compute dtype (as ``grid_sample_reference``).
    """
    spatial, _ = _spatial_shapes(input.shape, grid.shape, channels_last)
    n, ctype = input.shape[0], compute_dtype(input.dtype)
    taps = compute_taps(
        _flat_points(grid).astype(ctype),
        spatial, interpolation, padding, align_corners,
    )
    p, t = taps.valid.shape[1:]
    gout = _channels_last(grad_output, channels_last).astype(ctype)  # (N, P, C)
    channels = gout.shape[-1]
    grad_input = grad_grid = None
    if output_mask[0]:
        updates = jnp.where(
            taps.valid[..., None], taps.weight[..., None] * gout[:, :, None, :], 0
        ).reshape(n, p * t, channels)
        sums = _sums_in_fixed_order if deterministic else _scatter_add
        rows = int(np.prod(spatial))
        flat = jax.vmap(lambda i, u: sums(i, u, rows))(taps.index, updates)
        grad_input = _restore_layout(flat.astype(input.dtype), spatial, channels_last)
    if output_mask[1]:
        if interpolation == Interpolation.NEAREST:
            grad_grid = jnp.zeros(grid.shape, grid.dtype)
        else:
            values = _gather(_channels_last(input, channels_last), taps.index)
            values = values.reshape(n, p, t, channels).astype(ctype)
            values = jnp.where(taps.valid[..., None], values, 0)
            # d loss / d (tap weight), summed over channels: (N, P, T)
            dweight = jnp.sum(values * gout[:, :, None, :], axis=-1)
            slow_to_fast = taps.axes[::-1]
            components = []
            for j, axis in enumerate(taps.axes):  # grid order x, y[, z]
                a = len(slow_to_fast) - 1 - j
                factors = [ax.dweight if b == a else ax.weight for b, ax in enumerate(slow_to_fast)]
                dweight_du = _outer(factors, jnp.multiply)
                components.append(jnp.sum(dweight * dweight_du, axis=2) * axis.coord_grad)
            grad_grid = jnp.stack(components, -1).reshape(grid.shape)
            grad_grid = grad_grid.astype(grid.dtype) if rounded else grad_grid
    return grad_input, grad_grid


# --- grids for kernels without the guard (CANN's aclnn on Ascend) -----------------------------

_OUTSIDE = -7.0  # unnormalizes to -3 (S - 1) or -3 S - 1/2: every tap is outside, unless S = 1


def _unnormalize_np(c: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    """``_unnormalize``'s position in numpy (each operation rounded to ``c``'s dtype)."""
    one, two = c.dtype.type(1), c.dtype.type(2)
    if align_corners:
        return (c + one) / two * c.dtype.type(size - 1)
    return ((c + one) * c.dtype.type(size) - one) / two


def _beyond_edge(size: int, align_corners: bool, dtype: jnp.dtype, side: int) -> float:
    """A grid value, exact in ``dtype``, whose position is an integer at or past the last pixel
    (``side`` 1) or at or before the first (``side`` -1), by at least one pixel more than every
    bicubic tap needs: border padding then gives exactly what the guard's -8 or S + 8 gives.

    With ``align_corners=False`` the position ``((c + 1) S - 1) / 2`` is an integer only for an
    odd ``(c + 1) S``, so ``c = ±(1 + m / 2^e)`` with ``2^e`` the power of two in ``S``. Where
    ``dtype`` holds no such value (bfloat16 for S a multiple of 256, float16 of 2048) it is
    ``±5``: every tap still clamps to the edge, but bicubic's weights of ``t = 1/2`` sum to 1
    only up to rounding.
    """
    ctype = np.dtype(compute_dtype(dtype))
    for e in range(64):
        for m in (3, 4, 5):
            value = side * (1 + m * 2.0**-e)
            if float(np.asarray(value, dtype)) != value:
                continue
            u = float(_unnormalize_np(np.asarray(value, ctype), size, align_corners))
            if u == np.floor(u) and (size == 1 or (u <= -2 if side < 0 else u >= size)):
                return value
    return side * 5.0


def grid_for_aclnn(
    grid: jax.Array, spatial: tuple[int, ...], padding: tuple[int, ...], align_corners: bool
) -> tuple[jax.Array, jax.Array]:
    """The grid to send to a kernel without step 2 of docs/semantics.md (CANN's aclnn grid
    sampler) so that it computes what this reference computes; and which values it replaced.

    Every coordinate that the guard replaces (NaN, infinite, huge) becomes a finite, moderate grid
    value (``|c| <= 7``) with the same output and the same input gradient, the same gradient for
    the point's other coordinates too; so does every coordinate of a point that zeros padding
    reads nothing for. Per padding:

    - ``zeros``: the point's coordinates all become -7, outside the image on every axis but one
      of a single pixel with ``align_corners=True``, where every finite value is on the pixel (an
      input of a single pixel on every axis, with ``align_corners=True``, is the one case that no
      grid can honour: a non-finite point reads the pixel there instead of nothing);
    - ``border``: a value past the first pixel (NaN and negative ones) or the last, by an integer
      position (see ``_beyond_edge``);
    - ``reflection``: -1, as the guard has it.

    Their grid gradient is 0 by the guard (derivative 0); the replacements have one of 0 too,
    except bicubic's (which carries only ``du/dc``), so the caller zeros the grid gradient where
    ``replaced``.

    Parameters: ``grid`` (N, *So, k) in the call's dtype; ``spatial`` the input's spatial sizes
    (D, H, W or H, W); ``padding`` one mode per axis, the same on every axis (aclnn takes one).
    Returns ``(grid, replaced)``, ``replaced`` a boolean array of the grid's shape.
    """
    padding = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,)
    if len(set(padding)) != 1 or padding[0] not in (Padding.ZEROS, Padding.BORDER,
                                                    Padding.REFLECTION):
        raise ValueError(f"aclnn takes one of zeros, border and reflection on every axis, not "
                         f"{padding}")
    padding = padding[0]
    k = grid.shape[-1]
    ctype = compute_dtype(grid.dtype)
    coords, replaced = [], []
    for j in range(k):  # grid component j indexes spatial axis k-1-j
        size = spatial[k - 1 - j]
        c = grid[..., j]
        u, _ = _unnormalize(c.astype(ctype), size, align_corners)
        if padding == Padding.ZEROS:
            replaced.append(~(jnp.abs(u) <= size + _GUARD_MARGIN))
            coords.append(c)
        elif padding == Padding.BORDER:
            low, high = (_beyond_edge(size, align_corners, grid.dtype, side) for side in (-1, 1))
            kept = (u >= -_GUARD_MARGIN) & (u <= size + _GUARD_MARGIN)
            replaced.append(~kept)
            coords.append(jnp.where(kept, c, jnp.where(u > 0, high, low)).astype(grid.dtype))
        else:
            kept = jnp.abs(u) < _no_fraction_from(ctype)
            replaced.append(~kept)
            coords.append(jnp.where(kept, c, -1).astype(grid.dtype))
    replaced = jnp.stack(replaced, -1)
    new_grid = jnp.stack(coords, -1)
    if padding == Padding.ZEROS:
        replaced = jnp.broadcast_to(jnp.any(replaced, -1, keepdims=True), grid.shape)
        new_grid = jnp.where(replaced, jnp.asarray(_OUTSIDE, grid.dtype), grid)
    return new_grid, replaced
