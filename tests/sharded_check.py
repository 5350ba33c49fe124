"""Run by test_sharding.py in a subprocess with 8 host devices; prints one JSON line of findings.

Each case samples sharded operands under ``jax.jit`` and reports, from one compiled program that
runs the forward and the backward (``jax.vjp`` with a cotangent sharded like the output), the
collectives it holds, the shardings of the output and of both gradients, and the largest
difference from the same program on unsharded operands. test_sharding.py holds what each case
must give. (The device count must be set before jax starts, so this cannot run inside the test
process.)
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from pathlib import Path

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=8").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from hlo_collectives import count_collectives  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jax_gridsample  # noqa: E402
from jax_gridsample._compat import shard_map  # noqa: E402

jax.config.update("jax_enable_x64", True)

@dataclasses.dataclass(frozen=True)
class Case:
    """Operands of the given shapes, sharded by the given specs over a mesh of 8 devices."""

    mesh: tuple[tuple[str, int], ...]
    input: tuple[tuple[int, ...], P]
    grid: tuple[tuple[int, ...], P]
    mode: str = "bilinear"
    layout: str | None = None
    implementation: str = "reference"
    explicit: bool = True  # the mesh's axes: Explicit (jax.make_mesh's default) or Auto
    wrt: tuple[int, ...] = (0, 1)  # which gradients the program computes (the rest is DCE'd)
    vmapped: bool = False  # the grid carries a leading vmapped axis, the input is shared
    padding: str | tuple[str, ...] = "reflection"
    # "constant": a per-channel fill value sharded by this spec, its gradient argument 2
    fill: P | None = None


# name -> case; 2D grids (N, Ho, Wo, 2), 3D grids (N, Do, Ho, Wo, 3)
CASES = {
    # 1. points: the grid sharded on one of its point axes, the input replicated
    "points-2d-ho": Case((("d", 8),), ((2, 3, 6, 5), P()), ((2, 16, 3, 2), P(None, "d"))),
    "points-2d-wo-nhwc-bicubic-native": Case(
        (("d", 8),), ((2, 6, 5, 3), P()), ((2, 3, 8, 2), P(None, None, "d")), mode="bicubic",
        layout="NHWC", implementation="native", explicit=False),
    "points-3d-do-native": Case((("d", 8),), ((1, 2, 4, 5, 6), P()),
                                ((1, 8, 3, 2, 3), P(None, "d")), implementation="native"),
    "points-3d-wo-ndhwc-bicubic": Case((("d", 8),), ((1, 4, 5, 6, 3), P()),
                                       ((1, 2, 3, 8, 3), P(None, None, None, "d")),
                                       mode="bicubic", layout="NDHWC", explicit=False),
    # 2. channels: the input sharded on C, the grid replicated
    "channels-2d-bicubic-native": Case((("d", 8),), ((2, 8, 6, 5), P(None, "d")),
                                       ((2, 3, 4, 2), P()), mode="bicubic",
                                       implementation="native"),
    "channels-3d-ndhwc": Case((("d", 8),), ((1, 4, 5, 3, 8), P(None, None, None, None, "d")),
                              ((1, 2, 3, 2, 3), P()), layout="NDHWC"),
    "channels-2d-nhwc-native-auto": Case((("d", 8),), ((2, 6, 5, 16), P(None, None, None, "d")),
                                         ((2, 3, 4, 2), P()), layout="NHWC",
                                         implementation="native", explicit=False),
    # 3. two-dimensional meshes
    "batch-points-2d-native": Case((("b", 2), ("d", 4)), ((2, 3, 6, 5), P("b")),
                                   ((2, 8, 3, 2), P("b", "d")), implementation="native"),
    "batch-channels-2d-bicubic": Case((("b", 2), ("d", 4)), ((2, 8, 6, 5), P("b", "d")),
                                      ((2, 3, 4, 2), P("b")), mode="bicubic"),
    "points-channels-2d": Case((("c", 2), ("d", 4)), ((2, 4, 6, 5), P(None, "c")),
                               ((2, 3, 8, 2), P(None, None, "d"))),
    # what the op cannot honour locally: the input sharded on a spatial axis
    "spatial-2d-native": Case((("d", 8),), ((2, 3, 16, 5), P(None, None, "d")),
                              ((2, 3, 4, 2), P()), implementation="native"),
    "spatial-points-3d": Case((("d", 8),), ((1, 2, 8, 3, 4), P(None, None, "d")),
                              ((1, 8, 3, 2, 3), P(None, "d"))),
    # the batch alone, as before
    "batch-3d-native": Case((("b", 8),), ((16, 3, 5, 6, 7), P("b")),
                            ((16, 3, 4, 2, 3), P("b")), implementation="native"),
    # composition: only one gradient asked for (the other is DCE'd with its sum), vmap
    "points-2d-grid-grad-only-native": Case((("d", 8),), ((2, 3, 6, 5), P()),
                                            ((2, 16, 3, 2), P(None, "d")),
                                            implementation="native", wrt=(1,)),
    "channels-3d-bicubic-input-grad-only-native": Case(
        (("d", 8),), ((1, 8, 4, 5, 3), P(None, "d")), ((1, 2, 3, 2, 3), P()), mode="bicubic",
        implementation="native", wrt=(0,)),
    "vmap-grids-2d-native": Case((("d", 8),), ((2, 3, 6, 5), P()),
                                 ((8, 2, 3, 4, 2), P("d")), implementation="native",
                                 vmapped=True),
    # constant (the fill gradient sums over the batch and the points) and wrap
    "points-2d-constant-native": Case((("d", 8),), ((2, 3, 6, 5), P()),
                                      ((2, 16, 3, 2), P(None, "d")), implementation="native",
                                      padding="constant", fill=P(), wrt=(0, 1, 2)),
    "channels-2d-constant-native": Case((("d", 8),), ((2, 8, 6, 5), P(None, "d")),
                                        ((2, 3, 4, 2), P()), implementation="native",
                                        padding="constant", fill=P("d"), wrt=(0, 1, 2)),
    "batch-3d-constant-wrap-native": Case((("b", 8),), ((16, 3, 5, 6, 7), P("b")),
                                          ((16, 3, 4, 2, 3), P("b")), implementation="native",
                                          padding=("constant", "wrap", "border"), fill=P(),
                                          wrt=(0, 1, 2)),
    "points-2d-wrap": Case((("d", 8),), ((2, 3, 6, 5), P()), ((2, 16, 3, 2), P(None, "d")),
                           padding=("wrap", "border")),
}

# Run again under the other partitioner (Shardy or GSPMD, whichever is not the default).
OTHER_PARTITIONER_CASES = ("points-2d-ho", "channels-2d-nhwc-native-auto",
                           "batch-points-2d-native")


def _max_difference(got, expected) -> float:
    """On the host: a jnp reduction would compile one more program per shape."""
    return max(float(np.max(np.abs(np.asarray(g) - np.asarray(e))))
               for g, e in zip(got, expected, strict=True))


def _spec(sharding) -> list:
    """A sharding's partition spec as JSON, trailing unsharded axes dropped."""
    spec = [list(e) if isinstance(e, tuple) else e for e in sharding.spec]
    while spec and spec[-1] is None:
        spec.pop()
    return spec


