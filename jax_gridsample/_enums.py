"""Interpolation and padding modes, with the integer codes CANN's aclnn grid sampler uses."""

from __future__ import annotations

import enum


class Interpolation(enum.IntEnum):
    """Interpolation mode; the values are aclnn's ``interpolationMode`` codes.

    Examples
    --------
    >>> Interpolation.BICUBIC == 2, Interpolation(1).name
    (True, 'NEAREST')
    >>> images, grid = jnp.ones((1, 3, 8, 8)), jnp.zeros((1, 4, 4, 2))
    >>> grid_sample(images, grid, mode=Interpolation.NEAREST).shape  # as mode="nearest" or 1
    (1, 3, 4, 4)
    """

    BILINEAR = 0
    NEAREST = 1
    BICUBIC = 2


class Padding(enum.IntEnum):
    """Padding mode for out-of-range coordinates: 0-2 are aclnn's ``paddingMode`` codes, 3 and 4
    (which aclnn lacks) continue them.

    Examples
    --------
    >>> [mode.name.lower() for mode in Padding]
    ['zeros', 'border', 'reflection', 'constant', 'wrap']
    >>> images, grid = jnp.ones((1, 3, 8, 8)), jnp.zeros((1, 4, 4, 2))
    >>> grid_sample(images, grid, padding_mode=(Padding.WRAP, Padding.BORDER)).shape
    (1, 3, 4, 4)
    """

    ZEROS = 0
    BORDER = 1
    REFLECTION = 2
    CONSTANT = 3
    WRAP = 4
