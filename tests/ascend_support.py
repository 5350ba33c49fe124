"""The simulated aclnn library and how the Ascend tests call the handlers on it (shared by the
tests/test_ascend_*.py files; their fixtures are registered in conftest.py).

The simulator (``tests/ascend_sim/aclnn_sim.cc``) is compiled here with the system C++ compiler,
loaded by the handlers through their ordinary dlopen path (``JAX_GRIDSAMPLE_ACLNN_LIBS``), and
the handlers are registered for the CPU platform under test-only target names and called
through JAX. The CPU client has no device stream, so the tests run the handlers' test-only
twins (``test_registrations()``), which take a stream the simulator created as an attribute.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import os
import re
import shutil
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracle import torch_grid_sample

import jax_gridsample
from jax_gridsample import _ascend, _ascend_self_check, _primitives

SIM_SOURCE = Path(__file__).parent / "ascend_sim" / "aclnn_sim.cc"
FORWARD = "jax_gridsample_test_ascend_forward"
BACKWARD = "jax_gridsample_test_ascend_backward"
PROBE = "jax_gridsample_test_ascend_probe"
# The production handlers (stream from the runtime), registered for the CPU under test names.
FORWARD_NO_TEST_STREAM = "jax_gridsample_test_ascend_forward_runtime_stream"
BACKWARD_NO_TEST_STREAM = "jax_gridsample_test_ascend_backward_runtime_stream"
ENV = "JAX_GRIDSAMPLE_ACLNN_LIBS"

DTYPES = {  # dtype -> (aclDataType, rtol/atol against the float64 oracle)
    jnp.float64: (11, 1e-12),
    jnp.float32: (0, 2e-6),
    jnp.float16: (1, 2e-3),
    jnp.bfloat16: (27, 1.6e-2),
}
ACL_DTYPES = {"float32": 0, "float16": 1, "bfloat16": 27, "float64": 11}
# (spatial rank, interpolation, padding, align_corners) aclnn has: bicubic is 2D only.
CASES = [c for c in itertools.product((2, 3), (0, 1, 2), (0, 1, 2), (False, True))
         if not (c[0] == 3 and c[1] == 2)]


def case_id(case) -> str:
    k, interp, pad, ac = case
    return f"{k}d-{['bilinear', 'nearest', 'bicubic'][interp]}-" \
           f"{['zeros', 'border', 'reflection'][pad]}-{'ac' if ac else 'noac'}"



# --- the simulator and the handler module -------------------------------------------------

@pytest.fixture(scope="session")
def sim_path(tmp_path_factory) -> str:
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") \
        or shutil.which("clang++")
    if compiler is None:
        pytest.fail("no C++ compiler found (set CXX): the Ascend contract tests build the "
                    "simulated aclnn library from tests/ascend_sim/aclnn_sim.cc")
    out = tmp_path_factory.mktemp("aclnn_sim") / "libaclnn_sim.so"
    cmd = [compiler, "-std=c++17", "-O1", "-shared", "-fPIC", str(SIM_SOURCE), "-o", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"building the aclnn simulator failed:\n{' '.join(cmd)}\n{result.stderr}")
    return str(out)


class Sim:
    """ctypes view of the simulator's test knobs (the same loaded copy the handlers use)."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        lib.sim_get_log.restype = ctypes.c_char_p
        lib.sim_fail_next.argtypes = [ctypes.c_char_p, ctypes.c_int32]
        lib.sim_set_wrong_results.argtypes = [ctypes.c_char_p, ctypes.c_double]
        lib.sim_live.argtypes = [ctypes.c_char_p]
        lib.sim_live.restype = ctypes.c_int64
        lib.sim_violations.restype = ctypes.c_int64
        lib.sim_set_release.argtypes = [ctypes.c_char_p]
        lib.sim_set_soc.argtypes = [ctypes.c_char_p]
        lib.sim_set_default_context.argtypes = [ctypes.c_bool, ctypes.c_int32]
        lib.sim_get_context_deterministic.restype = ctypes.c_int64
        lib.sim_set_context_deterministic.argtypes = [ctypes.c_int64]
        lib.sim_get_process_deterministic.restype = ctypes.c_int64
        lib.sim_set_process_deterministic.argtypes = [ctypes.c_int64]
        lib.aclrtCreateStream.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self.lib = lib
        self.stream = self.new_stream()  # the stream every test call launches on
        self.stream_desc = self.log()[-1].split("-> ")[1]  # how the simulator's log names it

    def new_stream(self) -> int:
        handle = ctypes.c_void_p()
        assert self.lib.aclrtCreateStream(ctypes.byref(handle)) == 0
        return handle.value

    def log(self) -> list[str]:
        return self.lib.sim_get_log().decode().splitlines()

    def reset(self) -> None:
        self.lib.sim_reset()

    def fail_next(self, fn: str, code: int) -> None:
        self.lib.sim_fail_next(fn.encode(), code)

    def set(self, *, release: str | None = None, soc: str | None = None) -> None:
        if release is not None:
            assert self.lib.sim_set_release(release.encode()) == 0
        if soc is not None:
            self.lib.sim_set_soc(soc.encode())

    def live(self) -> dict[str, int]:
        return {k: self.lib.sim_live(k.encode())
                for k in ("tensor", "bool_array", "executor", "malloc")}


