"""The Ascend (aclnn) handlers, run for real against a simulated aclnn library.

The simulator (``tests/ascend_sim/aclnn_sim.cc``) is compiled here with the system C++ compiler,
loaded by the handlers through their ordinary dlopen path (``JAX_GRIDSAMPLE_ACLNN_LIBS``), and
the handlers are registered for the CPU platform under test-only target names and called
through JAX. The CPU client has no device stream, so the tests run the handlers' test-only
twins (``test_registrations()``), which take a stream the simulator created as an attribute;
the production handlers, registered too, must refuse to run without a stream. The simulator
computes in float64 on host memory, enforces the documented parameter checks, the outputMask
rules, single-use executors, live streams and a current context, returns early without writing
on empty tensors and rejects what ops-cv rejects per dtype and chip, records every call, and
can be told to fail a chosen call with a chosen status.
"""

from __future__ import annotations

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

from jax_gridsample import _ascend, _primitives

SIM_SOURCE = Path(__file__).parent / "ascend_sim" / "aclnn_sim.cc"
FORWARD = "jax_gridsample_test_ascend_forward"
BACKWARD = "jax_gridsample_test_ascend_backward"
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
# (spatial rank, interpolation, padding, align_corners) aclnn has: bicubic is 2D forward only.
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
        lib.sim_live.argtypes = [ctypes.c_char_p]
        lib.sim_live.restype = ctypes.c_int64
        lib.sim_set_workspace_size.argtypes = [ctypes.c_uint64]
        lib.sim_get_deterministic.restype = ctypes.c_int64
        lib.sim_set_deterministic.argtypes = [ctypes.c_int64]
        lib.sim_set_context_current.argtypes = [ctypes.c_bool]
        lib.sim_set_soc.argtypes = [ctypes.c_char_p]
        lib.sim_set_output_bias.argtypes = [ctypes.c_double]
        lib.aclrtCreateStream.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self.lib = lib
        handle = ctypes.c_void_p()
        assert lib.aclrtCreateStream(ctypes.byref(handle)) == 0
        self.stream = handle.value  # the stream every test call launches on
        self.stream_desc = self.log()[-1].split("-> ")[1]  # how the simulator's log names it

    def log(self) -> list[str]:
        return self.lib.sim_get_log().decode().splitlines()

    def reset(self) -> None:
        self.lib.sim_reset()

    def fail_next(self, fn: str, code: int) -> None:
        self.lib.sim_fail_next(fn.encode(), code)

    def live(self) -> dict[str, int]:
        return {k: self.lib.sim_live(k.encode())
                for k in ("tensor", "bool_array", "executor", "malloc")}


NOTHING_LIVE = {"tensor": 0, "bool_array": 0, "executor": 0, "malloc": 0}


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
def sim(_session_sim, sim_path):
    os.environ[ENV] = sim_path
    _session_sim.reset()
    yield _session_sim
    assert _session_sim.live() == NOTHING_LIVE, "the handler leaked aclnn objects or memory"


# --- calling the handlers through JAX -------------------------------------------------------

def _attrs(interp, pad, ac, deterministic=False, channels_last=False, stream=True):
    attrs = dict(interpolation=np.int64(interp), padding=np.int64(pad), align_corners=bool(ac),
                 channels_last=bool(channels_last), deterministic=bool(deterministic))
    # stream=True: the test-only target on the simulator's stream; False: the production target
    return dict(attrs, test_stream=np.int64(Sim.test_stream)) if stream else attrs


@functools.cache
def _jitted_call(target, results, aliases, attrs):
    """A jitted FFI call, one per target, result types, aliases and attributes, so that calling
    it again on arrays of the same types runs the program compiled the first time."""
    call = jax.ffi.ffi_call(target, results, input_output_aliases=dict(aliases) or None)
    return jax.jit(lambda *operands: call(*operands, **dict(attrs)))


def ascend_forward(x, g, interp, pad, ac, stream=True, **kw):
    out = jax.ShapeDtypeStruct(x.shape[:2] + g.shape[1:-1], x.dtype)
    attrs = _attrs(interp, pad, ac, stream=stream, **kw)
    return _jitted_call(FORWARD if stream else FORWARD_NO_TEST_STREAM, out, (),
                        tuple(sorted(attrs.items())))(x, g)


