"""Partitioning along the batch axis: sharded grid_sample runs per shard, with no all-gather.

XLA cannot see inside our FFI calls (nor, reliably, through the reference's gathers), so each
lowering wraps its computation in ``custom_partitioning``: when the batch axis N of the operands
is sharded over a mesh axis, every operand and result keeps that sharding on N and is
replicated on every other axis, and each device runs the same computation on its local batch.
Single-device programs and ``shard_map`` bodies lower the computation directly.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, PartitionSpec


def _batch_axis(arg_shapes):
    """The mesh axis (or axes) the operands' batch dimension is sharded over, or None."""
    for shape in arg_shapes:
        sharding = shape.sharding
        if isinstance(sharding, NamedSharding) and len(sharding.spec) and sharding.spec[0]:
            return sharding.spec[0]
    return None


def _on_batch(mesh, axis, shapes):
    return tuple(NamedSharding(mesh, PartitionSpec(axis, *([None] * (len(s.shape) - 1))))
                 for s in shapes)


def batch_partitioned(fn: Callable, multiple_results: bool) -> Callable:
    """``fn`` (arrays whose axis 0 is the batch -> array or tuple) partitioned along axis 0."""
    partitioned = custom_partitioning(fn)

    def results(result_shape):
        return tuple(result_shape) if multiple_results else (result_shape,)

    def pack(shardings):
        return shardings if multiple_results else shardings[0]

    def infer(mesh, arg_shapes, result_shape):
        return pack(_on_batch(mesh, _batch_axis(arg_shapes), results(result_shape)))

    def partition(mesh, arg_shapes, result_shape):
        axis = _batch_axis(arg_shapes)
        return (mesh, fn, pack(_on_batch(mesh, axis, results(result_shape))),
                _on_batch(mesh, axis, arg_shapes))

    def sharding_rule(mesh, operand_types, result_types):
        # Shardy: the batch factor is shared by everything; every other dimension is its own
        # factor that needs replication.
        names = (f"d{i}" for i in itertools.count())

        def spec(value_type):
            return " ".join(["n"] + [next(names) for _ in value_type.shape[1:]])

        operands = ", ".join(spec(t) for t in operand_types)
        outputs = ", ".join(spec(t) for t in result_types)
        return f"{operands} -> {outputs}"

    partitioned.def_partition(partition, infer_sharding_from_operands=infer,
                              sharding_rule=sharding_rule)
    return partitioned
