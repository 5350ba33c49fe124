"""Shared test configuration: float64 on, and XLA's CPU backend optimizations off.

The tests use tiny tensors, so LLVM's optimization of the jnp reference's many small programs
costs far more compile time than it saves; it changes no results beyond rounding the tests'
tolerances cover (the native kernels are compiled C++ and are unaffected).
"""

import os

if "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_backend_optimization_level=0").strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

# JAX_GRIDSAMPLE_TEST_PLATFORM=cuda runs the tests on the GPU (benchmarks/gpu.py does): JAX's
# default device becomes the GPU, so implementation="native" exercises the CUDA kernels and the
# FFI-level parity tests call the CUDA targets. Unset (the default): whatever JAX picks (CI: cpu).
TEST_PLATFORM = os.environ.get("JAX_GRIDSAMPLE_TEST_PLATFORM", "").lower()
if TEST_PLATFORM and TEST_PLATFORM != "cpu":
    jax.config.update("jax_platforms", f"{TEST_PLATFORM},cpu")
