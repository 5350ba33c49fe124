"""The forward and backward JAX primitives: abstract evaluation, lowering per platform, autodiff.

The forward's operands are ``(fill, input, grid)``: ``fill`` holds the fill value of each channel,
shape ``(C,)``, read only with a "constant" axis (zeros otherwise). The backward's are
``(fill, grad_output, input, grid)``, and its results the gradients of the input, the grid and
the fill value. Both carry the same parameters: ``interpolation`` (the aclnn integer code),
``padding`` (a tuple of one code per grid component, x first), ``align_corners``,
``channels_last``, ``implementation`` and ``deterministic`` (used by the reference and the kernels
whose backward is not deterministic by default); the backward adds ``output_mask`` (input, grid,
fill; the last only with a "constant" axis) and returns only the outputs it asks for. Each lowers
to the jnp reference on every platform; platforms with a native kernel (see ``_native``) get their
own lowering on top. A kernel without the fill value computes "zeros", and the fill value's term
(``_fill.py``) is added around it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import numpy as np

from . import _ascend, _native
from ._compat import (
    Primitive,
    ad,
    apply_primitive,
    batching,
    guard_cpu_ffi_results,
    register_dce_rule,
    register_partitioned_lowering,
)
from ._enums import Padding
from ._fill import add_fill, fill_vjp, term_params
from ._gradient_rules import jvp_of_reference, output_mask_dce
from ._reference import grid_for_aclnn, grid_sample_backward_reference, grid_sample_reference
from ._sharding import forward_sharding, lower_partitioned
from ._validate import output_shape

grid_sample_p = Primitive("jax_gridsample_forward")
grid_sample_backward_p = Primitive("jax_gridsample_backward")
grid_sample_backward_p.multiple_results = True


# --- abstract evaluation ---------------------------------------------------------------------

# Results are derived from the operands' avals (not built anew) so that they keep what jax tracks
# beside shape and dtype, such as how a value varies over shard_map's manual axes.

def _forward_abstract(fill, input, grid, *, channels_last, **_):
    del fill
    shape = output_shape(input.shape, grid.shape, channels_last)
    if not hasattr(input, "update"):
        return jax.core.ShapedArray(shape, input.dtype)
    return input.update(shape=shape, sharding=forward_sharding(input, grid,
                                                               channels_last=channels_last))


def _backward_abstract(fill, grad_output, input, grid, *, output_mask, **_):
    return [aval for aval, wanted in zip((input, grid, fill), output_mask, strict=True) if wanted]


# --- the reference as a lowering ------------------------------------------------------------

def _forward_reference(fill, input, grid, *, interpolation, padding, align_corners, channels_last,
                       implementation, deterministic):
    del implementation, deterministic
    # "zeros" (plus the fill term), rounded to the input's dtype once, as the kernels round
    output = grid_sample_reference(input, grid, interpolation, zeros_for_constant(padding),
                                   align_corners, channels_last, rounded=False)
    if Padding.CONSTANT in padding:
        output = add_fill(output, fill, grid, **term_params(
            input.shape, channels_last=channels_last, interpolation=interpolation,
            padding=padding, align_corners=align_corners))
    return output.astype(input.dtype)


def _backward_reference(fill, grad_output, input, grid, *, interpolation, padding, align_corners,
                        channels_last, output_mask, implementation, deterministic):
    del implementation
    # the grid gradient rounded once, after the fill term's part
    input_grad, grid_grad = grid_sample_backward_reference(
        grad_output, input, grid, interpolation, zeros_for_constant(padding), align_corners,
        output_mask[:2], channels_last, deterministic, rounded=False,
    )
    fill_grad = None
    if output_mask[1] or output_mask[2]:
        grid_grad, fill_grad = add_fill_gradients(
            fill, grad_output, input, grid, grid_grad, output_mask=output_mask,
            interpolation=interpolation, padding=padding, align_corners=align_corners,
            channels_last=channels_last)
    if grid_grad is not None:
        grid_grad = grid_grad.astype(grid.dtype)
    return [g for g in (input_grad, grid_grad, fill_grad) if g is not None]


def add_fill_gradients(fill, grad_output, input, grid, grid_grad, *, output_mask, **params):
    """``(grid_grad, fill_grad)``: the "zeros" ``grid_grad`` (None if not asked for) plus the fill
    term's part, in ``grid_grad``'s dtype, and the fill value's gradient (None if not asked
    for); no term, and a fill gradient of zeros, without a "constant" axis."""
    fill_grad = jax.numpy.zeros_like(fill) if output_mask[2] else None
    if Padding.CONSTANT not in params["padding"]:
        return grid_grad, fill_grad
    grid_part, fill_grad = fill_vjp(grad_output, fill, grid, **term_params(input.shape, **params))
    if output_mask[1]:
        grid_grad = (grid_grad + grid_part).astype(grid_grad.dtype)
    return grid_grad, fill_grad if output_mask[2] else None


def _no_native_kernel(platform: str) -> NotImplementedError:
    return NotImplementedError(
        f"implementation='native' was requested, but no native grid_sample kernel is available "
        f"for platform {platform!r} ({_native.native_status().get(platform, 'none is built')}); "
        "use implementation='auto' or 'reference'"
    )


def _reference_lowering(reference_fn, multiple_results):
    def rule(ctx, *args, implementation, **params):
        if implementation == "native":
            raise _no_native_kernel((ctx.platforms or ctx.module_context.platforms)[0])

        def fn(*operands):  # positional only: custom_partitioning binds no keywords
            results = reference_fn(*operands, implementation=implementation, **params)
            return tuple(results) if multiple_results else results

        return lower_partitioned(fn, ctx, *args, **params)

    return rule


def zeros_for_constant(padding: tuple[int, ...]) -> tuple[int, ...]:
    """``padding`` with "constant" axes as "zeros": what a call without the fill value samples."""
    return tuple(int(Padding.ZEROS) if p == Padding.CONSTANT else p for p in padding)


def forward_attributes(*, interpolation, padding, align_corners, channels_last, **_):
    """The FFI attributes of the forward targets (our CPU and CUDA kernels, version 2):
    ``padding`` holds one mode per grid component, x first."""
    return dict(interpolation=np.int64(interpolation), padding=np.asarray(padding, np.int64),
                align_corners=bool(align_corners), channels_last=bool(channels_last))


def backward_attributes(*, output_mask, **params):
    """The FFI attributes of the backward targets (version 2, and the Ascend ones): the
    forward's plus the output mask of the input and grid gradients."""
    return dict(forward_attributes(**params), input_mask=bool(output_mask[0]),
                grid_mask=bool(output_mask[1]))


