"""grid_sample for JAX: 2D and 3D, differentiable, with native kernels where available."""

from ._affine_grid import affine_grid
from ._api import grid_sample, grid_sample_backward
from ._ascend import prepare as ascend_prepare
from ._ascend import self_check as ascend_self_check
from ._contract import export_safety_checks
from ._enums import Interpolation, Padding
from ._native import native_status

__version__ = "0.1.0"

__all__ = [
    "Interpolation",
    "Padding",
    "affine_grid",
    "ascend_prepare",
    "ascend_self_check",
    "export_safety_checks",
    "grid_sample",
    "grid_sample_backward",
    "native_status",
]
