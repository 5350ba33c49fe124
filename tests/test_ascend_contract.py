"""The Ascend (aclnn) handlers, run for real against a simulated aclnn library
(``tests/ascend_support.py``); the production handlers must refuse to run without a stream. The
simulator models CANN's documented and source-visible behaviour (two releases, the chips' routes,
atomics that do not add up the same way twice, per-thread contexts), records every call, counts
every broken contract (the ``sim`` fixture asserts none) and can be told to fail a chosen call or
to return wrong results.

What each test expects of CANN comes from the simulator itself (``SimCalls`` asks its first phase
directly), never from a table written again here.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import re
import shutil
import threading
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ascend_support import (  # noqa: I001 - the tests' own helpers
    ACL_DTYPES,
    BACKWARD,
    CASES,
    DTYPES,
    ENV,
    FORWARD,
    SimCalls,
    _attrs,
    _calls,
    _ran_on_aclnn,
    _step,
    ascend_backward,
    ascend_forward,
    assert_close,
    case_id,
    f64,
    make_data,
    oracle,
)

import jax_gridsample
from jax_gridsample import _ascend, _ascend_self_check, _primitives


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


# --- the call sequence, formats and executors -------------------------------------------------

def _created_formats(log) -> list[int]:
    return [int(re.search(r"/f(\d+)", line).group(1)) for line in log
            if line.startswith("aclCreateTensor")]


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
    # Contiguous strides, offset 0, the dtype; feature maps ND (2D) or NCDHW (3D), grids ND.
    created = [line for line in log if line.startswith("aclCreateTensor")]
    assert _created_formats(log) == ([2, 2, 2] if k == 2 else [30, 2, 30])
    for line in created:
        assert "/dt0/" in line and "offset=0" in line
    strides = re.search(r"strides=\[([\d,]+)\]", created[0]).group(1)
    assert [int(s) for s in strides.split(",")] == list(np.cumprod(x.shape[::-1])[::-1][1:]) + [1]
    # The launch gets the workspace the first phase asked for (the AICore tiling's 16 MiB).
    asked = int(re.search(r"-> executor E\d+ workspace=(\d+)", "\n".join(log)).group(1))
    assert asked >= 16 * 2**20
    launch = next(line for line in log if line.startswith(name + " "))
    assert f"workspace_size={asked} workspace=set" in launch


def test_backward_sends_the_3d_grid_as_nd(sim):
    """CANN's own 3D backward test and example create every tensor ND, its op code never reads
    the grid's format, and torch_npu sends ND; the feature maps go NCDHW."""
    x, g, go = make_data(3, jnp.float32)
    ascend_backward(go, x, g, 0, 0, False)
    # gradOutput, input, grid, inputGrad, gridGrad
    assert _created_formats(sim.log()) == [30, 30, 2, 30, 2]


def test_executors_are_single_use_and_left_to_cann_once_launched(sim):
    """A launch consumes a non-repeatable executor (aclDestroyAclOpExecutor.md): the handlers
    never destroy one they launched (the simulator counts that as a broken contract)."""
    x, g, go = make_data(2, jnp.float32)
    for _ in range(2):
        ascend_forward(x, g, 0, 0, False)
        ascend_backward(go, x, g, 0, 0, False)
    log = sim.log()
    made = [m.group(1) for line in log if (m := re.search(r"-> executor (E\d+)", line))]
    launched = [m.group(1) for line in log if (m := re.search(r" executor=(\S+)", line))]
    assert len(made) == 4 and sorted(made) == sorted(launched)
    assert len(set(launched)) == 4  # a fresh executor per call, each launched once
    assert "aclDestroyAclOpExecutor" not in _calls(log)


def test_an_executor_never_launched_is_made_repeatable_then_destroyed(sim):
    """When the workspace cannot be had, the executor is never launched: the handler takes it
    over the documented way (repeatable, then destroyed), and the error is a resource one."""
    x, g, go = make_data(2, jnp.float16, seed=5, n=3)  # a workspace no earlier call needed
    sim.fail_next("aclrtMalloc", 207001)
    with pytest.raises(Exception, match=r"RESOURCE_EXHAUSTED: .*aclrtMalloc of \d+ bytes for "
                                        r"the aclnn workspace failed with aclError 207001"):
        jax.block_until_ready(ascend_backward(go, x, g, 0, 0, False, stream=sim.new_stream()))
    calls = _calls(sim.log())
    launch = "aclnnGridSampler2DBackward"
    assert launch not in calls
    assert calls.index("aclSetAclOpExecutorRepeatable") < calls.index("aclDestroyAclOpExecutor")


def test_refuses_to_run_without_a_device_stream(sim):
    """The production handlers on a runtime without a device stream (XLA's CPU client): a clear
    error before any ACL call, never a launch on ACL's default stream."""
    x, g, go = make_data(2, jnp.float32)
    for run in (lambda: ascend_forward(x, g, 0, 0, False, stream=False),
                lambda: ascend_backward(go, x, g, 0, 0, False, stream=False)):
        with pytest.raises(Exception) as info:
            jax.block_until_ready(run())
        msg = str(info.value)
        assert "no device stream" in msg and 'implementation="reference"' in msg
    assert sim.log() == []


def test_every_launch_is_on_the_call_stream(sim):
    x, g, go = make_data(3, jnp.float32)
    ascend_forward(x, g, 0, 0, False)
    ascend_backward(go, x, g, 1, 2, True, mask=(False, True), deterministic=True)
    log = sim.log()
    launches = [line for line in log if re.match(r"aclnnGridSampler3D(Backward)? ", line)]
    assert len(launches) == 2
    assert all(f"stream={sim.stream_desc} " in line for line in launches)
    assert not any("stream=default" in line or "stream=invalid" in line for line in log)


def test_no_current_context_is_a_clear_error(sim):
    sim.lib.sim_set_default_context(False, 0)
    x, g, go = make_data(2, jnp.float32)
    with pytest.raises(Exception, match=r"no ACL context is current .*aclError 107002"):
        jax.block_until_ready(ascend_backward(go, x, g, 0, 0, False))
    assert _calls(sim.log()) == ["aclrtGetCurrentContext"]


def test_the_context_must_be_on_the_calls_device(sim):
    """A context current on another device than the one XLA runs the call on: refused before
    any aclnn call (the CPU client runs it on device 0)."""
    sim.lib.sim_set_default_context(True, 1)
    x, g, _ = make_data(2, jnp.float32)
    with pytest.raises(Exception, match=r"FAILED_PRECONDITION: .*is on device 1, but XLA runs "
                                        r"the call on device 0"):
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False))
    assert not any(line.startswith("aclnnGridSampler") for line in sim.log())


