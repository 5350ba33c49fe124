"""Train a spatial transformer network on distorted digits, with and without the transformer.

scikit-learn's 8x8 digits (they ship inside the package) are upsampled onto a 40x40 canvas and
distorted by random rotations, scales and translations, all with affine_grid + grid_sample. A
localisation net predicts an affine transform per image, affine_grid + grid_sample resample the
canvas into a 24x24 crop, and a small CNN classifies the crop. The same classifier is trained a
second time with the transformer held at the identity, and both are scored on the same distorted
test digits. Run:

    pip install ".[examples]" && python examples/spatial_transformer.py
"""

from __future__ import annotations

import argparse
import math
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm import tqdm

import jax_gridsample

CANVAS = 40  # the distorted images are CANVAS x CANVAS
DIGIT = 20  # an undistorted digit spans DIGIT x DIGIT pixels in the middle of the canvas
CROP = 24  # the transformer resamples the canvas into CROP x CROP for the classifier
F32 = jnp.float32  # explicit everywhere, so the example behaves the same under jax_enable_x64


# --------------------------------------------------------------------------------------------
# Data: digits on a canvas, and random affine distortions (both through grid_sample)


def affine_matrices(angle, scale, shift_x, shift_y) -> jax.Array:
    """(N, 2, 3) thetas: rotation by angle, sampling step scale (> 1 shrinks), then a shift."""
    cos, sin = jnp.cos(angle) * scale, jnp.sin(angle) * scale
    return jnp.stack([jnp.stack([cos, -sin, shift_x], -1),
                      jnp.stack([sin, cos, shift_y], -1)], -2).astype(F32)


@partial(jax.jit, static_argnames="size")
def resample(images: jax.Array, theta: jax.Array, size: int = CANVAS) -> jax.Array:
    """images (N, 1, h, w) sampled at theta @ (x, y, 1) on a size x size output grid."""
    grid = jax_gridsample.affine_grid(theta, (images.shape[0], 1, size, size))
    return jax_gridsample.grid_sample(images, grid, mode="bilinear", padding_mode="zeros")