@pytest.fixture(scope="session")
def kernels():
    try:
        from jax_gridsample import _ascend_kernels
    except ImportError as exc:  # it builds everywhere: its absence is a build failure
        pytest.fail(f"jax_gridsample._ascend_kernels is not built: {exc}")
    regs = _ascend_kernels.registrations()
    test_regs = _ascend_kernels.test_registrations()
    for name, capsule in (
            (FORWARD, test_regs["jax_gridsample_ascend_forward_on_test_stream"]),
            (BACKWARD, test_regs["jax_gridsample_ascend_backward_on_test_stream"]),
            (PROBE, test_regs["jax_gridsample_ascend_probe_on_test_stream"]),
            (FORWARD_NO_TEST_STREAM, regs[_ascend.FORWARD_TARGET]),
            (BACKWARD_NO_TEST_STREAM, regs[_ascend.BACKWARD_TARGET])):
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")
    return _ascend_kernels


@pytest.fixture(scope="session")
def _session_sim(sim_path, kernels):
    old = os.environ.get(ENV)
    os.environ[ENV] = sim_path
    sim = Sim(sim_path)
    Sim.test_stream = sim.stream
    yield sim
    if old is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = old


@pytest.fixture
def sim(_session_sim, sim_path, kernels):
    os.environ[ENV] = sim_path
    kernels.reread_environment()  # the handlers read the environment once
    _session_sim.reset()
    yield _session_sim
    live = _session_sim.live()
    cache = kernels.workspace_paths()
    assert live == {"tensor": 0, "bool_array": 0, "executor": 0,
                    "malloc": cache["cached_buffers"]}, \
        "the handler leaked aclnn objects or memory (the stream cache's buffers aside)"
    assert _session_sim.lib.sim_violations() == 0, "\n".join(
        line for line in _session_sim.log() if "VIOLATION" in line)
    os.environ.pop(kernels.DETERMINISTIC_ENV_VAR, None)
    os.environ[ENV] = sim_path
    kernels.reread_environment()


def set_environment(kernels, name: str, value: str) -> None:
    """Set a variable the handlers read and make them read it again (their test hook)."""
    os.environ[name] = value
    kernels.reread_environment()


@pytest.fixture
def start_up_level(kernels):
    """Start-up determinism: JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1, as if set before Python
    started (the sim fixture unsets it after the test)."""
    set_environment(kernels, kernels.DETERMINISTIC_ENV_VAR, "1")


