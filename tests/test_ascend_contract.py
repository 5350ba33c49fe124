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
import re
import shutil
import threading
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ascend_support import (  # the Ascend tests' helpers
    ACL_DTYPES,
    BACKWARD,
    CASES,
    DTYPES,
    ENV,
    FORWARD,
    PROBE,
    Sim,
    SimCalls,
    _attrs,
    _calls,
    _ran_on_aclnn,
    ascend_backward,
    ascend_forward,
    assert_close,
    case_id,
    f64,
    make_data,
    oracle,
    set_environment,
)
from jax import export

import jax_gridsample
from jax_gridsample import _ascend, _ascend_self_check, _compat, _primitives


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


def test_an_executor_from_opbases_cache_is_destroyed_when_never_launched(sim):
    """A call identical to an earlier one gets a wrapper of opbase's cached executor, which
    aclSetAclOpExecutorRepeatable refuses (ACLNN_ERR_INNER, acl_op_api.cpp:476-488) and
    aclDestroyAclOpExecutor deletes (:501-504): when its workspace cannot be had, it is
    destroyed all the same (the sim fixture counts what is left alive)."""
    x, g, go = make_data(2, jnp.float16, seed=5, n=3)
    ascend_backward(go, x, g, 0, 0, False)  # opbase caches this call's executor
    sim.lib.sim_clear_log()
    sim.fail_next("aclrtMalloc", 207001)
    with pytest.raises(Exception, match=r"RESOURCE_EXHAUSTED: .*aclrtMalloc"):
        jax.block_until_ready(ascend_backward(go, x, g, 0, 0, False, stream=sim.new_stream()))
    log = sim.log()
    assert any("(from the op cache)" in line for line in log)
    calls = _calls(log)
    assert calls.index("aclSetAclOpExecutorRepeatable") < calls.index("aclDestroyAclOpExecutor")
    assert "aclnnGridSampler2DBackward" not in calls


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


def test_the_stream_cache_keeps_the_largest_workspace_asked(sim, kernels):
    """The workspace always comes from the per-stream aclrtMalloc cache (XLA's scratch
    allocator, which aligns to 16 bytes at most, is not used): each stream keeps, until the
    process exits, the largest workspace any of its calls asked for."""
    assert set(kernels.workspace_paths()) == {"stream_cache", "none", "cached_buffers",
                                              "cached_bytes"}
    stream = sim.new_stream()
    before = kernels.workspace_paths()["cached_bytes"]
    x16, g16, go16 = make_data(2, jnp.float16, n=3)  # the larger workspace
    x, g, go = make_data(2, jnp.float32)
    for args in ((go16, x16, g16), (go, x, g), (go16, x16, g16)):
        ascend_backward(*args, 0, 0, False, stream=stream)
    asked = [int(m.group(1)) for line in sim.log()
             if (m := re.search(r"-> executor E\d+ workspace=(\d+)", line))]
    assert kernels.workspace_paths()["cached_bytes"] - before == max(asked)
    assert _calls(sim.log()).count("aclrtMalloc") == 1


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
def test_helper_failures_reach_python(sim, start_up_level, fn, expected):
    x, g, go = make_data(2, jnp.float32)
    sim.fail_next(fn, 207001)
    with pytest.raises(Exception, match=re.escape(expected)):
        jax.block_until_ready(ascend_backward(go, x, g, 0, 0, False, deterministic=True))


# --- determinism: a process setting, applied before the first aclnn call -------------------------

def _option_calls(log):
    return [line for line in log if "SysParamOpt" in line and "Get" not in line]


def _kernels_launched(log):
    return [m.group(1) for line in log if (m := re.search(r" kernel=(\S+)", line))]


def test_a_deterministic_call_touches_no_option(sim):
    """CANN picks its deterministic kernel from the process's option (opbase c501b51 and later)
    or from the context's, once per kernel (before): no per-call switch changes the kernel, so
    the handlers make none; the call's ``deterministic`` attribute is not read by them."""
    x, g, go = make_data(3, jnp.float32)
    ascend_backward(go, x, g, 0, 0, True, deterministic=True)
    ascend_forward(x, g, 0, 0, True, deterministic=True)
    log = sim.log()
    assert not any("SysParamOpt" in line for line in log)
    assert _kernels_launched(log)[0] == "aicore"  # CANN's default backward kernel


