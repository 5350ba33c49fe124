"""``python -m jax_gridsample.ascend_plugin_check`` against a pretend plugin: the CPU client
running the handlers' test-stream twins on the simulated aclnn (``tests/ascend_support.py``),
made to break one requirement of docs/ascend.md, "The plugin contract", at a time. Each test
asserts the verdict lines.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import jax
import numpy as np
import pytest
from ascend_support import ENV, Sim, set_environment  # noqa: I001 - the tests' own helpers

from jax_gridsample import _ascend, ascend_plugin_check
from jax_gridsample.ascend_plugin_check import Targets

PLATFORMS = ("cpu",)
ENVIRONMENT = "jax_gridsample_test_ascend_environment"
ENVIRONMENT_RUNTIME_STREAM = "jax_gridsample_test_ascend_environment_runtime_stream"
ALLOCATOR = ("INFO device allocator: not needed (the aclnn workspace comes from a per-stream "
             "aclrtMalloc cache)")
E2E_PASS = (r'PASS end-to-end: forward and backward with implementation="native" match the '
            r"float64 host reference \(max error \d\.\de-\d\d\)")


@pytest.fixture
def plugin(sim, kernels, ascend_kernel) -> Targets:
    """A plugin meeting every requirement: the environment target's test-stream twin on the
    simulator's stream, a context current on device 0 (the simulator's default), the CANN
    libraries (the simulator), and the aclnn kernels installed as the CPU lowering."""
    twin = kernels.test_registrations()["jax_gridsample_ascend_environment_on_test_stream"]
    return Targets(ENVIRONMENT, {ENVIRONMENT: twin}, {"test_stream": np.int64(Sim.test_stream)})


def _lines(targets: Targets, platforms=PLATFORMS) -> list[str]:
    return [str(v) for v in ascend_plugin_check.check(platforms, targets)]


def _expected(sim_path: str, **changed: str) -> list[str]:
    """The verdicts of a plugin meeting every requirement, with ``changed`` lines instead."""
    lines = {
        "platform": "PASS platform: 'cpu' known to JAX (backend 'cpu')",
        "registration": "PASS registration: accepted (jax.ffi.register_ffi_target, "
                        "api_version=1), and the plugin runs the FFI target",
        "stream": "PASS stream: the plugin's XLA_FFI_Stream is an aclrtStream "
                  "(aclrtSynchronizeStream)",
        "libraries": f"PASS CANN libraries: loaded from {sim_path} (already loaded)",
        "context": "PASS context: an ACL context is current on the executing thread",
        "device": "PASS device: ordinal 0, as aclrtGetDevice",
        "e2e": E2E_PASS,
        "allocator": ALLOCATOR,
    }
    assert set(changed) <= set(lines)
    return list(dict(lines, **changed).values())


def _assert_lines(actual: list[str], expected: list[str]) -> None:
    assert len(actual) == len(expected), "\n".join(actual)
    for line, want in zip(actual, expected, strict=True):
        if want is E2E_PASS:
            assert re.fullmatch(want, line), line
        else:
            assert line == want


UNCHECKED_E2E = "SKIP end-to-end (an earlier requirement failed)"
NOT_NULL = ("PASS stream: not null (whether ACL takes it is asked once a context on the call's "
            "device is current)")


def test_a_plugin_meeting_every_requirement_passes(plugin, sim_path):
    out = io.StringIO()
    assert ascend_plugin_check.report(PLATFORMS, plugin, file=out) == 0
    lines = out.getvalue().splitlines()
    _assert_lines(lines[:-1], _expected(sim_path))
    assert lines[-1] == ("PASS: the plugin meets every requirement of jax_gridsample's aclnn "
                         "handlers")


def test_platform_unknown(plugin):
    from jax._src import xla_bridge

    backends = ", ".join(repr(name) for name in xla_bridge.backends())
    out = io.StringIO()
    assert ascend_plugin_check.report(("ascend",), plugin, file=out) == 1
    skipped = ("registration", "stream", "CANN libraries", "context", "device", "end-to-end")
    assert out.getvalue().splitlines() == [
        f"FAIL platform: no Ascend platform known to JAX (tried 'ascend'; JAX has {backends}): "
        "is an Ascend PJRT plugin installed?",
        *(f"SKIP {name} (no Ascend platform)" for name in skipped),
        ALLOCATOR,
        f"FAIL: not met: platform; not checked: {', '.join(skipped)}",
    ]


def _skipped_after_registration() -> list[str]:
    return [f"SKIP {name} (the registration failed)"
            for name in ("stream", "CANN libraries", "context", "device", "end-to-end")]


def test_registration_refused(plugin, monkeypatch):
    """The plugin's custom-call handler raises when jax.ffi.register_ffi_target reaches it."""
    def refuse(name, *args, **kwargs):
        raise RuntimeError(f"the pretend plugin refuses {name}")

    monkeypatch.setattr(jax.ffi, "register_ffi_target", refuse)
    assert _lines(plugin)[1:] == [
        f"FAIL registration: refused by the plugin: jax.ffi.register_ffi_target({ENVIRONMENT!r}, "
        f"platform='cpu') raised RuntimeError: the pretend plugin refuses {ENVIRONMENT}",
        *_skipped_after_registration(), ALLOCATOR]


