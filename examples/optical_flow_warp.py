"""Estimate a dense optical flow field by gradient descent through grid_sample.

A photograph that ships with scikit-image (no download) is downscaled to 128x128 and warped by a
known smooth synthetic flow to make the target frame. Starting from zero flow, Adam minimises a
photometric loss (the frame warped by the current flow against the target) plus a smoothness
penalty, coarse to fine; the endpoint error against the known flow is printed as it goes, and a
PNG shows frame, target, warped result and the flows. The flow is the one parameter of a Flax NNX
module, which nnx.Optimizer updates. Run:

    pip install ".[examples]" && python examples/optical_flow_warp.py
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
IMAGES = ("camera", "coins", "moon")  # grayscale images bundled inside scikit-image


def load_image(name: str, size: int) -> np.ndarray:
    """A bundled scikit-image photograph as float32 in [0, 1], area-downscaled to size^2."""
    from skimage import data, transform

    image = getattr(data, name)().astype(np.float32) / 255.0
    side = min(image.shape)  # centre square crop, then an anti-aliased downscale
    top, left = (image.shape[0] - side) // 2, (image.shape[1] - side) // 2
    image = image[top:top + side, left:left + side]
    return transform.resize(image, (size, size), anti_aliasing=True).astype(np.float32)


def synthetic_flow(size: int, seed: int, max_pixels: float) -> np.ndarray:
    """A smooth flow (size, size, 2) in pixels: a sum of broad Gaussian swirls and pushes."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[-1:1:size * 1j, -1:1:size * 1j]
    flow = np.zeros((size, size, 2))
    for _ in range(6):
        cx, cy = rng.uniform(-0.8, 0.8, 2)
        width = rng.uniform(0.3, 0.6)
        bump = np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * width**2))
        push, swirl = rng.normal(size=2), rng.normal()
        flow[..., 0] += bump * (push[0] - swirl * (y - cy) / width)
        flow[..., 1] += bump * (push[1] + swirl * (x - cx) / width)
    flow *= max_pixels / np.abs(flow).max()
    return flow.astype(np.float32)


@partial(jax.jit, static_argnames="mode")
def warp(image: jax.Array, flow_pixels: jax.Array, mode: str = "bilinear") -> jax.Array:
    """out(p) = image(p + flow(p)) for a (H, W) image and a (H, W, 2) flow in pixels (x, y)."""
    h, w = image.shape
    identity = jnp.eye(2, 3, dtype=F32)[None]
    base = jax_gridsample.affine_grid(identity, (1, 1, h, w))  # pixel centres, normalised
    # a displacement of one pixel is 2 / size in normalised coordinates (align_corners=False)
    grid = base + flow_pixels[None] * jnp.asarray([2.0 / w, 2.0 / h], F32)
    out = jax_gridsample.grid_sample(image[None, None], grid, mode=mode, padding_mode="border")
    return out[0, 0]


@partial(jax.jit, static_argnames="size")
def resize_flow(flow_pixels: jax.Array, size: int) -> jax.Array:
    """Bilinear resize of a (h, w, 2) flow to (size, size, 2), rescaling the vectors."""
    h = flow_pixels.shape[0]
    if flow_pixels.shape[:2] == (size, size):
        return flow_pixels
    identity = jnp.eye(2, 3, dtype=F32)[None]
    grid = jax_gridsample.affine_grid(identity, (1, 2, size, size))
    # the flow's two components are the channels of a channels-last (1, h, w, 2) image
    out = jax_gridsample.grid_sample(flow_pixels[None], grid, padding_mode="border",
                                     layout="NHWC")
    return out[0] * (size / h)