# --- memory: workspaces and masked-off gradients ----------------------------------------------

def _workspace_calls(kernels):
    return kernels.workspace_paths()["stream_cache"]


def test_workspace_is_cached_per_stream(sim, kernels):
    """Without XLA's scratch allocator (the CPU client has none), each stream keeps one
    workspace for every later call: no allocation, synchronization or free per call."""
    stream = sim.new_stream()
    x, g, go = make_data(2, jnp.float32)
    before = _workspace_calls(kernels)
    for _ in range(3):
        ascend_backward(go, x, g, 0, 0, False, stream=stream)
    calls = _calls(sim.log())
    assert calls.count("aclrtMalloc") == 1
    assert "aclrtSynchronizeStream" not in calls and "aclrtFree" not in calls
    assert _workspace_calls(kernels) == before + 3


def test_workspace_grows_after_the_stream_is_synchronized(sim):
    """A call that needs more than the stream's buffer: the stream is synchronized (its queued
    kernels may still use the old buffer), the old one freed and a bigger one allocated, each
    status checked."""
    stream = sim.new_stream()
    x, g, go = make_data(2, jnp.float32)
    ascend_backward(go, x, g, 0, 0, False, stream=stream)
    sim.lib.sim_clear_log()
    x16, g16, go16 = make_data(2, jnp.float16)  # half types need a float32 copy too
    sim.fail_next("aclrtSynchronizeStream", 107000)
    with pytest.raises(Exception, match=r"aclrtSynchronizeStream before growing the workspace "
                                        r"failed with aclError 107000"):
        jax.block_until_ready(ascend_backward(go16, x16, g16, 0, 0, False, stream=stream))
    ascend_backward(go16, x16, g16, 0, 0, False, stream=stream)
    calls = _calls(sim.log())
    assert calls.count("aclrtSynchronizeStream") == 2
    grow = calls[calls.index("aclrtSynchronizeStream", calls.index("aclrtSynchronizeStream") + 1):]
    assert grow[:3] == ["aclrtSynchronizeStream", "aclrtFree", "aclrtMalloc"]


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
    # The masked-off gradient is a tensor without data: no memory is spent on it.
    off = "inputGrad" if not mask[0] else "gridGrad"
    query = next(line for line in log if "BackwardGetWorkspaceSize" in line)
    assert re.search(off + r"=T\d+\[[\d,]+\]/dt0/f\d+/nodata", query)
    assert sum(line.startswith("aclCreateTensor") and "/nodata" in line for line in log) == 1


def test_handler_never_passes_an_empty_mask(sim):
    x, g, go = make_data(2, jnp.float32)
    call = jax.ffi.ffi_call(BACKWARD, [], has_side_effect=True)
    attrs = dict(_attrs(0, 0, False), input_mask=False, grid_mask=False)
    with pytest.raises(Exception, match="asks for no gradient"):
        jax.block_until_ready(jax.jit(lambda *a: call(*a, **attrs))(go, x, g))
    assert sim.log() == []


# --- errors reach Python, with the right code, and nothing leaks -----------------------------

STATUS_NAMES = {161001: "ACLNN_ERR_PARAM_NULLPTR", 161002: "ACLNN_ERR_PARAM_INVALID",
                361001: "ACLNN_ERR_RUNTIME_ERROR", 561103: "ACLNN_ERR_INNER_NULLPTR",
                561000: "ACLNN_ERR_INNER"}


@pytest.mark.parametrize("k", (2, 3))
@pytest.mark.parametrize("backward", (False, True), ids=("forward", "backward"))
@pytest.mark.parametrize("phase", ("GetWorkspaceSize", ""), ids=("workspace", "launch"))
@pytest.mark.parametrize("code", sorted(STATUS_NAMES))
def test_status_errors_reach_python(sim, k, backward, phase, code):
    """CANN's parameter errors (161001, 161002) are the caller's: INVALID_ARGUMENT; the others
    INTERNAL."""
    x, g, go = make_data(k, jnp.float32)
    fn = f"aclnnGridSampler{k}D{'Backward' if backward else ''}{phase}"
    sim.fail_next(fn, code)
    with pytest.raises(Exception) as info:
        if backward:
            jax.block_until_ready(ascend_backward(go, x, g, 0, 0, False))
        else:
            jax.block_until_ready(ascend_forward(x, g, 0, 0, False))
    msg = str(info.value)
    kind = "INVALID_ARGUMENT" if code in (161001, 161002) else "INTERNAL"
    assert msg.startswith(f"{kind}: ")
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
    ("aclrtCtxSetSysParamOpt", "aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 1) failed"),
])
def test_helper_failures_reach_python(sim, fn, expected):
    x, g, go = make_data(2, jnp.float32)
    sim.fail_next(fn, 207001)
    with pytest.raises(Exception, match=re.escape(expected)):
        jax.block_until_ready(ascend_backward(go, x, g, 0, 0, False, deterministic=True))
    assert sim.lib.sim_get_context_deterministic() in (-1, 0)  # never left raised


# --- determinism: what the call asks for, and nothing else ------------------------------------

def _option_calls(log):
    return [line for line in log if "SysParamOpt" in line and "Get" not in line]


def test_deterministic_call_raises_the_context_option_for_itself_only(sim):
    """A deterministic call raises the context's ACL_OPT_DETERMINISTIC for its first phase and
    launch and restores it after; the process-wide option is never touched, so other libraries'
    later calls are not switched."""
    x, g, go = make_data(3, jnp.float32)
    ascend_backward(go, x, g, 0, 0, True, deterministic=True)
    log = sim.log()
    assert _option_calls(log) == ["aclrtCtxSetSysParamOpt opt=0 value=1",
                                  "aclrtCtxSetSysParamOpt opt=0 value=0"]
    query = next(i for i, line in enumerate(log) if "BackwardGetWorkspaceSize" in line)
    launch = next(i for i, line in enumerate(log) if line.startswith("aclnnGridSampler3DBackward "))
    raised, restored = (log.index(line) for line in _option_calls(log))
    assert raised < query < launch < restored
    assert " ctxdet=1" in log[query]
    assert sim.lib.sim_get_context_deterministic() == 0
    assert sim.lib.sim_get_process_deterministic() == 0


def test_deterministic_never_lowers_a_level_already_set(sim):
    sim.lib.sim_set_context_deterministic(3)
    x, g, go = make_data(2, jnp.float32)
    ascend_backward(go, x, g, 0, 0, True, deterministic=True)
    assert _option_calls(sim.log()) == []
    assert sim.lib.sim_get_context_deterministic() == 3


