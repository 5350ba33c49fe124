"""Partitioning grid_sample so that it runs where its data lies: no all-gather for the shardings
the op can honour locally.

XLA cannot see inside our FFI calls (nor, reliably, through the reference's gathers), so each
lowering wraps its computation in ``custom_partitioning``. The op is local along three kinds of
dimension, named here as factors shared by its operands and results:

- ``n``, the batch: every operand and result has it.
- ``p0 .. p{d-1}``, the grid's point axes (Do / Ho / Wo): each shard samples its own points from a
  whole input. The output has them; the input gradient does not, so it is the sum of the shards'
  partial gradients (a ``psum`` over the mesh axes the points are sharded on).
- ``c``, the channels: each shard samples its own channels at whole points. The grid gradient
  lacks it, so it is the sum over the channel shards.

The input's spatial axes ``s0 ..`` and the grid's coordinate axis ``k`` must be whole on every
device; an operand sharded there is gathered (the one gather the op needs), and so is one whose
sharding conflicts with another's (two factors on one mesh axis: the batch wins, then the points,
then the channels). Each device then runs the same computation on its local shapes, followed by
the sums above. With Shardy the same factors are given as the op's sharding rule; with GSPMD
``infer_sharding_from_operands`` derives the results' shardings from them. Under explicit mesh
axes (``jax.make_mesh``'s default) the forward's result type carries the sharding partition()
gives it (``forward_sharding``, from the abstract evaluation), and the computation is traced with
those axes made automatic (``lower_partitioned``). Single-device programs and ``shard_map``
bodies lower the computation directly.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import jax
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from ._compat import SHARDING_RULE_FACTOR_KINDS, mlir, use_abstract_mesh
from ._validate import is_static

BATCH, CHANNELS, COORDINATE = "n", "c", "k"


@dataclasses.dataclass(frozen=True)
class Signature:
    """The factor of each dimension of the op's operands and results, and what each result sums."""

    operands: tuple[tuple[str, ...], ...]
    results: tuple[tuple[str, ...], ...]
    whole: tuple[str, ...]  # factors every device needs whole (input spatial axes, coordinate)
    sums: tuple[tuple[str, ...], ...]  # per result: the operand factors it is a sum over

    def factors(self) -> tuple[str, ...]:
        """The shardable factors, in the order they claim mesh axes."""
        points = tuple(f for f in self.operands[-1] if f.startswith("p"))
        return (BATCH, *points, CHANNELS)


def signature(dims: int, channels_last: bool, output_mask: Sequence[bool] | None) -> Signature:
    """The forward's (``output_mask`` None) or backward's factors for ``dims`` spatial axes."""
    spatial = tuple(f"s{i}" for i in range(dims))
    points = tuple(f"p{i}" for i in range(dims))

    def with_channels(axes):
        return (BATCH, *axes, CHANNELS) if channels_last else (BATCH, CHANNELS, *axes)

    input, grid, output = with_channels(spatial), (BATCH, *points, COORDINATE), \
        with_channels(points)
    whole = (*spatial, COORDINATE)
    if output_mask is None:  # the forward's operands: (fill, input, grid)
        return Signature(((CHANNELS,), input, grid), (output,), whole, ((),))
    # The backward's: (fill, grad_output, input, grid); the fill value's gradient sums over the
    # batch and the points.
    wanted = [(input, points), (grid, (CHANNELS,)), ((CHANNELS,), (BATCH, *points))]
    results = [r for r, on in zip(wanted, output_mask, strict=True) if on]
    return Signature(((CHANNELS,), output, input, grid), tuple(r for r, _ in results), whole,
                     tuple(s for _, s in results))


def _mesh_axes(sharding, dim: int) -> tuple[str, ...]:
    """The mesh axes dimension ``dim`` of a value is sharded over (empty: not sharded)."""
    if not isinstance(sharding, NamedSharding) or dim >= len(sharding.spec):
        return ()
    entry = sharding.spec[dim]
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def assign(mesh, sig: Signature, values: Sequence) -> dict[str, tuple[str, ...]]:
    """The mesh axes each factor is sharded over, from the values' shardings (operands first).

    A factor takes the first proposal, in the values' order, that it can honour: mesh axes no
    earlier factor holds, whose device count divides the factor's size (so no shard is padded:
    padding would enter the sums).
    """
    tensors = [*sig.operands, *sig.results]
    assignment: dict[str, tuple[str, ...]] = {}
    used: set[str] = set()
    for factor in sig.factors():
        for axes_of, value in zip(tensors, values, strict=False):
            if factor not in axes_of:
                continue
            dim = axes_of.index(factor)
            axes = _mesh_axes(getattr(value, "sharding", None), dim)
            devices = math.prod(mesh.shape[a] for a in axes)
            if axes and not used.intersection(axes) and value.shape[dim] % devices == 0:
                assignment[factor] = axes
                used.update(axes)
                break
    return assignment


