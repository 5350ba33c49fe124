"""The CUDA kernels are compiled wherever nvcc is present, so they cannot rot unnoticed.

CI has nvcc but no GPU: `pip install .` must then build `jax_gridsample._cuda_kernels` (a missing
module fails here, it is not skipped), its targets must register for the CUDA platform, and the
"cuda" lowering must emit our FFI targets with the CUDA backward's `deterministic` attribute. The
kernels themselves run only on a GPU (benchmarks/gpu.py).
"""

from __future__ import annotations

import os
import shutil

import jax
import jax.numpy as jnp
import pytest

import jax_gridsample
from jax_gridsample import _native
from jax_gridsample._primitives import NATIVE_KERNELS


def _nvcc() -> str | None:
    return shutil.which("nvcc") or next(
        (p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None)


needs_module = pytest.mark.skipif(
    _nvcc() is None and not _native.cuda_available(),
    reason="no nvcc here: the CUDA kernels are not built (not an error)",
)


@needs_module
def test_cuda_module_was_built():
    assert _native.cuda_available(), (
        f"nvcc is at {_nvcc()} but jax_gridsample._cuda_kernels is missing: "
        f"{_native.native_status()['cuda']}"
    )
    from jax_gridsample import _cuda_kernels

    assert set(_cuda_kernels.registrations()) == {_native.FORWARD_TARGET, _native.BACKWARD_TARGET}
    assert _native.native_status()["cuda"] in ("available", "compiled, no CUDA device")


def test_status_never_raises():
    status = _native.native_status()
    assert isinstance(status["cuda"], str) and status["cuda"]
    assert "cuda" in NATIVE_KERNELS


@needs_module
@pytest.mark.parametrize("deterministic", [False, True])
def test_cuda_lowering_calls_our_targets(deterministic):
    """Cross-platform lowering (no GPU needed) shows what a GPU run would call."""
    x = jnp.ones((2, 3, 5, 6), jnp.float32)
    grid = jnp.zeros((2, 4, 4, 2), jnp.float32)

    def loss(x, grid):
        out = jax_gridsample.grid_sample(x, grid, implementation="native",
                                         deterministic=deterministic)
        return jnp.sum(out * out)

    lowered = jax.jit(jax.grad(loss, argnums=(0, 1))).trace(x, grid).lower(
        lowering_platforms=("cuda",))
    text = lowered.as_text()
    assert _native.FORWARD_TARGET in text and _native.BACKWARD_TARGET in text
    assert f"deterministic = {str(deterministic).lower()}" in text


def test_auto_keeps_the_reference_on_cuda_until_verified():
    """The CUDA kernels have not run on a GPU yet: "auto" must not pick them."""
    x = jnp.ones((2, 3, 5, 6), jnp.float32)
    grid = jnp.zeros((2, 4, 4, 2), jnp.float32)
    text = jax.jit(lambda x, g: jax_gridsample.grid_sample(x, g)).trace(x, grid).lower(
        lowering_platforms=("cuda",)).as_text()
    assert _native.FORWARD_TARGET not in text