@pytest.mark.parametrize("release", ("head", "opbase-c501b51", "8.1.RC1"))
def test_start_up_level_applies_once_and_stays(sim, start_up_level, release):
    """JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1: before their first aclnn call, the handlers set
    the context's and the process's option to 1 (the ones both opbase regimes read) and leave
    them: every backward after runs CANN's deterministic kernel, asked for per call or not, on
    every release the simulator models."""
    sim.set(release=release)
    x, g, go = make_data(2, jnp.float32)
    for deterministic in (False, True, False):
        ascend_backward(go, x, g, 0, 0, True, deterministic=deterministic)
    log = sim.log()
    assert _option_calls(log) == ["aclrtCtxSetSysParamOpt opt=0 value=1",
                                  "aclrtSetSysParamOpt opt=0 value=1"]
    assert log.index(_option_calls(log)[1]) < next(
        i for i, line in enumerate(log) if "GetWorkspaceSize" in line)
    assert _kernels_launched(log) == ["aicore-deterministic"] * 3
    assert sim.lib.sim_get_context_deterministic() == 1
    assert sim.lib.sim_get_process_deterministic() == 1


def test_start_up_level_reaches_the_probe(sim, ascend_kernel, start_up_level):
    """The probe's first phases are the process's first aclnn calls: the level is set before
    them (an older opbase keeps, per kernel, what it read at the first one)."""
    ascend_kernel.capabilities("cpu")
    log = sim.log()
    first_phase = next(i for i, line in enumerate(log) if "GetWorkspaceSize" in line)
    assert [log.index(line) < first_phase for line in _option_calls(log)] == [True, True]


def test_a_level_someone_else_set_is_left_alone(sim, start_up_level):
    """Another library set level 3 for the process and 2 for the context: the handlers keep
    theirs (on opbase c501b51 to f93b493 those mean off: docs/ascend.md says so)."""
    sim.lib.sim_set_context_deterministic(2)
    sim.lib.sim_set_process_deterministic(3)
    x, g, go = make_data(2, jnp.float32)
    ascend_backward(go, x, g, 0, 0, True, deterministic=True)
    assert _option_calls(sim.log()) == []
    assert (sim.lib.sim_get_context_deterministic(), sim.lib.sim_get_process_deterministic()) \
        == (2, 3)


@pytest.mark.parametrize("release, deterministic", [
    ("head", True), ("opbase-c501b51", False), ("8.1.RC1", False)])
def test_sim_reads_the_option_as_each_opbase_does(sim, release, deterministic):
    """Process level 2: on (f93b493 and later: level >= 1), off (c501b51 to f93b493:
    determinConfig == 1), and off before c501b51 (which reads the context's, unset here)."""
    sim.set(release=release)
    sim.lib.sim_set_process_deterministic(2)
    x, g, go = make_data(2, jnp.float32)
    ascend_backward(go, x, g, 0, 0, True)
    assert _kernels_launched(sim.log()) == ["aicore-deterministic" if deterministic else "aicore"]


def test_sim_keeps_what_an_older_opbase_read_first(sim):
    """Before c501b51, the context's option is read the first time a kernel is tiled and kept:
    raised later, it changes nothing for that kernel."""
    sim.set(release="8.1.RC1")
    x, g, go = make_data(2, jnp.float32)
    ascend_backward(go, x, g, 0, 0, True)
    sim.lib.sim_set_context_deterministic(1)
    ascend_backward(go, x, g, 0, 0, True)
    assert _kernels_launched(sim.log()) == ["aicore", "aicore"]


@pytest.mark.parametrize("value", ("2", "3", "yes"))
def test_start_up_level_must_be_1(sim, kernels, value):
    """Only 1: opbase c501b51 to f93b493 reads 2 and 3 as off. The handlers refuse every call
    with the reason, and the lowering keeps every call off aclnn with it."""
    set_environment(kernels, kernels.DETERMINISTIC_ENV_VAR, value)
    x, g, _ = make_data(2, jnp.float32)
    with pytest.raises(Exception, match=rf"INVALID_ARGUMENT: .*JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC "
                                        rf"is \"{value}\"; expected 1 \(or unset\)"):
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False))
    assert _ascend.deterministic_level() == (None, _ascend.deterministic_level()[1])
    assert "expected 1 (or unset)" in _ascend.deterministic_level()[1]
    assert sim.log() == []