def test_not_deterministic_touches_nothing(sim):
    x, g, go = make_data(2, jnp.float32)
    ascend_backward(go, x, g, 0, 0, True)
    ascend_forward(x, g, 0, 0, True, deterministic=True)
    assert not any("SysParamOpt" in line for line in sim.log())


def test_start_up_level_applies_once_and_stays(sim, monkeypatch, kernels):
    """JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=<level>: the handlers raise the context's and the
    process's option to that level before their first aclnn call in a context and leave them:
    every later backward runs CANN's deterministic kernel, asked for per call or not."""
    monkeypatch.setenv(kernels.DETERMINISTIC_ENV_VAR, "2")
    x, g, go = make_data(2, jnp.float32)
    for deterministic in (False, True, False):
        ascend_backward(go, x, g, 0, 0, True, deterministic=deterministic)
    log = sim.log()
    assert _option_calls(log) == ["aclrtCtxSetSysParamOpt opt=0 value=2",
                                  "aclrtSetSysParamOpt opt=0 value=2"]
    assert log.index(_option_calls(log)[1]) < next(
        i for i, line in enumerate(log) if "GetWorkspaceSize" in line)
    assert [m.group(1) for line in log if (m := re.search(r" kernel=(\S+)", line))] == \
        ["aicore-deterministic"] * 3
    assert sim.lib.sim_get_context_deterministic() == 2
    assert sim.lib.sim_get_process_deterministic() == 2


def test_start_up_level_must_be_a_level(sim, monkeypatch, kernels):
    monkeypatch.setenv(kernels.DETERMINISTIC_ENV_VAR, "yes")
    x, g, _ = make_data(2, jnp.float32)
    with pytest.raises(Exception, match=r"INVALID_ARGUMENT: .*JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC "
                                        r"is \"yes\"; expected a level .*1, 2 or 3"):
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False))


@pytest.mark.parametrize("soc, on_aclnn", [("Ascend910B2", True), ("Ascend950PR_9599", True),
                                           ("Ascend910A", False), ("Ascend999", False)])
def test_deterministic_backwards_run_where_cann_documents_determinism(soc, on_aclnn):
    """CANN's deterministic conditions describe its AICore backward route: Atlas A2/A3 and 950,
    not float64, C <= 2048. Atlas training products (AICPU) and unknown chips: the reference."""
    family = _ascend.chip_family(soc)
    shapes = [(2, 3, 4, 4), (2, 3, 6, 6), (2, 4, 4, 2)]
    assert (_ascend.documented_limit(True, 2, 0, "float32", family, shapes, True) is None) \
        == on_aclnn
    assert _ascend.documented_limit(True, 2, 0, "float32", family, shapes, False) is None
    wide = [(2, 2049, 4, 4), (2, 2049, 6, 6), (2, 4, 4, 2)]
    assert _ascend.documented_limit(True, 2, 0, "float32", family, wide, True) is not None
    assert _ascend.documented_limit(True, 2, 0, "float64", family, shapes, True) is not None


# --- sizes --------------------------------------------------------------------------------------

def test_size_limits_route_to_the_reference():
    fwd = lambda input_shape: _ascend.documented_limit(  # noqa: E731
        False, 2, 0, "float32", "atlas-a2-a3", [input_shape, (1, 2, 2, 2)], False)
    assert fwd((1, 1, 46341, 46341)) is not None  # H*W just above INT32_MAX
    assert fwd((1, 1, 46340, 46340)) is None

    def bwd(grad_output, input, grid):
        return _ascend.documented_limit(True, 2, 0, "float32", "atlas-a2-a3",
                                        [grad_output, input, grid], False)

    assert bwd((1, 1, 2, 2), (1, 1, 46340, 46340), (1, 2, 2, 2)) is None
    assert bwd((1, 1, 2, 2), (1, 2, 46340, 46340), (1, 2, 2, 2)) is not None  # C*H*W
    assert bwd((3, 1, 2, 2), (3, 1, 30000, 30000), (3, 2, 2, 2)) is not None  # N*C*H*W
    assert bwd((0, 1, 2, 2), (0, 1, 46341, 46341), (0, 2, 2, 2)) is not None  # per sample
    assert bwd((1, 1, 46341, 46341), (1, 1, 2, 2), (1, 46341, 46341, 2)) is not None


@pytest.mark.parametrize("backward", (False, True), ids=("forward", "backward"))
def test_handlers_check_the_size_limits_themselves(sim, backward):
    """The C++ limit checks, on an empty batch (cheap) with a 46341 x 46341 plane: refused before
    any ACL call, whatever N is."""
    x = jnp.zeros((0, 1, 46341, 46341), jnp.float32)
    g = jnp.zeros((0, 2, 2, 2), jnp.float32)
    go = jnp.zeros((0, 1, 2, 2), jnp.float32)
    expected = (r"one sample of input has 2147488281 elements, but the aclnn backward indexes "
                r"in 32 bits" if backward else r"the input's spatial size .* is 2147488281")
    # A side effect, or XLA would not run a call whose results are empty.
    if backward:
        target, operands, results = BACKWARD, (go, x, g), (jax.ShapeDtypeStruct(x.shape, x.dtype),)
        attrs = dict(_attrs(0, 0, False), input_mask=True, grid_mask=False)
    else:
        target, operands, results = FORWARD, (x, g), jax.ShapeDtypeStruct(go.shape, go.dtype)
        attrs = _attrs(0, 0, False)
    call = jax.ffi.ffi_call(target, results, has_side_effect=True)
    with pytest.raises(Exception, match="INVALID_ARGUMENT: .*" + expected):
        jax.block_until_ready(jax.jit(lambda *a: call(*a, **attrs))(*operands))
    assert sim.log() == []


# --- what CANN takes, asked of CANN: the probe and two releases --------------------------------


SOCS = {  # a SoC name aclrtGetSocName gives -> the family its product belongs to
    "Ascend910B2": "atlas-a2-a3", "Ascend910B4-1": "atlas-a2-a3", "Ascend910_9391": "atlas-a2-a3",
    "Ascend950PR_9599": "ascend950", "Ascend910A": "atlas-training",
    "Ascend910B": "atlas-training", "Ascend910ProB": "atlas-training",
    "Ascend310P3": "unsupported", "": "unknown", "Ascend999": "unknown",
}


def test_chip_families():
    assert {soc: _ascend.chip_family(soc) for soc in SOCS} == SOCS



@pytest.mark.parametrize("release", ("head", "8.1.RC1"))
@pytest.mark.parametrize("soc", ("Ascend910B2", "Ascend910A", "Ascend950PR_9599"),
                         ids=("a2", "training", "950"))
