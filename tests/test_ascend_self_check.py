"""The aclnn self-check (``_ascend_self_check.py``), its on-disk cache (``_ascend_cache.py``) and
``ascend_prepare``, run on the simulated aclnn library (``tests/ascend_support.py``).

Most tests check float32 bilinear only (``few_kinds``): the full set of kinds is checked once,
by ``test_self_check_covers_every_kind_auto_sends``.
"""

from __future__ import annotations

import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ascend_support import _ran_on_aclnn, _step, few_self_check_kinds, make_data

import jax_gridsample
from jax_gridsample import _ascend, _ascend_cache, _ascend_self_check, _compat


@pytest.fixture
def few_kinds():
    with few_self_check_kinds():
        yield


def test_self_check_covers_every_kind_auto_sends(sim, ascend_kernel, self_check_on,
                                                 start_up_level, capsys):
    """Every dtype, every mode (bicubic too) and both routes (C <= 2048 and C > 2048) that the
    routing sends to aclnn, forward and backward, each against the host's float64 oracle; one
    line when it starts; "auto" then runs on aclnn, deterministic calls too."""
    kinds = _ascend_self_check.kinds(ascend_kernel, "cpu")
    names = {kind.name for kind in kinds}
    assert {kind.dtype for kind in kinds} == {"float32", "float16", "bfloat16", "float64"}
    assert {kind.mode for kind in kinds} == {"bilinear", "nearest", "bicubic"}
    assert {"2d bicubic float32 backward", "2d bilinear float32 forward, C > 2048"} <= names
    # what the routing keeps off aclnn is not checked: 3D bicubic, the AICPU bicubic backward
    assert not any(k.k == 3 and k.mode == "bicubic" for k in kinds)
    assert "2d bicubic float64 backward" not in names
    check = ascend_kernel.self_check("cpu")
    assert (check.failed, check.reference_failure, check.deterministic_failure) == ({}, None, None)
    assert check.compared == sum(2 if kind.backward else 1 for kind in kinds)
    started = [line for line in capsys.readouterr().err.splitlines() if "checking aclnn" in line]
    assert started == [f"jax_gridsample: checking aclnn on cpu:0: {len(kinds)} kinds of call, "
                       f"about {_ascend_self_check.estimated_seconds(len(kinds)):.0f} s "
                       "(docs/ascend.md, \"The self-check\")"]
    x, g, _ = make_data(2, jnp.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _ran_on_aclnn(sim, lambda: _step(x, g)) == (True, True)
        assert _ran_on_aclnn(sim, lambda: _step(x, g, deterministic=True)) == (True, True)
    assert f"self-check: passed on cpu:0 ({check.compared} results compared" in "; ".join(
        ascend_kernel.first_use_summaries())


def test_half_precision_is_checked_as_it_is_sent(sim, ascend_kernel, self_check_on,
                                                 monkeypatch):
    """The float16 2D backward on Atlas A2/A3 goes to aclnn in float32 (CANN's half-type
    kernel runs on one core there): the self-check sees it pass, and the simulator receives
    float32 operands for it."""
    monkeypatch.setattr(_ascend_self_check, "DTYPES", ("float16",))
    check = ascend_kernel.self_check("cpu")
    assert check.failed == {}
    x, g, go = make_data(2, jnp.float16)
    sim.lib.sim_clear_log()
    gx, gg = jax.block_until_ready(jax_gridsample.grid_sample_backward(go, x, g))
    assert gx.dtype == jnp.float16 and gg.dtype == jnp.float16
    first_phase = next(line for line in sim.log() if "2DBackwardGetWorkspaceSize" in line)
    assert "/dt0/" in first_phase and "/dt1/" not in first_phase  # float32, not float16


def test_self_check_catches_a_wrong_kernel(sim, ascend_kernel, self_check_on, few_kinds):
    """A backward that returns wrong values: on first use, one warning naming it, and from
    then on that kind runs on the reference while the forward stays on aclnn."""
    sim.lib.sim_set_wrong_results(b"aclnnGridSampler2DBackward", 1e-3)
    x, g, _ = make_data(2, jnp.float32)
    with pytest.warns(RuntimeWarning, match=r"self-check failed on cpu:0 .*kinds failed, first "
                                            r"2d bilinear float32 backward: error .* > 0.0001"):
        _step(x, g)  # the first use runs the check
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # only once
        assert _ran_on_aclnn(sim, lambda: _step(x, g)) == (True, False)
    check = ascend_kernel.self_check("cpu")
    assert all("backward" in name and name.startswith("2d") for name in check.failed)
    # as ascend_self_check() returns it (the acceptance script reads "failure")
    assert _ascend.self_check_outcome(check)["failure"].startswith(
        "2d bilinear float32 backward: error")


def test_self_check_catches_a_failing_call(sim, ascend_kernel, self_check_on, few_kinds):
    sim.fail_next("aclnnGridSampler3D", 561000)
    with pytest.warns(RuntimeWarning, match=r"an aclnn call failed: .*aclnnGridSampler3D failed "
                                            r"with ACLNN_ERR_INNER \(561000\)"):
        ascend_kernel.self_check("cpu")
    x, g, _ = make_data(2, jnp.float32)
    assert _ran_on_aclnn(sim, lambda: _step(x, g)) == (False, False)


def test_self_check_reports_a_broken_reference(sim, ascend_kernel, self_check_on, few_kinds,
                                               monkeypatch):
    """The plugin's compiled reference is compared with the host's float64 oracle, not trusted:
    a wrong one is reported as such, and aclnn, right, stays trusted."""
    run = _ascend_self_check._run

    def broken_device_reference(cases, implementation, device, dtype=None):
        results = run(cases, implementation, device, dtype)
        if implementation == "reference" and dtype is None:  # the device's, not the oracle
            results = jax.tree.map(lambda r: r + 0.5, results)
        return results

    monkeypatch.setattr(_ascend_self_check, "_run", broken_device_reference)
    with pytest.warns(RuntimeWarning, match=r"the plugin's compiled jax.numpy reference is "
                                            r"broken \(2d bilinear float32 forward: error"):
        check = ascend_kernel.self_check("cpu")
    assert check.failed == {}
    x, g, _ = make_data(2, jnp.float32)
    assert _ran_on_aclnn(sim, lambda: _step(x, g)) == (True, True)


def test_self_check_catches_a_backward_that_is_not_deterministic(sim, ascend_kernel,
                                                                 self_check_on, few_kinds,
                                                                 start_up_level):
    """Another library set the process's level to 2 before us, which opbase c501b51 to
    f93b493 reads as off: our level 1 is not applied over it, the deterministic backward is not
    reproducible over the check's runs, and deterministic backwards run on the reference."""
    sim.set(release="opbase-c501b51")
    sim.lib.sim_set_process_deterministic(2)
    with pytest.warns(RuntimeWarning, match=r"the deterministic backward is not reproducible "
                                            r"\(\d of 4 later runs of a deterministic backward"):
        check = ascend_kernel.self_check("cpu")
    assert check.failed == {}
    x, g, _ = make_data(2, jnp.float32)
    assert _ran_on_aclnn(sim, lambda: _step(x, g, deterministic=True)) == (True, False)
    assert _ran_on_aclnn(sim, lambda: _step(x, g)) == (True, True)


def test_reproducibility_is_checked_only_with_the_level(sim, ascend_kernel, self_check_on,
                                                        few_kinds):
    """Without the start-up level, deterministic backwards run on the reference: nothing to
    check, and no deterministic launch."""
    check = ascend_kernel.self_check("cpu")
    assert check.deterministic_failure is None
    assert not any("kernel=aicore-deterministic" in line and "Backward" in line
                   for line in sim.log())


def test_self_check_on_an_older_release_with_start_up_determinism(sim, ascend_kernel,
                                                                  self_check_on, few_kinds,
                                                                  start_up_level):
    """8.1.RC1's opbase reads the context's option once per kernel: set at start-up, before the
    first call (the probe's), it holds for every later call, and the check passes."""
    sim.set(release="8.1.RC1")
    check = ascend_kernel.self_check("cpu")
    assert check.trusts(_ascend_self_check.Kind(True, 2, "float32", "bilinear", False), True), \
        check.summary()


def test_self_check_runs_outside_the_callers_mesh_and_transfer_guard(sim, ascend_kernel,
                                                                     self_check_on, few_kinds):
    """The first use may come while a caller's program is lowered under its mesh and with
    transfers disallowed: the check's own programs run on one device regardless."""
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("batch",))
    x, g, _ = make_data(2, jnp.float32)
    with _compat.set_mesh(mesh), jax.transfer_guard("disallow"):
        jax.jit(lambda x, g: jax_gridsample.grid_sample(x, g)).lower(x, g)
    assert ascend_kernel.self_check("cpu").failed == {}


