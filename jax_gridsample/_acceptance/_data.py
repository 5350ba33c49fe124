"""The data the checks sample, and how their results are compared with the oracle's."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# Largest error allowed against the float64 host result, as a fraction of the largest magnitude
# of the expected value: about a few roundings of each dtype.
TOLERANCES = MappingProxyType(
    {"float64": 1e-10, "float32": 1e-5, "float16": 3e-3, "bfloat16": 3e-2})
# |normalized coordinate| up to this: beyond 1, so that every padding mode matters, and far
# enough (with align_corners=False, over half a pixel) that border and reflection differ.
GRID_RANGE = 1.5
# The fill value of "constant" padding in every check: not 0, so that it shows.
FILL_VALUE = 0.5


def require_x64() -> None:
    """Fail unless float64 is on: the host oracle computes in it."""
    if not jax.config.jax_enable_x64:
        raise RuntimeError("the checks need float64: call "
                           "jax.config.update('jax_enable_x64', True) first")


def unnormalize(x: np.ndarray | float, size: int, align_corners: bool) -> Any:
    """Pixel coordinates of normalized ones (docs/semantics.md)."""
    if align_corners:
        return (np.asarray(x) + 1) / 2 * (size - 1)
    return ((np.asarray(x) + 1) * size - 1) / 2


def normalize(u: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    """Normalized coordinates of pixel ones."""
    if align_corners:
        return 2 * u / (size - 1) - 1
    return (2 * u + 1) / size - 1


def make_grid(rng: np.random.Generator, grid_shape: Sequence[int], input_shape: Sequence[int],
              align_corners: bool, grid_range: float = GRID_RANGE) -> np.ndarray:
    """A float64 grid with coordinates in about [-grid_range, grid_range] whose pixel
    coordinates stay at least 0.15 away from integers and half-integers (also after reflection,
    wrapping and clamping), so that nearest's rounding, the floors and the clamps cannot flip
    between precisions."""
    sizes = tuple(reversed(input_shape[2:]))  # the grid holds (x, y[, z]): W, H[, D]
    points = tuple(grid_shape[:-1])
    coords = []
    for size in sizes:
        lo = unnormalize(-grid_range, size, align_corners)
        hi = unnormalize(grid_range, size, align_corners)
        u = rng.uniform(lo, hi, points)
        frac = rng.uniform(0.15, 0.35, points) + 0.5 * rng.integers(0, 2, points)
        coords.append(normalize(np.floor(u) + frac, size, align_corners))
    return np.stack(coords, axis=-1)


def output_shape(input_shape: Sequence[int], grid_shape: Sequence[int]) -> tuple[int, ...]:
    """The channels-first output shape of an input and a grid."""
    return (input_shape[0], input_shape[1], *grid_shape[1:-1])


def make_data(dim: int, mode: str, padding: str, align_corners: bool, dtype: str,
              shapes: tuple[Sequence[int], Sequence[int]]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input, grid, grad_output) as numpy arrays of ``dtype``, from a seed fixed by the
    combination and the shapes (output masks and ``deterministic`` share the data)."""
    input_shape, grid_shape = shapes
    key = f"{dim}-{mode}-{padding}-{align_corners}-{dtype}-{list(input_shape)}-{list(grid_shape)}"
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    x = rng.uniform(-1, 1, input_shape)
    g = make_grid(rng, grid_shape, input_shape, align_corners)
    go = rng.uniform(-1, 1, output_shape(input_shape, grid_shape))
    np_dtype = jnp.dtype(dtype)
    return x.astype(np_dtype), g.astype(np_dtype), go.astype(np_dtype)


def put(arrays: Iterable[np.ndarray], device: jax.Device, dtype: Any = None) -> list[jax.Array]:
    """The arrays on ``device`` (committed: a program runs there), cast to ``dtype`` if given."""
    return [jax.device_put(a if dtype is None else np.asarray(a).astype(dtype), device)
            for a in arrays]


def np64(a: Any) -> np.ndarray:
    """A float64 numpy copy."""
    return np.asarray(a).astype(np.float64)


def scaled_error(got: Any, expected: Any) -> float:
    """max |got - expected| / max |expected| (1 where expected is all zero); inf on a shape
    mismatch, a missing result or a non-finite difference."""
    if got is None or expected is None:
        return float("inf")
    g, e = np64(got), np64(expected)
    if g.shape != e.shape:
        return float("inf")
    if g.size == 0:
        return 0.0
    diff = np.abs(g - e)
    if not np.all(np.isfinite(diff)):
        return float("inf")
    scale = float(np.abs(e).max())
    return float(diff.max()) / (scale if scale > 0 else 1.0)


def identical(first: Sequence[Any], second: Sequence[Any]) -> bool:
    """Whether two lists of results hold the same bits (None matching None)."""
    return all((a is None and b is None) or (a is not None and b is not None
                                             and np.asarray(a).tobytes() == np.asarray(b).tobytes())
               for a, b in zip(first, second, strict=True))


def max_difference(first: Sequence[Any], second: Sequence[Any]) -> float:
    """The largest absolute difference between two lists of results."""
    return max((float(np.abs(np64(a) - np64(b)).max(initial=0.0))
                for a, b in zip(first, second, strict=True) if a is not None and b is not None),
               default=0.0)


def error_text(exc: BaseException, case: dict | None = None) -> str:
    """The exception in one string (at most about 2000 characters); for a 161002 where the
    oldest Ascend chips document a limit, a note saying so."""
    text = f"{type(exc).__name__}: {exc}"
    text = text if len(text) < 2000 else text[:2000] + " ..."
    limited = case is not None and (case["dtype"] == "bfloat16" or (
        case["dtype"] == "float64" and case["dim"] == 2 and case["op"] == "backward"))
    if limited and "161002" in text:
        text += (" [note: Atlas training products (the oldest chips) take no bfloat16 and no "
                 "float64 2D backward; this may be that documented limit]")
    return text


def ac(align_corners: bool) -> str:
    """How case names spell align_corners."""
    return "ac" if align_corners else "noac"


def sample_kwargs(mode: str, padding: str, align_corners: bool, implementation: str,
                  deterministic: bool = False) -> dict:
    """grid_sample's keyword arguments; "constant" padding reads :data:`FILL_VALUE`."""
    kw = dict(mode=mode, padding_mode=padding, align_corners=align_corners,
              implementation=implementation, deterministic=deterministic)
    if padding == "constant":
        kw["fill_value"] = FILL_VALUE
    return kw
