"""Whether an Ascend PJRT plugin gives jax_gridsample's aclnn handlers what they need.

Run it where the plugin is installed::

    python -m jax_gridsample.ascend_plugin_check

It checks each requirement of docs/ascend.md, "The plugin contract", in turn and prints one
verdict line per requirement (``PASS``, ``FAIL``, ``SKIP`` where an earlier failure leaves
nothing to check, ``INFO``), then a final line; the exit status is 0 only when every
requirement is met. What the plugin gives a custom call is seen by a diagnostic FFI target,
``jax_gridsample_ascend_environment``, which refuses nothing and reports what it found.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TextIO

import jax
import numpy as np

from . import _ascend

ENVIRONMENT_TARGET = "jax_gridsample_ascend_environment"
"""The diagnostic FFI target: what the runtime gives a custom call (never fails on it)."""

PLATFORM_NAMES: tuple[str, ...] = _ascend.PLATFORM_NAMES

_FFI_API_VERSION = 1
# Largest error of the float32 end-to-end results against the float64 host reference, as a
# fraction of the largest magnitude of each result (at least 1).
_TOLERANCE = 1e-5
_REQUIREMENTS = ("platform", "registration", "stream", "CANN libraries", "context", "device",
                 "end-to-end")


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One requirement's outcome.

    Attributes
    ----------
    status : str
        "PASS", "FAIL", "SKIP" (not checkable: an earlier requirement failed) or "INFO" (not a
        requirement).
    requirement : str
        What was checked: "platform", "registration", "stream", "CANN libraries", "context",
        "device", "end-to-end" or "device allocator".
    detail : str
        What was found, or why it was skipped.
    """

    status: str
    requirement: str
    detail: str

    def __str__(self) -> str:
        if self.status == "SKIP":
            return f"SKIP {self.requirement} ({self.detail})"
        return f"{self.status} {self.requirement}: {self.detail}"


@dataclasses.dataclass(frozen=True)
class Targets:
    """The diagnostic target the check calls and how it is registered.

    Attributes
    ----------
    environment : str
        The FFI target name called.
    registrations : Mapping[str, Any] or None
        FFI target name -> handler capsule, registered for the checked platform names with
        ``jax.ffi.register_ffi_target``; None: the package's own environment handler under
        :data:`ENVIRONMENT_TARGET`.
    extra_attributes : Mapping[str, Any]
        Added to the call (the tests pass a simulated stream to the test-only twin this way).
    """

    environment: str = ENVIRONMENT_TARGET
    registrations: Mapping[str, Any] | None = None
    extra_attributes: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def check(platforms: Sequence[str] = PLATFORM_NAMES, targets: Targets | None = None,
          ) -> list[Verdict]:
    """Check the plugin contract and return the verdicts, one per requirement.

    Parameters
    ----------
    platforms : Sequence[str]
        The platform names checked: the device is this process's first of a backend whose name,
        or whose devices' platform, is one of them (up to case), and the diagnostic target is
        registered under each.
    targets : Targets, optional
        The diagnostic target (default: the package's).

    Returns
    -------
    list[Verdict]
        In the order :func:`report` prints them; the requirements are met when each is
        "PASS" or "INFO".
    """
    return list(_verdicts(tuple(platforms), targets or Targets()))


