"""The hardware acceptance (``python -m jax_gridsample --full``): every check of a platform's
native kernel on its device, section by section, each ending with a verdict line.

With ``implementation="native"`` on the device, against ``implementation="reference"`` on the
same device and the float64 reference on the host CPU:

 1. plugin (Ascend): ``jax_gridsample.ascend_plugin_check``, what the PJRT plugin gives the
    handlers;
 2. self-check (Ascend): ``jax_gridsample.ascend_self_check()``, what "auto" runs on first use;
 3. parity: ``grid_sample`` and the default ``grid_sample_backward`` for every 2D/3D x mode x
    padding x align_corners x dtype x output mask; what the package routes to the reference
    (``"native"`` raises ``NotImplementedError``) is listed as routed;
 4. routes: shapes that reach the kernels' other paths (on Ascend CANN's other kernels): more
    than 2048 channels, large planes and volumes, a batch larger than the device's core count;
 5. chain: a forward, a second grid_sample on its result and the gradients of all three
    operands under one ``jax.jit``, dispatched several times without waiting (stream order);
 6. coordinates: grids of exact pixel centres and exact midpoints, where floors and nearest's
    rounding decide (reported, not judged);
 7. empty tensors: each result starts as a copy of a non-zero operand (the kernel's targets
    called directly), so that a result nobody writes shows; exact zeros expected;
 8. NaN coordinates: no crash, the finite points match (the NaN points' values reported);
 9. timings of realistic shapes, their results checked too: the native kernel, the reference
    lowering and torch (``torch_npu`` on Ascend), timed in a process of its own;
10. speed: SLOW where the native median is more than 10% above the reference's on the same
    device (a finding to report, not a failure), else PASS;
11. deterministic: the deterministic backwards of the parity and route cases, each run twice
    and bitwise equal;
12. reproducibility: a backward with many points scattering into few pixels, run twice: the
    deterministic one must give the same bits (the default one is reported);
13. workspace (Ascend): how many calls took their aclnn workspace from the per-stream cache.

On Ascend, CANN's deterministic backward runs only in a process started with
``JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1``; without it the deterministic sections are EXPECTED
(a known limitation), not FAIL. The last line is ``VERDICT overall: PASS|FAIL (...)``; the JSON
report is written after each section, so a crash still leaves what ran before it.

The checks take the devices and the platform's kernel as arguments, so they also run with both
devices being the CPU, where the tests install the Ascend handlers on a simulated CANN.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Any, TextIO

import jax

import jax_gridsample

from .._ascend import DETERMINISTIC_ENV_VAR
from . import _environment
from ._cases import covered_cases, not_reproducible, route_cases, run_cases
from ._checks import (
    check_chain,
    check_collisions,
    check_coordinates,
    check_empty,
    check_nan,
    check_self_check,
)
from ._data import error_text, require_x64
from ._plan import Options
from ._platforms import Platform
from ._report import (
    EXPECTED_DETERMINISM,
    Report,
    cases_verdict,
    checks_verdict,
    determinism_hint,
    estimate,
    overall_verdict,
    print_checks,
    print_collisions,
    print_estimate,
    print_parity_table,
    print_timing_table,
    workspace_delta,
    workspace_verdict,
)
from ._timings import speed_findings, speed_verdict, time_cases, time_torch


def environment(platform: Platform, device: jax.Device) -> dict[str, Any]:
    """The machine (:func:`_environment.machine`), the device, and on Ascend CANN's version,
    the chip and the start-up determinism level."""
    found = _environment.machine()
    found["device"] = _environment.device_info(device)
    if platform.name == "ascend":
        from .. import _ascend

        soc_name = _environment.call(_ascend.soc_name)
        level, level_error = _ascend.deterministic_level()
        found.update(
            cann_version=_environment.call(_ascend.cann_version), soc_name=soc_name,
            chip_family=_ascend.chip_family(soc_name if isinstance(soc_name, str) else None),
            start_up_determinism=os.environ.get(DETERMINISTIC_ENV_VAR) or None,
            deterministic_level=level, deterministic_level_error=level_error)
    return found


def _header(platform: Platform, device: jax.Device, env: dict, out: TextIO) -> None:
    versions = env["versions"]
    print(f"device: {device} ({device.device_kind}); jax {versions['jax']}, jaxlib "
          f"{versions['jaxlib']}, jax_gridsample {versions['jax_gridsample']}", file=out)
    if platform.name == "cuda":
        print(f"CUDA: {_environment.cuda_line(env['cuda'])}", file=out)
    if platform.name != "ascend":
        return
    print(f"CANN: {env['cann_version'] or 'version unknown'}; chip: "
          f"{env['soc_name'] or 'unknown'} ({env['chip_family']})", file=out)
    if env["deterministic_level"]:
        print(f"{DETERMINISTIC_ENV_VAR}={env['deterministic_level']}: every aclnn backward of "
              "this process runs CANN's deterministic kernels, the default cases and timings too",
              file=out)
    elif env["deterministic_level_error"]:
        print(f"{DETERMINISTIC_ENV_VAR}={env['start_up_determinism']}: the handlers refuse it "
              f"and run nothing ({env['deterministic_level_error']}); unset it or set it to 1",
              file=out)
    else:
        print(f"{DETERMINISTIC_ENV_VAR} not set: deterministic=True runs on the reference, so "
              f"the deterministic sections are EXPECTED; start Python with "
              f"{DETERMINISTIC_ENV_VAR}=1 to check CANN's deterministic backward", file=out)


def _plugin_section(platform: Platform, report: Report) -> None:
    report.section("plugin: what the PJRT plugin gives the handlers")
    if platform.plugin_check is None:
        report.verdict("plugin", "SKIPPED", f"no plugin contract to check on {platform.label}s")
        return
    try:
        verdicts = list(platform.plugin_check())
    except Exception as exc:  # noqa: BLE001 - reported
        report["plugin"] = dict(error=error_text(exc))
        report.verdict("plugin", "FAIL", f"the check could not run: {error_text(exc)[:300]}")
        return
    for v in verdicts:
        print(f"  {v}", file=report.out)
    report["plugin"] = [dataclasses.asdict(v) for v in verdicts]
    failed = [v.requirement for v in verdicts if v.status == "FAIL"]
    skipped = [v.requirement for v in verdicts if v.status == "SKIP"]
    if failed or skipped:
        detail = "; ".join(part for part in (
            f"not met: {', '.join(failed)}" if failed else "",
            f"not checked: {', '.join(skipped)}" if skipped else "") if part)
        report.verdict("plugin", "FAIL", detail)
    else:
        report.verdict("plugin", "PASS", f"{len(verdicts)} requirements met")


def _self_check_section(platform: Platform, report: Report, level: int | None) -> None:
    report.section("self-check (what \"auto\" runs on first use)")
    if platform.self_check is None:
        trusted = getattr(platform.kernel, "trusted", None)
        auto = "the native kernel" if trusted is None or trusted(platform.name) else \
            "the jnp reference, the native kernel only where asked for"
        report.verdict("self-check", "SKIPPED",
                       f"none on {platform.label}s: \"auto\" runs {auto} there")
        return
    report["self_check"] = outcome = check_self_check(platform.self_check, level)
    if "error" in outcome:
        report.verdict("self-check", "FAIL", f"it could not run: {outcome['error'][:300]}")
    else:
        detail = f"{outcome.get('compared')} results compared"
        for key in ("failure", "deterministic_failure"):
            if outcome.get(key):
                detail += f"; {key.replace('_', ' ')}: {outcome[key][:300]}"
        if outcome["status"] == "expected":
            detail += f"; {EXPECTED_DETERMINISM}"
        report.verdict("self-check", outcome["status"].upper(), detail)
    status = jax_gridsample.native_status().get(platform.name, "")
    print(f"native_status()[{platform.name!r}]: {status[:600]}", file=report.out)


def _coordinates_verdict(report: Report) -> None:
    checks = report["coordinates"]["checks"]
    print_checks(dict(checks=[c for c in checks if c.get("differs") or
                              c["status"] != "reported"]), report.out)
    differing = [c["name"] for c in checks if c.get("differs")]
    word = {"fail": "FAIL", "routed": "ROUTED"}.get(report["coordinates"]["status"], "REPORTED")
    same = sum(c["status"] == "reported" and not c["differs"] for c in checks)
    listed = (f": {', '.join(differing[:8])}" + (" ..." if len(differing) > 8 else "")
              if differing else "")
    report.verdict("coordinates", word, f"{len(checks)} grids: {same} the same as the "
                                        f"reference, {len(differing)} differ{listed}")


def _timing_sections(platform: Platform, device: jax.Device, host_device: jax.Device,
                     options: Options, report: Report) -> None:
    if not options.timing:
        report.verdict("timings", "SKIPPED", "--no-timing")
        report.verdict("speed", "SKIPPED", "--no-timing")
        return
    report.section(f"timings ({platform.kernel_name}'s results checked too)")
    report.phase("timings")
    rows = time_cases(device, host_device, platform.plan, repeats=options.repeats)
    report["timings"] = rows
    if options.torch and platform.torch_device_type is not None:
        report.phase(platform.torch_label)
        time_torch(rows, device, platform.torch_device_type, repeats=options.repeats,
                   warmup=platform.plan.timing_warmup)
        report["timings"] = rows
    print_timing_table(rows, report.out, platform.kernel_name, platform.torch_label)
    word, detail = cases_verdict([r["check"] for r in rows])
    report.verdict("timings", word, f"results of the timed calls: {detail}")
    report["speed"] = speed_findings(rows)
    report.verdict("speed", *speed_verdict(report["speed"], platform.kernel_name))


def _reproducibility_verdict(report: Report, level: int | None) -> None:
    default, deterministic = report["collisions_default"], report["collisions_deterministic"]
    print_collisions(default, report.out)
    print_collisions(deterministic, report.out)
    word, detail = checks_verdict(deterministic, why=False)
    ran = [c for c in default["checks"] if "identical" in c]
    differing = sum(not c["identical"] for c in ran)
    detail += (f"; default backward: {differing} of {len(ran)} differ between two runs"
               if ran else "")
    if any(c["status"] == "expected" for c in deterministic["checks"]):
        detail += f"; {EXPECTED_DETERMINISM}"
    report.verdict("reproducibility", word, f"deterministic backward: {detail}")


def run_acceptance(platform: Platform, device: jax.Device, host_device: jax.Device,
                   options: Options, out: TextIO = sys.stdout) -> tuple[int, dict]:
    """Every section on ``device``, in order (default calls before deterministic ones), its
    verdict line printed and the JSON report (``options.json``) written after each.

    Returns the exit status (1 if a check failed or nothing ran on the native kernel, else 0:
    EXPECTED, SLOW and SKIPPED sections fail nothing) and the report."""
    require_x64()
    started = time.perf_counter()
    plan, kernel_name = platform.plan, platform.kernel_name
    env = environment(platform, device)
    report = Report(options.json, out, env, dataclasses.asdict(options))
    level = platform.deterministic_level()
    workspace_before = _environment.call(platform.workspace_paths) \
        if platform.workspace_paths else None
    _header(platform, device, env, out)
    report["estimate"] = estimate(options, level, plan, platform.self_check is not None,
                                  platform.torch_label if platform.torch_device_type else None)
    print_estimate(report["estimate"], out)

    report.phase("self-check")
    _plugin_section(platform, report)
    _self_check_section(platform, report, level)

    # The default calls: every one before the first deterministic call.
    cases = covered_cases(plan, options.quick, options.cases)
    routes = route_cases(plan, options.quick, options.cases)
    for name, title, section_cases in (
            ("parity", "parity: forward and default backward", cases),
            ("routes", "routes: many channels, large planes and volumes, a large batch", routes)):
        report.section(title)
        report.phase(name)
        report[name] = run_cases([c for c in section_cases if not c["deterministic"]], device,
                                 host_device, name, level)
        print_parity_table(report[name], out)
        report.verdict(name, *cases_verdict(report[name]))

    report.section("chain: grid_sample of grid_sample and all gradients under one jax.jit, "
                   f"{plan.chain_runs} dispatched before any is read")
    report.phase("chain")
    report["chain"] = check_chain(device, host_device, plan)
    print_checks(report["chain"], out)
    report.verdict("chain", *checks_verdict(report["chain"]))

    report.section("coordinates: exact pixel centres and midpoints (reported, not judged)")
    report.phase("coordinates")
    report["coordinates"] = check_coordinates(device, host_device, plan, quick=options.quick)
    _coordinates_verdict(report)

    report.section("empty tensors (results pre-filled)")
    report.phase("empty")
    report["empty"] = check_empty(device, host_device, platform.kernel, plan)
    print_checks(report["empty"], out)
    report.verdict("empty", *checks_verdict(report["empty"]))

    report.section("NaN coordinates (finite points judged; the rest reported)")
    report.phase("nan")
    report["nan"] = check_nan(device, host_device, plan)
    print_checks(report["nan"], out)
    report.verdict("nan", *checks_verdict(report["nan"]))

    report.phase("default collisions")
    report["collisions_default"] = check_collisions(device, host_device, False, plan, level)

    _timing_sections(platform, device, host_device, options, report)

    # The deterministic calls.
    report.section("deterministic backward: parity and route cases, each run twice")
    report.phase("deterministic")
    report["deterministic"] = run_cases([c for c in cases + routes if c["deterministic"]],
                                        device, host_device, "deterministic", level)
    print_parity_table(report["deterministic"], out)
    report.verdict("deterministic", *cases_verdict(report["deterministic"]))

    report.section("reproducibility: many points scattering into few pixels, run twice")
    report.phase("deterministic collisions")
    report["collisions_deterministic"] = check_collisions(device, host_device, True, plan, level)
    report.phase(None)
    _reproducibility_verdict(report, level)
    if platform.name == "ascend" and ("EXPECTED" in report.words.values() or (level and (
            not_reproducible(report["deterministic"])
            or any(c.get("identical") is False
                   for c in report["collisions_deterministic"]["checks"])))):
        print(determinism_hint(level), file=out)

    report.section("workspace")
    if platform.workspace_paths is None:
        report.verdict("workspace", "SKIPPED", f"no workspace cache on {platform.label}s")
    else:
        report["workspace"] = workspace_delta(workspace_before,
                                              _environment.call(platform.workspace_paths))
        report.verdict("workspace", *workspace_verdict(report["workspace"]))

    ran = sum(r["status"] != "routed" for r in report["parity"])
    word, detail, failed = overall_verdict(report.words, ran, kernel_name)
    words = report.words
    report["summary"] = dict(
        platform=platform.name, parity_cases=len(report["parity"]), ran_natively=ran,
        failed_sections=failed,
        expected_sections=[s for s, w in words.items() if w == "EXPECTED"],
        slow_sections=[s for s, w in words.items() if w == "SLOW"],
        estimated_seconds=sum(p["seconds"] for p in report["estimate"]),
        seconds=time.perf_counter() - started)
    where = f"report written to {options.json}; " if options.json else ""
    print(f"\n{where}{report['summary']['seconds']:.0f} s (estimated "
          f"{report['summary']['estimated_seconds']:.0f} s)", file=out)
    report.verdict("overall", word, detail)
    return (1 if word == "FAIL" else 0), report.data