def ascend_backward(go, x, g, interp, pad, ac, mask=(True, True), stream=True, aliases=None,
                    **kw):
    """The backward target; ``aliases`` (operand -> result) makes results start as operands."""
    outs = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype)
                 for a, m in zip((x, g), mask, strict=True) if m)
    attrs = dict(_attrs(interp, pad, ac, stream=stream, **kw), input_mask=bool(mask[0]),
                 grid_mask=bool(mask[1]))
    return _jitted_call(BACKWARD if stream else BACKWARD_NO_TEST_STREAM, outs,
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


# --- results equal the float64 oracle -------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_forward_and_gradients_match_reference(sim, case):
    k, interp, pad, ac = case
    for dtype, (_, tol) in DTYPES.items():
        if interp == 2 and dtype == jnp.float64:
            continue  # rejected by the forward: test_sim_rejects_what_cann_rejects
        x, g, go = make_data(k, dtype)
        ro, ri, rg = oracle(x, g, go, interp, pad, ac)  # on the same (rounded) values
        out = ascend_forward(x, g, interp, pad, ac)
        assert out.dtype == dtype
        assert_close(out, ro, tol)
        gi, gg = ascend_backward(go, x, g, interp, pad, ac)
        assert gi.dtype == dtype and gg.dtype == dtype
        # Gradients sum many terms, so their scale (not each term's) sets the tolerance.
        assert_close(gi, ri, tol * 4)
        assert_close(gg, rg, tol * 4 * max(1.0, float(np.abs(f64(rg)).max())))


EMPTY = {  # what is empty -> (n, c, output spatial size of each axis)
    "no-points": (2, 3, 0),
    "no-channels": (2, 0, 2),
    "no-batch": (0, 3, 2),
}


@pytest.mark.parametrize("k", (2, 3))
@pytest.mark.parametrize("empty", sorted(EMPTY))
def test_empty_tensors_give_exact_zeros(sim, k, empty):
    """aclnn returns early and writes nothing when gradOutput, input or grid is empty; the
    gradients that still have elements (grad_input without points, grad_grid without channels)
    must be zeros all the same. Each result starts as a copy of a non-zero operand (aliased), so
    a result nobody wrote shows."""
    n, c, points = EMPTY[empty]
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.uniform(1, 2, (n, c) + (3, 4, 5)[3 - k:]), jnp.float32)
    g = jnp.asarray(rng.uniform(0.5, 0.9, (n,) + (points,) * k + (k,)), jnp.float32)
    go = jnp.ones((n, c) + (points,) * k, jnp.float32)
    out = ascend_forward(x, g, 0, 0, False)
    assert out.shape == go.shape and out.size == 0
    for mask in ((True, True), (True, False), (False, True)):
        aliases = {1 + i: j for j, i in enumerate(i for i in (0, 1) if mask[i])}
        grads = ascend_backward(go, x, g, 0, 0, False, mask=mask, aliases=aliases)
        for grad, operand in zip(grads, [a for a, m in zip((x, g), mask, strict=True) if m],
                                 strict=True):
            assert grad.shape == operand.shape and grad.dtype == operand.dtype
            np.testing.assert_array_equal(np.asarray(grad), 0.0)
    # Zeroed on the call's stream, without asking aclnn for anything.
    log = sim.log()
    assert not any(line.startswith("aclnnGridSampler") for line in log)
    assert all(f"stream={sim.stream_desc}" in line for line in log
               if line.startswith("aclrtMemsetAsync"))


# --- the call sequence ---------------------------------------------------------------------

def _calls(log):
    return [line.split()[0] for line in log if not line.startswith("  ")]


@pytest.mark.parametrize("k", (2, 3))
def test_forward_call_sequence(sim, k):
    x, g, _ = make_data(k, jnp.float32)
    ascend_forward(x, g, 0, 1, True)
    log = sim.log()
    calls = _calls(log)
    name = f"aclnnGridSampler{k}D"
    assert calls.count("aclCreateTensor") == 3
    assert calls.count(name + "GetWorkspaceSize") == 1 and calls.count(name) == 1
    assert calls.index(name + "GetWorkspaceSize") < calls.index(name)
    assert all(c < calls.index(name + "GetWorkspaceSize")
               for c, n in enumerate(calls) if n == "aclCreateTensor")
    assert calls.count("aclDestroyTensor") == 3
    # Contiguous strides, offset 0, the dtype and the documented formats.
    created = [line for line in log if line.startswith("aclCreateTensor")]
    formats = [int(re.search(r"/f(\d+)", line).group(1)) for line in created]
    assert formats == ([2, 2, 2] if k == 2 else [30, 2, 30])  # the 3D forward page: grid ND
    for line in created:
        assert "/dt0/" in line and "offset=0" in line
    strides = re.search(r"strides=\[([\d,]+)\]", created[0]).group(1)
    assert [int(s) for s in strides.split(",")] == list(np.cumprod(x.shape[::-1])[::-1][1:]) + [1]
    # The workspace (256 bytes by default) is device memory handed to the launch.
    launch = next(line for line in log if line.startswith(name + " "))
    assert "workspace_size=256 workspace=set" in launch