def test_native_skips_the_self_check(sim, ascend_kernel, self_check_on):
    sim.lib.sim_set_wrong_results(b"", 1.0)
    x, g, _ = make_data(2, jnp.float32)
    jax.block_until_ready(jax_gridsample.grid_sample(x, g, implementation="native"))
    assert ascend_kernel._self_checks == {}


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


# --- the on-disk cache ---------------------------------------------------------------------

def _first_phases(sim) -> int:
    return sum("GetWorkspaceSize" in line for line in sim.log())


def test_the_cache_skips_the_probe_and_the_check_next_time(sim, ascend_kernel, self_check_on,
                                                           few_kinds, monkeypatch, tmp_path):
    """A second process (a fresh kernel here) on the same installation reads both from disk;
    another chip, CANN release or plugin version is another entry."""
    monkeypatch.setenv(_ascend_cache.ENV_VAR, str(tmp_path))
    first = ascend_kernel.self_check("cpu")
    assert _first_phases(sim) > 0 and len(list(tmp_path.glob("*.json"))) == 2
    entry = json.loads(next(tmp_path.glob("probe-*.json")).read_text())
    assert {"cann", "chip", "driver", "jax_gridsample", "jaxlib", "plugin"} <= set(entry["key"])
    assert entry["key"]["chip"] == "Ascend910B2"

    again = _ascend.AscendKernel(ascend_kernel.forward_target, ascend_kernel.backward_target,
                                 ascend_kernel.probe_target, ascend_kernel.extra_attributes)
    sim.lib.sim_clear_log()
    second = again.self_check("cpu")
    assert _first_phases(sim) == 0 and sim.log() == []
    assert second.from_cache and again.capabilities("cpu").from_cache
    assert (second.failed, second.compared) == (first.failed, first.compared)
    assert "from the on-disk cache" in second.summary()

    sim.set(soc="Ascend910B3")
    other = _ascend.AscendKernel(ascend_kernel.forward_target, ascend_kernel.backward_target,
                                 ascend_kernel.probe_target, ascend_kernel.extra_attributes)
    other.self_check("cpu")
    assert _first_phases(sim) > 0 and len(list(tmp_path.glob("*.json"))) == 4


