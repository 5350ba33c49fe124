"""Smoke test of an installed wheel (.ci/wheel), run outside the source tree.

Fails unless the native CPU module loads and runs: `native_status()["cpu"]` is "available", the
jitted forward and gradient hold our CPU custom calls, and their values match the jnp reference.
A wheel whose native module is broken must not pass on the reference.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np

import jax_gridsample
from jax_gridsample import _contract


def main() -> None:
    here = Path(jax_gridsample.__file__).resolve()
    if (here.parent.parent / "pyproject.toml").exists():
        raise SystemExit(f"imported from a source tree, not from the wheel: {here}")
    status = jax_gridsample.native_status()
    if status["cpu"] != "available":
        raise SystemExit(f"native CPU kernels not available: {status['cpu']}")

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((2, 3, 7, 9)), jnp.float32)
    grid = jnp.asarray(rng.uniform(-1.2, 1.2, (2, 5, 6, 2)), jnp.float32)

    def loss(x, grid, implementation):
        out = jax_gridsample.grid_sample(x, grid, padding_mode="reflection",
                                         implementation=implementation)
        return jnp.sum(out * out)

    forward = jax.jit(lambda x, g: jax_gridsample.grid_sample(x, g, implementation="native"))
    gradient = jax.jit(jax.grad(lambda x, g: loss(x, g, "native"), argnums=(0, 1)))
    for name, fn, target in ((("forward", forward, _contract.FORWARD_TARGET)),
                             ("gradient", gradient, _contract.CPU_BACKWARD_TARGET)):
        hlo = fn.lower(x, grid).as_text()
        if target not in hlo:
            raise SystemExit(f"the jitted {name} does not call {target}:\n{hlo}")

    got = forward(x, grid)
    want = jax_gridsample.grid_sample(x, grid, implementation="reference")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    got_grads = gradient(x, grid)
    want_grads = jax.grad(lambda x, g: loss(x, g, "reference"), argnums=(0, 1))(x, grid)
    for g, w in zip(got_grads, want_grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    print(f"wheel smoke test passed: jax_gridsample {jax_gridsample.__version__}, "
          f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, numpy {np.__version__}, "
          f"Python {sys.version.split()[0]}, from {here.parent}")


if __name__ == "__main__":
    main()