def test_executors_are_single_use(sim):
    x, g, go = make_data(2, jnp.float32)
    for _ in range(2):
        ascend_forward(x, g, 0, 0, False)
        ascend_backward(go, x, g, 0, 0, False)
    log = sim.log()
    made = [m.group(1) for line in log if (m := re.search(r"-> executor (E\d+)", line))]
    launched = [m.group(1) for line in log if (m := re.search(r" executor=(\S+)", line))]
    assert len(made) == 4 and sorted(made) == sorted(launched)
    assert len(set(launched)) == 4  # a fresh executor per call, each launched once


def test_no_workspace_means_no_allocation(sim):
    sim.lib.sim_set_workspace_size(0)
    x, g, _ = make_data(2, jnp.float32)
    ascend_forward(x, g, 0, 0, False)
    log = sim.log()
    assert not any(line.startswith("aclrtMalloc") for line in log)
    assert "workspace_size=0 workspace=null" in next(
        line for line in log if line.startswith("aclnnGridSampler2D "))


@pytest.mark.parametrize("backward", (False, True), ids=("forward", "backward"))
def test_refuses_to_run_without_a_device_stream(sim, backward):
    """The production handlers on a runtime without a device stream (XLA's CPU client): a clear
    error before any ACL call, never a launch on ACL's default stream."""
    x, g, go = make_data(2, jnp.float32)
    with pytest.raises(Exception) as info:
        if backward:
            jax.block_until_ready(ascend_backward(go, x, g, 0, 0, False, stream=False))
        else:
            jax.block_until_ready(ascend_forward(x, g, 0, 0, False, stream=False))
    msg = str(info.value)
    assert "no device stream" in msg and 'implementation="reference"' in msg
    assert sim.log() == []


def test_every_launch_is_on_the_call_stream(sim):
    x, g, go = make_data(3, jnp.float32)
    sim.lib.sim_set_workspace_size(0)  # no workspace: nothing synchronized or freed either
    ascend_forward(x, g, 0, 0, False)
    ascend_backward(go, x, g, 1, 2, True, mask=(False, True), deterministic=True)
    log = sim.log()
    launches = [line for line in log if re.match(r"aclnnGridSampler3D(Backward)? ", line)]
    assert len(launches) == 2
    assert all(line.endswith(f"stream={sim.stream_desc}") for line in launches)
    assert not any("stream=default" in line or "stream=invalid" in line for line in log)


def test_no_current_context_is_a_clear_error(sim):
    sim.lib.sim_set_context_current(False)
    x, g, go = make_data(2, jnp.float32)
    with pytest.raises(Exception, match=r"no ACL context is current .*aclError 107002"):
        jax.block_until_ready(ascend_backward(go, x, g, 0, 0, False))
    assert _calls(sim.log()) == ["aclrtGetCurrentContext"]


# --- errors reach Python, nothing leaks ----------------------------------------------------

STATUS_NAMES = {161001: "ACLNN_ERR_PARAM_NULLPTR", 161002: "ACLNN_ERR_PARAM_INVALID",
                361001: "ACLNN_ERR_RUNTIME_ERROR", 561103: "ACLNN_ERR_INNER_NULLPTR",
                561000: "ACLNN_ERR_INNER"}


@pytest.mark.parametrize("k", (2, 3))
@pytest.mark.parametrize("backward", (False, True), ids=("forward", "backward"))
@pytest.mark.parametrize("phase", ("GetWorkspaceSize", ""), ids=("workspace", "launch"))
@pytest.mark.parametrize("code", sorted(STATUS_NAMES))
def test_status_errors_reach_python(sim, k, backward, phase, code):
    x, g, go = make_data(k, jnp.float32)
    fn = f"aclnnGridSampler{k}D{'Backward' if backward else ''}{phase}"
    sim.fail_next(fn, code)
    with pytest.raises(Exception) as info:
        if backward:
            jax.block_until_ready(ascend_backward(go, x, g, 0, 0, False))
        else:
            jax.block_until_ready(ascend_forward(x, g, 0, 0, False))
    msg = str(info.value)
    assert f"{fn} failed with {STATUS_NAMES[code]} ({code})" in msg
    assert f"injected failure of {fn} ({code})" in msg  # aclGetRecentErrMsg()
    calls = _calls(sim.log())
    assert calls.count("aclDestroyTensor") == calls.count("aclCreateTensor")
    assert calls.count("aclDestroyBoolArray") == calls.count("aclCreateBoolArray")
    if phase:  # no launch after a failed workspace query
        assert f"aclnnGridSampler{k}D{'Backward' if backward else ''}" not in calls
    # the sim fixture asserts that nothing is left alive


