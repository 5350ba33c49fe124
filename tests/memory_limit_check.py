"""Run by test_out_of_memory.py in a subprocess: native calls whose host buffers cannot be
allocated under an address-space limit (``resource.setrlimit``); prints one JSON line.

Each case compiles its call first, then lowers the process's address-space limit to what it
uses now, plus the call's XLA results, plus half of the buffer the kernel must allocate: XLA's
allocations succeed, the kernel's fails. The error the call raises is reported, then the limit
is lifted and the same compiled call runs again (the process and the CPU thread pool survive).
"""

from __future__ import annotations

import json
import resource

import jax
import jax.numpy as jnp
import numpy as np

import jax_gridsample as gs

# Float32 values in the buffer the kernel allocates: large enough that half of it dwarfs what
# XLA and the allocator may map besides during a call.
BUFFER_FLOATS = 50_000_000


def _address_space_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def _under_limit(compiled, args, result_bytes: int, buffer_bytes: int) -> tuple[str, list]:
    """The error `compiled(*args)` raises under the limit, and its results without it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space_bytes() + result_bytes + buffer_bytes // 2
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        jax.block_until_ready(compiled(*args))
        error = "no error"
    except Exception as exc:  # noqa: BLE001 - the error is what the test checks
        error = f"{type(exc).__name__}: {exc}"
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return error, [np.asarray(r) for r in jax.tree.leaves(compiled(*args))]


def limit_enforced() -> bool:
    """Whether a 256 MB allocation fails under a limit 64 MB above what the process maps: not
    where RLIMIT_AS is not applied (qemu-user keeps it from the emulator it would limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (_address_space_bytes() + (64 << 20), hard))
    try:
        np.ones(64 << 20, np.float32)
        return False
    except MemoryError:
        return True
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def forward_in_parallel_tasks() -> dict:
    """Channels last, two batch elements of one point: two parallel tasks (ParallelFor), each
    allocating a row of C zeros for the taps outside the input (ffi/cpu/tile_sampler.cc)."""
    c = BUFFER_FLOATS
    fwd = jax.jit(lambda x, g: gs.grid_sample(x, g, layout="NHWC", implementation="native"))
    fwd(jnp.ones((2, 1, 1, 64), jnp.float32), jnp.zeros((2, 1, 1, 2), jnp.float32))  # threads up
    x = jnp.ones((2, 1, 1, c), jnp.float32)
    g = jnp.zeros((2, 1, 1, 2), jnp.float32)
    compiled = fwd.lower(x, g).compile()
    error, (out,) = _under_limit(compiled, (x, g), result_bytes=2 * c * 4, buffer_bytes=c * 4)
    return {"error": error, "bytes": c * 4, "after": [float(out.min()), float(out.max())]}


def backward_widening() -> dict:
    """float16 through the float32 kernel: the float32 copy of the input (half_precision.h) is
    the buffer that does not fit."""
    size = BUFFER_FLOATS
    bwd = jax.jit(lambda go, x, g: gs.grid_sample_backward(go, x, g, implementation="native"))
    x = jnp.ones((1, 1, 8, size // 8), jnp.float16)
    g = jnp.zeros((1, 1, 1, 2), jnp.float16)
    go = jnp.ones((1, 1, 1, 1), jnp.float16)
    compiled = bwd.lower(go, x, g).compile()
    error, (grad_input, grad_grid) = _under_limit(compiled, (go, x, g),
                                                  result_bytes=size * 2, buffer_bytes=size * 4)
    return {"error": error, "bytes": size * 4, "after": float(np.sum(grad_input, dtype=np.float64))}


if __name__ == "__main__":
    if limit_enforced():
        print(json.dumps({"forward": forward_in_parallel_tasks(), "backward": backward_widening()}))
    else:
        print(json.dumps({"limit_not_enforced": True}))
