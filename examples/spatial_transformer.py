"""Train a spatial transformer network on distorted digits, with and without the transformer.

scikit-learn's 8x8 digits (they ship inside the package) are upsampled onto a 40x40 canvas and
distorted by random rotations, scales and translations, all with affine_grid + grid_sample. A
localisation net predicts an affine transform per image, affine_grid + grid_sample resample the
canvas into a 24x24 crop, and a small CNN classifies the crop. The same classifier is trained a
second time with the transformer held at the identity, and both are scored on the same distorted
test digits. The networks are Flax NNX modules on channels-last images, which grid_sample reads
as they are (layout="NHWC"). Run:

    pip install ".[examples]" && python examples/spatial_transformer.py
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

CANVAS = 40  # the distorted images are CANVAS x CANVAS
DIGIT = 20  # an undistorted digit spans DIGIT x DIGIT pixels in the middle of the canvas
CROP = 24  # the transformer resamples the canvas into CROP x CROP for the classifier
F32 = jnp.float32  # explicit everywhere, so the example behaves the same under jax_enable_x64
IDENTITY = np.eye(2, 3, dtype=np.float32)  # the affine theta that leaves an image as it is


# --------------------------------------------------------------------------------------------
# Data: digits on a canvas, and random affine distortions (both through grid_sample)


def affine_matrices(angle, scale, shift_x, shift_y) -> jax.Array:
    """(N, 2, 3) thetas: rotation by angle, sampling step scale (> 1 shrinks), then a shift."""
    cos, sin = jnp.cos(angle) * scale, jnp.sin(angle) * scale
    return jnp.stack([jnp.stack([cos, -sin, shift_x], -1),
                      jnp.stack([sin, cos, shift_y], -1)], -2).astype(F32)


@partial(jax.jit, static_argnames="size")
def resample(images: jax.Array, theta: jax.Array, size: int = CANVAS) -> jax.Array:
    """images (N, h, w, 1) sampled at theta @ (x, y, 1) on a size x size output grid."""
    grid = jax_gridsample.affine_grid(theta, (images.shape[0], 1, size, size))
    return jax_gridsample.grid_sample(images, grid, mode="bilinear", padding_mode="zeros",
                                      layout="NHWC")


def load_canvas_digits(seed: int, test_fraction: float = 0.25):
    """The 1797 digits upsampled from 8x8 to DIGITxDIGIT in the middle of a CANVAS^2 canvas."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = jnp.asarray(digits.images[..., None] / 16.0, F32)  # (1797, 8, 8, 1) in [0, 1]
    n = images.shape[0]
    # theta maps canvas coordinates to digit coordinates: the 8x8 digit covers DIGIT/CANVAS of
    # the canvas, so one canvas step is CANVAS/DIGIT digit steps; zeros padding leaves the
    # rest of the canvas black.
    zoom = jnp.full((n,), CANVAS / DIGIT, F32)
    theta = affine_matrices(jnp.zeros_like(zoom), zoom, jnp.zeros_like(zoom), jnp.zeros_like(zoom))
    canvas = resample(images, theta, CANVAS)
    order = np.random.default_rng(seed).permutation(n)
    n_test = int(n * test_fraction)
    test, train = order[:n_test], order[n_test:]
    labels = jnp.asarray(digits.target, jnp.int32)
    return (canvas[train], labels[train]), (canvas[test], labels[test])


def random_distortions(key, n: int, strength: float) -> jax.Array:
    """Random rotations (up to 60 deg), scales (0.7x to 1.2x) and shifts (up to 5 px) at 1.0."""
    k_angle, k_scale, k_shift = jax.random.split(key, 3)
    angle = jax.random.uniform(k_angle, (n,), F32, -1.0, 1.0) * strength * (np.pi / 3)
    # theta's scale is the inverse of the size the digit appears at
    size = jnp.exp(jax.random.uniform(k_scale, (n,), F32, np.log(0.7), np.log(1.2)) * strength)
    shift = jax.random.uniform(k_shift, (n, 2), F32, -1.0, 1.0) * strength * 0.25
    return affine_matrices(angle, 1.0 / size, shift[:, 0], shift[:, 1])


# --------------------------------------------------------------------------------------------
# The networks: Flax NNX modules on channels-last (N, H, W, C) images