@pytest.mark.parametrize("fn, expected", [
    ("aclCreateTensor", "aclCreateTensor returned null"),
    ("aclCreateBoolArray", "aclCreateBoolArray returned null"),
    ("aclrtMalloc", "aclrtMalloc of 256 bytes for the aclnn workspace failed with aclError 207001"),
    ("aclrtCtxSetSysParamOpt", "aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 1) failed"),
])
def test_helper_failures_reach_python(sim, fn, expected):
    x, g, go = make_data(2, jnp.float32)
    sim.fail_next(fn, 207001)
    with pytest.raises(Exception, match=re.escape(expected)):
        jax.block_until_ready(ascend_backward(go, x, g, 0, 0, False, deterministic=True))
    calls = _calls(sim.log())
    if fn == "aclrtMalloc":  # the executor that was never launched is destroyed
        assert "aclDestroyAclOpExecutor" in calls
    # Turned on right before the workspace query and then left on (test_deterministic_set_once).
    assert sim.lib.sim_get_deterministic() == (1 if fn == "aclrtMalloc" else 0)


# --- what CANN rejects runs on the reference --------------------------------------------------

SOCS = {  # a SoC name aclrtGetSocName gives -> the family its product belongs to
    "Ascend910B2": "atlas-a2-a3", "Ascend910B4-1": "atlas-a2-a3", "Ascend910_9391": "atlas-a2-a3",
    "Ascend950PR_9599": "ascend950", "Ascend910A": "atlas-training",
    "Ascend910B": "atlas-training", "Ascend910ProB": "atlas-training",
    "Ascend310P3": "unsupported", "": "unknown", "Ascend999": "unknown",
}


def test_chip_families():
    assert {soc: _ascend.chip_family(soc) for soc in SOCS} == SOCS
    for call in itertools.product((False, True), (2, 3), (0, 2), DTYPES):  # unknown: strictest
        backward, k, interp, dtype = call
        args = (backward, k, interp, jnp.dtype(dtype).name)
        assert (_ascend.aclnn_rejects(*args, "unknown", 16, 3, False) is None) == \
            (_ascend.aclnn_rejects(*args, "atlas-training", 16, 3, False) is None)


@pytest.mark.parametrize("chip", ("Ascend910B2", "Ascend910A"), ids=("a2", "training"))
def test_auto_never_sends_what_cann_rejects(sim, ascend_lowering_on_cpu, chip):
    """Every mode and dtype, forward and backward, on a simulated chip whose rejections follow
    ops-cv and the API pages: under "auto" nothing fails, and what aclnn covers runs on it. (An
    unknown chip gets the training products' rules: test_chip_families.)"""
    import jax_gridsample

    sim.lib.sim_set_soc(chip.encode())
    ran = {}
    for k, mode, dtype in itertools.product((2, 3), ("bilinear", "nearest", "bicubic"),
                                            DTYPES):
        if k == 3 and mode == "bicubic":
            continue
        x, g, _ = make_data(k, dtype)
        sim.lib.sim_clear_log()

        def loss(x, g, mode=mode):
            return jnp.sum(jax_gridsample.grid_sample(x, g, mode=mode).astype(jnp.float32))

        jax.block_until_ready(jax.grad(loss, argnums=(0, 1))(x, g))
        ran[k, mode, jnp.dtype(dtype).name] = tuple(
            name in _calls(sim.log())
            for name in (f"aclnnGridSampler{k}D", f"aclnnGridSampler{k}DBackward"))
    modern = chip == "Ascend910B2"
    expected = {key: (
        not (key[2] == "bfloat16" and not modern)
        and not (key[1] == "bicubic" and (key[2] == "float64" or not modern)),
        not (key[2] == "bfloat16" and not modern) and key[1] != "bicubic"
        and not (key[0] == 2 and key[2] == "float64" and not modern)) for key in ran}
    assert ran == expected


def test_size_limit_and_determinism_route_to_reference():
    def avals(input_shape, dtype=jnp.float32):
        grid = jax.ShapeDtypeStruct((1, 2, 2, 2), dtype)
        return [jax.ShapeDtypeStruct(input_shape, dtype), grid]

    params = dict(interpolation=0, channels_last=False)
    huge = (1, 1, 46341, 46341)  # H*W just above INT32_MAX
    assert not _ascend.supports(False, avals(huge), **params)
    assert _ascend.supports(False, avals((1, 1, 46340, 46340)), **params)
    assert _ascend.supports(True, [None, *avals(huge)], **params)  # documented for the forward
    wide = (1, 2049, 4, 4)
    assert _ascend.supports(True, [None, *avals(wide)], deterministic=False, **params)
    assert not _ascend.supports(True, [None, *avals(wide)], deterministic=True, **params)
    assert not _ascend.supports(True, [None, *avals((1, 3, 4, 4), jnp.float64)],
                                deterministic=True, **params)
    assert not _ascend.supports(False, avals((1, 3, 4, 4)), interpolation=0, channels_last=True)