def report(platforms: Sequence[str] = PLATFORM_NAMES, targets: Targets | None = None,
           file: TextIO | None = None) -> int:
    """Check the plugin contract, printing each verdict as it is reached, then a final line.

    Parameters
    ----------
    platforms, targets
        As for :func:`check`.
    file : TextIO, optional
        Where to print (default: standard output).

    Returns
    -------
    int
        0 when every requirement is met, else 1 (the command's exit status).
    """
    out = sys.stdout if file is None else file
    verdicts = []
    for verdict in _verdicts(tuple(platforms), targets or Targets()):
        print(verdict, file=out, flush=True)
        verdicts.append(verdict)
    met = all(v.status in ("PASS", "INFO") for v in verdicts)
    print(_final_line(verdicts) if not met else
          "PASS: the plugin meets every requirement of jax_gridsample's aclnn handlers",
          file=out, flush=True)
    return 0 if met else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m jax_gridsample.ascend_plugin_check``: :func:`report` on the installed plugin.

    Parameters
    ----------
    argv : Sequence[str], optional
        The command's arguments (default: ``sys.argv[1:]``; it takes none but ``--help``).

    Returns
    -------
    int
        The exit status: 0 when every requirement is met, else 1. Enables ``jax_enable_x64``
        (the end-to-end reference is float64).
    """
    parser = argparse.ArgumentParser(
        prog="python -m jax_gridsample.ascend_plugin_check",
        description="Check that the installed Ascend PJRT plugin gives jax_gridsample's aclnn "
                    "handlers what they need (docs/ascend.md, \"The plugin contract\").")
    parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    return report()


def _final_line(verdicts: Sequence[Verdict]) -> str:
    failed = [v.requirement for v in verdicts if v.status == "FAIL"]
    skipped = [v.requirement for v in verdicts if v.status == "SKIP"]
    parts = ([f"not met: {', '.join(failed)}"] if failed else []) + (
        [f"not checked: {', '.join(skipped)}"] if skipped else [])
    return "FAIL: " + "; ".join(parts)


# --- the checks --------------------------------------------------------------------------------

def _verdicts(platforms: tuple[str, ...], targets: Targets) -> Iterator[Verdict]:
    pending = list(_REQUIREMENTS)

    def verdict(status: str, detail: str) -> Verdict:
        return Verdict(status, pending.pop(0), detail)

    def skip_rest(why: str) -> Iterator[Verdict]:
        while pending:
            yield verdict("SKIP", why)
        yield _allocator()

    device, backend, why = _find_device(platforms)
    if device is None:
        yield verdict("FAIL", why)
        yield from skip_rest("no Ascend platform")
        return
    yield verdict("PASS", f"{device.platform!r} known to JAX (backend {backend!r})")

    refused = _registration_error(platforms, targets)
    found = None
    if refused is None:
        found, refused = _run_environment(device, targets)
    if refused is not None:
        yield verdict("FAIL", refused)
        yield from skip_rest("the registration failed")
        return
    yield verdict("PASS", "accepted (jax.ffi.register_ffi_target, api_version=1), and the "
                          "plugin runs the FFI target")

    results = [_stream(found), _libraries(found), _context(found),
               _device(found, _ascend.device_ordinal(device))]
    for status, detail in results:
        yield verdict(status, detail)
    if any(status != "PASS" for status, _ in results):
        yield from skip_rest("an earlier requirement failed")
        return
    if not jax.config.jax_enable_x64:
        yield from skip_rest("the float64 reference needs jax_enable_x64")
        return
    yield verdict(*_end_to_end(device))
    yield _allocator()


def _allocator() -> Verdict:
    return Verdict("INFO", "device allocator",
                   "not needed (the aclnn workspace comes from a per-stream aclrtMalloc cache)")


def _find_device(platforms: tuple[str, ...]) -> tuple[jax.Device | None, str, str]:
    """This process's first device of a backend named, or whose devices are, one of
    ``platforms`` (up to case): (device, backend, "") or (None, "", why not)."""
    from jax._src import xla_bridge

    tried = ", ".join(repr(name) for name in platforms)
    try:
        backends = xla_bridge.backends()
    except Exception as exc:  # noqa: BLE001 - a plugin that fails to start: say so
        return None, "", f"JAX's backends did not start ({_ascend.last_line(exc)})"
    found = _ascend.find_local_device(platforms)
    if found is not None:
        return found[1], found[0], ""
    return None, "", (f"no Ascend platform known to JAX (tried {tried}; JAX has "
                      f"{', '.join(repr(name) for name in backends)}): is an Ascend PJRT plugin "
                      "installed?")


def _registration_error(platforms: tuple[str, ...], targets: Targets) -> str | None:
    """Why the FFI targets do not reach the plugin, or None: the package's registration at
    import (what ``_native.load_and_register`` recorded), then the diagnostic target's, then
    whether jaxlib has a custom-call handler to deliver them to."""
    if _ascend._MODULE is None:
        if getattr(_ascend, "_REFUSED", None):
            return f"refused by the plugin: {_ascend._STATUS}"
        return f"the Ascend handlers are not available: {_ascend._STATUS}"
    refused = {name: why for name, why in getattr(_ascend, "_REFUSED", {}).items()
               if name.lower() in {p.lower() for p in platforms}}
    if refused:
        return "refused by the plugin: " + "; ".join(f"{p}: {e}" for p, e in refused.items())
    registrations = targets.registrations
    if registrations is None:
        registrations = {ENVIRONMENT_TARGET: _ascend._MODULE.registrations()[ENVIRONMENT_TARGET]}
    for name, capsule in registrations.items():
        for platform in platforms:
            try:
                jax.ffi.register_ffi_target(name, capsule, platform=platform,
                                            api_version=_FFI_API_VERSION)
            except Exception as exc:  # noqa: BLE001 - the plugin's handler refused it
                return (f"refused by the plugin: jax.ffi.register_ffi_target({name!r}, "
                        f"platform={platform!r}) raised {type(exc).__name__}: {exc}")
    return _undelivered(platforms)


def _undelivered(platforms: tuple[str, ...]) -> str | None:
    """Why registrations for ``platforms`` wait in jaxlib's queue, or None when a plugin
    registered a custom-call handler for one of them (a jaxlib without the table: None)."""
    try:
        from jax._src.lib import xla_client

        handlers = set(xla_client._custom_callback_handler)
        xla_names = xla_client.xla_platform_names
    except Exception:  # noqa: BLE001 - another jaxlib: the call below will tell
        return None
    if any(xla_names.get(p, p) in handlers for p in platforms):
        return None
    return ("queued in jaxlib, never delivered: the plugin registers no custom-call handler "
            f"(jaxlib's xla_client.register_custom_call_handler) for "
            f"{', '.join(repr(p) for p in platforms)} (jaxlib has handlers for "
            f"{', '.join(repr(h) for h in sorted(handlers)) or 'none'})")


def _run_environment(device: jax.Device, targets: Targets) -> tuple[dict | None, str | None]:
    """Run the diagnostic target on ``device``: (its report, None) or (None, why not)."""
    call = jax.ffi.ffi_call(targets.environment, jax.ShapeDtypeStruct((1,), np.uint8))
    attributes = dict(targets.extra_attributes)
    try:
        anchor = jax.device_put(np.zeros((1,), np.uint8), device)  # runs the call there
        jax.block_until_ready(jax.jit(lambda _: call(**attributes))(anchor))
    except Exception as exc:  # noqa: BLE001 - whatever the plugin says, reported
        return None, (f"accepted, but the plugin did not run the FFI target "
                      f"{targets.environment!r}: {_ascend.last_line(exc)}")
    report = _ascend._MODULE.environment_report(None)
    if report is None:
        return None, f"the FFI target {targets.environment!r} ran but left no report"
    return report, None


def _stream(report: dict) -> tuple[str, str]:
    if not report["stream"]:
        return "FAIL", "null (the plugin gives custom calls no XLA_FFI_Stream)"
    status = report["stream_status"]
    if status is None:
        return "PASS", ("not null (whether ACL takes it is asked once a context on the call's "
                        "device is current)")
    if status != 0:
        return "FAIL", ("not an aclrtStream of the current context (aclrtSynchronizeStream "
                        f"returned aclError {status})")
    return "PASS", "the plugin's XLA_FFI_Stream is an aclrtStream (aclrtSynchronizeStream)"


def _libraries(report: dict) -> tuple[str, str]:
    text = report["libraries"].removeprefix("grid_sample (ascend): ")
    if report["libraries_loaded"]:
        return "PASS", text
    return "FAIL", f"not loaded: {text.split('. ')[0]}"


def _context(report: dict) -> tuple[str, str]:
    if not report["libraries_loaded"]:
        return "SKIP", "no CANN libraries"
    if report["context"]:
        return "PASS", "an ACL context is current on the executing thread"
    return "FAIL", ("no ACL context current on the executing thread (aclrtGetCurrentContext "
                    f"returned aclError {report['context_status']})")


def _device(report: dict, expected: int) -> tuple[str, str]:
    if not report["libraries_loaded"]:
        return "SKIP", "no CANN libraries"
    if not report["context"]:
        return "SKIP", "no ACL context current"
    ordinal = report["device_ordinal"]
    if ordinal != expected:
        return "FAIL", (f"the call ran with XLA device ordinal {ordinal}, but JAX's device has "
                        f"local hardware id {expected}")
    if not report["get_device_available"]:
        return "PASS", f"ordinal {ordinal} (this CANN has no aclrtGetDevice to compare)"
    if report["get_device_status"] != 0:
        return "FAIL", f"aclrtGetDevice failed with aclError {report['get_device_status']}"
    if report["acl_device"] != ordinal:
        return "FAIL", (f"ordinal {ordinal} but aclrtGetDevice {report['acl_device']} (the "
                        "context current on the executing thread is another device's)")
    return "PASS", f"ordinal {ordinal}, as aclrtGetDevice"


def _end_to_end(device: jax.Device) -> tuple[str, str]:
    """A tiny forward and backward with implementation="native" on ``device`` against the
    float64 reference on the host CPU."""
    from . import _api

    rng = np.random.default_rng(0)
    data = (rng.standard_normal((1, 2, 4, 5)), rng.uniform(-1.1, 1.1, (1, 3, 3, 2)),
            rng.standard_normal((1, 2, 3, 3)))
    data = tuple(a.astype(np.float32) for a in data)

    def run(implementation: str, dtype, on: jax.Device) -> list[np.ndarray]:
        def forward_backward(x, g, go):
            out, vjp = jax.vjp(
                lambda x, g: _api.grid_sample(x, g, implementation=implementation), x, g)
            return (out, *vjp(go))

        operands = [jax.device_put(a.astype(dtype), on) for a in data]
        return [np.asarray(r, np.float64) for r in jax.jit(forward_backward)(*operands)]

    try:
        native = run("native", np.float32, device)
    except Exception as exc:  # noqa: BLE001 - reported
        return "FAIL", (f'implementation="native" failed: {type(exc).__name__}: '
                        f"{_ascend.last_line(exc)}")
    reference = run("reference", np.float64, jax.devices("cpu")[0])
    errors = [float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))
              for a, b in zip(native, reference, strict=True)]
    worst = max(errors)
    what = ("forward", "input gradient", "grid gradient")[errors.index(worst)]
    if worst > _TOLERANCE:
        return "FAIL", (f'implementation="native" differs from the float64 host reference '
                        f"(max error {worst:.1e} > {_TOLERANCE:.0e}, in the {what})")
    return "PASS", ('forward and backward with implementation="native" match the float64 host '
                    f"reference (max error {worst:.1e})")


if __name__ == "__main__":
    sys.exit(main())