def cpu_backward_attributes(*, output_mask, **params):
    """The CPU backward's (version 3): also whether the fill value's gradient is asked for."""
    return dict(backward_attributes(output_mask=output_mask, **params),
                fill_mask=bool(output_mask[2]))


def cuda_backward_attributes(*, deterministic, **params):
    """The CUDA backward's attributes: the CPU ones plus ``deterministic`` (fixed-order
    reduction instead of atomics for grad_input)."""
    return dict(backward_attributes(**params), deterministic=bool(deterministic))


@dataclasses.dataclass(frozen=True)
class NativeKernel:
    """A platform's FFI targets and how to call them."""

    available: Callable[[], bool]  # whether the compiled module loaded and registered
    forward_target: str
    backward_target: str
    forward_attributes: Callable[..., dict] = forward_attributes
    backward_attributes: Callable[..., dict] = backward_attributes
    # rejects(platform, backward, avals_in, **params): why the kernel does not cover a call, or
    # None if it does (None here: it covers all); "auto" lowers the others to the reference,
    # "native" raises for them with that reason.
    rejects: Callable[..., str | None] | None = None
    # trusted(platform, backward=..., avals_in=..., **params): whether "auto" picks this kernel
    # for a call it covers. False for one not yet verified on its hardware, which then runs
    # only when asked for with implementation="native"; the Ascend kernel's answer is its
    # self-check's, per kind of call.
    trusted: Callable[..., bool] = lambda platform, **params: True
    # grid_for_kernel(grid, spatial, padding, align_corners) -> (grid, replaced): for a kernel
    # without docs/semantics.md's guard (aclnn), the grid it is sent instead, and where the
    # guard replaced a coordinate (the grid gradient is zero there).
    grid_for_kernel: Callable[..., tuple] | None = None
    # compute_dtype(platform, backward, avals_in, **params) -> dtype: the dtype the kernel is
    # called in, when that differs from the call's (operands cast to it, results rounded back
    # once); None: the call's own.
    compute_dtype: Callable[..., np.dtype] | None = None
    # takes_fill: whether the forward target takes the fill operand and "constant" axes (version
    # 2 of ours); a kernel without samples them as "zeros" and XLA adds the fill term.
    takes_fill: bool = True
    # backward_takes_fill: the same of the backward target (version 3, the CPU's), which then
    # also returns the fill value's gradient; without, XLA computes the fill term's gradients.
    backward_takes_fill: bool = False
    # backward_workspace(grad_output, input, grid, **params): bytes of a uint8 scratch result
    # that the backward target takes after its gradients (None: it takes none). XLA allocates
    # it like any other buffer, so it is valid in CUDA graphs too.
    backward_workspace: Callable[..., int] | None = None
    # (forward, backward): channels-last calls with fewer channels than this run the
    # channels-first kernel between XLA transposes (0: never). On the CPU, a channels-last
    # pixel of a few channels is too short for the kernel's vectors, and channels-first planes
    # stay in the cache where whole channels-last pixels do not: the detour wins below 4
    # channels for the forward and below 8 for the backward, and loses above.
    channels_first_below: tuple[int, int] = (0, 0)