@pytest.mark.parametrize("soc, k, dtype, backward, interp", [
    ("Ascend910B2", 2, jnp.float64, False, 2),   # no AICPU bicubic
    ("Ascend910A", 2, jnp.float32, False, 2),    # Atlas training: bicubic only on AICPU
    ("Ascend910A", 3, jnp.bfloat16, False, 0),   # 3D forward bf16 only on A2/A3
    ("Ascend910A", 2, jnp.bfloat16, True, 0),    # 2D backward bf16 only on A2/A3/950
    ("Ascend910A", 2, jnp.float64, True, 0),     # the 2D backward page: no float64 there
    ("Ascend910A", 3, jnp.bfloat16, True, 0),    # the 3D backward page: no bf16 there
])
def test_sim_rejects_what_cann_rejects(sim, soc, k, dtype, backward, interp):
    sim.lib.sim_set_soc(soc.encode())
    x, g, go = make_data(k, dtype)
    with pytest.raises(Exception, match=r"ACLNN_ERR_PARAM_INVALID \(161002\)"):
        if backward:
            jax.block_until_ready(ascend_backward(go, x, g, interp, 0, False))
        else:
            jax.block_until_ready(ascend_forward(x, g, interp, 0, False))
    sim.lib.sim_set_soc(b"Ascend910B2")
    if not (k == 2 and dtype == jnp.float64 and not backward):
        (ascend_backward(go, x, g, interp, 0, False) if backward
         else ascend_forward(x, g, interp, 0, False))  # the same call runs on an A2


def test_channels_last_is_a_clear_error(sim):
    x, g, _ = make_data(2, jnp.float32)
    with pytest.raises(Exception, match="channels-first input only"):
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False, channels_last=True))
    assert sim.log() == []  # rejected before any library call


# --- output_mask ---------------------------------------------------------------------------

@pytest.mark.parametrize("k", (2, 3))
@pytest.mark.parametrize("mask", [(True, False), (False, True)])
def test_output_mask_single_gradient(sim, k, mask):
    x, g, go = make_data(k, jnp.float32)
    results = ascend_backward(go, x, g, 0, 2, False, mask=mask)
    assert len(results) == 1
    _, ri, rg = oracle(x, g, go, 0, 2, False)
    expected = ri if mask[0] else rg
    assert results[0].shape == expected.shape
    assert_close(results[0], expected, 1e-5)
    log = sim.log()
    masks = [re.search(r"mask=(\S+)", line).group(1) for line in log if "mask=" in line]
    assert len(masks) == 1
    assert masks[0].endswith(f"[{int(mask[0])},{int(mask[1])}]")  # a real 2-element array
    assert "computes nothing" not in "\n".join(log)
    # The masked-off gradient still gets a tensor over device memory of its own.
    assert any(line.startswith("aclrtMalloc") for line in log)


def test_handler_never_passes_an_empty_mask(sim):
    x, g, go = make_data(2, jnp.float32)
    call = jax.ffi.ffi_call(BACKWARD, [], has_side_effect=True)
    attrs = dict(_attrs(0, 0, False), input_mask=False, grid_mask=False)
    with pytest.raises(Exception, match="asks for no gradient"):
        jax.block_until_ready(jax.jit(lambda *a: call(*a, **attrs))(go, x, g))
    assert sim.log() == []


# --- determinism ---------------------------------------------------------------------------

def test_deterministic_set_once_and_left_on(sim):
    """ACL_OPT_DETERMINISTIC is context-wide and CANN advises setting it once: the handler turns it
    on when first asked and never switches it back (which would race with other threads)."""
    x, g, go = make_data(3, jnp.float32)
    for _ in range(3):
        ascend_backward(go, x, g, 0, 0, True, deterministic=True)
    ascend_backward(go, x, g, 0, 0, True)
    log = sim.log()
    sets = [line for line in log if "SetSysParamOpt" in line]
    assert sets == ["aclrtCtxSetSysParamOpt opt=0 value=1", "aclrtSetSysParamOpt opt=0 value=1"]
    queries = [line for line in log if "BackwardGetWorkspaceSize" in line]
    assert len(queries) == 4 and all(" det=1 ctxdet=1" in line for line in queries)
    assert log.index(sets[0]) < log.index(queries[0])
    assert sim.lib.sim_get_deterministic() == 1


def test_deterministic_already_on_is_left_alone(sim):
    sim.lib.sim_set_deterministic(1)
    x, g, go = make_data(2, jnp.float32)
    ascend_backward(go, x, g, 0, 0, True, deterministic=True)
    assert not any("SetSysParamOpt" in line for line in sim.log())


def test_not_deterministic_touches_nothing(sim):
    x, g, go = make_data(2, jnp.float32)
    ascend_backward(go, x, g, 0, 0, True)
    ascend_forward(x, g, 0, 0, True, deterministic=True)
    assert not any("SysParamOpt" in line for line in sim.log())


# --- loading the library -------------------------------------------------------------------

