"""One of the processes test_multihost.py starts: ``python multihost_check.py ID COUNT PORT``.

Process ID of COUNT, each with 4 CPU devices, joins the others through
``jax.distributed.initialize`` (coordinator on localhost:PORT), so that the global mesh spans every
process, and prints one JSON line of findings:

- cases: grid_sample sharded across the processes along the batch, the grid's points and the
  channels (native kernels and reference); per case, from one compiled program running the
  forward and the backward, its collectives and the largest difference of this process's shards
  of the output and of both gradients from the same step on unsharded operands, computed here;
- training: a few data-parallel steps (the batch sharded over every device, the parameters and
  Adam's state replicated) fitting an affine warp; the losses and this process's parameters.

A process that has not finished within DEADLINE_SECONDS (a hang: a peer gone, a collective that
never completes) prints every thread's stack and exits with an error.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys

DEADLINE_SECONDS = 100
LOCAL_DEVICES = 4
faulthandler.dump_traceback_later(DEADLINE_SECONDS, exit=True)
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + f" --xla_force_host_platform_device_count={LOCAL_DEVICES}").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from hlo_collectives import count_collectives  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jax_gridsample  # noqa: E402
from jax_gridsample._compat import set_mesh  # noqa: E402

# name -> (input shape, its spec, grid shape, its spec, implementation); one mesh axis "d" over
# every device of every process. 2D, bilinear, reflection.
CASES = {
    "batch-native": ((8, 3, 6, 5), P("d"), (8, 4, 3, 2), P("d"), "native"),
    "points-native": ((2, 3, 6, 5), P(), (2, 16, 3, 2), P(None, "d"), "native"),
    "points-reference": ((2, 3, 6, 5), P(), (2, 16, 3, 2), P(None, "d"), "reference"),
    "channels-native": ((2, 8, 6, 5), P(None, "d"), (2, 3, 4, 2), P(), "native"),
}


def put(value: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """A global array from the same host value in every process (each keeps its own shards)."""
    return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def largest_local_difference(got: jax.Array, expected: np.ndarray) -> float:
    """Over this process's shards of `got`, against the same slices of `expected`."""
    return max(float(np.max(np.abs(np.asarray(shard.data) - expected[shard.index]), initial=0))
               for shard in got.addressable_shards)


def run_case(mesh, x_shape, x_spec, g_shape, g_spec, implementation) -> dict:
    rng = np.random.default_rng(0)  # the same operands in every process
    x = rng.standard_normal(x_shape)
    grid = rng.uniform(-1.1, 1.1, g_shape)

    def step(x, grid):
        out, vjp = jax.vjp(lambda x, grid: jax_gridsample.grid_sample(
            x, grid, padding_mode="reflection", implementation=implementation), x, grid)
        return (out, *vjp(out))  # the output as its own cotangent: a loss's gradient shape

    shardings = (NamedSharding(mesh, x_spec), NamedSharding(mesh, g_spec))
    sharded = jax.jit(step, in_shardings=shardings)
    args = [put(a, s) for a, s in zip((x, grid), shardings, strict=True)]
    hlo = sharded.lower(*args).compile().as_text()
    local = jax.local_devices()[0]
    expected = jax.jit(step)(jax.device_put(x, local), jax.device_put(grid, local))
    return {
        "collectives": count_collectives(hlo),
        "max_difference": max(largest_local_difference(g, np.asarray(e))
                              for g, e in zip(sharded(*args), expected, strict=True)),
    }


def train(mesh, steps: int = 4) -> dict:
    """Data parallel: recover an affine warp of a batch of images spread over every device."""
    rng = np.random.default_rng(1)
    images = rng.standard_normal((8, 2, 12, 12)).astype(np.float32)
    true_theta = np.tile(np.array([[0.9, 0.1, 0.05], [-0.1, 0.95, -0.05]], np.float32), (8, 1, 1))

    def warp(theta, x):
        grid = jax_gridsample.affine_grid(theta, x.shape)
        return jax_gridsample.grid_sample(x, grid, padding_mode="border")

    local = jax.local_devices()[0]
    targets = np.asarray(jax.jit(warp)(jax.device_put(true_theta, local),
                                       jax.device_put(images, local)))
    identity = np.array([[1, 0, 0], [0, 1, 0]], np.float32)
    optimizer = optax.adam(0.02)

    @jax.jit
    def step(params, opt_state, images, targets):
        def loss_fn(params):
            theta = jnp.broadcast_to(params, (images.shape[0], 2, 3))
            return jnp.mean((warp(theta, images) - targets) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def fit(params, images, targets):
        opt_state = jax.jit(optimizer.init)(params)
        losses = []
        for _ in range(steps):
            params, opt_state, loss = step(params, opt_state, images, targets)
            losses.append(float(loss))
        return params, losses

    unsharded, _ = fit(*(jax.device_put(a, local) for a in (identity, images, targets)))
    on_batch = NamedSharding(mesh, P("d"))
    # jax.jit(optimizer.init) needs it on a mesh of explicit axes (jax.make_mesh's default since
    # jax 0.7; older releases have neither)
    with set_mesh(mesh):
        params, losses = fit(put(identity, NamedSharding(mesh, P())), put(images, on_batch),
                             put(targets, on_batch))
    copies = [np.asarray(shard.data) for shard in params.addressable_shards]
    return {"losses": losses, "params": copies[0].tolist(),
            "local_copies_equal": all(np.array_equal(c, copies[0]) for c in copies),
            "unsharded_difference": float(np.max(np.abs(copies[0] - np.asarray(unsharded))))}


def main(process_id: int, process_count: int, port: int) -> dict:
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"localhost:{port}", num_processes=process_count,
                               process_id=process_id, initialization_timeout=60)
    mesh = jax.make_mesh((jax.device_count(),), ("d",))
    found = {"process_index": jax.process_index(), "devices": jax.device_count(),
             "local_devices": jax.local_device_count(),
             "cases": {name: run_case(mesh, *case) for name, case in CASES.items()}}
    found["training"] = train(mesh)
    jax.distributed.shutdown()
    return found


if __name__ == "__main__":
    print(json.dumps(main(*(int(a) for a in sys.argv[1:4]))), flush=True)