def test_routing_sends_aclnn_exactly_what_cann_takes(sim, ascend_kernel, release, soc):
    """Every mode, dtype and channel class, forward and backward, on a simulated chip and CANN
    release: aclnn gets a call exactly when the simulated CANN's first phase takes it (asked of
    it directly, on other shapes than the probe's) and its documentation does not rule it out
    (3D bicubic)."""
    sim.set(release=release, soc=soc)
    asked = SimCalls(sim)
    for backward, k, interp, dtype, channels in itertools.product(
            (False, True), (2, 3), (0, 1, 2), ACL_DTYPES, (3, 2049)):
        x = jax.ShapeDtypeStruct((1, channels) + (3,) * k, jnp.dtype(dtype))
        g = jax.ShapeDtypeStruct((1,) + (2,) * k + (k,), jnp.dtype(dtype))
        avals = [jax.ShapeDtypeStruct((1, channels) + (2,) * k, x.dtype), x, g] if backward \
            else [x, g]
        routed = ascend_kernel.rejects("cpu", backward, avals, interpolation=interp,
                                       channels_last=False)
        expected = asked.first_phase_accepts(backward, k, dtype, interp, channels) and not (
            k == 3 and interp == 2)
        assert (routed is None) == expected, (backward, k, interp, dtype, channels, routed)


def test_an_older_release_keeps_its_rejections_off_aclnn(sim, ascend_kernel):
    """End to end through "auto": CANN 8.1.RC1 lacks the 2D bfloat16 forward (ops-cv 78f22ac4)
    and the 2D bicubic backward (b3bb0e12), and on the 950 sent the float64 2D backward to a
    kernel without float64 (760ad4cc): those run on the reference there, without an error, and
    on aclnn with today's CANN."""
    def forward_bf16():
        x, g, _ = make_data(2, jnp.bfloat16)
        jax.block_until_ready(jax_gridsample.grid_sample(x, g))

    def backward_bicubic():
        x, g, go = make_data(2, jnp.float32)
        jax.block_until_ready(jax_gridsample.grid_sample_backward(go, x, g, mode="bicubic"))

    def backward_f64():
        x, g, go = make_data(2, jnp.float64)
        jax.block_until_ready(jax_gridsample.grid_sample_backward(go, x, g))

    for release, soc, expected in (("8.1.RC1", "Ascend910B2", False), ("head", "Ascend910B2", True),
                                   ("8.1.RC1", "Ascend950PR_9599", False),
                                   ("head", "Ascend950PR_9599", True)):
        sim.set(release=release, soc=soc)
        ascend_kernel._capabilities.clear()  # a new CANN install, as far as the kernel knows
        jax.clear_caches()  # and programs lowered anew
        if soc == "Ascend910B2":
            assert _ran_on_aclnn(sim, forward_bf16)[0] == expected
            assert _ran_on_aclnn(sim, backward_bicubic)[1] == expected
        else:
            assert _ran_on_aclnn(sim, backward_f64)[1] == expected
    assert ascend_kernel.capabilities("cpu").cann_version.startswith("head")


def test_native_names_what_cann_rejects(sim, ascend_kernel):
    sim.set(release="8.1.RC1")
    x, g, go = make_data(2, jnp.float32)
    with pytest.raises(NotImplementedError, match=r"does not cover this call: CANN's first phase "
                                                  r"rejects it \(161002: .*interpolationMode"):
        jax_gridsample.grid_sample_backward(go, x, g, mode="bicubic", implementation="native")


def test_a_probe_that_cannot_run_keeps_everything_on_the_reference(sim, ascend_kernel):
    sim.lib.sim_set_default_context(False, 0)
    x, g, _ = make_data(2, jnp.float32)
    out = jax_gridsample.grid_sample(x, g)  # auto: the reference, no error
    assert_close(out, oracle(x, g, np.zeros((2, 3, 3, 4)), 0, 0, False)[0], 1e-5)
    assert "no ACL context is current" in ascend_kernel.capabilities("cpu").error
    with pytest.raises(NotImplementedError, match="the aclnn support probe failed on cpu:0"):
        jax_gridsample.grid_sample(x, g, implementation="native")


@pytest.mark.parametrize("soc, k, dtype, backward, interp", [
    ("Ascend910B2", 2, jnp.float64, False, 2),   # no AICPU bicubic
    ("Ascend910A", 2, jnp.float32, False, 2),    # Atlas training: bicubic only on AICPU
    ("Ascend910A", 3, jnp.bfloat16, False, 0),   # 3D forward bf16 only on A2/A3
    ("Ascend910A", 2, jnp.bfloat16, True, 0),    # 2D backward bf16 only on A2/A3/950
    ("Ascend910A", 2, jnp.float64, True, 0),     # the 2D backward page: no float64 there
    ("Ascend910A", 3, jnp.bfloat16, True, 0),    # the 3D backward page: no bf16 there
])
def test_sim_rejects_what_cann_rejects(sim, soc, k, dtype, backward, interp):
    sim.set(soc=soc)
    x, g, go = make_data(k, dtype)
    with pytest.raises(Exception, match=r"INVALID_ARGUMENT: .*ACLNN_ERR_PARAM_INVALID \(161002\)"):
        if backward:
            jax.block_until_ready(ascend_backward(go, x, g, interp, 0, False))
        else:
            jax.block_until_ready(ascend_forward(x, g, interp, 0, False))
    sim.set(soc="Ascend910B2")
    if not (k == 2 and dtype == jnp.float64 and not backward):
        (ascend_backward(go, x, g, interp, 0, False) if backward
         else ascend_forward(x, g, interp, 0, False))  # the same call runs on an A2


def test_channels_last_is_a_clear_error(sim):
    x, g, _ = make_data(2, jnp.float32)
    with pytest.raises(Exception, match="channels-first input only"):
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False, channels_last=True))
    assert sim.log() == []  # rejected before any library call


# --- what aclnn is sent: coordinates the guard replaces --------------------------------------

