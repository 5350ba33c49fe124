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
