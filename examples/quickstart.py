"""Recover a known affine transform by gradient descent through affine_grid + grid_sample.

A synthetic image is warped by a known rotation, scale and shift; starting from the identity,
jax.grad of the photometric error through grid_sample finds the transform again. Run:

    python examples/quickstart.py
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jax_gridsample


def synthetic_image(size: int, seed: int) -> jax.Array:
    """Soft blobs of random sizes and brightness: smooth, so the error surface is too."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[-1:1:size * 1j, -1:1:size * 1j]
    image = np.zeros((size, size))
    for _ in range(12):
        cx, cy = rng.uniform(-0.7, 0.7, 2)
        width = rng.uniform(0.08, 0.25)
        image += rng.uniform(0.3, 1.0) * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * width**2))
    return jnp.asarray(image[None, None], jnp.float32)  # (N=1, C=1, H, W)


def affine(angle: float, scale: float, shift: tuple[float, float]) -> jax.Array:
    c, s = np.cos(angle) * scale, np.sin(angle) * scale
    return jnp.asarray([[[c, -s, shift[0]], [s, c, shift[1]]]], jnp.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=0.5)
    args = parser.parse_args()

    image = synthetic_image(args.size, args.seed)
    theta_true = affine(angle=0.35, scale=0.9, shift=(0.12, -0.08))
    size = image.shape

    def warp(theta):
        grid = jax_gridsample.affine_grid(theta, size, align_corners=False)
        return jax_gridsample.grid_sample(image, grid, padding_mode="border")

    target = warp(theta_true)

    @jax.jit
    def step(theta, velocity):
        loss, grad = jax.value_and_grad(lambda t: jnp.mean((warp(t) - target) ** 2))(theta)
        velocity = 0.9 * velocity - args.learning_rate * grad
        return theta + velocity, velocity, loss

    theta = affine(0.0, 1.0, (0.0, 0.0))
    velocity = jnp.zeros_like(theta)
    print(f"backend: {jax.default_backend()}, native kernels: {jax_gridsample.native_status()}")
    print(f"{'step':>6} {'loss':>12} {'|theta - true|':>16}")
    start = time.perf_counter()
    for i in range(args.steps + 1):
        theta, velocity, loss = step(theta, velocity)
        if i % max(1, args.steps // 10) == 0:
            error = float(jnp.abs(theta - theta_true).max())
            print(f"{i:>6} {float(loss):>12.3e} {error:>16.3e}")
    error = float(jnp.abs(theta - theta_true).max())
    print(f"recovered theta:\n{np.asarray(theta[0]).round(4)}\ntrue theta:\n"
          f"{np.asarray(theta_true[0]).round(4)}")
    print(f"max error {error:.2e} after {args.steps} steps in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