@pytest.mark.parametrize("k", (2, 3))
@pytest.mark.parametrize("pad", (0, 1, 2), ids=("zeros", "border", "reflection"))
def test_aclnn_gets_a_grid_without_what_the_guard_replaces(sim, ascend_kernel, k, pad):
    """CANN has no guard for NaN, infinite and huge coordinates (docs/semantics.md, step 2):
    the lowering sends it _reference.grid_for_aclnn's grid, so that aclnn computes what every
    other implementation does, and zeroes the grid gradient where a coordinate was replaced."""
    x, g, go = make_data(k, jnp.float32, seed=3)
    bad = np.asarray(g).copy().reshape(-1, k)
    for i, value in enumerate((np.nan, np.inf, -np.inf, 1e30, -1e30, 2.0**60)):
        bad[2 * i, i % k] = value
    g = jnp.asarray(bad.reshape(g.shape))
    for interp in (0, 1, 2) if k == 2 else (0, 1):
        mode = ("bilinear", "nearest", "bicubic")[interp]
        kw = dict(mode=mode, padding_mode=("zeros", "border", "reflection")[pad],
                  align_corners=bool(interp % 2))
        sim.lib.sim_clear_log()
        got = jax.block_until_ready((jax_gridsample.grid_sample(x, g, **kw),
                                     *jax_gridsample.grid_sample_backward(go, x, g, **kw)))
        launched = _calls(sim.log())
        assert f"aclnnGridSampler{k}D" in launched, mode
        assert f"aclnnGridSampler{k}DBackward" in launched, mode
        expected = (jax_gridsample.grid_sample(x, g, implementation="reference", **kw),
                    *jax_gridsample.grid_sample_backward(go, x, g, implementation="reference",
                                                         **kw))
        for a, b in zip(got, expected, strict=True):
            assert np.all(np.isfinite(np.asarray(a))), mode
            assert_close(a, b, 2e-5 * max(1.0, float(np.abs(f64(b)).max())))
        replaced = ~np.isfinite(bad.reshape(g.shape)) | (np.abs(bad.reshape(g.shape)) > 1e9)
        np.testing.assert_array_equal(np.asarray(got[2])[replaced], 0.0)


def test_a_one_pixel_input_with_zeros_and_align_corners_is_routed(sim, ascend_kernel):
    """There every finite grid value reads the pixel, so no grid can stand for a NaN one."""
    x = jnp.ones((1, 2, 1, 1), jnp.float32)
    g = jnp.zeros((1, 2, 2, 2), jnp.float32)
    assert _ran_on_aclnn(sim, lambda: jax.block_until_ready(jax_gridsample.grid_sample(
        x, g, align_corners=True))) == (False, False)
    assert _ran_on_aclnn(sim, lambda: jax.block_until_ready(jax_gridsample.grid_sample(
        x, g, align_corners=False))) == (True, False)


# --- the self-check: "auto" trusts what passed on the device -----------------------------------



def test_self_check_passes_and_auto_runs_on_aclnn(sim, ascend_kernel, self_check_on,
                                                  monkeypatch, kernels):
    """With determinism set at start-up, every check passes: "auto" runs forward and backward,
    default and deterministic, on aclnn, and native_status() says so."""
    monkeypatch.setenv(kernels.DETERMINISTIC_ENV_VAR, "1")
    x, g, _ = make_data(2, jnp.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _ran_on_aclnn(sim, lambda: _step(x, g)) == (True, True)
        assert _ran_on_aclnn(sim, lambda: _step(x, g, deterministic=True)) == (True, True)
    check = ascend_kernel.self_check("cpu")
    assert check.failure is None and check.deterministic_failure is None
    # 4 cases: a forward, and default and deterministic backwards of both, input, grid gradients
    assert check.compared == 4 * (1 + 2 * (2 + 1 + 1))
    assert "self-check: passed on cpu:0 (36 results compared)" in "; ".join(
        ascend_kernel.first_use_summaries())


def test_self_check_catches_a_wrong_kernel(sim, ascend_kernel, self_check_on):
    """A backward that returns wrong values: on first use, one warning naming the first
    mismatch, and from then on every call of "auto" on the reference."""
    sim.lib.sim_set_wrong_results(b"aclnnGridSampler2DBackward", 1e-3)
    x, g, _ = make_data(2, jnp.float32)
    with pytest.warns(RuntimeWarning, match=r"self-check failed on cpu:0 \(2d-bilinear-border-"
                                            r"noac backward, both gradients: error .* > 0.0001\)"):
        _step(x, g)  # the first use runs the check
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # only once
        assert _ran_on_aclnn(sim, lambda: _step(x, g)) == (False, False)
    assert not ascend_kernel.self_check("cpu").trusts(False)


def test_self_check_catches_a_failing_call(sim, ascend_kernel, self_check_on):
    sim.fail_next("aclnnGridSampler3D", 561000)
    with pytest.warns(RuntimeWarning, match=r"an aclnn call failed: .*aclnnGridSampler3D failed "
                                            r"with ACLNN_ERR_INNER \(561000\)"):
        ascend_kernel.self_check("cpu")
    x, g, _ = make_data(2, jnp.float32)
    assert _ran_on_aclnn(sim, lambda: _step(x, g)) == (False, False)


def test_self_check_catches_a_backward_that_is_not_deterministic(sim, ascend_kernel,
                                                                 self_check_on):
    """Per call, only the context's option is raised; today's opbase picks kernels by the
    process's (c501b51), so a deterministic call gets the default kernel, whose atomic adds do
    not give the same bits twice. The self-check finds it: deterministic backwards run on the
    reference, everything else on aclnn."""
    with pytest.warns(RuntimeWarning, match=r"except the deterministic backward \(two runs of a "
                                            r"deterministic backward with many colliding points "
                                            r"differ"):
        ascend_kernel.self_check("cpu")
    x, g, _ = make_data(2, jnp.float32)
    assert _ran_on_aclnn(sim, lambda: _step(x, g, deterministic=True)) == (True, False)
    assert _ran_on_aclnn(sim, lambda: _step(x, g)) == (True, True)


def test_native_skips_the_self_check(sim, ascend_kernel, self_check_on):
    sim.lib.sim_set_wrong_results(b"", 1.0)
    x, g, _ = make_data(2, jnp.float32)
    jax.block_until_ready(jax_gridsample.grid_sample(x, g, implementation="native"))
    assert ascend_kernel._self_checks == {}
    assert _calls(sim.log()).count("aclnnGridSampler2D") == 1


def test_self_check_off_trusts_aclnn(sim, ascend_kernel):
    sim.lib.sim_set_wrong_results(b"", 1.0)  # a check would fail
    x, g, _ = make_data(2, jnp.float32)
    assert _ran_on_aclnn(sim, lambda: _step(x, g)) == (True, True)
    assert ascend_kernel._self_checks == {}


def test_self_check_setting_is_validated(monkeypatch):
    monkeypatch.setenv(_ascend_self_check.ENV_VAR, "maybe")
    with pytest.raises(ValueError, match=r"JAX_GRIDSAMPLE_ASCEND_SELF_CHECK='maybe': expected "
                                         r"'on' or 'off'"):
        _ascend_self_check.enabled()


def test_self_check_on_an_older_release_with_start_up_determinism(sim, ascend_kernel,
                                                                  self_check_on, monkeypatch,
                                                                  kernels):
    """8.1.RC1's opbase reads the context's option once per kernel: set at start-up, before the
    first call, it holds for every later call, and the deterministic check passes."""
    monkeypatch.setenv(kernels.DETERMINISTIC_ENV_VAR, "1")
    sim.set(release="8.1.RC1")
    check = ascend_kernel.self_check("cpu")
    assert check.trusts(True), check.summary()


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


def test_library_without_the_symbols_is_a_clear_error(sim, sim_path):
    x, g, _ = make_data(2, jnp.float32)
    os.environ[ENV] = "libm.so.6"
    with pytest.raises(Exception, match=r"cannot load the CANN library libm\.so\.6 \(defines "
                                        r"none of the symbols still missing\)"):
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False))
    os.environ[ENV] = f"{sim_path}:libm.so.6"  # nothing left to add after the sim
    with pytest.raises(Exception, match=r"cannot load the CANN library libm\.so\.6"):
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False))


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


