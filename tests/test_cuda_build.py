"""The CUDA kernels are compiled wherever the build was told or decided to build them, so they
cannot rot unnoticed.

`pip install .` builds `jax_gridsample._cuda_kernels` when JAX_GRIDSAMPLE_CUDA (CMakeLists.txt)
says so: ON builds them wherever a CUDA compiler is found and fails without one; AUTO, the
default, only where an NVIDIA GPU is visible and nvcc is found; OFF never. CI has nvcc but no GPU
and exports JAX_GRIDSAMPLE_CUDA=ON (.ci/run): there the module must exist (a missing module fails
here, it is not skipped), its targets must register for the CUDA platform, and the "cuda"
lowering must emit our FFI targets with the CUDA backward's `deterministic` attribute. The
kernels themselves run only on a GPU (benchmarks/gpu.py).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess

import jax
import jax.numpy as jnp
import pytest

import jax_gridsample
from jax_gridsample import _contract, _native
from jax_gridsample._primitives import NATIVE_KERNELS


def _nvcc() -> str | None:
    """The CUDA compiler CMake's check_language(CUDA) would find: CUDACXX, else nvcc on PATH."""
    return os.environ.get("CUDACXX") or shutil.which("nvcc")


def _visible_nvidia_gpu() -> str | None:
    """CMakeLists.txt's test for a visible NVIDIA GPU, the evidence or None."""
    for pattern in ("/dev/nvidia[0-9]", "/dev/nvidia[0-9][0-9]", "/proc/driver/nvidia/gpus/*"):
        found = sorted(glob.glob(pattern))
        if found:
            return f"{found[0]} exists"
    smi = shutil.which("nvidia-smi") or shutil.which("nvidia-smi", path="/usr/lib/wsl/lib")
    if smi:
        try:
            listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        match = re.search(r"GPU \d+:.*", listing.stdout)
        if listing.returncode == 0 and match:
            return f"nvidia-smi -L: {match.group(0)}"
    return None


def _why_required() -> str | None:
    """Why the build must have made the CUDA module here, or None where it need not have.

    The setting is read from this process's environment, as the build read it: .ci/run exports
    it for both. A build told otherwise by a -D / cmake.define is not seen here."""
    setting = os.environ.get("JAX_GRIDSAMPLE_CUDA", "").strip().upper() or "AUTO"
    if setting in ("ON", "YES", "TRUE", "Y", "1"):
        return f"JAX_GRIDSAMPLE_CUDA={os.environ['JAX_GRIDSAMPLE_CUDA']} forces the CUDA build"
    if setting != "AUTO":
        return None
    gpu = _visible_nvidia_gpu()
    if gpu and _nvcc():
        return f"nvcc is at {_nvcc()} and an NVIDIA GPU is visible ({gpu})"
    return None


WHY_REQUIRED = _why_required()

needs_module = pytest.mark.skipif(
    WHY_REQUIRED is None and not _native.cuda_available(),
    reason="the build was neither told (JAX_GRIDSAMPLE_CUDA=ON) nor able (nvcc and a visible "
           "NVIDIA GPU) to build the CUDA kernels here: not an error",
)


@needs_module
def test_cuda_module_was_built():
    assert _native.cuda_available(), (
        f"{WHY_REQUIRED}, but jax_gridsample._cuda_kernels is missing: "
        f"{_native.native_status()['cuda']}"
    )
    from jax_gridsample import _cuda_kernels

    assert set(_cuda_kernels.registrations()) == {_native.FORWARD_TARGET, _native.BACKWARD_TARGET,
                                                   _contract.FORWARD_TARGET_V1,
                                                   _contract.BACKWARD_TARGET_V1}
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

    traced = jax.jit(jax.grad(loss, argnums=(0, 1))).trace(x, grid)
    if deterministic and _native.cuda_status() != "available":
        # The deterministic backward's workspace includes cub's sort storage, whose size only
        # a device can tell: lowering says so instead of guessing.
        with pytest.raises(RuntimeError, match="deterministic=True.*CUDA device"):
            traced.lower(lowering_platforms=("cuda",))
        return
    text = traced.lower(lowering_platforms=("cuda",)).as_text()
    assert _native.FORWARD_TARGET in text and _native.BACKWARD_TARGET in text
    assert f"deterministic = {str(deterministic).lower()}" in text
    # The backward's last result is its uint8 workspace: none needed for float32 with atomics.
    assert re.search(r"tensor<0xui8>\)$" if not deterministic else r"tensor<[1-9]\d*xui8>\)$",
                     _backward_call(text)), _backward_call(text)


def _backward_call(text: str) -> str:
    return next(line.strip() for line in text.splitlines()
                if "custom_call" in line and _native.BACKWARD_TARGET in line)


@needs_module
@pytest.mark.parametrize("dtype, input_grad, accumulator_floats", [
    (jnp.float16, True, 2 * 3 * 5 * 6),   # float32 accumulator of grad_input's size
    (jnp.bfloat16, True, 2 * 3 * 5 * 6),
    (jnp.float16, False, 0),              # grid gradient only: no accumulator
    (jnp.float32, True, 0),               # atomics straight into grad_input
])
def test_cuda_backward_workspace_is_declared(dtype, input_grad, accumulator_floats):
    """Half types accumulate grad_input in a float32 buffer that XLA allocates as the call's
    last result (XLA's FFI scratch allocator refused such requests on a GPU)."""
    x = jnp.ones((2, 3, 5, 6), dtype)
    grid = jnp.zeros((2, 4, 4, 2), dtype)

    def loss(x, grid):
        out = jax_gridsample.grid_sample(x, grid, implementation="native")
        return jnp.sum(out.astype(jnp.float32))

    argnums = (0, 1) if input_grad else 1
    text = jax.jit(jax.grad(loss, argnums=argnums)).trace(x, grid).lower(
        lowering_platforms=("cuda",)).as_text()
    expected = -(-accumulator_floats * 4 // 256) * 256  # rounded up to 256-byte alignment
    assert _backward_call(text).endswith(f"tensor<{expected}xui8>)"), _backward_call(text)


def test_auto_keeps_the_reference_on_cuda_until_verified():
    """The CUDA kernels have not run on a GPU yet: "auto" must not pick them."""
    x = jnp.ones((2, 3, 5, 6), jnp.float32)
    grid = jnp.zeros((2, 4, 4, 2), jnp.float32)
    text = jax.jit(lambda x, g: jax_gridsample.grid_sample(x, g)).trace(x, grid).lower(
        lowering_platforms=("cuda",)).as_text()
    assert _native.FORWARD_TARGET not in text