def run_case(case: Case) -> dict:
    names, sizes = zip(*case.mesh, strict=True)
    axis_type = AxisType.Explicit if case.explicit else AxisType.Auto
    mesh = jax.make_mesh(sizes, names, axis_types=(axis_type,) * len(names))
    rng = np.random.default_rng(0)
    (x_shape, x_spec), (g_shape, g_spec) = case.input, case.grid
    x = jnp.asarray(rng.standard_normal(x_shape))
    grid = jnp.asarray(rng.uniform(-1.1, 1.1, g_shape))
    channels = x_shape[-1] if case.layout in ("NHWC", "NDHWC") else x_shape[1]
    fill = jnp.linspace(-1.0, 2.0, channels)

    def sample(x, grid, fill):
        def one(grid):
            kw = dict(fill_value=fill) if case.fill is not None else {}
            return jax_gridsample.grid_sample(x, grid, mode=case.mode, padding_mode=case.padding,
                                              layout=case.layout,
                                              implementation=case.implementation, **kw)

        return jax.vmap(one)(grid) if case.vmapped else one(grid)

    weights = jnp.asarray(rng.standard_normal(jax.eval_shape(sample, x, grid, fill).shape))

    def step(x, grid, fill, weights):
        out, vjp = jax.vjp(sample, x, grid, fill)
        grads = vjp(out * weights)  # a cotangent sharded like the output, as a loss would give
        return (out, *(grads[i] for i in case.wrt))

    shardings = (NamedSharding(mesh, x_spec), NamedSharding(mesh, g_spec),
                 NamedSharding(mesh, case.fill if case.fill is not None else P()), None)
    sharded = jax.jit(step, in_shardings=shardings)
    operands = (x, grid, fill, weights)
    hlo = sharded.lower(*operands).compile().as_text()
    got = sharded(*(a if s is None else jax.device_put(a, s)
                    for a, s in zip(operands, shardings, strict=True)))
    expected = jax.jit(step)(*operands)
    return {
        "collectives": count_collectives(hlo),
        "kernel_calls": hlo.count("custom-call(") if case.implementation == "native" else None,
        "specs": [_spec(g.sharding) for g in got],
        "max_difference": _max_difference(got, expected),
    }