def test_an_opapi_library_already_loaded_is_reused(sim, kernels, sim_path, tmp_path):
    """torch_npu opens the combined libopapi.so; opening libopapi_cv.so next to it is the mix
    CANN does not support: an alternative the process has loaded wins over the group's first."""
    cv, combined = tmp_path / "libopapi_cv_sim.so", tmp_path / "libopapi_sim.so"
    for path in (cv, combined):
        shutil.copy(sim_path, path)
    ctypes.CDLL(str(combined))  # as torch_npu would have
    os.environ[ENV] = f"{cv}|{combined}"
    assert kernels.load_libraries() == f"loaded from {combined} (already loaded)"
    assert not _mapped(cv)


def test_loader_reports_where_it_loaded_from(sim, kernels, sim_path):
    assert sim_path in kernels.load_libraries()
    assert sim_path in _ascend.status()


def test_status_says_separately_what_is_there(sim, sim_path, tmp_path, monkeypatch):
    """Handlers built, CANN libraries found (where) or not, Ascend platform known or not; and
    "available" only with all three."""
    os.environ[ENV] = str(tmp_path / "libnothing.so")
    status = _ascend.status()
    assert status.startswith("handlers built; CANN libraries not found (")
    assert "libnothing.so" in status and "; no Ascend platform known to JAX (no Ascend PJRT " \
        "plugin)" in status
    os.environ[ENV] = sim_path  # loaded by this process already (Sim), so reused
    loaded = f"CANN libraries loaded from {sim_path} (already loaded)"
    assert _ascend.status().startswith(f"handlers built; {loaded}; no Ascend platform known to "
                                       "JAX (no Ascend PJRT plugin)")
    monkeypatch.setattr(_ascend, "_known", lambda name: name == "ascend")
    assert _ascend.status().startswith(f"available (handlers built; {loaded}; Ascend platform "
                                       "'ascend' known to JAX)")


# --- the package's lowering, end to end ------------------------------------------------------

def test_no_ascend_lowering_without_the_plugin():
    assert not any(name in _primitives.NATIVE_KERNELS for name in
                   _ascend.lowering_platform_names())
    called = []
    _ascend.on_platform_known(called.append)
    assert called == []
    with pytest.raises(RuntimeError, match="no Ascend platform known to JAX"):
        jax_gridsample.ascend_self_check()


def test_registers_once_jax_knows_the_platform(monkeypatch):
    called = []
    monkeypatch.setattr(_ascend, "_known", lambda name: name == "ascend")
    _ascend.on_platform_known(called.append)
    assert called == ["ascend"]


def test_public_api_runs_on_aclnn(sim, ascend_kernel):
    x, g, _ = make_data(2, jnp.float32)

    def loss(x, g):
        return jnp.sum(jax_gridsample.grid_sample(x, g, mode="bilinear", padding_mode="border",
                                                  deterministic=True) ** 2)

    hlo = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, g).as_text()
    assert FORWARD in hlo and BACKWARD in hlo
    gx, gg = jax.block_until_ready(jax.grad(loss, argnums=(0, 1))(x, g))
    calls = _calls(sim.log())
    assert "aclnnGridSampler2D" in calls and "aclnnGridSampler2DBackward" in calls
    out, _, _ = oracle(x, g, np.zeros((2, 3, 3, 4)), 0, 1, False)
    _, rx, rg = oracle(x, g, 2 * out, 0, 1, False)  # d sum(out^2) = 2 out
    assert_close(gx, rx, 1e-5)
    assert_close(gg, rg, 1e-5 * max(1.0, float(np.abs(f64(rg)).max())))


def test_public_api_routes_uncovered_calls_to_reference(sim, ascend_kernel):
    x, g, _ = make_data(3, jnp.float32)

    def loss(x, g):
        return jnp.sum(jax_gridsample.grid_sample(x, g, mode="bicubic") ** 2)

    assert _ran_on_aclnn(sim, lambda: jax.grad(loss, argnums=(0, 1))(x, g)) == (False, False)
    with pytest.raises(NotImplementedError, match=r"does not cover this call: CANN's first phase "
                                                  r"rejects it \(161002: .*interpolationMode 2"):
        jax_gridsample.grid_sample(x, g, mode="bicubic", implementation="native")


# --- the simulator itself follows the documentation ----------------------------------------

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
    assert sim.lib.sim_violations() == 1  # the second launch broke the contract
    sim.lib.sim_reset()


def test_sim_workspace_depends_on_the_call(sim):
    """The AICore tilings' 16 MiB, plus a float32 copy of grad_input for half types in the 2D
    backward, plus the executor's intermediate gradients; AICPU routes need only those."""
    x, g, go = make_data(2, jnp.float32)
    ascend_backward(go, x, g, 0, 0, False)
    x16, g16, go16 = make_data(2, jnp.float16)
    ascend_backward(go16, x16, g16, 0, 0, False)
    sim.set(soc="Ascend910A")  # AICPU
    ascend_backward(go, x, g, 0, 0, False)
    sizes = [int(m.group(1)) for line in sim.log()
             if (m := re.search(r"-> executor E\d+ workspace=(\d+)", line))]
    inter32, inter16 = (x.size + g.size) * 4, (x.size + g.size) * 2
    assert sizes == [16 * 2**20 + inter32, 16 * 2**20 + inter16 + x.size * 4, inter32]