# --- calling the handlers through JAX -------------------------------------------------------

def _attrs(interp, pad, ac, deterministic=False, channels_last=False, stream=True):
    attrs = dict(interpolation=np.int64(interp), padding=np.int64(pad), align_corners=bool(ac),
                 channels_last=bool(channels_last), deterministic=bool(deterministic))
    # stream=True: the test-only target on the simulator's stream (or the one given); False:
    # the production target
    if stream is False:
        return attrs
    return dict(attrs, test_stream=np.int64(Sim.test_stream if stream is True else stream))


@functools.cache
def _jitted_call(target, results, aliases, attrs):
    """A jitted FFI call, one per target, result types, aliases and attributes, so that calling
    it again on arrays of the same types runs the program compiled the first time. The call
    returns once the results are ready: JAX dispatches asynchronously, and the simulator's log is
    read right after."""
    call = jax.ffi.ffi_call(target, results, input_output_aliases=dict(aliases) or None)
    jitted = jax.jit(lambda *operands: call(*operands, **dict(attrs)))
    return lambda *operands: jax.block_until_ready(jitted(*operands))


def ascend_forward(x, g, interp, pad, ac, stream=True, **kw):
    out = jax.ShapeDtypeStruct(x.shape[:2] + g.shape[1:-1], x.dtype)
    attrs = _attrs(interp, pad, ac, stream=stream, **kw)
    return _jitted_call(FORWARD if stream is not False else FORWARD_NO_TEST_STREAM, out, (),
                        tuple(sorted(attrs.items())))(x, g)


def ascend_backward(go, x, g, interp, pad, ac, mask=(True, True), stream=True, aliases=None,
                    **kw):
    """The backward target; ``aliases`` (operand -> result) makes results start as operands."""
    outs = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype)
                 for a, m in zip((x, g), mask, strict=True) if m)
    attrs = dict(_attrs(interp, pad, ac, stream=stream, **kw), input_mask=bool(mask[0]),
                 grid_mask=bool(mask[1]))
    return _jitted_call(BACKWARD if stream is not False else BACKWARD_NO_TEST_STREAM, outs,
                        tuple(sorted((aliases or {}).items())),
                        tuple(sorted(attrs.items())))(go, x, g)


def make_data(k, dtype, seed=0, n=2, c=3):
    rng = np.random.default_rng(seed)
    spatial = (3, 4, 5)[3 - k:]
    out_spatial = (2, 3, 4)[3 - k:]
    x = rng.standard_normal((n, c) + spatial)
    g = rng.uniform(-1.2, 1.2, (n,) + out_spatial + (k,))
    go = rng.standard_normal((n, c) + out_spatial)
    return tuple(jnp.asarray(a, dtype) for a in (x, g, go))


def f64(a):
    return np.asarray(jnp.asarray(a, jnp.float64))


def assert_close(actual, expected, tol):
    np.testing.assert_allclose(f64(actual), f64(expected), rtol=tol, atol=tol)


def oracle(x, g, go, interp, pad, ac):
    """Output and both gradients in float64 on the same values: PyTorch's, which has every case
    aclnn has (the jnp reference agrees with it on all of them: test_semantics.py)."""
    return torch_grid_sample(f64(x), f64(g), f64(go), align_corners=ac,
                             mode=("bilinear", "nearest", "bicubic")[interp],
                             padding_mode=("zeros", "border", "reflection")[pad])


def _calls(log):
    return [line.split()[0] for line in log if not line.startswith("  ")]


# --- results equal the float64 oracle -------------------------------------------------------