RELU_INIT = nnx.initializers.he_normal()  # weights of layers that feed a ReLU


def pool(x: jax.Array) -> jax.Array:
    """2x2 max pooling of (N, H, W, C), H and W even. nnx.max_pool computes the same, but its
    gradient (XLA's select-and-scatter) made a training step 1.5 times as long on the CPU."""
    n, h, w, c = x.shape
    return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


class Localiser(nnx.Module):
    """The transformer's localisation net: (N, 40, 40, 1) canvases -> (N, 2, 3) thetas."""

    def __init__(self, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(1, 8, (3, 3), strides=2, kernel_init=RELU_INIT, rngs=rngs)
        self.conv2 = nnx.Conv(8, 16, (3, 3), strides=2, kernel_init=RELU_INIT, rngs=rngs)
        self.fc1 = nnx.Linear(16 * 5 * 5, 32, kernel_init=RELU_INIT, rngs=rngs)
        # zero weights and the identity as bias: the transformer begins by passing the image
        # through, and learns to deviate from that
        self.fc2 = nnx.Linear(32, 6, kernel_init=nnx.initializers.zeros,
                              bias_init=nnx.initializers.constant(IDENTITY.ravel()), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = nnx.relu(self.conv1(pool(x)))  # 20x20 -> 10x10
        x = nnx.relu(self.conv2(x))  # 5x5
        x = nnx.relu(self.fc1(x.reshape(x.shape[0], -1)))
        return self.fc2(x).reshape(-1, 2, 3)


class Classifier(nnx.Module):
    """A small CNN: (N, 24, 24, 1) crops -> (N, 10) logits."""

    def __init__(self, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(1, 16, (3, 3), kernel_init=RELU_INIT, rngs=rngs)
        self.conv2 = nnx.Conv(16, 32, (3, 3), kernel_init=RELU_INIT, rngs=rngs)
        self.fc = nnx.Linear(32 * 6 * 6, 10, kernel_init=RELU_INIT, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = pool(nnx.relu(self.conv1(x)))  # 12x12
        x = pool(nnx.relu(self.conv2(x)))  # 6x6
        return self.fc(x.reshape(x.shape[0], -1))


class SpatialTransformerNet(nnx.Module):
    """A spatial transformer in front of the classifier, or (use_stn=False) the classifier on
    the identity crop, the middle CROP x CROP of the canvas."""

    def __init__(self, *, use_stn: bool, mode: str, padding: str, rngs: nnx.Rngs):
        # the classifier is made first, so that both variants start from the same weights
        self.classifier = Classifier(rngs)
        self.localiser = Localiser(rngs) if use_stn else None
        self.mode, self.padding = mode, padding

    def transform(self, images: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The spatial transformer: theta from the localiser (or the identity), then resample."""
        n = images.shape[0]
        if self.localiser is not None:
            theta = self.localiser(images)
        else:
            theta = jnp.broadcast_to(jnp.asarray(IDENTITY), (n, 2, 3))
        grid = jax_gridsample.affine_grid(theta, (n, 1, CROP, CROP))
        crops = jax_gridsample.grid_sample(images, grid, mode=self.mode,
                                           padding_mode=self.padding, layout="NHWC")
        return crops, theta

    def __call__(self, images: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Logits, and the crops the classifier saw and the thetas that made them."""
        crops, theta = self.transform(images)
        return self.classifier(crops), crops, theta


# --------------------------------------------------------------------------------------------
# Training

def loss_fn(model: SpatialTransformerNet, images: jax.Array,
            targets: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mean cross-entropy, and the batch's accuracy as the auxiliary output."""
    logits, _, _ = model(images)
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()
    return loss, jnp.mean(jnp.argmax(logits, -1) == targets)


def train(model: SpatialTransformerNet, train_set, steps: int, key, *, batch: int, lr: float,
          strength: float, label: str) -> tuple[np.ndarray, np.ndarray]:
    """Adam with a cosine decay on model (in place); the per-step losses and accuracies."""
    canvas, labels = train_set
    optimizer = nnx.Optimizer(model, optax.adam(optax.cosine_decay_schedule(lr, steps, alpha=0.05)),
                              wrt=nnx.Param)
    # The step takes and returns the state of (model, optimizer), split from them once, and
    # merges it back into objects inside the trace: nnx.jit would walk the objects in Python at
    # every call (Flax's "performance considerations" guide).
    graphdef, state = nnx.split((model, optimizer))

    @jax.jit
    def step(state: nnx.State, key):
        model, optimizer = nnx.merge(graphdef, state)
        # a fresh random distortion of a random batch every step, made inside the jitted step
        k_index, k_distort = jax.random.split(key)
        index = jax.random.randint(k_index, (batch,), 0, canvas.shape[0], jnp.int32)
        images = resample(canvas[index], random_distortions(k_distort, batch, strength))
        (loss, accuracy), grads = nnx.value_and_grad(loss_fn, has_aux=True)(
            model, images, labels[index])
        apply_gradients(optimizer, model, grads)
        return nnx.state((model, optimizer)), loss, accuracy

    losses, accuracies = [], []
    bar = tqdm(range(steps), desc=label, ncols=90, mininterval=0.5)
    for i in bar:
        state, loss, accuracy = step(state, jax.random.fold_in(key, i))
        losses.append(loss)
        accuracies.append(accuracy)
        if i % 25 == 0 or i == steps - 1:  # running means over the last 50 steps
            recent = slice(max(0, i - 49), i + 1)
            bar.set_postfix(loss=f"{float(np.mean(losses[recent])):.3f}",
                            acc=f"{float(np.mean(accuracies[recent])):.3f}")
    bar.close()
    nnx.update((model, optimizer), state)  # the trained weights into the model
    return np.asarray(losses, np.float64), np.asarray(accuracies, np.float64)


@nnx.jit
def predict(model: SpatialTransformerNet, images: jax.Array) -> tuple[jax.Array, ...]:
    """The model's logits, crops and thetas for a batch, compiled."""
    return model(images)


def evaluate(model: SpatialTransformerNet, images: jax.Array, labels: jax.Array):
    """Test accuracy, the predictions, and the crops and thetas the model made."""
    logits, crops, theta = predict(model, images)
    predictions = jnp.argmax(logits, -1)
    return float(jnp.mean(predictions == labels)), predictions, crops, theta


def save_figure(path, images, crops, theta, labels, predictions, n_mistakes: int = 0) -> None:
    """Top: distorted inputs with the region the transformer samples; bottom: its output, under
    the true and the predicted class (red, and a red frame, where they differ). The last
    n_mistakes columns, set apart, are more of the transformer's mistakes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = images.shape[0]
    n_first = columns - n_mistakes
    # the crop's outer corners are (+-1, +-1) in its normalised coordinates; theta maps them
    # into the input, whose pixel centres are at ((x + 1) * size - 1) / 2 (align_corners=False)
    corners = np.array([[-1, -1, 1], [1, -1, 1], [1, 1, 1], [-1, 1, 1], [-1, -1, 1]], np.float64)
    outline = ((corners @ np.asarray(theta, np.float64).transpose(0, 2, 1)) + 1) * CANVAS / 2 - 0.5
    # a narrow empty column between the digits of each class and the mistakes
    slots = list(range(n_first)) + ([None] if n_mistakes else []) + list(range(n_first, columns))
    widths = [0.4 if j is None else 1.0 for j in slots]
    fig, axes = plt.subplots(2, len(slots), figsize=(1.2 * sum(widths), 3.5), squeeze=False,
                             gridspec_kw={"width_ratios": widths})
    for slot, j in enumerate(slots):
        if j is None:
            axes[0, slot].axis("off")
            axes[1, slot].axis("off")
            continue
        for row, picture in enumerate((images[j, ..., 0], crops[j, ..., 0])):
            ax = axes[row, slot]
            ax.imshow(np.asarray(picture), cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[0, slot].plot(outline[j, :, 0], outline[j, :, 1], color="tab:orange", lw=1)
        axes[0, slot].set_xlim(-0.5, CANVAS - 0.5)
        axes[0, slot].set_ylim(CANVAS - 0.5, -0.5)
        wrong = predictions[j] != labels[j]
        axes[1, slot].set_title(f"true {int(labels[j])}\npredicted {int(predictions[j])}",
                                fontsize=9, color="red" if wrong else "black",
                                fontweight="bold" if wrong else "normal")
        if wrong:
            for spine in axes[1, slot].spines.values():
                spine.set_color("red")
                spine.set_linewidth(2.5)
    axes[0, 0].set_ylabel("distorted\ninput", fontsize=9)
    axes[1, 0].set_ylabel("transformer\noutput", fontsize=9)
    fig.suptitle("Distorted test digits, the region the transformer samples (orange), its output, "
                 "and the true and predicted class (red: wrong)", fontsize=10)
    fig.tight_layout()
    if n_mistakes:  # a heading over the mistakes, once the layout has placed them
        left = axes[0, n_first + 1].get_position()
        right = axes[0, -1].get_position()
        fig.text((left.x0 + right.x1) / 2, left.y1 + 0.015, "misclassified", ha="center",
                 va="bottom", fontsize=9, color="red")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600, help="training steps per model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="spatial_transformer.png", help="PNG to write")
    parser.add_argument("--mode", default="bilinear", choices=["bilinear", "nearest", "bicubic"],
                        help="the transformer's interpolation (nearest has no grid gradient, "
                             "so the localiser cannot learn)")
    parser.add_argument("--padding", default="zeros", choices=["zeros", "border", "reflection"],
                        help="the transformer's padding mode")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3, help="Adam's initial learning rate")
    parser.add_argument("--strength", type=float, default=1.0,
                        help="distortion strength (1.0: up to 60 deg, 0.7x-1.2x, 5 px)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")

    start = time.perf_counter()
    print(f"backend: {jax.default_backend()}, native kernels: {jax_gridsample.native_status()}")
    train_set, (test_canvas, test_labels) = load_canvas_digits(args.seed)
    key_init, key_train, key_test = jax.random.split(jax.random.key(args.seed), 3)
    # the test digits get one fixed random distortion each, the same for both models
    test_images = resample(test_canvas,
                           random_distortions(key_test, test_canvas.shape[0], args.strength))
    print(f"{train_set[0].shape[0]} training digits (distorted afresh every step), "
          f"{test_images.shape[0]} distorted test digits, {CANVAS}x{CANVAS} canvas")

    if args.mode == "nearest":
        print("note: nearest sampling has a zero gradient with respect to the grid, so the "
              "localiser gets no signal and the transformer stays at the identity")
    # the same key: both classifiers start from the same weights
    stn = SpatialTransformerNet(use_stn=True, mode=args.mode, padding=args.padding,
                                rngs=nnx.Rngs(key_init))
    plain = SpatialTransformerNet(use_stn=False, mode=args.mode, padding=args.padding,
                                  rngs=nnx.Rngs(key_init))
    settings = dict(batch=args.batch, lr=args.lr, strength=args.strength)
    stn_losses, stn_accs = train(stn, train_set, args.steps, key_train, label="STN + CNN",
                                 **settings)
    plain_losses, plain_accs = train(plain, train_set, args.steps, key_train,
                                     label="CNN alone", **settings)

    stn_acc, predictions, crops, theta = evaluate(stn, test_images, test_labels)
    plain_acc, _, _, _ = evaluate(plain, test_images, test_labels)
    print(f"\ntest accuracy on {test_images.shape[0]} distorted digits "
          f"({args.steps} steps, seed {args.seed}, mode {args.mode}, padding {args.padding}):")
    print(f"  STN + CNN   {stn_acc:.4f}")
    print(f"  CNN alone   {plain_acc:.4f}")

    # one test digit of each class for the picture, then up to four of the transformer's
    # mistakes
    labels_np, predictions_np = np.asarray(test_labels), np.asarray(predictions)
    shown = [int(np.flatnonzero(labels_np == c)[0]) for c in range(10) if np.any(labels_np == c)]
    mistakes = [int(i) for i in np.flatnonzero(predictions_np != labels_np) if i not in shown][:4]
    shown = np.asarray(shown + mistakes)
    save_figure(args.out, test_images[shown], crops[shown], theta[shown], labels_np[shown],
                predictions_np[shown], n_mistakes=len(mistakes))
    print(f"wrote {args.out}; total {time.perf_counter() - start:.1f} s")
    return {"stn_accuracy": stn_acc, "plain_accuracy": plain_acc,
            "stn_losses": stn_losses, "plain_losses": plain_losses,
            "stn_train_accuracy": stn_accs, "plain_train_accuracy": plain_accs, "out": args.out}


if __name__ == "__main__":
    main()
