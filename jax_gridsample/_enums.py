"""Interpolation and padding modes, with the integer codes CANN's aclnn grid sampler uses."""

from __future__ import annotations

import enum


class Interpolation(enum.IntEnum):
    """Interpolation mode; the values are aclnn's ``interpolationMode`` codes."""

    BILINEAR = 0
    NEAREST = 1
    BICUBIC = 2


class Padding(enum.IntEnum):
    """Padding mode for out-of-range coordinates: 0-2 are aclnn's ``paddingMode`` codes, 3 and 4
    (which aclnn lacks) continue them."""

    ZEROS = 0
    BORDER = 1
    REFLECTION = 2
    CONSTANT = 3
    WRAP = 4