def test_registration_refused_at_import(plugin, monkeypatch):
    """What _native.load_and_register recorded when the plugin refused the package's own
    registration at import."""
    monkeypatch.setattr(_ascend, "_REFUSED", {"cpu": "RuntimeError: refused at import"})
    assert _lines(plugin)[1] == ("FAIL registration: refused by the plugin: cpu: RuntimeError: "
                                 "refused at import")


def test_registration_never_delivered(plugin, monkeypatch):
    """A plugin that installs no custom-call handler in jaxlib: the registration waits in
    jaxlib's queue and never reaches it."""
    from jax._src.lib import xla_client

    monkeypatch.setattr(xla_client, "_custom_callback_handler", {})
    monkeypatch.setattr(xla_client, "_custom_callback", {})
    assert _lines(plugin)[1:] == [
        "FAIL registration: queued in jaxlib, never delivered: the plugin registers no "
        "custom-call handler (jaxlib's xla_client.register_custom_call_handler) for 'cpu' "
        "(jaxlib has handlers for none)",
        *_skipped_after_registration(), ALLOCATOR]


def test_a_target_the_plugin_does_not_run(plugin):
    """Registered nowhere: the call fails, and the check says what the runtime answered."""
    name = "jax_gridsample_test_not_registered"
    lines = _lines(Targets(name, {}, {}))
    prefix = f"FAIL registration: accepted, but the plugin did not run the FFI target {name!r}: "
    assert lines[1].startswith(prefix) and name in lines[1][len(prefix):], lines[1]
    assert lines[2:] == [*_skipped_after_registration(), ALLOCATOR]


def test_no_stream(plugin, kernels, sim_path):
    """The production environment handler: the CPU client gives custom calls no stream."""
    runtime_stream = Targets(ENVIRONMENT_RUNTIME_STREAM, {
        ENVIRONMENT_RUNTIME_STREAM: kernels.registrations()["jax_gridsample_ascend_environment"]})
    _assert_lines(_lines(runtime_stream), _expected(
        sim_path, stream="FAIL stream: null (the plugin gives custom calls no XLA_FFI_Stream)",
        e2e=UNCHECKED_E2E))


def test_a_stream_acl_does_not_take(plugin, sim_path):
    """A non-null stream that is not an aclrtStream (the simulator knows its live streams)."""
    bogus = Targets(plugin.environment, plugin.registrations, {"test_stream": np.int64(16)})
    _assert_lines(_lines(bogus), _expected(
        sim_path, stream="FAIL stream: not an aclrtStream of the current context "
                         "(aclrtSynchronizeStream returned aclError 107000)",
        e2e=UNCHECKED_E2E))


def test_no_context(plugin, sim, sim_path):
    sim.lib.sim_set_default_context(False, 0)
    _assert_lines(_lines(plugin), _expected(
        sim_path, stream=NOT_NULL,
        context="FAIL context: no ACL context current on the executing thread "
                "(aclrtGetCurrentContext returned aclError 107002)",
        device="SKIP device (no ACL context current)", e2e=UNCHECKED_E2E))


def test_context_on_another_device(plugin, sim, sim_path):
    sim.lib.sim_set_default_context(True, 3)
    _assert_lines(_lines(plugin), _expected(
        sim_path, stream=NOT_NULL,
        device="FAIL device: ordinal 0 but aclrtGetDevice 3 (the context current on the "
               "executing thread is another device's)",
        e2e=UNCHECKED_E2E))


def test_cann_libraries_missing(plugin, kernels, sim_path, tmp_path):
    missing = str(tmp_path / "libopapi_missing.so")
    set_environment(kernels, ENV, missing)  # the sim fixture restores it
    _assert_lines(_lines(plugin), _expected(
        sim_path, stream=NOT_NULL,
        libraries=f"FAIL CANN libraries: not loaded: cannot load the CANN library {missing} "
                  f"({missing}: cannot open shared object file: No such file or directory) "
                  f"listed in {ENV}",
        context="SKIP context (no CANN libraries)", device="SKIP device (no CANN libraries)",
        e2e=UNCHECKED_E2E))


def test_wrong_results(plugin, sim, sim_path):
    sim.lib.sim_set_wrong_results(b"", 1e-3)
    lines = _lines(plugin)
    _assert_lines(lines[:-2] + lines[-1:], _expected(sim_path)[:-2] + [ALLOCATOR])
    assert re.fullmatch(r'FAIL end-to-end: implementation="native" differs from the float64 '
                        r"host reference \(max error \d\.\de-04 > 1e-05, in the forward\)",
                        lines[-2]), lines[-2]


def test_the_command_without_an_ascend_platform():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-m", "jax_gridsample.ascend_plugin_check"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == ("FAIL platform: no Ascend platform known to JAX (tried 'ascend', "
                        "'ASCEND', 'npu', 'NPU'; JAX has 'cpu'): is an Ascend PJRT plugin "
                        "installed?")
    assert lines[-1].startswith("FAIL: not met: platform; not checked: registration")