def test_missing_library_is_a_clear_error(sim, kernels, tmp_path):
    x, g, _ = make_data(2, jnp.float32)
    missing = str(tmp_path / "libopapi_missing.so")
    os.environ[ENV] = missing
    with pytest.raises(Exception) as info:
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False))
    msg = str(info.value)
    assert missing in msg and "set_env.sh" in msg and ENV in msg
    with pytest.raises(RuntimeError, match="libopapi_missing.so"):
        kernels.load_libraries()


def test_library_without_the_symbols_is_a_clear_error(sim):
    x, g, _ = make_data(2, jnp.float32)
    os.environ[ENV] = "libm.so.6"
    with pytest.raises(Exception, match=r"cannot load the CANN library libm\.so\.6 \(defines "
                                        r"none of the symbols still missing\)"):
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False))
    os.environ[ENV] = f"{sim_path_of(sim)}:libm.so.6"  # nothing left to add after the sim
    with pytest.raises(Exception, match=r"cannot load the CANN library libm\.so\.6"):
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False))


def sim_path_of(sim) -> str:
    return sim.lib._name


def test_default_libraries_never_pair_combined_and_per_repository_opapi(kernels):
    """CANN does not support libopapi.so (combined, deprecated) loaded together with
    libopapi_cv.so: they are alternatives of one group, of which only one is ever kept."""
    groups = [group.split("|") for group in re.split("[:;]", kernels.DEFAULT_LIBRARIES)]
    assert [g for g in groups if any(name.startswith("libopapi") for name in g)] == \
        [["libopapi_cv.so", "libopapi.so"]]


def _mapped(path) -> bool:
    return str(path) in Path("/proc/self/maps").read_text()


def test_alternatives_keep_only_the_first_that_has_the_grid_sampler(sim, kernels, sim_path,
                                                                    tmp_path):
    cv, combined = tmp_path / "libopapi_cv_sim.so", tmp_path / "libopapi_sim.so"
    for path in (cv, combined):
        shutil.copy(sim_path, path)
    os.environ[ENV] = f"{cv}|{combined}"
    assert kernels.load_libraries() == f"loaded from {cv}"
    assert _mapped(cv) and not _mapped(combined)  # the second was never opened
    os.environ[ENV] = f"libm.so.6|{combined}"  # a library without the symbols is skipped
    assert kernels.load_libraries() == f"loaded from {combined}"


def test_loader_reports_where_it_loaded_from(sim, kernels, sim_path):
    assert sim_path in kernels.load_libraries()
    assert sim_path in _ascend.status()


def test_status_says_separately_what_is_there(sim, sim_path, tmp_path, monkeypatch):
    """Handlers built, CANN libraries found (where) or not, Ascend platform known or not; and
    "available" only with all three."""
    os.environ[ENV] = str(tmp_path / "libnothing.so")
    status = _ascend.status()
    assert status.startswith("handlers built; CANN libraries not found (")
    assert "libnothing.so" in status and status.endswith(
        "; no Ascend platform known to JAX (no Ascend PJRT plugin)")
    os.environ[ENV] = sim_path
    assert _ascend.status() == (f"handlers built; CANN libraries loaded from {sim_path}; "
                                "no Ascend platform known to JAX (no Ascend PJRT plugin)")
    monkeypatch.setattr(_ascend, "_known", lambda name: name == "ascend")
    assert _ascend.status() == (f"available (handlers built; CANN libraries loaded from "
                                f"{sim_path}; Ascend platform 'ascend' known to JAX)")


# --- the package's lowering, end to end ------------------------------------------------------

def test_no_ascend_lowering_without_the_plugin():
    assert not any(name in _primitives.NATIVE_KERNELS for name in
                   _ascend.lowering_platform_names())
    called = []
    _ascend.on_platform_known(called.append)
    assert called == []


def test_registers_once_jax_knows_the_platform(monkeypatch):
    called = []
    monkeypatch.setattr(_ascend, "_known", lambda name: name == "ascend")
    _ascend.on_platform_known(called.append)
    assert called == ["ascend"]


@pytest.fixture
def ascend_lowering_on_cpu(sim):
    """The Ascend kernel entry, with the test targets, as the CPU lowering (restored after)."""
    from jax._src.interpreters import mlir as mlir_internal

    def on_test_stream(attributes):
        return lambda **params: dict(attributes(**params), test_stream=np.int64(Sim.test_stream))

    kernel = _primitives.NativeKernel(
        _ascend.available, FORWARD, BACKWARD, on_test_stream(_ascend.forward_attributes),
        on_test_stream(_ascend.backward_attributes), supports=_ascend.supports)
    table = mlir_internal._platform_specific_lowerings["cpu"]
    prims = (_primitives.grid_sample_p, _primitives.grid_sample_backward_p)
    saved = {p: table.get(p) for p in prims}
    fwd_ref = _primitives._reference_lowering(_primitives._forward_reference, False)
    bwd_ref = _primitives._reference_lowering(_primitives._backward_reference, True)
    jax.clear_caches()
    for prim, backward, ref in ((prims[0], False, fwd_ref), (prims[1], True, bwd_ref)):
        mlir_internal.register_lowering(
            prim, _primitives._native_lowering("cpu", kernel, backward, ref), platform="cpu")
    yield
    for p, entry in saved.items():
        if entry is None:
            table.pop(p, None)
        else:
            table[p] = entry
    jax.clear_caches()


