"""What a hardware acceptance runs (:class:`Plan`: its shapes, modes and dtypes, one per
platform) and the options of a run (:class:`Options`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType

Shape = tuple[int, ...]

MASKS = ((True, True), (True, False), (False, True))
MASK_NAMES = MappingProxyType({(True, True): "both", (True, False): "input",
                               (False, True): "grid"})


@dataclasses.dataclass(frozen=True)
class Plan:
    """The cases of a hardware acceptance. Each field's default is what a run checks; the tests
    replace them with tiny ones (``dataclasses.replace``)."""

    # dimension -> interpolation modes; the padding modes; the parity cases' dtypes
    modes: Mapping[int, tuple[str, ...]] = dataclasses.field(default_factory=lambda: (
        MappingProxyType({2: ("bilinear", "nearest", "bicubic"), 3: ("bilinear", "nearest")})))
    paddings: tuple[str, ...] = ("zeros", "border", "reflection")
    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64")
    # (input shape, grid shape) of the parity cases: small, with odd sizes, different per axis
    shapes: Mapping[int, tuple[Shape, Shape]] = dataclasses.field(default_factory=lambda: (
        MappingProxyType({2: ((2, 3, 5, 6), (2, 4, 5, 2)),
                          3: ((2, 3, 3, 4, 5), (2, 2, 3, 4, 3))})))
    # Shapes that reach a kernel's other paths (on Ascend, CANN's other kernels): (name, input
    # shape, grid shape, mode, padding, align_corners, dtypes). Each runs the forward and the
    # backward of both gradients, default and deterministic.
    route_shapes: tuple[tuple, ...] = (
        ("wide-c", (2, 2056, 5, 6), (2, 4, 5, 2), "bilinear", "zeros", False, ("float32",)),
        ("wide-c-3d", (1, 2056, 3, 4, 5), (1, 2, 3, 4, 3), "nearest", "border", True,
         ("float32",)),
        ("large-plane", (1, 4, 1000, 1500), (1, 96, 128, 2), "bilinear", "reflection", False,
         ("float32", "float16")),
        ("large-volume", (1, 2, 96, 128, 160), (1, 16, 16, 16, 3), "bilinear", "zeros", True,
         ("float32", "float16")),
        ("batch-64", (64, 3, 16, 17), (64, 8, 9, 2), "bicubic", "border", False,
         ("float32", "float16")),
        ("batch-64-3d", (64, 2, 4, 5, 6), (64, 3, 3, 3, 3), "bilinear", "zeros", False,
         ("float32", "float16")),
    )
    # The jitted chain: (name, input shape, first grid shape, second grid shape, mode, padding,
    # align_corners); chain_runs programs dispatched back to back, each on data of its own.
    chain_shapes: tuple[tuple, ...] = (
        ("2d", (4, 16, 64, 64), (4, 48, 48, 2), (4, 32, 32, 2), "bilinear", "border", False),
        ("3d", (2, 8, 16, 16, 16), (2, 12, 12, 12, 3), (2, 8, 8, 8, 3), "bilinear", "zeros",
         True),
    )
    chain_runs: int = 3
    # Many points, few pixels: (name, input shape, grid shape, dtype).
    collision_shapes: tuple[tuple, ...] = (
        ("2d", (2, 8, 3, 3), (2, 128, 128, 2), "float32"),
        ("2d", (2, 8, 3, 3), (2, 128, 128, 2), "float16"),
        ("3d", (1, 4, 2, 2, 2), (1, 24, 24, 24, 3), "float32"),
    )
    # (name, input shape, grid shape)
    empty_cases: tuple[tuple, ...] = (
        ("2d no output points", (2, 3, 5, 6), (2, 0, 5, 2)),
        ("2d C=0", (2, 0, 5, 6), (2, 4, 5, 2)),
        ("2d N=0", (0, 3, 5, 6), (0, 4, 5, 2)),
        ("3d no output points", (2, 3, 3, 4, 5), (2, 2, 0, 4, 3)),
        ("3d C=0", (2, 0, 3, 4, 5), (2, 2, 3, 4, 3)),
        ("3d N=0", (0, 3, 3, 4, 5), (0, 2, 3, 4, 3)),
    )
    empty_dtypes: tuple[str, ...] = ("float32", "float16")
    # (name, input shape, output spatial shape) of the timings; bilinear, zeros padding.
    timing_shapes: tuple[tuple, ...] = (
        ("2d", (8, 32, 128, 128), (128, 128)),
        ("3d", (2, 16, 32, 32, 32), (32, 32, 32)),
    )
    timing_dtypes: tuple[str, ...] = ("float32", "float16")
    timing_warmup: int = 2

    def combinations(self, quick: bool) -> list[tuple[int, str, str, bool]]:
        """(dim, mode, padding, align_corners) for every dimension, mode and padding: both
        align_corners, or (``quick``) one, alternating."""
        return [(dim, mode, padding, align_corners)
                for dim, modes in self.modes.items()
                for mode_index, mode in enumerate(modes)
                for pad_index, padding in enumerate(self.paddings)
                for align_corners in (False, True)
                if not quick or align_corners == bool((mode_index + pad_index + dim) % 2)]


ASCEND_PLAN = Plan()
"""aclnn's modes and paddings: no 3D bicubic, no "constant" (aclnn runs it as "zeros", the fill
term is XLA's) and no "wrap"."""

CUDA_PLAN = Plan(modes=MappingProxyType({2: ("bilinear", "nearest", "bicubic"),
                                         3: ("bilinear", "nearest", "bicubic")}),
                 paddings=("zeros", "border", "reflection", "constant", "wrap"))
"""Our CUDA kernels': every mode (3D bicubic is tricubic) and every padding."""


@dataclasses.dataclass(frozen=True)
class Options:
    """A hardware acceptance run's options (the command line's).

    ``json``: the report file, written after each section (None: none); ``quick``: float32
    parity cases only, one align_corners per mode x padding; ``cases``: only the parity and
    route cases whose name matches this regular expression; ``repeats``: timed calls per median;
    ``timing``: run the timings; ``torch``: time torch's grid_sample too."""

    json: str | None = None
    quick: bool = False
    cases: str | None = None
    repeats: int = 10
    timing: bool = True
    torch: bool = True