def shard_map_difference() -> float:
    """The batch-sharded step inside shard_map, each device on its own slice of the batch."""
    mesh = jax.make_mesh((8,), ("b",))
    rng = np.random.default_rng(1)
    on_batch = NamedSharding(mesh, P("b"))
    x, grid = (jax.device_put(a, on_batch) for a in (rng.standard_normal((16, 3, 5, 6)),
                                                     rng.uniform(-1.1, 1.1, (16, 3, 4, 2))))

    def step(x, grid):
        out, vjp = jax.vjp(jax_gridsample.grid_sample, x, grid)
        return (out, *vjp(out))

    mapped = jax.jit(shard_map(step, mesh=mesh, in_specs=(P("b"),) * 2,
                                   out_specs=(P("b"),) * 3))
    return _max_difference(mapped(x, grid), jax.jit(step)(x, grid))


def symbolic_batch_export() -> dict:
    """An artifact exported with a symbolic batch sharded over 8 devices (forward and both
    gradients, native): the largest difference from the unsharded call for 8 and 16 batch
    elements, and whether its program gathers the operands (custom_partitioning takes static
    shapes only, so the op is not partitioned there)."""
    from jax import export

    mesh = jax.make_mesh((8,), ("b",))
    on_batch = NamedSharding(mesh, P("b"))
    rng = np.random.default_rng(2)
    x, grid = rng.standard_normal((16, 3, 5, 6)), rng.uniform(-1.1, 1.1, (16, 3, 4, 2))

    def step(x, grid):
        out, vjp = jax.vjp(lambda x, g: jax_gridsample.grid_sample(x, g, implementation="native"),
                           x, grid)
        return (out, *vjp(out))

    (b,) = export.symbolic_shape("8*b")
    exported = export.export(jax.jit(step, in_shardings=(on_batch, on_batch)),
                             disabled_checks=jax_gridsample.export_safety_checks())(
        jax.ShapeDtypeStruct((b, 3, 5, 6), x.dtype), jax.ShapeDtypeStruct((b, 3, 4, 2), x.dtype))
    differences = []
    for n in (8, 16):
        args = [jax.device_put(a[:n], on_batch) for a in (x, grid)]
        differences.append(_max_difference(exported.call(*args), jax.jit(step)(x[:n], grid[:n])))
    hlo = jax.jit(exported.call).lower(*args).compile().as_text()
    return {"max_difference": max(differences),
            "all_gathers": count_collectives(hlo)["all-gather"]}


def example() -> dict:
    """examples/sharded_volume.py with tiny settings: its collectives and whether it learns."""
    path = Path(__file__).resolve().parents[1] / "examples" / "sharded_volume.py"
    spec = importlib.util.spec_from_file_location("sharded_volume", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--size", "8", "--points", "4096", "--steps", "20"])
    return {"collectives": result["collectives"], "samples_spec": _spec(result["samples_spec"]),
            "first_loss": float(result["losses"][0]), "last_loss": float(result["losses"][-1])}


def main() -> dict:
    found = {name: run_case(case) for name, case in CASES.items()}
    shardy = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", not shardy)
    found.update({f"other-partitioner-{name}": run_case(CASES[name])
                  for name in OTHER_PARTITIONER_CASES})
    jax.config.update("jax_use_shardy_partitioner", shardy)
    return {"devices": jax.device_count(), "cases": found,
            "shard_map_difference": shard_map_difference(), "example": example(),
            "symbolic_batch_export": symbolic_batch_export()}


if __name__ == "__main__":
    print(json.dumps(main()))