class SimCalls:
    """Direct ctypes calls into the simulator: its documented checks, and its own answer to
    whether a call's first phase succeeds."""

    def __init__(self, sim: Sim):
        lib = sim.lib
        p, i64, u64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64
        lib.aclCreateTensor.restype = p
        lib.aclCreateTensor.argtypes = [p, u64, ctypes.c_int32, p, i64, ctypes.c_int32, p, u64, p]
        lib.aclDestroyTensor.argtypes = [p]
        lib.aclCreateBoolArray.restype = p
        lib.aclCreateBoolArray.argtypes = [p, u64]
        lib.aclDestroyBoolArray.argtypes = [p]
        lib.aclSetAclOpExecutorRepeatable.argtypes = [p]
        lib.aclDestroyAclOpExecutor.argtypes = [p]
        for k in (2, 3):
            getattr(lib, f"aclnnGridSampler{k}DGetWorkspaceSize").argtypes = [
                p, p, i64, i64, ctypes.c_bool, p, ctypes.POINTER(u64), ctypes.POINTER(p)]
            getattr(lib, f"aclnnGridSampler{k}DBackwardGetWorkspaceSize").argtypes = [
                p, p, p, i64, i64, ctypes.c_bool, p, p, p, ctypes.POINTER(u64), ctypes.POINTER(p)]
        lib.aclnnGridSampler2DBackward.argtypes = [p, u64, p, p]
        self.lib, self.keep = lib, []

    def tensor(self, shape, dtype=0, fmt=2, data=True):
        buffer = np.zeros(max(1, int(np.prod(shape))), np.float64)
        dims = (ctypes.c_int64 * len(shape))(*shape)
        strides = (ctypes.c_int64 * len(shape))(
            *(int(np.prod(shape[j + 1:])) for j in range(len(shape))))
        self.keep += [buffer, dims, strides]
        return self.lib.aclCreateTensor(dims, len(shape), dtype, strides, 0, fmt, dims,
                                        len(shape), buffer.ctypes.data if data else None), buffer

    def runs(self, backward, k, dtype, interp, channels=2) -> bool:
        """Whether the simulated CANN runs a small call: its first phase takes it and its launch
        (on the default stream, host memory) succeeds."""
        input = (1, channels) + (3,) * k
        grid = (1,) + (2,) * k + (k,)
        out = (1, channels) + (2,) * k
        fmt = 30 if k == 3 else 2
        acl = ACL_DTYPES[dtype]
        made = [self.tensor(s, acl, f)[0] for s, f in
                ((input, fmt), (grid, 2), (out, fmt), (input, fmt), (grid, 2))]
        ws, ex = ctypes.c_uint64(), ctypes.c_void_p()
        arr = self.lib.aclCreateBoolArray((ctypes.c_bool * 2)(True, True), 2)
        name = f"aclnnGridSampler{k}D{'Backward' if backward else ''}"
        if backward:
            rc = getattr(self.lib, f"{name}GetWorkspaceSize")(
                made[2], made[0], made[1], interp, 0, False, arr, made[3], made[4],
                ctypes.byref(ws), ctypes.byref(ex))
        else:
            rc = getattr(self.lib, f"{name}GetWorkspaceSize")(
                made[0], made[1], interp, 0, False, made[2], ctypes.byref(ws), ctypes.byref(ex))
        if rc == 0:
            work = np.zeros(max(1, ws.value), np.uint8)
            launch = getattr(self.lib, name)
            launch.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
            rc = launch(work.ctypes.data, ws.value, ex, None)
        for t in made:
            self.lib.aclDestroyTensor(t)
        self.lib.aclDestroyBoolArray(arr)
        return rc == 0

    def backward2d(self, shapes=None, dtypes=None, interp=0, pad=0, mask=(True, True),
                   null=None):
        shapes = dict(dict(go=(1, 2, 3, 4), x=(1, 2, 5, 6), g=(1, 3, 4, 2), gx=(1, 2, 5, 6),
                           gg=(1, 3, 4, 2)), **(shapes or {}))
        dtypes = dict(dict.fromkeys(shapes, 0), **(dtypes or {}))
        made = {k: self.tensor(shapes[k], dtypes[k]) for k in shapes}
        ts = {k: (None if k == null else made[k][0]) for k in made}
        arr = None
        if mask is not None:
            values = (ctypes.c_bool * 2)(*mask)
            arr = self.lib.aclCreateBoolArray(values, 2)
        ws, ex = ctypes.c_uint64(), ctypes.c_void_p()
        rc = self.lib.aclnnGridSampler2DBackwardGetWorkspaceSize(
            ts["go"], ts["x"], ts["g"], interp, pad, True, arr, ts["gx"], ts["gg"],
            ctypes.byref(ws), ctypes.byref(ex))
        launch = None
        if rc == 0:
            work = np.zeros(max(1, ws.value), np.uint8)
            launch = lambda: self.lib.aclnnGridSampler2DBackward(  # noqa: E731
                work.ctypes.data, ws.value, ex, None)
        return rc, launch, made, arr

    def release(self, made, arr):
        for t, _ in made.values():
            self.lib.aclDestroyTensor(t)
        if arr:
            self.lib.aclDestroyBoolArray(arr)


