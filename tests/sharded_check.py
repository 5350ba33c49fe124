"""Run by test_sharding.py in a subprocess with 8 host devices; prints one JSON line of findings.

(The device count must be set before jax starts, so this cannot run inside the test process.)
"""

import json
import os
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jax_gridsample  # noqa: E402

jax.config.update("jax_enable_x64", True)


def _max_difference(got, expected) -> float:
    return max(float(jnp.max(jnp.abs(g - e))) for g, e in zip(got, expected, strict=True))


def main(implementation: str, dims: int) -> dict:
    mesh = jax.make_mesh((8,), ("batch",))
    rng = np.random.default_rng(0)
    spatial, out_spatial = (5, 6, 7)[-dims:], (3, 4, 2)[-dims:]
    x = jnp.asarray(rng.standard_normal((16, 3) + spatial))
    grid = jnp.asarray(rng.uniform(-1.1, 1.1, (16,) + out_spatial + (dims,)))
    weights = jnp.asarray(rng.standard_normal((16, 3) + out_spatial))
    on_batch = NamedSharding(mesh, P("batch"))

    def step(x, grid, weights):
        def loss(x, grid):
            out = jax_gridsample.grid_sample(x, grid, padding_mode="reflection",
                                             implementation=implementation)
            return jnp.sum(out * weights, axis=tuple(range(1, out.ndim)))  # per-example losses

        out, vjp = jax.vjp(loss, x, grid)
        return (out,) + vjp(jnp.ones_like(out))

    sharded = jax.jit(step, in_shardings=(on_batch,) * 3)
    compiled = sharded.lower(x, grid, weights).compile().as_text()
    args = [jax.device_put(a, on_batch) for a in (x, grid, weights)]
    got = sharded(*args)
    expected = jax.jit(step)(x, grid, weights)

    # the same op inside shard_map, each device on its own slice of the batch
    mapped = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P("batch"),) * 3,
                                   out_specs=(P("batch"),) * 3))
    via_shard_map = mapped(*args)
    return {
        "collectives": [op for op in ("all-gather", "all-reduce", "all-to-all",
                                      "collective-permute") if op in compiled],
        "kernel_calls": compiled.count("custom-call(") if implementation == "native" else None,
        "batch_axes": [g.sharding.spec[0] for g in got],
        "max_difference": _max_difference(got, expected),
        "shard_map_difference": _max_difference(via_shard_map, expected),
        "devices": jax.device_count(),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))
