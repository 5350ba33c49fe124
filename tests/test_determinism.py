"""What ``deterministic=True`` promises for the jnp reference (README, "deterministic").

The reference's input gradient sums the updates of every tap that reads a pixel. A scatter-add
does that, and XLA:GPU runs it with atomics, whose order varies from run to run. With
``deterministic=True`` the reference sums them with no scatter at all (a sort, a segmented scan
and a gather: one fixed order). The programs are checked where that matters, lowered for CUDA
(no GPU needed), and the sums' values on the CPU: the same as the scatter-add's, and PyTorch's.
Without the flag, the reference on the CPU is deterministic already (XLA:CPU's scatter-add runs
in order): its bits are checked over repeated runs.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracle import random_case, torch_grid_sample

import jax_gridsample
from jax_gridsample import _reference

SCATTER = re.compile(r'"?stablehlo\.scatter"?\(')  # the op, not its attributes' name


def _loss(dims, mode, deterministic, implementation="reference"):
    def loss(x, grid):
        out = jax_gridsample.grid_sample(x, grid, mode=mode, implementation=implementation,
                                         deterministic=deterministic)
        return jnp.sum(out ** 2)
    return jax.jit(jax.grad(loss, argnums=(0, 1)))


@pytest.mark.parametrize("dims, mode", [(2, "bilinear"), (2, "bicubic"), (3, "nearest")])
def test_deterministic_gradient_has_no_scatter_for_cuda(dims, mode):
    """jax.grad's program for CUDA (forward and backward, the reference): a scatter-add without
    deterministic, none with it (the sort that replaces it instead)."""
    x, grid = (jnp.asarray(a, jnp.float32) for a in random_case(dims, np.random.default_rng(0)))

    def program(deterministic):
        return _loss(dims, mode, deterministic).trace(x, grid).lower(
            lowering_platforms=("cuda",)).as_text()

    assert len(SCATTER.findall(program(False))) == 1
    text = program(True)
    assert not SCATTER.findall(text)
    assert "stablehlo.sort" in text


@pytest.mark.parametrize("dims, mode, padding", [
    (2, "bilinear", "zeros"), (2, "nearest", "border"), (2, "bicubic", "reflection"),
    (3, "bilinear", "border"), (3, "nearest", "reflection"),
])
def test_deterministic_gradients_match(dims, mode, padding):
    """float64, on the shared shapes (taps of many points read the same pixels): the same input
    gradient as the scatter-add's, to rounding, and PyTorch's; the grid gradient unchanged."""
    rng = np.random.default_rng(1)
    x, grid = random_case(dims, rng)
    grad_output = rng.standard_normal(jax_gridsample.grid_sample(x, grid).shape)
    kwargs = dict(mode=mode, padding_mode=padding, implementation="reference")
    plain = jax_gridsample.grid_sample_backward(grad_output, x, grid, **kwargs)
    fixed = jax_gridsample.grid_sample_backward(grad_output, x, grid, deterministic=True,
                                                **kwargs)
    _, torch_input_grad, _ = torch_grid_sample(x, grid, grad_output, mode=mode,
                                               padding_mode=padding, align_corners=False)
    np.testing.assert_allclose(fixed[0], plain[0], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(fixed[0], torch_input_grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(fixed[1], plain[1])


def test_sums_in_fixed_order():
    """Rows hit many times, once, or never (the first and last rows among them)."""
    rng = np.random.default_rng(2)
    index = np.concatenate([rng.integers(1, 6, 40), [8, 3]]).astype(np.int32)
    updates = rng.standard_normal((index.size, 3))
    want = np.zeros((10, 3))
    np.add.at(want, index, updates)
    sums = jax.jit(_reference._sums_in_fixed_order, static_argnums=2)
    got = sums(jnp.asarray(index), jnp.asarray(updates), 10)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    assert not np.any(np.asarray(got)[[0, 6, 7, 9]])


@pytest.mark.parametrize("empty", ["batch", "channels", "points"])
def test_deterministic_empty_tensors(empty):
    x, grid = np.ones((2, 3, 4, 5)), np.zeros((2, 3, 4, 2))
    if empty == "batch":
        x, grid = x[:0], grid[:0]
    elif empty == "channels":
        x = x[:, :0]
    else:
        grid = grid[:, :0]
    grad_output = np.ones(jax_gridsample.grid_sample(x, grid).shape)
    grads = jax_gridsample.grid_sample_backward(grad_output, x, grid, implementation="reference",
                                                deterministic=True)
    assert grads[0].shape == x.shape and not np.any(np.asarray(grads[0]))
    assert grads[1].shape == grid.shape and not np.any(np.asarray(grads[1]))


def test_reference_on_the_cpu_is_deterministic_without_the_flag():
    """docs/guide.md, "Determinism": XLA:CPU runs the reference's scatter-add in order, so its
    input gradient has the same bits on every run without ``deterministic``. float32, 4096
    points on 12 pixels, where the order shows: the fixed order of ``deterministic=True`` (a
    segmented scan) gives other bits."""
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.standard_normal((1, 1, 3, 4)), jnp.float32)
    grid = jnp.asarray(rng.uniform(-1, 1, (1, 64, 64, 2)), jnp.float32)
    grad_output = jnp.asarray(rng.standard_normal((1, 1, 64, 64)), jnp.float32)

    def input_grad(deterministic):
        return np.asarray(jax.jit(jax_gridsample.grid_sample_backward, static_argnames=(
            "implementation", "deterministic"))(grad_output, x, grid, implementation="reference",
                                                deterministic=deterministic)[0])

    first = input_grad(False)
    for _ in range(4):
        np.testing.assert_array_equal(input_grad(False), first)
    assert not np.array_equal(input_grad(True), first)
    np.testing.assert_allclose(input_grad(True), first, rtol=1e-4)