@pytest.fixture
def ascend_kernel(sim, monkeypatch):
    """A fresh Ascend kernel on the test targets (its probe and self-check not yet run),
    installed as the CPU lowering the way the package registers its own (restored after). The
    self-check is off unless a test turns it on."""
    from jax_gridsample import _compat

    monkeypatch.setenv(_ascend_self_check.ENV_VAR, "off")
    kernel = _ascend.AscendKernel(FORWARD, BACKWARD, PROBE,
                                  {"test_stream": np.int64(Sim.test_stream)})
    native = _primitives.ascend_native_kernel(kernel)
    prims = (_primitives.grid_sample_p, _primitives.grid_sample_backward_p)
    saved = {p: _compat._PARTITIONED_RULES[p].get("cpu") for p in prims}
    fwd_ref = _primitives._reference_lowering(_primitives._forward_reference, False)
    bwd_ref = _primitives._reference_lowering(_primitives._backward_reference, True)
    jax.clear_caches()
    for prim, backward, ref in ((prims[0], False, fwd_ref), (prims[1], True, bwd_ref)):
        _compat.register_partitioned_lowering(
            prim, _primitives._native_lowering("cpu", native, backward, ref), platform="cpu")
    yield kernel
    for p, rule in saved.items():
        _compat._PARTITIONED_RULES[p]["cpu"] = rule
    jax.clear_caches()


def _ran_on_aclnn(sim, fn) -> tuple[bool, bool]:
    """Run fn; whether the forward and the backward entry points were launched."""
    sim.lib.sim_clear_log()
    jax.block_until_ready(fn())
    calls = _calls(sim.log())
    return (any(re.fullmatch(r"aclnnGridSampler[23]D", c) for c in calls),
            any(re.fullmatch(r"aclnnGridSampler[23]DBackward", c) for c in calls))


@pytest.fixture
def self_check_on(monkeypatch):
    monkeypatch.setenv(_ascend_self_check.ENV_VAR, "on")


@contextlib.contextmanager
def few_self_check_kinds():
    """The self-check's float32 bilinear kinds alone (2D and 3D, forward and backward, both
    routes) while inside: the tests of its behaviour; every kind is checked once, by
    test_self_check_covers_every_kind_auto_sends."""
    saved = _ascend_self_check.DTYPES, _ascend_self_check.MODES
    _ascend_self_check.DTYPES = ("float32",)
    _ascend_self_check.MODES = {2: ("bilinear",), 3: ("bilinear",)}
    try:
        yield
    finally:
        _ascend_self_check.DTYPES, _ascend_self_check.MODES = saved


def _step(x, g, deterministic=False):
    def loss(x, g):
        return jnp.sum(jax_gridsample.grid_sample(x, g, padding_mode="border",
                                                  deterministic=deterministic) ** 2)
    return jax.block_until_ready(jax.grad(loss, argnums=(0, 1))(x, g))
