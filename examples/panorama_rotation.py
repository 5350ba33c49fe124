"""Rotate the viewing direction of an equirectangular panorama with one grid_sample call.

An equirectangular panorama maps longitude to x and latitude to y, so it is periodic in x (its
left and right edges are the same meridian) but not in y (its top and bottom rows are the poles).
padding_mode=("wrap", "border") says exactly that: taps past the left or right edge wrap around
to the other side, taps past the top or bottom clamp to the edge row. The example draws a
synthetic panorama (sky, sun, ground, a grid of meridians and parallels), turns the viewer by a
yaw and a pitch (3D rotation of each output pixel's viewing direction), writes the original and
rotated panoramas side by side to a PNG, and checks two yaws against np.roll: a yaw by whole
columns is a roll, and a yaw by half a column, the average of two rolls, is matched only with
"wrap" along x (the column at the seam blends the first and the last column). Run:

    python examples/panorama_rotation.py --yaw 60 --pitch 25
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jax_gridsample

F32 = jnp.float32  # explicit everywhere, so the example behaves the same under jax_enable_x64
PANORAMA_PADDING = ("wrap", "border")  # (x: longitude, periodic; y: latitude, clamped at poles)

# Conventions. Directions are unit vectors (x right, y up, z forward); longitude is
# atan2(x, z) in [-pi, pi] (0 straight ahead, positive to the right), latitude asin(y) in
# [-pi/2, pi/2] (positive up). Column j of a W-wide panorama covers the longitudes
# [-pi + 2 pi j / W, -pi + 2 pi (j + 1) / W] and row i of an H-high one the latitudes from
# pi/2 - pi i / H down to pi/2 - pi (i + 1) / H. With align_corners=False, grid_sample's -1 and 1
# are the outer edges of the first and last pixels, so the normalized coordinates are
#     x = longitude / pi,    y = -latitude / (pi / 2)    (y grows downwards, as rows do).


def pixel_centres(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Longitude and latitude (radians, float64) of each pixel centre, each (height, width)."""
    longitude = np.pi * ((2 * np.arange(width) + 1) / width - 1)
    latitude = -np.pi / 2 * ((2 * np.arange(height) + 1) / height - 1)
    return np.meshgrid(longitude, latitude)


def synthetic_panorama(height: int, width: int) -> np.ndarray:
    """(height, width, 3) RGB in [0, 1]: sky above the horizon, a sun, ground with a hue that
    goes once round the colour wheel with longitude, and dark lines every 30 degrees."""
    from matplotlib.colors import hsv_to_rgb

    lon, lat = pixel_centres(height, width)
    up = np.clip(lat / (np.pi / 2), 0, 1)[..., None]  # 0 at the horizon, 1 at the zenith
    sky = (1 - up) * np.array([0.75, 0.85, 1.0]) + up * np.array([0.2, 0.4, 0.9])
    hue = (lon / (2 * np.pi)) % 1.0  # periodic: the same at -pi and at pi
    value = 0.8 + 0.3 * lat / np.pi  # darker towards the nadir
    ground = hsv_to_rgb(np.stack([hue, np.full_like(hue, 0.7), value], axis=-1))
    above = 1 / (1 + np.exp(-lat * 60))  # a soft horizon
    image = above[..., None] * sky + (1 - above[..., None]) * ground

    sun_lon, sun_lat = np.radians(40.0), np.radians(25.0)
    cos_angle = (np.sin(lat) * np.sin(sun_lat)  # of each pixel's angle from the sun
                 + np.cos(lat) * np.cos(sun_lat) * np.cos(lon - sun_lon))
    sun = np.exp((cos_angle - 1) / 0.01)  # a bright disc about 12 degrees across
    image = image + sun[..., None] * (np.array([1.0, 0.9, 0.5]) - image)

    # meridians and parallels every 30 degrees, about a pixel wide
    step = np.radians(30.0)
    near_meridian = np.abs((lon + step / 2) % step - step / 2) * width / (2 * np.pi)
    near_parallel = np.abs((lat + step / 2) % step - step / 2) * height / np.pi
    lines = np.maximum(np.exp(-near_meridian**2), np.exp(-near_parallel**2))
    image = image * (1 - 0.6 * lines[..., None])
    return np.clip(image, 0, 1).astype(np.float32)


def rotation(yaw: float, pitch: float) -> np.ndarray:
    """(3, 3), float64: turn right by yaw, then look up by pitch (radians)."""
    cy, sy, cp, sp = np.cos(yaw), np.sin(yaw), np.cos(pitch), np.sin(pitch)
    turn = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])  # about y: longitude + yaw
    tilt = np.array([[1, 0, 0], [0, cp, sp], [0, -sp, cp]])  # about x: forward (0, 0, 1) -> up
    return turn @ tilt


