"""affine_grid: the sampling grid of an affine transform, as torch.nn.functional.affine_grid."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from ._reference import compute_dtype
from ._validate import check_affine_args, check_bool


def _base_coordinates(size: int, align_corners: bool, dtype) -> jax.Array:
    """Normalized pixel-centre (or corner) coordinates of one axis; a size-1 axis gives [0]."""
    if size <= 1:
        return jnp.zeros((1,), dtype)
    steps = jnp.linspace(-1.0, 1.0, size, dtype=dtype)
    return steps if align_corners else steps * ((size - 1) / size)


def affine_grid(theta: jax.Array, size: Sequence[int], *, align_corners: bool = False) -> jax.Array:
    """Sampling grid for a batch of affine transforms, for use with :func:`grid_sample`.

    Parameters
    ----------
    theta : jax.Array
        ``(N, 2, 3)`` for 2D or ``(N, 3, 4)`` for 3D: maps output coordinates ``(x, y[, z], 1)``
        (normalized to [-1, 1]) to input coordinates.
    size : sequence of int
        The output size ``(N, C, H, W)`` or ``(N, C, D, H, W)``.
    align_corners : bool
        As in :func:`grid_sample`; use the same value for both.

    Returns
    -------
    jax.Array
        ``(N, H, W, 2)`` or ``(N, D, H, W, 3)`` in theta's dtype; differentiable in theta.

    Examples
    --------
    >>> theta = jnp.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])  # the identity, (1, 2, 3)
    >>> grid = affine_grid(theta, (1, 3, 4, 5))
    >>> grid.shape
    (1, 4, 5, 2)
    >>> print(grid[0, 0, 0])  # (x, y) of the top-left pixel's centre
    [-0.8  -0.75]
    >>> affine_grid(jnp.eye(3, 4)[None], (1, 1, 2, 3, 4)).shape  # 3D: (N, D, H, W, 3)
    (1, 2, 3, 4, 3)
    """
    size = check_affine_args(theta, size)
    align_corners = check_bool(align_corners, "align_corners")
    spatial = size[2:]
    ctype = compute_dtype(theta.dtype)
    # Axes in grid order (x over the last spatial axis, then y, then z), plus the constant 1.
    axes = [_base_coordinates(s, align_corners, ctype) for s in spatial[::-1]]
    mesh = jnp.meshgrid(*axes[::-1], indexing="ij")[::-1]  # a list, or a tuple since jax 0.11.1
    base = jnp.stack([*mesh, jnp.ones_like(mesh[0])], axis=-1)  # (*spatial, k + 1)
    grid = jnp.einsum("...k,njk->n...j", base, theta.astype(ctype),
                      precision=jax.lax.Precision.HIGHEST)
    return grid.astype(theta.dtype)
