"""Test helpers: the torch oracle, random test data and the parameter grid every test shares."""

from __future__ import annotations

import itertools
import os

import jax.numpy as jnp
import numpy as np
import torch

import jax_gridsample

# Whether the tests run on the GPU (JAX_GRIDSAMPLE_TEST_PLATFORM=cuda, see conftest.py).
ON_CUDA = os.environ.get("JAX_GRIDSAMPLE_TEST_PLATFORM", "").lower() == "cuda"

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")

# Every (spatial rank, mode, padding, align_corners) we support.
ALL_CASES = list(itertools.product((2, 3), MODES, PADDINGS, (False, True)))
# Those PyTorch 2.13 has too: its bicubic is 2D only (3D bicubic is ours alone).
CASES = [case for case in ALL_CASES if not (case[0] == 3 and case[1] == "bicubic")]


def case_id(case) -> str:
    dims, mode, padding, align_corners = case
    return f"{dims}d-{mode}-{padding}-{'ac' if align_corners else 'noac'}"


def implementations() -> list[str]:
    """Both: the tests run on the CPU, where `pip install` always builds the native kernel.

    Where it failed to build or load, the native cases fail (with the reason) rather than skip.
    """
    return ["reference", "native"]


def random_case(dims: int, rng: np.random.Generator, batch=2, channels=3, spread=1.3):
    """A small input and a grid that reaches a little past [-1, 1] on every side.

    Its shapes are the ones the tests share: a test that samples arrays of these shapes (float64,
    say) reuses the programs every other such test compiled for the same configuration, as JAX
    caches an eagerly called operation's program by its shapes, dtypes and parameters.
    """
    spatial = (4, 5, 6)[-dims:]
    out_spatial = (3, 4, 5)[-dims:]
    x = rng.standard_normal((batch, channels) + spatial)
    grid = rng.uniform(-spread, spread, (batch,) + out_spatial + (dims,))
    return x, grid


def torch_grid_sample(x, grid, grad_output, *, mode, padding_mode, align_corners):
    """PyTorch's forward and both gradients, in the dtype of the numpy arrays given."""
    tx = torch.tensor(x, requires_grad=True)
    tg = torch.tensor(grid, requires_grad=True)
    out = torch.nn.functional.grid_sample(
        tx, tg, mode=mode, padding_mode=padding_mode, align_corners=align_corners
    )
    out.backward(torch.tensor(grad_output))
    return out.detach().numpy(), tx.grad.numpy(), tg.grad.numpy()


def ours(x, grid, grad_output, *, implementation, **kwargs):
    """Our forward and both gradients (through grid_sample_backward)."""
    x, grid, grad_output = jnp.asarray(x), jnp.asarray(grid), jnp.asarray(grad_output)
    out = jax_gridsample.grid_sample(x, grid, implementation=implementation, **kwargs)
    gi, gg = jax_gridsample.grid_sample_backward(
        grad_output, x, grid, implementation=implementation, **kwargs
    )
    return np.asarray(out), np.asarray(gi), np.asarray(gg)


# Grid values around and far beyond the positions without fractional bits (2^23 in float32, 2^52
# in float64) on a row of 5 (align_corners=False) or 4 (True): spans of 5 and 3, so that a huge
# position (a multiple of a large power of two) does not reflect to the first pixel by chance.
# Where below 2^23, the positions are exact in float32.
WITHOUT_FRACTION = [1e30, -1e30, 3e38, 1e10, -3e9, 1e6, 2.0**21 - 1, 2.0**22, 2.0**24 - 2,
                    2.0**24, -(2.0**24)]