def test_sim_contexts_are_per_thread(sim):
    """A thread's current context is its own (aclrtSetCurrentContext); threads without one see
    the primary context when the simulated plugin makes it current, and none otherwise. The
    deterministic option belongs to the context."""
    lib = sim.lib
    lib.aclrtCreateContext.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int32]
    lib.aclrtGetDevice.argtypes = [ctypes.POINTER(ctypes.c_int32)]
    lib.aclrtCtxSetSysParamOpt.argtypes = [ctypes.c_int32, ctypes.c_int64]
    lib.aclrtDestroyContext.argtypes = [ctypes.c_void_p]
    seen = {}

    def own():
        ctx = ctypes.c_void_p()
        assert lib.aclrtCreateContext(ctypes.byref(ctx), 3) == 0
        device = ctypes.c_int32()
        lib.aclrtGetDevice(ctypes.byref(device))
        seen["own"] = (device.value, lib.aclrtCtxSetSysParamOpt(0, 1))
        lib.aclrtDestroyContext(ctx)

    def other():
        device = ctypes.c_int32(-1)
        seen["other"] = lib.aclrtGetDevice(ctypes.byref(device)), device.value

    for target in (own, other):
        t = threading.Thread(target=target)
        t.start()
        t.join()
    assert seen["own"] == (3, 0) and seen["other"] == (0, 0)
    assert lib.sim_get_context_deterministic() == -1  # the primary's option was not touched
    lib.sim_set_default_context(False, 0)
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["other"][0] == 107002


# --- the hardware acceptance script (benchmarks/ascend.py), run against the simulator ---------