def _never_trusted(platform, **params) -> bool:
    return False


# Platforms (JAX lowering platform names) with a native kernel.
NATIVE_KERNELS = {
    "cpu": NativeKernel(_native.cpu_available, _native.FORWARD_TARGET,
                        _native.CPU_BACKWARD_TARGET, backward_attributes=cpu_backward_attributes,
                        backward_takes_fill=True, channels_first_below=(4, 8)),
    # NVIDIA GPUs: ffi/cuda, built where nvcc and a GPU were present at install (CI forces
    # it). One H200 run (benchmarks/GPU_RESULTS.md) failed the backwards that needed scratch
    # memory, and their workspace result since has not run on a GPU yet (issue 7), so "auto"
    # keeps the reference.
    "cuda": NativeKernel(_native.cuda_available, _native.FORWARD_TARGET, _native.BACKWARD_TARGET,
                         backward_attributes=cuda_backward_attributes, trusted=_never_trusted,
                         backward_workspace=_native.cuda_backward_workspace_bytes),
}


def ascend_native_kernel(kernel: _ascend.AscendKernel) -> NativeKernel:
    """The NativeKernel of an Ascend kernel (``_ascend.AscendKernel``): its targets, the
    probe's and the documentation's routing, and its self-check."""
    return NativeKernel(_ascend.available, kernel.forward_target, kernel.backward_target,
                        kernel.forward_attributes, kernel.backward_attributes,
                        rejects=kernel.rejects, trusted=kernel.trusted,
                        grid_for_kernel=grid_for_aclnn, compute_dtype=kernel.compute_dtype,
                        takes_fill=False)


# Ascend NPUs: CANN's aclnn grid sampler (see _ascend.py), under every spelling of the platform.
ASCEND_KERNEL = ascend_native_kernel(_ascend.KERNEL)
NATIVE_KERNELS.update(dict.fromkeys(_ascend.PLATFORM_NAMES, ASCEND_KERNEL))