def load_canvas_digits(seed: int, test_fraction: float = 0.25):
    """The 1797 digits upsampled from 8x8 to DIGITxDIGIT in the middle of a CANVAS^2 canvas."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = jnp.asarray(digits.images[:, None] / 16.0, F32)  # (1797, 1, 8, 8) in [0, 1]
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
# The networks: plain functions of a dict of arrays


def dense_init(key, n_in: int, n_out: int) -> dict:
    w = jax.random.normal(key, (n_in, n_out), F32) * math.sqrt(2.0 / n_in)
    return {"w": w, "b": jnp.zeros((n_out,), F32)}


def conv_init(key, c_in: int, c_out: int, k: int = 3) -> dict:
    w = jax.random.normal(key, (c_out, c_in, k, k), F32) * math.sqrt(2.0 / (c_in * k * k))
    return {"w": w, "b": jnp.zeros((c_out,), F32)}


def dense(p: dict, x: jax.Array) -> jax.Array:
    return x @ p["w"] + p["b"]


def conv(p: dict, x: jax.Array, stride: int = 1) -> jax.Array:
    y = jax.lax.conv_general_dilated(x, p["w"], (stride, stride), "SAME",
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return y + p["b"][None, :, None, None]


def max_pool(x: jax.Array) -> jax.Array:
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def init_params(key) -> dict:
    keys = jax.random.split(key, 6)
    localiser = {
        "conv1": conv_init(keys[0], 1, 8),
        "conv2": conv_init(keys[1], 8, 16),
        "fc1": dense_init(keys[2], 16 * 5 * 5, 32),
        # the last layer starts at zero weights and the identity as bias: the transformer
        # begins by passing the image through, and learns to deviate from that
        "fc2": {"w": jnp.zeros((32, 6), F32), "b": jnp.asarray([1, 0, 0, 0, 1, 0], F32)},
    }
    classifier = {
        "conv1": conv_init(keys[3], 1, 16),
        "conv2": conv_init(keys[4], 16, 32),
        "fc": dense_init(keys[5], 32 * 6 * 6, 10),
    }
    return {"localiser": localiser, "classifier": classifier}


def localise(p: dict, x: jax.Array) -> jax.Array:
    """(N, 1, 40, 40) -> (N, 2, 3) affine transforms."""
    x = jax.nn.relu(conv(p["conv1"], max_pool(x), stride=2))  # 10x10
    x = jax.nn.relu(conv(p["conv2"], x, stride=2))  # 5x5
    x = jax.nn.relu(dense(p["fc1"], x.reshape(x.shape[0], -1)))
    return dense(p["fc2"], x).reshape(-1, 2, 3)


def classify(p: dict, x: jax.Array) -> jax.Array:
    """(N, 1, 24, 24) -> (N, 10) logits."""
    x = max_pool(jax.nn.relu(conv(p["conv1"], x)))  # 12x12
    x = max_pool(jax.nn.relu(conv(p["conv2"], x)))  # 6x6
    return dense(p["fc"], x.reshape(x.shape[0], -1))


def transform(params: dict, images: jax.Array, use_stn: bool, mode: str, padding: str):
    """The spatial transformer: theta from the localiser (or the identity), then resample."""
    n = images.shape[0]
    if use_stn:
        theta = localise(params["localiser"], images)
    else:
        theta = jnp.broadcast_to(jnp.eye(2, 3, dtype=F32), (n, 2, 3))
    grid = jax_gridsample.affine_grid(theta, (n, 1, CROP, CROP))
    return jax_gridsample.grid_sample(images, grid, mode=mode, padding_mode=padding), theta


def predict(params, images, use_stn, mode, padding):
    """Logits, and the crops the classifier saw and the thetas that made them."""
    crops, theta = transform(params, images, use_stn, mode, padding)
    return classify(params["classifier"], crops), crops, theta


# --------------------------------------------------------------------------------------------
# Training


def train(params, train_set, steps, key, *, use_stn, mode, padding, batch, lr, strength, label):
    canvas, labels = train_set
    optimizer = optax.adam(optax.cosine_decay_schedule(lr, steps, alpha=0.05))
    if not use_stn:  # the localiser is not used: train (and carry) the classifier only
        params = {"classifier": params["classifier"]}
    opt_state = optimizer.init(params)

    def loss_fn(params, images, targets):
        logits, _, _ = predict(params, images, use_stn, mode, padding)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()
        return loss, jnp.mean(jnp.argmax(logits, -1) == targets)

    @jax.jit
    def step(params, opt_state, key):
        # a fresh random distortion of a random batch every step, made inside the jitted step
        k_index, k_distort = jax.random.split(key)
        index = jax.random.randint(k_index, (batch,), 0, canvas.shape[0], jnp.int32)
        images = resample(canvas[index], random_distortions(k_distort, batch, strength))
        (loss, accuracy), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, images, labels[index])
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, accuracy

    losses, accuracies = [], []
    bar = tqdm(range(steps), desc=label, ncols=90, mininterval=0.5)
    for i in bar:
        params, opt_state, loss, accuracy = step(params, opt_state, jax.random.fold_in(key, i))
        losses.append(loss)
        accuracies.append(accuracy)
        if i % 25 == 0 or i == steps - 1:  # running means over the last 50 steps
            recent = slice(max(0, i - 49), i + 1)
            bar.set_postfix(loss=f"{float(np.mean(losses[recent])):.3f}",
                            acc=f"{float(np.mean(accuracies[recent])):.3f}")
    bar.close()
    return params, np.asarray(losses, np.float64), np.asarray(accuracies, np.float64)


def evaluate(params, images, labels, use_stn, mode, padding):
    """Test accuracy, the predictions, and the crops and thetas the model made."""
    run = jax.jit(partial(predict, use_stn=use_stn, mode=mode, padding=padding))
    logits, crops, theta = run(params, images)
    predictions = jnp.argmax(logits, -1)
    return float(jnp.mean(predictions == labels)), predictions, crops, theta


def save_figure(path, images, crops, theta, labels, predictions):
    """Top: distorted inputs with the region the transformer samples; bottom: its output."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = images.shape[0]
    # the crop's outer corners are (+-1, +-1) in its normalised coordinates; theta maps them
    # into the input, whose pixel centres are at ((x + 1) * size - 1) / 2 (align_corners=False)
    corners = np.array([[-1, -1, 1], [1, -1, 1], [1, 1, 1], [-1, 1, 1], [-1, -1, 1]], np.float64)
    outline = ((corners @ np.asarray(theta, np.float64).transpose(0, 2, 1)) + 1) * CANVAS / 2 - 0.5
    fig, axes = plt.subplots(2, columns, figsize=(1.3 * columns, 3.1))
    for j in range(columns):
        for row, picture in enumerate((images[j, 0], crops[j, 0])):
            ax = axes[row, j]
            ax.imshow(np.asarray(picture), cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[0, j].plot(outline[j, :, 0], outline[j, :, 1], color="tab:orange", lw=1)
        axes[0, j].set_xlim(-0.5, CANVAS - 0.5)
        axes[0, j].set_ylim(CANVAS - 0.5, -0.5)
        axes[1, j].set_title(f"{int(predictions[j])}", fontsize=9,
                             color="black" if predictions[j] == labels[j] else "red")
    axes[0, 0].set_ylabel("distorted\ninput", fontsize=9)
    axes[1, 0].set_ylabel("transformer\noutput", fontsize=9)
    fig.suptitle("Distorted digits, the region the transformer samples (orange), "
                 "its output and the predicted class", fontsize=10)
    fig.tight_layout()
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
    params = init_params(key_init)
    settings = dict(mode=args.mode, padding=args.padding, batch=args.batch, lr=args.lr,
                    strength=args.strength)
    stn, stn_losses, stn_accs = train(params, train_set, args.steps, key_train, use_stn=True,
                                      label="STN + CNN", **settings)
    plain, plain_losses, plain_accs = train(params, train_set, args.steps, key_train,
                                            use_stn=False, label="CNN alone", **settings)

    kw = dict(mode=args.mode, padding=args.padding)
    stn_acc, predictions, crops, theta = evaluate(stn, test_images, test_labels, True, **kw)
    plain_acc, _, _, _ = evaluate(plain, test_images, test_labels, False, **kw)
    print(f"\ntest accuracy on {test_images.shape[0]} distorted digits "
          f"({args.steps} steps, seed {args.seed}, mode {args.mode}, padding {args.padding}):")
    print(f"  STN + CNN   {stn_acc:.4f}")
    print(f"  CNN alone   {plain_acc:.4f}")

    # one test digit of each class for the picture
    labels_np = np.asarray(test_labels)
    shown = np.asarray([np.flatnonzero(labels_np == c)[0] for c in range(10)
                        if np.any(labels_np == c)])
    save_figure(args.out, test_images[shown], crops[shown], theta[shown], labels_np[shown],
                np.asarray(predictions)[shown])
    print(f"wrote {args.out}; total {time.perf_counter() - start:.1f} s")
    return {"stn_accuracy": stn_acc, "plain_accuracy": plain_acc,
            "stn_losses": stn_losses, "plain_losses": plain_losses,
            "stn_train_accuracy": stn_accs, "plain_train_accuracy": plain_accs, "out": args.out}


if __name__ == "__main__":
    main()
