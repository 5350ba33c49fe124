"""One large 3D volume sampled at points sharded over every device: fit a voxel grid to samples.

A single volume (batch 1) cannot be split along the batch, and a neural field's millions of
sample points do not fit one device's program either. Shard the grid's point axis instead: each
device samples its own points from the whole (replicated) volume, the samples come back sharded
like the points, and the volume's gradient is the sum of the devices' partial gradients, one
all-reduce. The program fits a voxel grid to noisy samples of a smooth field taken at random
points, by Adam on the mean squared error, and prints the collectives of the compiled step.
Run on a CPU with 8 host devices:

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python examples/sharded_volume.py
"""

from __future__ import annotations

import argparse
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jax_gridsample

F32 = jnp.float32  # explicit everywhere, so the example behaves the same under jax_enable_x64


def field(points: np.ndarray) -> np.ndarray:
    """The smooth field to recover, at (..., 3) points (x, y, z) in [-1, 1]."""
    x, y, z = points[..., 0], points[..., 1], points[..., 2]
    return np.sin(3 * x) * np.cos(2 * y) + 0.5 * z ** 2


def collectives(compiled_text: str) -> dict[str, int]:
    """How many of each collective a compiled program runs."""
    ops = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")
    return {op: len(re.findall(rf"\s{op}(?:-start)?\(", compiled_text)) for op in ops}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=32, help="voxel grid edge")
    parser.add_argument("--points", type=int, default=1 << 18, help="sample points (rounded "
                        "up to a multiple of the device count)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    devices = jax.device_count()
    mesh = jax.make_mesh((devices,), ("points",))
    replicated = NamedSharding(mesh, P())
    on_points = NamedSharding(mesh, P(None, "points"))  # the grid's Do
    on_samples = NamedSharding(mesh, P(None, None, "points"))  # the output's Do

    rng = np.random.default_rng(args.seed)
    count = -(-args.points // devices) * devices
    points = rng.uniform(-1, 1, (1, count, 1, 1, 3)).astype(np.float32)  # grid (N, Do, Ho, Wo, 3)
    samples = (field(points) + 0.05 * rng.standard_normal(points.shape[:-1]))[:, None]
    points = jax.device_put(points, on_points)
    samples = jax.device_put(samples.astype(np.float32), on_samples)  # (1, 1, Do, 1, 1)
    volume = jax.device_put(jnp.zeros((1, 1) + (args.size,) * 3, F32), replicated)

    optimizer = optax.adam(args.lr)
    opt_state = jax.device_put(optimizer.init(volume), replicated)

    @jax.jit
    def step(volume, opt_state, points, samples):
        def loss_fn(volume):
            predicted = jax_gridsample.grid_sample(volume, points, align_corners=True)
            return jnp.mean((predicted - samples) ** 2)

        loss, grad = jax.value_and_grad(loss_fn)(volume)  # the grid's gradient is never made
        updates, opt_state = optimizer.update(grad, opt_state, volume)
        return optax.apply_updates(volume, updates), opt_state, loss

    compiled = step.lower(volume, opt_state, points, samples).compile()
    found = collectives(compiled.as_text())
    print(f"{devices} devices, {count} points ({count // devices} per device), volume "
          f"{args.size}^3; collectives in the compiled step: "
          + ", ".join(f"{n} {op}" for op, n in found.items() if n))

    losses = []
    for _ in range(args.steps):
        volume, opt_state, loss = compiled(volume, opt_state, points, samples)
        losses.append(float(loss))
    print(f"mean squared error {losses[0]:.4f} -> {losses[-1]:.4f} (the noise variance is 0.0025)")

    # the whole fitted volume against the field at the voxel centres
    axis = np.linspace(-1, 1, args.size)
    z, y, x = np.meshgrid(axis, axis, axis, indexing="ij")
    error = float(np.sqrt(np.mean((np.asarray(volume)[0, 0] - field(np.stack([x, y, z], -1)))
                                  ** 2)))
    print(f"rms error of the fitted voxels: {error:.4f}")
    samples_sharding = jax.jit(
        lambda v, p: jax_gridsample.grid_sample(v, p, align_corners=True))(volume, points).sharding
    return {"collectives": found, "losses": np.asarray(losses), "voxel_rms_error": error,
            "samples_spec": samples_sharding, "devices": devices}


if __name__ == "__main__":
    main()