def test_the_environment_is_read_once(sim, kernels, monkeypatch):
    """The handlers read their variables at first use and keep them (tests use the
    reread_environment hook): changing one later changes nothing."""
    x, g, go = make_data(2, jnp.float32)
    monkeypatch.setenv(kernels.DETERMINISTIC_ENV_VAR, "1")
    monkeypatch.setenv(ENV, "libnothing.so")
    ascend_backward(go, x, g, 0, 0, True)
    assert _option_calls(sim.log()) == []
    assert _ascend.deterministic_level() == (None, None)


def test_deterministic_without_the_level_runs_the_reference(sim, ascend_kernel):
    """deterministic=True without the start-up level: "auto" runs the deterministic reference
    (no warning); "native" says which variable to set."""
    x, g, go = make_data(2, jnp.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _ran_on_aclnn(sim, lambda: jax_gridsample.grid_sample_backward(
            go, x, g, deterministic=True)) == (False, False)
    assert _ran_on_aclnn(sim, lambda: jax_gridsample.grid_sample_backward(go, x, g)) == \
        (False, True)
    with pytest.raises(NotImplementedError, match=r"start Python with "
                                                  r"JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1"):
        jax_gridsample.grid_sample_backward(go, x, g, deterministic=True, implementation="native")


def test_deterministic_with_the_level_runs_on_aclnn(sim, ascend_kernel, start_up_level):
    x, g, go = make_data(2, jnp.float32)
    assert _ran_on_aclnn(sim, lambda: jax_gridsample.grid_sample_backward(
        go, x, g, deterministic=True)) == (False, True)
    assert _kernels_launched(sim.log()) == ["aicore-deterministic"]


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
    # a symbolic batch (jax.export): the forward's limit is per plane, the backward's unknown
    (b,) = export.symbolic_shape("b")
    assert fwd((b, 1, 4, 4)) is None
    assert "symbolic batch" in bwd((b, 1, 2, 2), (b, 1, 4, 4), (b, 2, 2, 2))


def test_a_symbolic_batch_runs_the_forward_on_aclnn_and_the_backward_on_the_reference(
        sim, ascend_kernel):
    """jax.export with a symbolic batch: the forward's limit is per plane, so it runs on aclnn;
    the backward's 32-bit limit on the whole operand cannot be checked, so "auto" runs the
    reference and "native" says why. The artifact's results match the reference."""
    x, g, go = make_data(2, jnp.float32)
    (b,) = export.symbolic_shape("b")

    def exported(fn, *args):
        specs = [jax.ShapeDtypeStruct((b, *a.shape[1:]), a.dtype) for a in args]
        test_targets = [export.DisabledSafetyCheck.custom_call(t) for t in (FORWARD, BACKWARD)]
        return export.export(jax.jit(fn), disabled_checks=test_targets)(*specs).call

    forward = exported(jax_gridsample.grid_sample, x, g)
    backward = exported(jax_gridsample.grid_sample_backward, go, x, g)
    assert _ran_on_aclnn(sim, lambda: forward(x, g)) == (True, False)
    assert _ran_on_aclnn(sim, lambda: backward(go, x, g)) == (False, False)
    ro, ri, rg = oracle(x, g, go, 0, 0, False)
    assert_close(forward(x, g), ro, DTYPES[jnp.float32][1])
    for got, want in zip(backward(go, x, g), (ri, rg), strict=True):
        assert_close(got, want, DTYPES[jnp.float32][1] * 4)
    with pytest.raises(NotImplementedError, match="a symbolic batch"):
        exported(lambda *a: jax_gridsample.grid_sample_backward(*a, implementation="native"),
                 go, x, g)


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
    release: aclnn gets a call exactly when the simulated CANN runs it, first phase and launch
    (asked of it directly, on other shapes than the probe's), and its documentation does not
    rule it out (3D bicubic). The probe sees only first phases: what fails at launch only (the
    AICPU kernels' missing bicubic and bfloat16) is routed by documented_limit."""
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
        expected = asked.runs(backward, k, dtype, interp, channels) and not (
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
    with pytest.warns(RuntimeWarning, match="the aclnn support probe failed on cpu:0"):
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


@pytest.mark.parametrize("soc, dtype, backward, interp, channels", [
    ("Ascend910A", jnp.bfloat16, False, 0, 3),   # the AICPU forward has no bfloat16
    ("Ascend910A", jnp.float32, True, 2, 3),     # Atlas training: the AICPU backward
    ("Ascend910B2", jnp.float64, True, 2, 3),    # float64: the AICPU backward
    ("Ascend910B2", jnp.float32, True, 2, 2049),  # C > 2048: the AICPU backward
], ids=("training-bf16-forward", "training-bicubic-backward", "f64-bicubic-backward",
        "wide-bicubic-backward"))
def test_sim_fails_at_launch_what_the_aicpu_kernels_lack(sim, ascend_kernel, soc, dtype,
                                                         backward, interp, channels):
    """CANN's first phase routes these 2D calls to AICPU kernels that lack their dtype or mode:
    it succeeds, the launch fails. The probe cannot see that; the routing keeps them on the
    reference all the same, and "native" says why."""
    sim.set(soc=soc)
    x, g, go = make_data(2, dtype, c=channels, n=1)
    with pytest.raises(Exception, match=r"INTERNAL: .*aclnnGridSampler2D(Backward)? failed with "
                                        r"ACLNN_ERR_INNER \(561000\): .*has no"):
        jax.block_until_ready(ascend_backward(go, x, g, interp, 0, False) if backward
                              else ascend_forward(x, g, interp, 0, False))
    assert any(line.startswith("aclnnGridSampler2D") and "kernel=aicpu" in line
               for line in sim.log())
    mode = ("bilinear", "nearest", "bicubic")[interp]
    assert _ran_on_aclnn(sim, lambda: jax_gridsample.grid_sample_backward(go, x, g, mode=mode)
                         if backward else jax_gridsample.grid_sample(x, g, mode=mode)) == \
        (False, False)
    with pytest.raises(NotImplementedError, match="its AICPU kernel, which has no"):
        (jax_gridsample.grid_sample_backward(go, x, g, mode=mode, implementation="native")
         if backward else jax_gridsample.grid_sample(x, g, mode=mode, implementation="native"))


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


# --- loading the library -------------------------------------------------------------------

def test_missing_library_is_a_clear_error(sim, kernels, tmp_path):
    x, g, _ = make_data(2, jnp.float32)
    missing = str(tmp_path / "libopapi_missing.so")
    set_environment(kernels, ENV, missing)
    with pytest.raises(Exception) as info:
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False))
    msg = str(info.value)
    assert missing in msg and "set_env.sh" in msg and ENV in msg
    with pytest.raises(RuntimeError, match="libopapi_missing.so"):
        kernels.load_libraries()


def test_library_without_the_symbols_is_a_clear_error(sim, sim_path, kernels):
    x, g, _ = make_data(2, jnp.float32)
    set_environment(kernels, ENV, "libm.so.6")
    with pytest.raises(Exception, match=r"cannot load the CANN library libm\.so\.6 \(defines "
                                        r"none of the symbols still missing\)"):
        jax.block_until_ready(ascend_forward(x, g, 0, 0, False))
    set_environment(kernels, ENV, f"{sim_path}:libm.so.6")  # nothing left to add after the sim
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
    set_environment(kernels, ENV, f"{cv}|{combined}")
    assert kernels.load_libraries() == f"loaded from {cv}"
    assert _mapped(cv) and not _mapped(combined)  # the second was never opened
    # a library without the symbols is skipped
    set_environment(kernels, ENV, f"libm.so.6|{combined}")
    assert kernels.load_libraries() == f"loaded from {combined}"


def test_an_opapi_library_already_loaded_is_reused(sim, kernels, sim_path, tmp_path):
    """torch_npu opens the combined libopapi.so; opening libopapi_cv.so next to it is the mix
    CANN does not support: an alternative the process has loaded wins over the group's first."""
    cv, combined = tmp_path / "libopapi_cv_sim.so", tmp_path / "libopapi_sim.so"
    for path in (cv, combined):
        shutil.copy(sim_path, path)
    ctypes.CDLL(str(combined))  # as torch_npu would have
    set_environment(kernels, ENV, f"{cv}|{combined}")
    assert kernels.load_libraries() == f"loaded from {combined} (already loaded)"
    assert not _mapped(cv)


def test_loader_reports_where_it_loaded_from(sim, kernels, sim_path):
    assert sim_path in kernels.load_libraries()
    assert sim_path in _ascend.status()


def test_status_says_separately_what_is_there(sim, sim_path, tmp_path, monkeypatch, kernels):
    """Handlers built, CANN libraries found (where) or not, Ascend platform known or not; and
    "available" only with all three."""
    set_environment(kernels, ENV, str(tmp_path / "libnothing.so"))
    status = _ascend.status()
    assert status.startswith("handlers built; CANN libraries not found (")
    assert "libnothing.so" in status and "; no Ascend platform known to JAX (no Ascend PJRT " \
        "plugin)" in status
    set_environment(kernels, ENV, sim_path)  # loaded by this process already (Sim), so reused
    loaded = f"CANN libraries loaded from {sim_path} (already loaded)"
    assert _ascend.status().startswith(f"handlers built; {loaded}; no Ascend platform known to "
                                       "JAX (no Ascend PJRT plugin)")
    monkeypatch.setattr(_ascend, "_known", lambda name: name == "ascend")
    assert _ascend.status().startswith(f"available (handlers built; {loaded}; Ascend platform "
                                       "'ascend' known to JAX)")


# --- the package's lowering, end to end ------------------------------------------------------

@pytest.mark.parametrize("spelling", _ascend.PLATFORM_NAMES)
def test_an_export_for_each_spelling_reaches_the_ascend_rule(monkeypatch, spelling):
    """JAX picks a lowering rule by the plugin's own platform string: an artifact exported for
    any spelling calls the aclnn targets (the probe's answer stands in for a device here)."""
    monkeypatch.setenv(_ascend_self_check.ENV_VAR, "off")
    monkeypatch.setitem(_ascend.KERNEL._capabilities, spelling,
                        _ascend.Capabilities(f"{spelling}:0", "Ascend910B2", "8.1.RC1"))
    x, g, _ = make_data(2, jnp.float32)

    def loss(x, g):
        return jnp.sum(jax_gridsample.grid_sample(x, g) ** 2)

    exported = _compat.import_jax_export().export(
        jax.jit(jax.grad(loss, argnums=(0, 1))), platforms=(spelling,),
        disabled_checks=jax_gridsample.export_safety_checks())(x, g)
    text = exported.mlir_module()
    assert _ascend.FORWARD_TARGET in text and _ascend.BACKWARD_TARGET in text


@pytest.mark.parametrize("spelling", _ascend.PLATFORM_NAMES)
def test_the_ffi_targets_reach_a_plugin_of_each_spelling(monkeypatch, spelling):
    """jaxlib queues a registration for a platform until its plugin registers a handler; the
    handlers are queued under every spelling, so a plugin of any spelling receives them."""
    from jaxlib import xla_client

    received = []
    monkeypatch.setattr(xla_client, "_custom_callback_handler",
                        dict(xla_client._custom_callback_handler))
    monkeypatch.setattr(xla_client, "_custom_callback", {
        name: list(queue) for name, queue in xla_client._custom_callback.items()})
    xla_client.register_custom_call_handler(
        spelling, lambda name, fn, platform, api_version, traits: received.append(
            (name, platform, api_version)))
    assert {(t, spelling, 1) for t in (_ascend.FORWARD_TARGET, _ascend.BACKWARD_TARGET,
                                      _ascend.PROBE_TARGET)} <= set(received)


@pytest.mark.parametrize("spelling", _ascend.PLATFORM_NAMES)
def test_a_call_under_each_spelling_runs_on_aclnn(sim, monkeypatch, spelling):
    """The Ascend rule made for a spelling (the CPU client lowering it, its devices standing in
    for the plugin's): the probe, the routing and the call run on aclnn, keyed by it."""
    monkeypatch.setenv(_ascend_self_check.ENV_VAR, "off")
    cpu = jax.devices("cpu")[0]
    asked = []
    monkeypatch.setattr(_ascend, "local_device",
                        lambda platform: asked.append(platform) or cpu)
    kernel = _ascend.AscendKernel(FORWARD, BACKWARD, PROBE,
                                  {"test_stream": np.int64(Sim.test_stream)})
    native = _primitives.ascend_native_kernel(kernel)
    prims = (_primitives.grid_sample_p, _primitives.grid_sample_backward_p)
    monkeypatch.setitem(_compat._PARTITIONED_RULES[prims[0]], "cpu", _primitives._native_lowering(
        spelling, native, False, _primitives._reference_lowering(_primitives._forward_reference,
                                                                 False)))
    monkeypatch.setitem(_compat._PARTITIONED_RULES[prims[1]], "cpu", _primitives._native_lowering(
        spelling, native, True, _primitives._reference_lowering(_primitives._backward_reference,
                                                                True)))
    jax.clear_caches()
    x, g, go = make_data(2, jnp.float32)
    try:
        assert _ran_on_aclnn(sim, lambda: jax_gridsample.grid_sample_backward(go, x, g)) == \
            (False, True)
    finally:
        jax.clear_caches()
    assert set(asked) == {spelling}  # the rule asks for its own spelling's device
    assert list(kernel._capabilities) == ["cpu:0"]  # and keeps what it found per device


def test_the_device_is_found_by_any_spelling():
    """A backend's name or its devices' platform, up to case."""
    cpu = jax.local_devices(backend="cpu")[0]
    assert _ascend.local_device("CPU") == cpu
    with pytest.raises(RuntimeError, match="this process has no 'npu' device"):
        _ascend.local_device("npu")


def test_status_reports_a_plugin_that_refused_the_registration(monkeypatch):
    monkeypatch.setattr(_ascend, "_REFUSED", {"ASCEND": "XlaRuntimeError: no FFI extension"})
    assert "the plugin for 'ASCEND' refused the registration (XlaRuntimeError: no FFI " \
        "extension)" in _ascend.status()
    monkeypatch.setattr(_ascend, "_MODULE", None)
    monkeypatch.setattr(_ascend, "_STATUS", "registering ... failed")
    assert _ascend.status().startswith("the Ascend PJRT plugin refused the handlers' "
                                       "registration")


def test_public_api_runs_on_aclnn(sim, ascend_kernel, start_up_level):
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


def test_constant_runs_on_aclnn_as_zeros_plus_the_fill_term(sim, ascend_kernel):
    """padding_mode="constant" (docs/ascend.md): aclnn samples "zeros" (paddingMode 0), XLA adds
    the fill term and its gradients; the result and all three gradients are the reference's."""
    x, g, _ = make_data(2, jnp.float32)
    g = 1.6 * g  # many taps outside
    fill = jnp.asarray([0.5, -1.0, 2.0], jnp.float32)

    def loss(x, g, f, implementation):
        out = jax_gridsample.grid_sample(x, g, padding_mode="constant", fill_value=f,
                                         implementation=implementation)
        return jnp.sum(out**2)

    grad = jax.grad(loss, argnums=(0, 1, 2))
    hlo = jax.jit(lambda *a: grad(*a, "auto")).lower(x, g, fill).as_text()
    assert FORWARD in hlo and BACKWARD in hlo
    sim.lib.sim_clear_log()
    got = jax.block_until_ready(grad(x, g, fill, "auto"))
    log = sim.log()
    calls = _calls(log)
    assert "aclnnGridSampler2D" in calls and "aclnnGridSampler2DBackward" in calls
    pads = set(re.findall(r"^aclnnGridSampler2D\w* .* pad=(\d+)", "\n".join(log), re.M))
    assert pads == {"0"}
    want = grad(*(jnp.asarray(a, jnp.float64) for a in (x, g, fill)), "reference")
    for a, e in zip(got, want, strict=True):
        assert_close(a, e, 1e-5 * max(1.0, float(np.abs(f64(e)).max())))


@pytest.mark.parametrize("padding", ["wrap", ("border", "reflection")], ids=str)
def test_wrap_and_per_axis_modes_run_on_the_reference(sim, ascend_kernel, padding):
    """aclnn has one of zeros, border and reflection for every axis: "auto" keeps the rest on
    the reference, "native" says why."""
    x, g, _ = make_data(2, jnp.float32)

    def loss(x, g):
        return jnp.sum(jax_gridsample.grid_sample(x, g, padding_mode=padding) ** 2)

    assert _ran_on_aclnn(sim, lambda: jax.grad(loss, argnums=(0, 1))(x, g)) == (False, False)
    why = "no wrap padding" if padding == "wrap" else "one padding mode for every axis"
    with pytest.raises(NotImplementedError, match=why):
        jax_gridsample.grid_sample(x, g, padding_mode=padding, implementation="native")


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