@partial(jax.jit, static_argnames="factor")
def downscale(image: jax.Array, factor: int) -> jax.Array:
    """Average-pool a (H, W) image by factor along both axes (for the coarse levels)."""
    h, w = image.shape
    return image.reshape(h // factor, factor, w // factor, factor).mean(axis=(1, 3))


def endpoint_error(flow: jax.Array, truth: jax.Array) -> float:
    """Mean length of flow - truth, px (one compiled call: it scores the flow every few steps)."""
    return float(_mean_distance(flow, truth))


@jax.jit
def _mean_distance(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.mean(jnp.linalg.norm(a - b, axis=-1))


class FlowField(nnx.Module):
    """A dense flow, (H, W, 2) in pixels, as the model's one parameter: calling the model on a
    (H, W) image warps the image by the flow."""

    def __init__(self, flow_pixels: jax.Array):
        self.flow = nnx.Param(jnp.asarray(flow_pixels, F32))

    def __call__(self, image: jax.Array) -> jax.Array:
        return warp(image, self.flow[...])

    def roughness(self) -> jax.Array:
        """Mean squared difference of neighbouring flow vectors, along x and along y."""
        flow = self.flow[...]
        dx = flow[:, 1:] - flow[:, :-1]
        dy = flow[1:] - flow[:-1]
        return jnp.mean(dx**2) + jnp.mean(dy**2)


def loss_fn(model: FlowField, frame: jax.Array, target: jax.Array, smoothness) -> jax.Array:
    """Charbonnier (a robust L1) photometric error of the warped frame, plus smoothness."""
    residual = model(frame) - target
    photometric = jnp.mean(jnp.sqrt(residual**2 + 1e-4))
    return photometric + smoothness * model.roughness()


@partial(jax.jit, static_argnums=0)
def train_step(graphdef: nnx.GraphDef, state: nnx.State, frame: jax.Array, target: jax.Array,
               smoothness) -> tuple[nnx.State, jax.Array]:
    """One Adam step: the new state of (model, optimizer), split by nnx.split, and the loss
    before the step. It takes and returns state, merged back into objects only inside the
    trace, because nnx.jit would walk the objects in Python at every call: a millisecond a step
    here, as long as the step itself (Flax's "performance considerations" guide)."""
    model, optimizer = nnx.merge(graphdef, state)
    loss, grads = nnx.value_and_grad(loss_fn)(model, frame, target, smoothness)
    apply_gradients(optimizer, model, grads)
    return nnx.state((model, optimizer)), loss


def estimate_flow(frame, target, truth, *, levels, steps, lr, smoothness, progress=True):
    """Coarse to fine: at each level Adam fits the flow, then it is upsampled to the next."""
    size = frame.shape[0]
    flow = jnp.zeros((size >> (levels - 1),) * 2 + (2,), F32)
    history = [endpoint_error(resize_flow(flow, size), truth)]

    for level in reversed(range(levels)):
        factor = 1 << level
        frame_l, target_l = downscale(frame, factor), downscale(target, factor)
        model = FlowField(resize_flow(flow, size // factor))  # vectors in this level's pixels
        optimizer = nnx.Optimizer(model, optax.adam(lr / factor), wrt=nnx.Param)
        graphdef, state = nnx.split((model, optimizer))

        bar = tqdm(range(steps), desc=f"level {size // factor:>3}px", ncols=90,
                   mininterval=0.5, disable=not progress)
        for i in bar:
            state, loss = train_step(graphdef, state, frame_l, target_l, smoothness)
            if i % 25 == 0 or i == steps - 1:
                nnx.update((model, optimizer), state)
                epe = endpoint_error(resize_flow(model.flow[...], size), truth)
                bar.set_postfix(loss=f"{float(loss):.4f}", epe=f"{epe:.3f}px")
        bar.close()
        flow = model.flow[...]
        history.append(endpoint_error(resize_flow(flow, size), truth))
    return resize_flow(flow, size), history


def flow_to_rgb(flow: np.ndarray, scale: float) -> np.ndarray:
    """Colour-wheel rendering: hue is the direction, brightness the magnitude (up to scale)."""
    from matplotlib.colors import hsv_to_rgb

    angle = np.arctan2(flow[..., 1], flow[..., 0])
    magnitude = np.linalg.norm(flow, axis=-1)
    hsv = np.stack([(angle / (2 * np.pi)) % 1.0, np.ones_like(angle),
                    np.clip(magnitude / scale, 0, 1)], axis=-1)
    return hsv_to_rgb(hsv)


def colour_key(size: int = 101) -> np.ndarray:
    """The colour wheel flow_to_rgb draws on: flow (x, y) at (x, y) from the centre, up to the
    rim (full scale), y pointing down as in the images; RGBA, transparent outside the rim."""
    y, x = np.mgrid[-1:1:size * 1j, -1:1:size * 1j]
    rgb = flow_to_rgb(np.stack([x, y], axis=-1), 1.0)
    return np.concatenate([rgb, (x**2 + y**2 <= 1.0)[..., None]], axis=-1)


def save_figure(path, frame, target, warped, truth, flow) -> None:
    """Top: frame, target and the frame warped by the estimate; bottom: the colour key, true and
    estimated flow (arrows at twice their length), and the endpoint error with its scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scale = float(np.linalg.norm(truth, axis=-1).max())
    error = np.linalg.norm(flow - truth, axis=-1)
    # a narrow column on the left for the flows' colour key and one on the right for the error's
    # colour bar, so that the six pictures are all the same size
    fig = plt.figure(figsize=(12.0, 6.9))
    grid = fig.add_gridspec(2, 5, width_ratios=[0.55, 1, 1, 1, 0.06], wspace=0.1,
                            hspace=0.12, left=0.02, right=0.94, top=0.95, bottom=0.04)
    panels = [
        (grid[0, 1], frame, "frame", "gray"),
        (grid[0, 2], target, "target (frame warped by true flow)", "gray"),
        (grid[0, 3], warped, "frame warped by estimated flow", "gray"),
        (grid[1, 1], flow_to_rgb(truth, scale), "true flow", None),
        (grid[1, 2], flow_to_rgb(flow, scale), "estimated flow (arrows at 2x length)", None),
        (grid[1, 3], error, f"endpoint error (mean {error.mean():.2f} px)", "magma"),
    ]
    axes = []
    for cell, picture, title, cmap in panels:
        ax = fig.add_subplot(cell)
        ax.imshow(picture, cmap=cmap, vmin=0 if cmap == "gray" else None,
                  vmax=1 if cmap == "gray" else None)
        ax.set_title(title, fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
        axes.append(ax)
    fig.colorbar(axes[-1].images[0], cax=fig.add_subplot(grid[1, 4]), label="endpoint error, px")

    key = fig.add_subplot(grid[1, 0])
    key.imshow(colour_key(), extent=(-scale, scale, scale, -scale))
    key.add_patch(plt.Circle((0, 0), scale, fill=False, color="0.5", lw=0.8))
    key.set_xticks([])
    key.set_yticks([])
    key.set_xlabel(f"centre: 0 px, rim: {scale:.1f} px", fontsize=8)
    for spine in key.spines.values():
        spine.set_visible(False)
    key.set_title("flow colour key\n(hue: direction,\nbrightness: length)", fontsize=9)

    # sparse arrows over the estimated flow
    h = flow.shape[0]
    step = max(1, h // 16)
    yy, xx = np.mgrid[step // 2:h:step, step // 2:h:step]
    axes[4].quiver(xx, yy, flow[yy, xx, 0], flow[yy, xx, 1], color="white",
                   angles="xy", scale_units="xy", scale=0.5, width=0.004)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="camera", choices=IMAGES)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--max-flow", type=float, default=4.0, help="largest true shift, px")
    parser.add_argument("--levels", type=int, default=3, help="pyramid levels, coarse to fine")
    parser.add_argument("--steps", type=int, default=300, help="Adam steps per level")
    parser.add_argument("--lr", type=float, default=0.1, help="Adam step, px at full size")
    parser.add_argument("--smoothness", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="optical_flow_warp.png", help="PNG to write")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.size % (1 << (args.levels - 1)):
        parser.error("--size must be divisible by 2 ** (levels - 1)")

    start = time.perf_counter()
    frame = jnp.asarray(load_image(args.image, args.size))
    truth = jnp.asarray(synthetic_flow(args.size, args.seed, args.max_flow))
    target = warp(frame, truth)
    print(f"{args.image} at {args.size}x{args.size}, true flow up to {args.max_flow} px; "
          f"endpoint error of zero flow: {endpoint_error(jnp.zeros_like(truth), truth):.3f} px")

    flow, history = estimate_flow(frame, target, truth, levels=args.levels, steps=args.steps,
                                  lr=args.lr, smoothness=args.smoothness)
    warped = warp(frame, flow)
    print("mean endpoint error: "
          + " -> ".join(f"{e:.3f}" for e in history) + " px (start, then after each level)")
    print(f"photometric error |warped - target|: {float(jnp.abs(warped - target).mean()):.4f} "
          f"(zero flow: {float(jnp.abs(frame - target).mean()):.4f})")
    save_figure(args.out, np.asarray(frame), np.asarray(target), np.asarray(warped),
                np.asarray(truth), np.asarray(flow))
    print(f"wrote {args.out}; total {time.perf_counter() - start:.1f} s")
    return {"epe_history": history, "epe": history[-1], "out": args.out}


if __name__ == "__main__":
    main()