def test_public_api_runs_on_aclnn(sim, ascend_lowering_on_cpu):
    import jax_gridsample

    x, g, _ = make_data(2, jnp.float32)

    def loss(x, g):
        return jnp.sum(jax_gridsample.grid_sample(x, g, mode="bilinear", padding_mode="border",
                                                  deterministic=True) ** 2)

    hlo = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, g).as_text()
    assert FORWARD in hlo and BACKWARD in hlo
    gx, gg = jax.grad(loss, argnums=(0, 1))(x, g)
    calls = _calls(sim.log())
    assert "aclnnGridSampler2D" in calls and "aclnnGridSampler2DBackward" in calls
    out, _, _ = oracle(x, g, np.zeros((2, 3, 3, 4)), 0, 1, False)
    _, rx, rg = oracle(x, g, 2 * out, 0, 1, False)  # d sum(out^2) = 2 out
    assert_close(gx, rx, 1e-5)
    assert_close(gg, rg, 1e-5 * max(1.0, float(np.abs(f64(rg)).max())))


def test_public_api_routes_uncovered_calls_to_reference(sim, ascend_lowering_on_cpu):
    import jax_gridsample

    x, g, _ = make_data(2, jnp.float32)

    def loss(x, g):
        return jnp.sum(jax_gridsample.grid_sample(x, g, mode="bicubic") ** 2)

    jax.grad(loss, argnums=(0, 1))(x, g)  # bicubic: aclnn forward, reference backward
    calls = _calls(sim.log())
    assert "aclnnGridSampler2D" in calls and "aclnnGridSampler2DBackward" not in calls
    sim.lib.sim_clear_log()
    jax.grad(loss, argnums=(0, 1))(x.astype(jnp.float64), g.astype(jnp.float64))
    assert _calls(sim.log()) == []  # no float64 bicubic in aclnn: all on the reference
    with pytest.raises(NotImplementedError, match="does not cover this call"):
        jax_gridsample.grid_sample_backward(
            jnp.ones((2, 3, 3, 4), jnp.float32), x, g, mode="bicubic", implementation="native")


# --- the hardware acceptance script (benchmarks/ascend.py), run against the simulator ---------