def _acceptance():
    import importlib.util

    path = Path(__file__).parents[1] / "benchmarks" / "ascend.py"
    spec = importlib.util.spec_from_file_location("ascend_acceptance", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny(acceptance):
    """The script's sections on a few tiny shapes each (a fresh module: nothing leaks); the
    parity case scatters 64 points into 9 pixels, so that atomics show."""
    acceptance.MODES, acceptance.PADDINGS = {2: ("bilinear",)}, ("border",)
    acceptance.SHAPES = {2: ((1, 2, 3, 3), (1, 8, 8, 2))}
    acceptance.ROUTE_SHAPES = (
        ("wide-c", (1, 2049, 2, 3), (1, 2, 2, 2), "bilinear", "zeros", False, ("float32",)),)
    acceptance.CHAIN_SHAPES = (
        ("2d", (2, 3, 6, 7), (2, 5, 4, 2), (2, 3, 4, 2), "bilinear", "border", False),)
    acceptance.CHAIN_RUNS = 2
    acceptance.COLLISION_SHAPES = (("2d", (1, 2, 2, 2), (1, 24, 24, 2), "float32"),)
    acceptance.EMPTY_CASES, acceptance.EMPTY_DTYPES = acceptance.EMPTY_CASES[:1], ("float32",)
    acceptance.TIMING_SHAPES, acceptance.TIMING_DTYPES = (("2d", (1, 2, 7, 9), (4, 5)),), \
        ("float32",)
    acceptance.TIMING_WARMUP = 0
    return acceptance


def _run_acceptance(sim, kernel, tmp_path) -> tuple[int, str, dict, int]:
    """The whole script (``--quick``, tiny shapes, no torch_npu) on the simulator: its exit
    status, its output, its JSON report, and where in the simulator's log its self-check
    ended."""
    import dataclasses
    import io
    import json

    acceptance, cpu, out, marks = _tiny(_acceptance()), jax.devices("cpu")[0], io.StringIO(), {}

    def self_check():
        outcome = dataclasses.asdict(kernel.self_check("cpu"))
        marks["self_check_end"] = len(sim.log())
        return outcome

    args = acceptance.parser().parse_args(
        ["--quick", "--repeats", "1", "--no-torch", "--json", str(tmp_path / "report.json")])
    status = acceptance.run_acceptance(cpu, cpu, args, out=out, kernel=kernel,
                                       self_check=self_check)
    report = json.loads((tmp_path / "report.json").read_text())
    return status, out.getvalue(), report, marks["self_check_end"]


ACCEPTANCE_SECTIONS = ["self-check", "parity", "routes", "chain", "coordinates", "empty", "nan",
                       "timings", "deterministic", "reproducibility", "workspace", "overall"]


def _verdicts(output: str) -> dict[str, str]:
    lines = re.findall(r"^VERDICT ([\w-]+): (\w+) \((.*)\)$", output, re.M)
    assert [section for section, _, _ in lines] == ACCEPTANCE_SECTIONS, output
    return {section: f"{word} ({detail})" for section, word, detail in lines}


def test_acceptance_script_passes_on_aclnn(sim, ascend_kernel, monkeypatch, kernels, tmp_path):
    """Every section of the script on the simulator, with determinism set at start-up: one
    verdict line per section, all passing, the overall one last; the header names CANN's
    version, the chip and the start-up level; the JSON report has every section and verdict;
    the wide case reached CANN's AICPU backward."""
    monkeypatch.setenv(kernels.DETERMINISTIC_ENV_VAR, "1")
    status, output, report, _ = _run_acceptance(sim, ascend_kernel, tmp_path)
    verdicts = _verdicts(output)
    assert status == 0, output
    assert {s: v.split()[0] for s, v in verdicts.items()} == dict.fromkeys(
        ACCEPTANCE_SECTIONS, "PASS") | {"coordinates": "REPORTED", "workspace": "REPORTED"}
    assert verdicts["parity"] == "PASS (2 passed)"  # the forward and the default backward
    assert verdicts["routes"] == "PASS (2 passed)"
    assert verdicts["deterministic"] == "PASS (1 passed, 1 routed)"  # C > 2048: routed
    assert verdicts["coordinates"] == "REPORTED (2 grids: 2 the same as the reference, 0 differ)"
    assert "CANN: head (ops-cv 6ae87653, opbase aa3cd74); chip: Ascend910B2 (atlas-a2-a3)" \
        in output
    assert "JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1: every aclnn backward" in output
    assert "HINT" not in output
    assert re.search(r"VERDICT workspace: REPORTED \(XLA's scratch allocator for \d+ calls, the "
                     r"per-stream cache for \d+ \(\d+ buffers", output)
    assert report["workspace"]["scratch"] + report["workspace"]["stream_cache"] > 0
    assert report["verdicts"] == {s: f"VERDICT {s}: {v}" for s, v in verdicts.items()}
    assert {"self_check", "parity", "routes", "chain", "coordinates", "empty", "nan",
            "collisions_default", "timings", "deterministic", "collisions_deterministic",
            "workspace", "summary"} <= set(report)
    assert report["environment"]["soc_name"] == "Ascend910B2"
    assert any(re.match(r"aclnnGridSampler2DBackward .* kernel=aicpu$", line)
               for line in sim.log())


def test_acceptance_script_runs_default_calls_before_deterministic_ones(sim, ascend_kernel,
                                                                        tmp_path):
    """After the self-check (what "auto" runs first), every default backward (the parity and
    route cases, the default collisions, the timings) asks CANN for its first phase before the
    first deterministic one does. Without a start-up level, today's CANN (the simulator's
    "head") picks the default kernel for a per-call deterministic backward: the script says
    so, fails those sections and tells the user to set JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC."""
    status, output, report, self_check_end = _run_acceptance(sim, ascend_kernel, tmp_path)
    first_phases = [line for line in sim.log()[self_check_end:]
                    if re.match(r"aclnnGridSampler[23]DBackwardGetWorkspaceSize ", line)]
    asked = [" ctxdet=1" in line for line in first_phases]  # deterministic=True raises it
    first = asked.index(True)
    assert not any(asked[:first]) and all(asked[first:]), first_phases
    assert any(re.search(r" input=T\d+\[1,2,7,9\]", line) for line in first_phases[:first])
    launches = [line for line in sim.log()[self_check_end:]
                if re.match(r"aclnnGridSampler[23]DBackward ", line)]
    assert launches and not any("kernel=aicore-deterministic" in line for line in launches)

    verdicts = _verdicts(output)
    assert status == 1
    assert verdicts["self-check"].startswith(
        "FAIL (36 results compared; deterministic failure: two runs of a deterministic backward")
    assert verdicts["deterministic"] == "FAIL (1 failed, 1 routed; 1 not reproducible)"
    assert verdicts["reproducibility"] == ("FAIL (deterministic backward: 1 failed; default "
                                           "backward: 1 of 1 differ between two runs)")
    assert verdicts["overall"] == "FAIL (failed: self-check, deterministic, reproducibility)"
    assert all(verdicts[s].startswith("PASS") for s in
               ("parity", "routes", "chain", "empty", "nan", "timings"))
    assert "HINT: deterministic=True alone did not make the backward reproducible" in output
    assert "start Python with JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1" in output
    assert report["summary"]["failed_sections"] == ["self-check", "deterministic",
                                                    "reproducibility"]


def test_acceptance_quick_covers_default_and_deterministic_backwards():
    acceptance = _acceptance()
    for cases in (acceptance.covered_cases(quick=True), acceptance.route_cases(quick=True)):
        kinds = {(c["op"], c["deterministic"]) for c in cases}
        assert kinds == {("forward", None), ("backward", False), ("backward", True)}
    assert {c["route"] for c in acceptance.route_cases()} == {
        "wide-c", "wide-c-3d", "large-plane", "large-volume", "batch-64", "batch-64-3d"}
    assert all(c["input_shape"][1] > _ascend.AICORE_MAX_CHANNELS
               for c in acceptance.route_cases(pattern="^wide-c"))


def test_acceptance_checks_catch_a_wrong_kernel(sim, ascend_kernel):
    """Results off by 1e-3: every case, the route cases, the chain and the timed calls fail;
    the exact coordinates report it (they are not judged)."""
    acceptance, cpu = _tiny(_acceptance()), jax.devices("cpu")[0]
    sim.lib.sim_set_wrong_results(b"", 1e-3)
    cases = acceptance.covered_cases(quick=True) + acceptance.route_cases(quick=True)
    cases = [c for c in cases if c["name"].endswith("-fwd") or c["route"]]
    results = {r["name"]: r["status"] for r in
               (acceptance.check_case(case, cpu, cpu) for case in cases)}
    assert results == {"2d-bilinear-border-noac-float32-fwd": "fail",
                       "wide-c-2d-bilinear-zeros-noac-float32-fwd": "fail",
                       "wide-c-2d-bilinear-zeros-noac-float32-bwd-both-nondet": "fail",
                       "wide-c-2d-bilinear-zeros-noac-float32-bwd-both-det": "routed"}
    assert acceptance.check_chain(cpu, cpu)["status"] == "fail"
    assert acceptance.time_cases(cpu, cpu, repeats=1)[0]["check"]["status"] == "fail"
    coordinates = acceptance.check_coordinates(cpu, cpu, quick=True)
    assert coordinates["status"] == "reported"
    assert all(c["differs"] for c in coordinates["checks"])


def test_acceptance_checks_catch_a_failing_call(sim, ascend_kernel):
    acceptance, cpu = _tiny(_acceptance()), jax.devices("cpu")[0]
    for check, entry_point in (
            (lambda: acceptance.check_chain(cpu, cpu), "aclnnGridSampler2DBackward"),
            (lambda: acceptance.check_coordinates(cpu, cpu, quick=True), "aclnnGridSampler2D"),
            (lambda: acceptance.check_collisions(cpu, cpu, True), "aclnnGridSampler2DBackward")):
        sim.fail_next(entry_point, 561000)
        result = check()
        assert result["status"] == "fail"
        assert f"{entry_point} failed with ACLNN_ERR_INNER (561000)" in result["checks"][0]["error"]


def test_acceptance_empty_checks_see_a_result_nobody_wrote(sim, ascend_kernel):
    """The handler zeroes grad_input of a call without output points with aclrtMemsetAsync;
    the simulator makes the next one succeed without writing: the pre-filled result shows it."""
    acceptance, cpu = _tiny(_acceptance()), jax.devices("cpu")[0]
    assert acceptance.check_empty(cpu, cpu, kernel=ascend_kernel)["status"] == "pass"
    sim.fail_next("aclrtMemsetAsync", 0)
    result = acceptance.check_empty(cpu, cpu, kernel=ascend_kernel)
    assert result["status"] == "fail"
    assert result["checks"][0]["problems"] == [
        "pre-filled grad_input (mask both): 180 of 180 entries not zero"]


def test_acceptance_times_torch_npu_in_a_process_of_its_own(tmp_path, monkeypatch):
    """torch_npu is imported by another process (here stand-ins for torch and torch_npu, the
    latter saying where it runs), and what that process answers fills the timing rows."""
    (tmp_path / "torch.py").write_text("")
    (tmp_path / "torch_npu.py").write_text(
        "import os\nraise ImportError(f'torch_npu stand-in in process {os.getpid()}')\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    acceptance = _acceptance()
    rows = [dict(input_shape=[1, 2, 3, 4], out_spatial=[2, 2], dtype="float32")]
    acceptance.time_torch(rows, jax.devices("cpu")[0], repeats=1, warmup=0)
    match = re.fullmatch(r"not installed \(ImportError: torch_npu stand-in in process (\d+)\)",
                         rows[0]["torch_npu"])
    assert match and int(match.group(1)) != os.getpid(), rows
    assert "torch_npu" not in __import__("sys").modules


def test_acceptance_script_without_an_npu(capsys):
    assert _acceptance().main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no Ascend NPU visible to JAX") and out.count("\n") == 1