def _native_lowering(platform, kernel: NativeKernel, backward: bool, reference_rule):
    """Lower to the FFI target unless the reference was asked for or the kernel is absent."""
    target = kernel.backward_target if backward else kernel.forward_target
    attributes = kernel.backward_attributes if backward else kernel.forward_attributes
    # XLA's CPU compiler in some old jaxlibs cannot have an FFI call as a root (see _compat).
    guard = guard_cpu_ffi_results if platform == "cpu" else tuple

    def rule(ctx, *args, implementation, **params):
        if implementation == "reference":
            return reference_rule(ctx, *args, implementation="auto", **params)
        available = kernel.available()
        if not available and implementation == "native":
            raise _no_native_kernel(platform)
        why_not = None
        if available and kernel.rejects is not None:
            why_not = kernel.rejects(platform, backward, ctx.avals_in, **params)
        if implementation == "auto" and not (
            available and why_not is None
            and kernel.trusted(platform, backward=backward, avals_in=ctx.avals_in, **params)
        ):
            return reference_rule(ctx, *args, implementation="auto", **params)
        if why_not is not None:
            raise NotImplementedError(
                f"the native grid_sample kernel for platform {platform!r} does not cover this "
                f"call: {why_not}; use implementation='auto' or 'reference'"
            )

        def call_kernel(operands, params):
            if (not backward and not kernel.takes_fill
                    and Padding.CONSTANT in params["padding"]):
                # "zeros" on the kernel, then the fill term on the call's own grid
                fill, input, grid = operands
                sampled = dict(params, padding=zeros_for_constant(params["padding"]))
                return add_fill(call_kernel(operands, sampled), fill, grid,
                                **term_params(input.shape, **params))
            if (backward and not kernel.backward_takes_fill
                    and Padding.CONSTANT in params["padding"]):
                # "zeros"'s gradients on the kernel, the fill term's around it
                fill, grad_output, input, grid = operands
                mask = params["output_mask"]
                results = iter(call_kernel(operands, dict(
                    params, padding=zeros_for_constant(params["padding"]),
                    output_mask=(*mask[:2], False))) if any(mask[:2]) else ())
                input_grad = next(results) if mask[0] else None
                grid_grad, fill_grad = add_fill_gradients(
                    fill, grad_output, input, grid, next(results) if mask[1] else None, **params)
                return tuple(g for g in (input_grad, grid_grad, fill_grad) if g is not None)
            original = operands[-2].dtype
            wanted = None
            if kernel.compute_dtype is not None:
                wanted = kernel.compute_dtype(platform, backward, operands, **params)
            if wanted is not None and wanted != original:
                results = call_kernel([o.astype(wanted) for o in operands], params)
                if not backward:
                    return results.astype(original)
                return tuple(r.astype(original) for r in results)
            replaced = None
            if kernel.grid_for_kernel is not None:
                input, grid = operands[-2], operands[-1]
                spatial = input.shape[1:-1] if params["channels_last"] else input.shape[2:]
                grid, replaced = kernel.grid_for_kernel(grid, spatial, params["padding"],
                                                        params["align_corners"])
                operands = (*operands[:-1], grid)
            if not backward:
                fill, input, grid = operands
                avals = _forward_abstract(*operands, **params)
                if Padding.CONSTANT not in params["padding"]:
                    fill = jax.numpy.zeros((0,), input.dtype)  # not read: no C-sized buffer
                ffi_operands = (input, grid, fill) if kernel.takes_fill else (input, grid)
                output = jax.ffi.ffi_call(target, avals)(*ffi_operands, **attributes(**params))
                return guard((output,))[0]
            avals = _backward_abstract(*operands, **params)
            fill, *operands = operands  # (grad_output, input, grid)
            if kernel.backward_takes_fill:
                if Padding.CONSTANT not in params["padding"]:
                    fill = jax.numpy.zeros((0,), fill.dtype)  # not read: no C-sized buffer
                operands = [*operands, fill]
            workspace = kernel.backward_workspace
            if workspace is not None:
                nbytes = workspace(*operands, **params)
                avals = [*avals, jax.ShapeDtypeStruct((nbytes,), np.uint8)]
            results = jax.ffi.ffi_call(target, avals)(*operands, **attributes(**params))
            results = list(guard(results[:-1] if workspace is not None else results))
            if replaced is not None and params["output_mask"][1]:
                at = int(params["output_mask"][0])  # the grid gradient's index
                results[at] = jax.numpy.where(replaced, 0, results[at]).astype(results[at].dtype)
            return tuple(results)

        def call(*operands):  # on whatever (local) shapes the partitioner gives it
            below = kernel.channels_first_below[1 if backward else 0]
            channels = operands[-2].shape[-1]  # the input's: (fill, [grad_output,] input, grid)
            if not (params["channels_last"] and channels < below):
                return call_kernel(operands, params)
            return _via_channels_first(call_kernel, operands, params, backward)

        return lower_partitioned(call, ctx, *args, **params)

    return rule