def _sharding(mesh, axes_of: tuple[str, ...], assignment) -> NamedSharding:
    spec = []
    for factor in axes_of:
        axes = assignment.get(factor, ())
        spec.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return NamedSharding(mesh, PartitionSpec(*spec))


def partitioned(fn: Callable, sig: Signature, multiple_results: bool) -> Callable:
    """``fn`` (the op's operands -> result or tuple of results) partitioned by ``sig``."""
    op = custom_partitioning(fn)

    def pack(shardings):
        return tuple(shardings) if multiple_results else shardings[0]

    def results(result_shape):
        return tuple(result_shape) if multiple_results else (result_shape,)

    def infer(mesh, arg_shapes, result_shape):
        assignment = assign(mesh, sig, arg_shapes)
        return pack([_sharding(mesh, r, assignment) for r in sig.results])

    def partition(mesh, arg_shapes, result_shape):
        assignment = assign(mesh, sig, [*arg_shapes, *results(result_shape)])
        sums = [tuple(a for f in summed for a in assignment.get(f, ())) for summed in sig.sums]

        def local(*operands):
            out = fn(*operands)
            out = tuple(out) if multiple_results else (out,)
            out = [jax.lax.psum(r, axes) if axes else r for r, axes in zip(out, sums, strict=True)]
            return pack(out)

        return (mesh, local, pack([_sharding(mesh, r, assignment) for r in sig.results]),
                tuple(_sharding(mesh, o, assignment) for o in sig.operands))

    def sharding_rule(mesh, operand_types, result_types):
        # Shardy: one factor per distinct name; the input's spatial axes and the coordinate axis
        # must be replicated; a factor missing from a result is summed over by partition().
        def spec(axes_of):
            return " ".join(axes_of)

        rule = (", ".join(spec(o) for o in sig.operands) + " -> "
                + ", ".join(spec(r) for r in sig.results))
        if not SHARDING_RULE_FACTOR_KINDS:  # partition() then gathers what Shardy shards there
            return rule
        return rule, {"need_replication_factors": sig.whole}

    op.def_partition(partition, infer_sharding_from_operands=infer, sharding_rule=sharding_rule)
    return op


def forward_sharding(input, grid, *, channels_last: bool, **_):
    """The forward result's sharding type: under explicit mesh axes, the one partition() makes
    (sharded on the batch, points and channels it can honour); otherwise the input's."""
    input, grid = (a.aval if isinstance(a, jax.core.Tracer) else a for a in (input, grid))
    mesh = next((a.sharding.mesh for a in (input, grid)
                 if getattr(a, "sharding", None) is not None and not a.sharding.mesh.empty), None)
    if mesh is None or not any(_mesh_axes(a.sharding, d) for a in (input, grid)
                               for d in range(len(a.shape))):
        return input.sharding
    sig = signature(len(grid.shape) - 2, channels_last, None)
    return _sharding(mesh, sig.results[0], assign(mesh, sig, (None, input, grid)))


def _auto(mesh):
    """``mesh`` with its explicit axes made automatic, or None if it has none."""
    explicit = getattr(mesh, "explicit_axes", ())
    if not explicit:
        return None
    return mesh.update_axis_types({a: AxisType.Auto for a in explicit})


def lower_partitioned(fn: Callable, ctx, *args, channels_last: bool,
                      output_mask: Sequence[bool] | None = None, sig: Signature | None = None,
                      **_):
    """Lower ``fn`` on the forward's (fill, input, grid) or the backward's (fill, grad_output,
    input, grid), partitioned over batch, points and channels; ``output_mask`` given means the
    backward (``sig``: another op's signature, with its ``output_mask``).

    Under explicit mesh axes the operands are traced with those axes made automatic: the result
    types were settled by the abstract evaluation, and the computation inside (the reference's
    gathers) must not be typed per shard again; partition() places it.
    """
    dims = len(ctx.avals_in[-1].shape) - 2
    backward = output_mask is not None
    if not all(is_static(a.shape) for a in ctx.avals_in):
        # a symbolic batch (jax.export): custom_partitioning takes static shapes only, so the
        # op is lowered whole, and a mesh's partitioner gathers its operands
        return mlir.lower_fun(fn, backward)(ctx, *args)
    sig = signature(dims, channels_last, output_mask) if sig is None else sig
    op = partitioned(fn, sig, multiple_results=backward)
    meshes = [a.sharding.mesh for a in ctx.avals_in if getattr(a, "sharding", None) is not None]
    auto = next((m for m in map(_auto, meshes) if m is not None), None)
    if auto is None:
        return mlir.lower_fun(op, backward)(ctx, *args)

    def untyped(aval):
        return aval.update(sharding=NamedSharding(auto, PartitionSpec()))

    ctx = ctx.replace(avals_in=[untyped(a) for a in ctx.avals_in],
                      avals_out=[untyped(a) for a in ctx.avals_out])
    with use_abstract_mesh(auto):
        return mlir.lower_fun(op, backward)(ctx, *args)