def _acceptance():
    import importlib.util

    path = Path(__file__).parents[1] / "benchmarks" / "ascend.py"
    spec = importlib.util.spec_from_file_location("ascend_acceptance", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_acceptance_script_passes_on_aclnn(sim, ascend_lowering_on_cpu):
    """Its parity, empty and NaN checks, with "native" meaning the handlers on the simulator."""
    acceptance, cpu = _acceptance(), jax.devices("cpu")[0]
    cases = acceptance.covered_cases(  # one case per kind of call; the script has them all
        quick=True, pattern=r"^2d-bilinear-reflection|^2d-bicubic-border|^3d-nearest-border")
    results = {r["name"]: r["status"] for r in
               (dict(acceptance.check_case(case, cpu, cpu), name=case["name"]) for case in cases)}
    assert results == {
        "2d-bilinear-reflection-noac-float32-fwd": "pass",
        "2d-bilinear-reflection-noac-float32-bwd-both-det": "pass",
        "2d-bicubic-border-ac-float32-fwd": "pass",
        "2d-bicubic-border-ac-float32-bwd-both-det": "routed",
        "3d-nearest-border-ac-float32-fwd": "pass",
        "3d-nearest-border-ac-float32-bwd-both-det": "pass"}
    calls = _calls(sim.log())
    assert "aclnnGridSampler3DBackward" in calls and "aclnnGridSampler2DBackward" in calls
    assert acceptance.check_empty(cpu, cpu, dtypes=("float32",))["status"] == "pass"
    acceptance.MODES, acceptance.PADDINGS = {2: ("bicubic",), 3: ("bilinear",)}, ("border",)
    assert acceptance.check_nan(cpu, cpu)["status"] == "pass"


def test_acceptance_script_catches_a_wrong_kernel(sim, ascend_lowering_on_cpu):
    acceptance, cpu = _acceptance(), jax.devices("cpu")[0]
    sim.lib.sim_set_output_bias(1e-3)
    cases = acceptance.covered_cases(quick=True, pattern=r"^2d-bilinear-border|^3d-nearest-zeros")
    results = [acceptance.check_case(case, cpu, cpu) for case in cases]
    assert len(results) >= 4 and all(r["status"] == "fail" for r in results)


def test_acceptance_script_without_an_npu(capsys):
    assert _acceptance().main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no Ascend NPU visible to JAX") and out.count("\n") == 1


# --- the simulator itself follows the documentation ----------------------------------------

class SimCalls:
    """Direct ctypes calls into the simulator, for its documented checks."""

    def __init__(self, sim: Sim):
        lib = sim.lib
        p, i64, u64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64
        lib.aclCreateTensor.restype = p
        lib.aclCreateTensor.argtypes = [p, u64, ctypes.c_int32, p, i64, ctypes.c_int32, p, u64, p]
        lib.aclDestroyTensor.argtypes = [p]
        lib.aclCreateBoolArray.restype = p
        lib.aclCreateBoolArray.argtypes = [p, u64]
        lib.aclDestroyBoolArray.argtypes = [p]
        lib.aclnnGridSampler2DBackwardGetWorkspaceSize.argtypes = [
            p, p, p, i64, i64, ctypes.c_bool, p, p, p, ctypes.POINTER(u64), ctypes.POINTER(p)]
        lib.aclnnGridSampler2DBackward.argtypes = [p, u64, p, p]
        self.lib, self.keep = lib, []

    def tensor(self, shape, dtype=0, fmt=2):
        data = np.zeros(max(1, int(np.prod(shape))), np.float64)
        dims = (ctypes.c_int64 * len(shape))(*shape)
        strides = (ctypes.c_int64 * len(shape))(
            *(int(np.prod(shape[j + 1:])) for j in range(len(shape))))
        self.keep += [data, dims, strides]
        return self.lib.aclCreateTensor(dims, len(shape), dtype, strides, 0, fmt, dims,
                                        len(shape), data.ctypes.data), data

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
            work = np.zeros(ws.value, np.uint8)
            launch = lambda: self.lib.aclnnGridSampler2DBackward(  # noqa: E731
                work.ctypes.data, ws.value, ex, None)
        return rc, launch, made, arr

    def release(self, made, arr):
        for t, _ in made.values():
            self.lib.aclDestroyTensor(t)
        if arr:
            self.lib.aclDestroyBoolArray(arr)


INVALID_2D_BACKWARD = {  # every ACLNN_ERR_PARAM_INVALID condition of the 2D backward seed
    "dtype not supported": dict(dtypes=dict(go=3, x=3, g=3, gx=3, gg=3)),
    "dtypes differ": dict(dtypes=dict(g=1)),
    "not 4-D": dict(shapes=dict(go=(1, 2, 3, 4, 1))),
    "interpolation out of range": dict(interp=3),
    "padding out of range": dict(pad=3),
    "N differs": dict(shapes=dict(g=(2, 3, 4, 2), gg=(2, 3, 4, 2))),
    "C differs": dict(shapes=dict(go=(1, 3, 3, 4))),
    "grid H differs from gradOutput": dict(shapes=dict(g=(1, 2, 4, 2), gg=(1, 2, 4, 2))),
    "grid W differs from gradOutput": dict(shapes=dict(g=(1, 3, 5, 2), gg=(1, 3, 5, 2))),
    "input spatial size 0": dict(shapes=dict(x=(1, 2, 0, 6), gx=(1, 2, 0, 6))),
    "grid last dim not 2": dict(shapes=dict(g=(1, 3, 4, 3), gg=(1, 3, 4, 3))),
    "inputGrad shape": dict(shapes=dict(gx=(1, 2, 5, 5))),
    "gridGrad shape": dict(shapes=dict(gg=(1, 3, 3, 2))),
}


@pytest.mark.parametrize("why", sorted(INVALID_2D_BACKWARD))
def test_sim_enforces_documented_checks(sim, why):
    calls = SimCalls(sim)
    rc, _, made, arr = calls.backward2d(**INVALID_2D_BACKWARD[why])
    calls.release(made, arr)
    assert rc == 161002


@pytest.mark.parametrize("null", ("go", "x", "g", "gx", "gg"))
def test_sim_null_tensors(sim, null):
    calls = SimCalls(sim)
    rc, _, made, arr = calls.backward2d(null=null)
    calls.release(made, arr)
    assert rc == 161001


@pytest.mark.parametrize("mask", (None, (False, False)))
def test_sim_empty_mask_computes_nothing(sim, mask):
    calls = SimCalls(sim)
    rc, launch, made, arr = calls.backward2d(mask=mask)
    made["go"][1][:] = 1.0
    made["x"][1][:] = 1.0
    made["gx"][1][:] = 7.0
    assert rc == 0 and launch() == 0
    assert (made["gx"][1] == 7.0).all()  # untouched: success without computing
    assert launch() == 161002  # and the executor was single-use
    calls.release(made, arr)