def test_the_cache_key_names_the_plugin_distribution(monkeypatch):
    class Dist:
        version = "1.2.3"
        metadata = {"Name": "jax-npu-plugin"}

    class Entry:
        name, value, dist = "npu", "jax_npu_plugin", Dist()

    monkeypatch.setattr(_ascend_cache.metadata, "entry_points", lambda group: [Entry()])
    assert _ascend_cache.plugin_version("npu") == "jax-npu-plugin==1.2.3"


def test_the_cache_can_be_disabled_or_moved(monkeypatch, tmp_path):
    monkeypatch.setenv(_ascend_cache.ENV_VAR, "off")
    assert _ascend_cache.directory() is None
    _ascend_cache.store("probe", {"a": 1}, {"b": 2})
    assert _ascend_cache.load("probe", {"a": 1}) is None
    monkeypatch.setenv(_ascend_cache.ENV_VAR, str(tmp_path / "elsewhere"))
    _ascend_cache.store("probe", {"a": 1}, {"b": 2})
    assert _ascend_cache.load("probe", {"a": 1}) == {"b": 2}
    assert _ascend_cache.load("probe", {"a": 2}) is None
    monkeypatch.delenv(_ascend_cache.ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _ascend_cache.directory() == tmp_path / "jax_gridsample" / "ascend"


def test_a_failed_call_is_not_cached(sim, ascend_kernel, self_check_on, few_kinds, monkeypatch,
                                     tmp_path):
    monkeypatch.setenv(_ascend_cache.ENV_VAR, str(tmp_path))
    sim.fail_next("aclnnGridSampler2D", 561000)
    with pytest.warns(RuntimeWarning):
        ascend_kernel.self_check("cpu")
    assert [p.name.split("-")[0] for p in tmp_path.glob("*.json")] == ["probe"]


# --- ascend_prepare -------------------------------------------------------------------------

def test_prepare_runs_both_ahead_of_the_first_jit(sim, ascend_kernel, self_check_on, few_kinds,
                                                  monkeypatch):
    monkeypatch.setattr(_ascend, "KERNEL", ascend_kernel)
    monkeypatch.setattr(_ascend, "_known_platform", lambda: "cpu")
    prepared = jax_gridsample.ascend_prepare()
    assert prepared["device"] == "cpu:0"
    assert prepared["probe"].startswith("cpu:0: chip Ascend910B2, CANN head")
    assert prepared["self_check"].startswith("passed on cpu:0 (")
    sim.lib.sim_clear_log()
    x, g, _ = make_data(2, jnp.float32)
    _step(x, g)
    assert not any("GetWorkspaceSize" in line and "dt27" in line for line in sim.log())


def test_prepare_and_self_check_without_a_platform():
    for call in (jax_gridsample.ascend_prepare, jax_gridsample.ascend_self_check):
        with pytest.raises(RuntimeError, match="no Ascend platform known to JAX"):
            call()


def test_a_probe_that_fails_on_a_device_warns_once(sim, ascend_kernel):
    sim.lib.sim_set_default_context(False, 0)
    x, g, _ = make_data(2, jnp.float32)
    with pytest.warns(RuntimeWarning, match=r"the aclnn support probe failed on cpu:0 .*no ACL "
                                            r"context is current.*native_status\(\)\['ascend'\]"):
        jax_gridsample.grid_sample(x, g)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jax_gridsample.grid_sample(x, g, mode="nearest")