def rotation_grid(height: int, width: int, yaw: float, pitch: float) -> jax.Array:
    """(1, height, width, 2) grid: where each pixel of the rotated view looks in the panorama.

    Computed in float64 and rounded to float32 once at the end: the pixel centres,
    x = (2j + 1) / W - 1 and y = (2i + 1) / H - 1, are exact in float32 for W and H powers of
    two, so after a yaw by whole columns the grid lands exactly on pixel centres.
    """
    lon, lat = pixel_centres(height, width)
    direction = np.stack([np.cos(lat) * np.sin(lon), np.sin(lat), np.cos(lat) * np.cos(lon)],
                         axis=-1)
    world = direction @ rotation(yaw, pitch).T  # the direction each output pixel looks in
    world_lon = np.arctan2(world[..., 0], world[..., 2])
    world_lat = np.arcsin(np.clip(world[..., 1], -1.0, 1.0))
    grid = np.stack([world_lon / np.pi, -world_lat / (np.pi / 2)], axis=-1)
    return jnp.asarray(grid[None], F32)


def rotate(panorama: jax.Array, grid: jax.Array, padding=PANORAMA_PADDING) -> jax.Array:
    """Sample the (H, W, C) panorama at the grid; (H, W, C) too (a channels-last image)."""
    out = jax_gridsample.grid_sample(panorama[None], grid, padding_mode=padding,
                                     align_corners=False, layout="NHWC")
    return out[0]


def roll_checks(panorama: jax.Array, columns: int) -> dict:
    """Max |difference| between grid_sample's yaw and np.roll: a yaw by whole columns, and one by
    half a column more (bilinear: the mean of two rolls) with "wrap" and with "zeros" along x."""
    h, w, _ = panorama.shape
    image = np.asarray(panorama)
    whole = rotate(panorama, rotation_grid(h, w, 2 * np.pi * columns / w, 0.0))
    # the view turned right by k columns: output column j shows panorama column j + k
    expected = np.roll(image, -columns, axis=1)
    result = {"roll_difference": float(np.abs(np.asarray(whole) - expected).max())}

    half_grid = rotation_grid(h, w, 2 * np.pi * (columns + 0.5) / w, 0.0)
    expected = 0.5 * (expected + np.roll(image, -columns - 1, axis=1))
    for padding in (PANORAMA_PADDING, ("zeros", "border")):
        half = rotate(panorama, half_grid, padding)
        result[f"half_roll_difference_{padding[0]}"] = float(
            np.abs(np.asarray(half) - expected).max())
    return result


def save_figure(path: str, panorama: np.ndarray, rotated: np.ndarray, yaw: float,
                pitch: float) -> None:
    """The original and the rotated panorama side by side, axes in degrees."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3), dpi=100, layout="constrained")
    titles = ["original panorama", f"rotated: yaw {yaw:g}°, pitch {pitch:g}°"]
    for ax, picture, title in zip(axes, [panorama, rotated], titles, strict=True):
        ax.imshow(picture, extent=(-180, 180, -90, 90))
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(-180, 181, 90))
        ax.set_yticks(range(-90, 91, 45))
        ax.set_xlabel("longitude, degrees", fontsize=8)
    axes[0].set_ylabel("latitude, degrees", fontsize=8)
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--height", type=int, default=128)
    parser.add_argument("--width", type=int, default=256, help="powers of two (width and "
                        "height) keep the np.roll checks exact")
    parser.add_argument("--yaw", type=float, default=60.0, help="turn right, degrees")
    parser.add_argument("--pitch", type=float, default=25.0, help="look up, degrees")
    parser.add_argument("--roll-columns", type=int, default=37,
                        help="the yaw, in columns, of the np.roll check")
    parser.add_argument("--output", "--out", default="panorama_rotated.png", help="PNG to write")
    args = parser.parse_args(argv)

    panorama = jnp.asarray(synthetic_panorama(args.height, args.width))  # (H, W, 3)
    grid = rotation_grid(args.height, args.width, np.radians(args.yaw), np.radians(args.pitch))
    rotated = rotate(panorama, grid)
    print(f"panorama {args.height}x{args.width}, yaw {args.yaw:g}°, pitch {args.pitch:g}°, "
          f"padding_mode={PANORAMA_PADDING}")

    checks = roll_checks(panorama, args.roll_columns)
    print(f"yaw by {args.roll_columns} columns vs np.roll: max |difference| "
          f"{checks['roll_difference']:.3g}")
    print(f"yaw by {args.roll_columns + 0.5} columns vs the mean of two np.rolls: max |difference| "
          f"{checks['half_roll_difference_wrap']:.3g} with wrap along x, "
          f"{checks['half_roll_difference_zeros']:.3g} with zeros (the seam column)")

    save_figure(args.output, np.asarray(panorama), np.asarray(rotated), args.yaw, args.pitch)
    print(f"wrote {args.output}")
    return {**checks, "out": args.output}


if __name__ == "__main__":
    main()