def _via_channels_first(call_kernel, operands, params, backward):
    """A channels-last call run on the channels-first kernel (NativeKernel.channels_first_below):
    the operands with channels moved to axis 1, the results moved back."""
    def first(x):
        return jax.numpy.moveaxis(x, -1, 1)

    def last(x):
        return jax.numpy.moveaxis(x, 1, -1)

    params = dict(params, channels_last=False)
    if not backward:
        fill, input, grid = operands
        return last(call_kernel((fill, first(input), grid), params))
    fill, grad_output, input, grid = operands
    results = call_kernel((fill, first(grad_output), first(input), grid), params)
    if params["output_mask"][0]:
        return (last(results[0]), *results[1:])
    return results


# --- autodiff: custom_vjp on top of the two primitives ---------------------------------------

@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def grid_sample_op(input: jax.Array, grid: jax.Array, fill: jax.Array, params: tuple) -> jax.Array:
    """Bind the forward; ``fill`` has shape (C,); ``params`` is a sorted tuple of the
    primitive's (name, value) pairs."""
    return grid_sample_p.bind(fill, input, grid, **dict(params))


def _op_forward(input, grid, fill, params):
    return grid_sample_op(input, grid, fill, params), (input, grid, fill)


def _op_backward(params, residuals, grad_output):
    input, grid, fill = residuals
    params = dict(params)
    with_fill = Padding.CONSTANT in params["padding"]
    grads = grid_sample_backward_p.bind(fill, grad_output, input, grid,
                                        output_mask=(True, True, with_fill), **params)
    input_grad, grid_grad = grads[:2]
    return input_grad, grid_grad, grads[2] if with_fill else jax.numpy.zeros_like(fill)


grid_sample_op.defvjp(_op_forward, _op_backward)


def grid_sample_backward_op(grad_output, input, grid, fill, params: tuple, output_mask):
    """Bind the backward (``fill``: shape (C,)); returns (grad_input or None, grad_grid or None,
    grad_fill or None), ``output_mask`` asking for each (the last only with a "constant" axis)."""
    if not any(output_mask):
        return None, None, None
    grads = iter(grid_sample_backward_p.bind(
        fill, grad_output, input, grid, output_mask=tuple(output_mask), **dict(params)
    ))
    return tuple(next(grads) if wanted else None for wanted in output_mask)


# --- registration ---------------------------------------------------------------------------

def _register() -> None:
    from ._batching import backward_batcher, forward_batcher

    for primitive, abstract in ((grid_sample_p, _forward_abstract),
                                (grid_sample_backward_p, _backward_abstract)):
        primitive.def_abstract_eval(abstract)
        primitive.def_impl(functools.partial(apply_primitive, primitive))
    batching.primitive_batchers[grid_sample_p] = forward_batcher
    batching.primitive_batchers[grid_sample_backward_p] = backward_batcher

    forward_rule = _reference_lowering(_forward_reference, multiple_results=False)
    backward_rule = _reference_lowering(_backward_reference, multiple_results=True)
    register_partitioned_lowering(grid_sample_p, forward_rule)
    register_partitioned_lowering(grid_sample_backward_p, backward_rule)
    def register_native(platform, kernel):
        register_partitioned_lowering(
            grid_sample_p, _native_lowering(platform, kernel, False, forward_rule),
            platform=platform,
        )
        register_partitioned_lowering(
            grid_sample_backward_p, _native_lowering(platform, kernel, True, backward_rule),
            platform=platform,
        )

    for platform, kernel in NATIVE_KERNELS.items():
        register_native(platform, kernel)


_register()


register_dce_rule(grid_sample_backward_p, output_mask_dce)
ad.primitive_jvps[grid_sample_backward_p] = jvp_of_reference(grid_sample_backward_p,
                                                             _backward_reference)
