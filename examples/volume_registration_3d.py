"""Affine registration of two 3D volumes by gradient descent through the 3D grid_sample.

The example builds a synthetic "anatomy" volume (a soft ellipsoidal body holding organs of
different brightness and a hollow "spine", on a background of non-zero intensity), resamples it
through a known 3D affine transform (rotation about all three axes, anisotropic scaling, shift)
to make the moving volume, and then recovers the transform from the identity with Adam on the
mean squared difference between the fixed volume and the moving one resampled by affine_grid +
grid_sample, which reads the background intensity outside the volume (padding_mode="constant").
The transform is the one parameter of a Flax NNX module, which nnx.Optimizer updates. Run:

    pip install ".[examples]" && python examples/volume_registration_3d.py
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from flax_compat import apply_gradients  # examples/flax_compat.py, beside this file
from tqdm import tqdm

import jax_gridsample

F32 = jnp.float32  # explicit everywhere, so the example behaves the same under jax_enable_x64
BACKGROUND = 0.2  # intensity around the body: a scan seldom reads 0 there (noise, offsets)


def rotation(ax: float, ay: float, az: float) -> np.ndarray:
    cx, sx, cy, sy, cz, sz = np.cos(ax), np.sin(ax), np.cos(ay), np.sin(ay), np.cos(az), np.sin(az)
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx


def anatomy(size: int, seed: int) -> np.ndarray:
    """(size,)*3 volume in [0, 1]: ellipsoids with soft (sigmoid) edges, deliberately asymmetric,
    on a background of intensity BACKGROUND."""
    rng = np.random.default_rng(seed)
    z, y, x = np.meshgrid(*[np.linspace(-1, 1, size)] * 3, indexing="ij")
    points = np.stack([x, y, z], axis=-1)  # (x, y, z), the order grid_sample uses

    def ellipsoid(centre, radii, angles, sharpness=12.0):
        local = (points - centre) @ rotation(*angles)  # into the ellipsoid's own frame
        r = np.sqrt(np.sum((local / radii) ** 2, axis=-1))
        return 1.0 / (1.0 + np.exp(sharpness * (r - 1.0)))

    volume = 0.35 * ellipsoid([0.0, 0.0, 0.0], [0.62, 0.48, 0.7], [0.0, 0.0, 0.1])
    for _ in range(5):  # organs: random blobs inside the body
        centre = rng.uniform(-0.3, 0.3, 3)
        radii = rng.uniform(0.1, 0.25, 3)
        volume += rng.uniform(0.2, 0.5) * ellipsoid(centre, radii, rng.uniform(-1, 1, 3))
    spine = ellipsoid([0.0, 0.32, 0.0], [0.08, 0.08, 0.62], [0.0, 0.0, 0.0])
    volume += 0.5 * spine - 0.3 * ellipsoid([0.0, 0.32, 0.0], [0.035, 0.035, 0.6], [0, 0, 0])
    return np.clip(BACKGROUND + volume, 0.0, 1.0).astype(np.float32)


def true_transform(seed: int) -> np.ndarray:
    """(3, 4) affine: rotations of up to ~14 degrees, scales 0.9-1.1, shifts up to 0.1."""
    rng = np.random.default_rng(seed + 1)
    linear = rotation(*rng.uniform(-0.25, 0.25, 3)) @ np.diag(rng.uniform(0.9, 1.1, 3))
    return np.concatenate([linear, rng.uniform(-0.1, 0.1, (3, 1))], axis=1).astype(np.float32)


def inverse(theta: np.ndarray) -> np.ndarray:
    square = np.vstack([theta, [0, 0, 0, 1]]).astype(np.float64)
    return np.linalg.inv(square)[:3].astype(np.float32)


@partial(jax.jit, static_argnames="mode")
def resample(volume: jax.Array, theta: jax.Array, mode: str = "bilinear") -> jax.Array:
    """volume (N, 1, D, H, W) sampled at theta @ (x, y, z, 1) for every output voxel."""
    grid = jax_gridsample.affine_grid(theta, volume.shape)  # (N, D, H, W, 3)
    # Outside the field of view the scene is background, not black: "zeros" would bring a dark
    # frame into the rotated, scaled or shifted volume that the fixed one lacks, a mismatch the
    # transform can only shrink by distorting itself, so it biases the fit. "constant" with
    # fill_value=BACKGROUND reads what is there.
    return jax_gridsample.grid_sample(volume, grid, mode=mode, padding_mode="constant",
                                      fill_value=BACKGROUND)


def blur(volume: jax.Array, factor: int) -> jax.Array:
    """Average-pool by factor along the three axes (for the coarse levels)."""
    if factor == 1:
        return volume
    n, c, d, h, w = volume.shape
    v = volume.reshape(n, c, d // factor, factor, h // factor, factor, w // factor, factor)
    return v.mean(axis=(3, 5, 7))


class AffineTransform(nnx.Module):
    """A 3D affine transform, (1, 3, 4), as the model's one parameter; it starts at the identity.
    Calling the model on a (1, 1, D, H, W) volume resamples the volume through it."""

    def __init__(self, mode: str = "bilinear"):
        self.theta = nnx.Param(jnp.eye(3, 4, dtype=F32)[None])
        self.mode = mode

    def __call__(self, volume: jax.Array) -> jax.Array:
        return resample(volume, self.theta[...], self.mode)


def mismatch(model: AffineTransform, fixed: jax.Array, moving: jax.Array) -> jax.Array:
    """Mean squared difference between the moving volume, resampled by the model, and fixed."""
    return jnp.mean((model(moving) - fixed) ** 2)


@partial(jax.jit, static_argnums=0)
def train_step(graphdef: nnx.GraphDef, state: nnx.State, fixed: jax.Array,
               moving: jax.Array) -> tuple[nnx.State, jax.Array]:
    """One Adam step: the new state of (model, optimizer), split by nnx.split, and the mismatch
    before the step. It takes and returns state, merged back into objects only inside the
    trace, because nnx.jit would walk the objects in Python at every call: a millisecond or two
    a step here (Flax's "performance considerations" guide)."""
    model, optimizer = nnx.merge(graphdef, state)
    loss, grads = nnx.value_and_grad(mismatch)(model, fixed, moving)
    apply_gradients(optimizer, model, grads)
    return nnx.state((model, optimizer)), loss


def register(fixed, moving, theta_true, *, steps, lr, levels, mode, log_every):
    """Fit theta so that resample(moving, theta) matches fixed; coarse levels first.

    Returns theta and a history of (step, full-resolution mean squared difference,
    max |theta - true|).
    """
    model = AffineTransform(mode)
    full_mismatch = nnx.jit(mismatch)

    def record(step_count):
        error = float(jnp.abs(model.theta[0] - theta_true).max())
        history.append((step_count, float(full_mismatch(model, fixed, moving)), error))
        return error

    history = []
    record(0)
    step_count = 0
    for level in reversed(range(levels)):
        fixed_l, moving_l = blur(fixed, 1 << level), blur(moving, 1 << level)
        # the finer levels start close to the answer: smaller steps
        level_lr = lr if level == levels - 1 else lr * 0.25
        tx = optax.adam(optax.cosine_decay_schedule(level_lr, steps, alpha=0.1))
        optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
        graphdef, state = nnx.split((model, optimizer))

        size = fixed_l.shape[-1]
        bar = tqdm(range(steps), desc=f"level {size:>3}^3", ncols=90, mininterval=0.5)
        for i in bar:
            state, loss = train_step(graphdef, state, fixed_l, moving_l)
            step_count += 1
            if (i + 1) % log_every == 0 or i == steps - 1:
                nnx.update((model, optimizer), state)
                error = record(step_count)
                bar.set_postfix(loss=f"{float(loss):.2e}", err=f"{error:.4f}")
        bar.close()
    return model.theta[0], history


def save_figure(path, fixed, moving, registered) -> None:
    """Middle slices along the three axes of the volumes and of their differences; the two
    difference columns share one colour scale, shown by the colour bar beside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    volumes = [("fixed", fixed), ("moving", moving), ("registered", registered),
               ("|fixed - moving|", np.abs(fixed - moving)),
               ("|fixed - registered|", np.abs(fixed - registered))]
    d = fixed.shape[0] // 2
    cuts = [("axial (z)", lambda v: v[d]), ("coronal (y)", lambda v: v[:, d]),
            ("sagittal (x)", lambda v: v[:, :, d])]
    difference_max = 0.5  # of intensities in [0, 1]; the colour bar says where that saturates
    fig, axes = plt.subplots(len(cuts), len(volumes), figsize=(2.6 * len(volumes) + 0.9, 2.6 * 3),
                             layout="constrained")
    for j, (name, volume) in enumerate(volumes):
        for i, (cut_name, cut) in enumerate(cuts):
            ax = axes[i, j]
            shown = ax.imshow(cut(volume), cmap="gray" if j < 3 else "magma", vmin=0,
                              vmax=1 if j < 3 else difference_max, origin="lower")
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(name, fontsize=10)
            if j == 0:
                ax.set_ylabel(cut_name, fontsize=10)
    extend = "max" if np.abs(fixed - moving).max() > difference_max else "neither"
    fig.colorbar(shown, ax=axes[:, 3:], shrink=0.6, extend=extend,
                 label="|difference| (intensities in [0, 1])")
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=48, help="volume edge, voxels")
    parser.add_argument("--steps", type=int, default=150, help="Adam steps per level")
    parser.add_argument("--levels", type=int, default=2, help="resolution levels, coarse first")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--mode", default="bilinear", choices=["bilinear", "bicubic"],
                        help="trilinear or tricubic resampling")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="volume_registration_3d.png", help="PNG to write")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.size % (1 << (args.levels - 1)):
        parser.error("--size must be divisible by 2 ** (levels - 1)")

    start = time.perf_counter()
    fixed = jnp.asarray(anatomy(args.size, args.seed))[None, None]  # (1, 1, D, H, W)
    theta_true = true_transform(args.seed)
    # moving(p) = fixed(true^-1 p), so resampling moving at true @ p gives fixed back
    moving = resample(fixed, jnp.asarray(inverse(theta_true))[None])
    theta_true = jnp.asarray(theta_true)
    print(f"volumes {args.size}^3, mode {args.mode}; true transform (x, y, z, 1 -> x, y, z):\n"
          f"{np.asarray(theta_true).round(4)}")

    theta, history = register(fixed, moving, theta_true, steps=args.steps, lr=args.lr,
                              levels=args.levels, mode=args.mode,
                              log_every=max(1, args.steps // 6))
    print(f"\n{'step':>6} {'mean sq. diff':>14} {'max |theta - true|':>20}")
    for step, loss, error in history:
        print(f"{step:>6} {loss:>14.3e} {error:>20.5f}")
    registered = resample(moving, theta[None], args.mode)
    print(f"recovered transform:\n{np.asarray(theta).round(4)}")
    error = float(jnp.abs(theta - theta_true).max())
    mse_before = float(jnp.mean((moving - fixed) ** 2))
    mse_after = float(jnp.mean((registered - fixed) ** 2))
    print(f"max |recovered - true| = {error:.5f}; mean squared difference to fixed "
          f"{mse_before:.2e} -> {mse_after:.2e}")
    save_figure(args.out, np.asarray(fixed[0, 0]), np.asarray(moving[0, 0]),
                np.asarray(registered[0, 0]))
    print(f"wrote {args.out}; total {time.perf_counter() - start:.1f} s")
    return {"history": history, "error": error, "initial_error": history[0][2],
            "mse_before": mse_before, "mse_after": mse_after, "out": args.out}


if __name__ == "__main__":
    main()
