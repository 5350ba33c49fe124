"""The hardware acceptance (``python -m jax_gridsample --full``, jax_gridsample/_acceptance/) on
Ascend, run against the simulated aclnn library (``tests/ascend_support.py``, fixtures
registered in conftest.py): its sections and verdicts, what is EXPECTED without the start-up
determinism level and what fails with it, the speed verdict, the run-time estimate it prints
from its case counts (and docs/ascend.md documents); and the quick check's Ascend path.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import sys
from pathlib import Path
from types import MappingProxyType

import jax
import numpy as np
import pytest
from ascend_support import Sim, few_self_check_kinds  # noqa: I001 - the tests' own helpers

from jax_gridsample import _ascend, ascend_plugin_check
from jax_gridsample._acceptance import (
    _cases,
    _checks,
    _full,
    _main,
    _platforms,
    _quick,
    _report,
    _timings,
)
from jax_gridsample._acceptance._plan import ASCEND_PLAN, Options

ROOT = Path(__file__).parents[1]
ACCEPTANCE_SECTIONS = ["plugin", "self-check", "parity", "routes", "chain", "coordinates",
                       "empty", "nan", "timings", "speed", "deterministic", "reproducibility",
                       "workspace", "overall"]
LEVEL = "JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC"
AGAIN = f"start Python with {LEVEL}=1 and run `python -m jax_gridsample --full` again to check it"
# The medians the whole runs report (ms), so that the speed verdict does not depend on this
# machine: aclnn faster than the reference unless a test says otherwise.
FAST = {"native": 1.0, "reference": 2.0}
# The sections on a few tiny shapes each; the parity case scatters 64 points into 9 pixels, so
# that atomics show.
TINY = dataclasses.replace(
    ASCEND_PLAN, modes=MappingProxyType({2: ("bilinear",)}), paddings=("border",),
    shapes=MappingProxyType({2: ((1, 2, 3, 3), (1, 8, 8, 2))}),
    route_shapes=(("wide-c", (1, 2049, 2, 3), (1, 2, 2, 2), "bilinear", "zeros", False,
                   ("float32",)),),
    chain_shapes=(("2d", (2, 3, 6, 7), (2, 5, 4, 2), (2, 3, 4, 2), "bilinear", "border",
                   False),),
    chain_runs=2, collision_shapes=(("2d", (1, 2, 2, 2), (1, 24, 24, 2), "float32"),),
    empty_cases=ASCEND_PLAN.empty_cases[:1], empty_dtypes=("float32",),
    timing_shapes=(("2d", (1, 2, 7, 9), (4, 5)),), timing_dtypes=("float32",), timing_warmup=0)
TINY_OPTIONS = Options(quick=True, repeats=1, torch=False)
ENVIRONMENT = "jax_gridsample_test_ascend_environment"


def _options(*argv: str) -> Options:
    """The options of ``python -m jax_gridsample --full ARGV``."""
    return _main.options_of(_main.parser().parse_args(["--full", *argv]), None)


def _plugin_check(kernels):
    """The plugin contract checked on a pretend plugin that meets it (the CPU client running
    the environment target's test-stream twin on the simulator)."""
    twin = kernels.test_registrations()["jax_gridsample_ascend_environment_on_test_stream"]
    targets = ascend_plugin_check.Targets(ENVIRONMENT, {ENVIRONMENT: twin},
                                          {"test_stream": np.int64(Sim.test_stream)})
    return lambda: ascend_plugin_check.check(("cpu",), targets)


def _platform(sim, kernels, kernel, marks: dict | None = None) -> _platforms.Platform:
    """The Ascend platform on the simulator: the test targets, the tiny plan, the plugin check
    on the pretend plugin and the self-check as jax_gridsample.ascend_self_check() reports it,
    on its float32 bilinear kinds only, both ranks and routes (``marks["self_check_end"]``: where
    in the simulator's log it ended)."""
    def self_check():
        with few_self_check_kinds():
            outcome = _ascend.self_check_outcome(kernel.self_check("cpu"))
        if marks is not None:
            marks["self_check_end"] = len(sim.log())
        return outcome

    return dataclasses.replace(_platforms.ascend(), kernel=kernel, plan=TINY,
                               self_check=self_check, plugin_check=_plugin_check(kernels))


def _fix_times(monkeypatch, times: dict[str, float]) -> None:
    """Make every timed median ``times[implementation]`` (the calls still run and are checked)."""
    measure = _timings.time_jax

    def fixed(device, x, g, implementation, repeats, warmup):
        measured, results = measure(device, x, g, implementation, repeats, warmup)
        return {key: times[implementation] if isinstance(ms, float) else ms
                for key, ms in measured.items()}, results

    monkeypatch.setattr(_timings, "time_jax", fixed)


def _run_acceptance(sim, kernels, kernel, tmp_path, monkeypatch, times=FAST
                    ) -> tuple[int, str, dict, int]:
    """The whole acceptance (``--quick``, tiny shapes, no torch_npu, the medians ``times``) on
    the simulator: its exit status, its output, its JSON report (as written to the file), and
    where in the simulator's log its self-check ended."""
    cpu, out, marks = jax.devices("cpu")[0], io.StringIO(), {}
    _fix_times(monkeypatch, times)
    options = dataclasses.replace(TINY_OPTIONS, json=str(tmp_path / "report.json"))
    status, data = _full.run_acceptance(_platform(sim, kernels, kernel, marks), cpu, cpu,
                                        options, out)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdicts"] == data["verdicts"]
    return status, out.getvalue(), report, marks["self_check_end"]


def _verdicts(output: str) -> dict[str, str]:
    lines = re.findall(r"^VERDICT ([\w-]+): (\w+) \((.*)\)$", output, re.M)
    assert [section for section, _, _ in lines] == ACCEPTANCE_SECTIONS, output
    return {section: f"{word} ({detail})" for section, word, detail in lines}


def _words(verdicts: dict[str, str]) -> dict[str, str]:
    return {section: verdict.split()[0] for section, verdict in verdicts.items()}


# --- whole runs on the simulator ---------------------------------------------------------------

def test_acceptance_passes_on_aclnn(sim, kernels, ascend_kernel, start_up_level, tmp_path,
                                    monkeypatch):
    """Every section on the simulator, with determinism set at start-up: one verdict line per
    section, all passing, the overall one last; the header names CANN's version, the chip and
    the start-up level; the plugin contract is met; the JSON report has every section and
    verdict, the estimate and each phase's seconds; the estimate's counts are what ran; the wide
    case reached CANN's AICPU backward."""
    status, output, report, _ = _run_acceptance(sim, kernels, ascend_kernel, tmp_path,
                                                monkeypatch)
    verdicts = _verdicts(output)
    assert status == 0, output
    assert _words(verdicts) == dict.fromkeys(ACCEPTANCE_SECTIONS, "PASS") | {
        "coordinates": "REPORTED", "workspace": "REPORTED"}
    assert verdicts["plugin"] == "PASS (8 requirements met)"
    assert "  PASS stream: the plugin's XLA_FFI_Stream is an aclrtStream" in output
    assert verdicts["parity"] == "PASS (2 passed)"  # the forward and the default backward
    assert verdicts["routes"] == "PASS (2 passed)"
    assert verdicts["deterministic"] == "PASS (1 passed, 1 routed)"  # C > 2048: routed
    assert verdicts["reproducibility"] == ("PASS (deterministic backward: 1 passed; default "
                                           "backward: 0 of 1 differ between two runs)")
    assert verdicts["coordinates"] == "REPORTED (2 grids: 2 the same as the reference, 0 differ)"
    assert verdicts["overall"] == "PASS (13 sections)"
    assert "CANN: head (ops-cv 6ae87653, opbase aa3cd74); chip: Ascend910B2 (atlas-a2-a3)" \
        in output
    assert f"{LEVEL}=1: every aclnn backward" in output
    assert "HINT" not in output and "EXPECTED" not in output
    assert re.search(r"VERDICT workspace: REPORTED \(the per-stream cache for \d+ calls \(\d+ "
                     r"buffers, [\d.]+ MiB\), no workspace for \d+\)$", output, re.M)
    assert report["workspace"]["stream_cache"] > 0
    assert report["verdicts"] == {s: f"VERDICT {s}: {v}" for s, v in verdicts.items()}
    assert {"plugin", "self_check", "parity", "routes", "chain", "coordinates", "empty", "nan",
            "collisions_default", "timings", "speed", "deterministic",
            "collisions_deterministic", "workspace", "summary", "estimate",
            "seconds"} <= set(report)
    assert [v["status"] for v in report["plugin"]] == ["PASS"] * 7 + ["INFO"]
    assert report["environment"]["soc_name"] == "Ascend910B2"
    assert report["environment"]["deterministic_level"] == 1
    assert report["environment"]["versions"]["jax"] == jax.__version__
    assert any(re.match(r"aclnnGridSampler2DBackward .* kernel=aicpu$", line)
               for line in sim.log())

    counts = {p["phase"]: p["count"] for p in report["estimate"]}
    assert counts == {
        "self-check": 1, "parity": len(report["parity"]), "routes": len(report["routes"]),
        "chain": len(report["chain"]["checks"]),
        "coordinates": len(report["coordinates"]["checks"]),
        "empty": len(report["empty"]["checks"]), "nan": len(report["nan"]["checks"]),
        "default collisions": len(report["collisions_default"]["checks"]),
        "timings": len(report["timings"]), "torch_npu": 0,
        "deterministic": len(report["deterministic"]),
        "deterministic collisions": len(report["collisions_deterministic"]["checks"])}
    assert set(report["seconds"]) == set(counts) - {"torch_npu"}  # torch=False: not run
    assert report["summary"]["estimated_seconds"] == sum(p["seconds"]
                                                         for p in report["estimate"])


def test_acceptance_without_the_level_expects_determinism(sim, kernels, ascend_kernel, tmp_path,
                                                          monkeypatch):
    """Without JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1 no deterministic backward reaches aclnn:
    no call switches CANN's determinism per call (no first phase after the self-check asks for
    it, no launch runs the deterministic kernel) while the default backwards do run there. The
    deterministic sections say EXPECTED with the reason and what to do, the overall verdict
    passes and counts them, and the exit status is 0."""
    status, output, report, self_check_end = _run_acceptance(sim, kernels, ascend_kernel,
                                                             tmp_path, monkeypatch)
    log = sim.log()[self_check_end:]
    first_phases = [line for line in log
                    if re.match(r"aclnnGridSampler[23]DBackwardGetWorkspaceSize ", line)]
    assert first_phases and all(" det=0 " in line and " ctxdet=1" not in line
                                for line in first_phases), first_phases
    launches = [line for line in log if re.match(r"aclnnGridSampler[23]DBackward ", line)]
    assert launches and not any("kernel=aicore-deterministic" in line for line in launches)

    verdicts = _verdicts(output)
    assert status == 0, output
    assert _words(verdicts) == dict.fromkeys(ACCEPTANCE_SECTIONS, "PASS") | {
        "coordinates": "REPORTED", "workspace": "REPORTED", "deterministic": "EXPECTED",
        "reproducibility": "EXPECTED"}
    assert verdicts["deterministic"].startswith("EXPECTED (2 expected; a known limitation")
    assert verdicts["reproducibility"].startswith(
        "EXPECTED (deterministic backward: 1 expected; default backward: 1 of 1 differ")
    assert AGAIN in verdicts["deterministic"] and AGAIN in verdicts["reproducibility"]
    assert verdicts["overall"].startswith(
        "PASS (13 sections; 2 EXPECTED (deterministic, reproducibility): without "
        f"{LEVEL}=1 at start-up")
    assert f"{LEVEL} not set: deterministic=True runs on the reference" in output
    assert f"HINT: {LEVEL}=1 was not set at start-up" in output
    assert all(r["status"] == "expected" and LEVEL in r["reason"]
               for r in report["deterministic"])
    assert report["summary"]["failed_sections"] == []
    assert report["summary"]["expected_sections"] == ["deterministic", "reproducibility"]
    assert [p["seconds_each"] for p in report["estimate"]
            if p["phase"].startswith("deterministic")] == [0.05, 0.05]  # refused at once


@pytest.mark.parametrize("fault", ("wrong results", "not reproducible"))
def test_acceptance_fails_deterministic_faults_with_the_level(sim, kernels, ascend_kernel,
                                                               start_up_level, tmp_path,
                                                               monkeypatch, fault):
    """With the start-up level, the deterministic sections judge CANN's deterministic backward:
    results off by 1e-3 (the simulator's, from the deterministic phase on) fail it, as do two
    runs that differ; the overall verdict and the exit status fail, nothing is EXPECTED."""
    run_cases = _full.run_cases

    def faulty(cases, device, host_device, label="cases", level=1):
        if label == "deterministic":
            if fault == "wrong results":
                sim.lib.sim_set_wrong_results(b"aclnnGridSampler2DBackward", 1e-3)
            else:
                for module in (_cases, _checks):
                    monkeypatch.setattr(module, "identical", lambda first, second: False)
        return run_cases(cases, device, host_device, label, level)

    monkeypatch.setattr(_full, "run_cases", faulty)
    status, output, report, _ = _run_acceptance(sim, kernels, ascend_kernel, tmp_path,
                                                monkeypatch)
    verdicts = _verdicts(output)
    assert status == 1
    assert "EXPECTED" not in output
    assert verdicts["parity"] == "PASS (2 passed)"
    if fault == "wrong results":
        assert verdicts["deterministic"] == "FAIL (1 failed, 1 routed)"
        assert "bwd-both-det: grad_input: error" in output
        assert verdicts["overall"] == "FAIL (failed: deterministic)"
    else:
        assert verdicts["deterministic"] == "FAIL (1 failed, 1 routed; 1 not reproducible)"
        assert verdicts["reproducibility"].startswith("FAIL (deterministic backward: 1 failed")
        assert verdicts["overall"] == "FAIL (failed: deterministic, reproducibility)"
        assert f"HINT: with {LEVEL}=1 set at start-up, deterministic backwards still differ" \
            in output
    assert report["summary"]["failed_sections"] == verdicts["overall"][len(
        "FAIL (failed: "):-1].split(", ")


def test_acceptance_speed_verdict_reports_slow_aclnn(sim, kernels, ascend_kernel, start_up_level,
                                                     tmp_path, monkeypatch):
    """aclnn's median 1.5 times the reference's: the speed section says SLOW and names each
    timed program, the timing table marks them, and the overall verdict still passes (a finding
    to report, not a failure)."""
    status, output, report, _ = _run_acceptance(sim, kernels, ascend_kernel, tmp_path,
                                                monkeypatch,
                                                times={"native": 3.0, "reference": 2.0})
    verdicts = _verdicts(output)
    assert status == 0, output
    assert verdicts["speed"] == (
        "SLOW (aclnn's median more than 10% above the reference's on the same device in 2 of 2 "
        "timed programs: 2d float32 forward 3 ms vs 2 ms (1.50x), 2d float32 forward+backward "
        "3 ms vs 2 ms (1.50x); a finding to report, not a failure)")
    assert verdicts["timings"] == "PASS (results of the timed calls: 1 passed)"
    assert verdicts["overall"] == ("PASS (13 sections; speed SLOW: aclnn slower than the "
                                   "reference, a finding to report, not a failure)")
    assert len(re.findall(r"^2d float32 forward.*; SLOW$", output, re.M)) == 2
    assert report["summary"]["slow_sections"] == ["speed"]
    assert [f["slow"] for f in report["speed"]] == [True, True]


def test_acceptance_plugin_not_met_fails(sim, kernels, ascend_kernel):
    """A plugin whose platform JAX does not know: the plugin section fails, naming what is not
    met and what could not be checked."""
    platform = dataclasses.replace(_platform(sim, kernels, ascend_kernel),
                                   plugin_check=lambda: ascend_plugin_check.check(("ascend",)))
    report = _report.Report(None, io.StringIO(), {}, {})
    _full._plugin_section(platform, report)
    assert report.data["verdicts"]["plugin"] == (
        "VERDICT plugin: FAIL (not met: platform; not checked: registration, stream, CANN "
        "libraries, context, device, end-to-end)")
    assert report.words == {"plugin": "FAIL"}
    assert report["plugin"][0]["status"] == "FAIL"
    assert _report.overall_verdict(report.words, 1, "aclnn")[:2] == ("FAIL",
                                                                     "failed: plugin")


# --- the speed verdict, the self-check's and the estimate, without a run ----------------------

def _row(native: dict, reference: dict) -> dict:
    return dict(name="2d", dtype="float32", native=native, reference=reference)


def test_acceptance_speed_verdict_compares_medians_with_a_margin():
    """Within the margin (10%) is not slower; beyond it is; what did not run is not compared;
    nothing to compare is REPORTED."""
    rows = [_row({"forward": 2.1, "forward+backward": 2.3},
                 {"forward": 2.0, "forward+backward": 2.0}),
            _row({"forward": "routed", "forward+backward": 1.0},
                 {"forward": 2.0, "forward+backward": "an error"})]
    findings = _timings.speed_findings(rows)
    assert [(f["name"], f["slow"]) for f in findings] == [("2d float32 forward", False),
                                                          ("2d float32 forward+backward", True)]
    word, detail = _timings.speed_verdict(findings)
    assert word == "SLOW" and "in 1 of 2 timed programs: 2d float32 forward+backward" in detail
    assert _timings.speed_verdict(findings[:1])[0] == "PASS"
    assert _timings.speed_verdict([])[0] == "REPORTED"
    assert _timings.speed_verdict(_timings.speed_findings(rows, margin=0.2))[0] == "PASS"
    assert _timings.speed_verdict(findings, "CUDA")[1].startswith("CUDA's median more than")


def test_acceptance_self_check_deterministic_failure_is_expected_only_without_the_level():
    """A self-check whose deterministic part failed: EXPECTED without the start-up level (CANN's
    deterministic backward does not run without it), FAIL with it; a failure of the default
    part fails either way."""
    outcome = dict(device="cpu:0", compared=3, failure=None, deterministic_failure="differs")
    assert _checks.check_self_check(lambda: outcome, None)["status"] == "expected"
    assert _checks.check_self_check(lambda: dict(outcome, failure="x"), None)["status"] == "fail"
    assert _checks.check_self_check(lambda: outcome, 1)["status"] == "fail"


def _estimate(options: Options, level: int | None = 1, plan=ASCEND_PLAN) -> dict[str, dict]:
    return {p["phase"]: p for p in _report.estimate(options, level, plan)}


def _total(phases: dict[str, dict]) -> float:
    return sum(p["seconds"] for p in phases.values())


def test_acceptance_estimate_follows_the_case_counts():
    """Each phase's estimate is its count times the seconds stated per unit, the counts are the
    sections' own lists (default, --quick, --cases, the tiny shapes), fewer cases give a smaller
    estimate, and without the start-up level the deterministic phases cost only the refusal."""
    each = _report.SECONDS_EACH
    for argv in ([], ["--quick"], ["--cases", "2d-bilinear"], ["--no-timing"]):
        options = _options(*argv)
        cases = _cases.covered_cases(ASCEND_PLAN, options.quick, options.cases)
        routes = _cases.route_cases(ASCEND_PLAN, options.quick, options.cases)
        phases = _estimate(options)
        assert phases["parity"]["count"] == sum(not c["deterministic"] for c in cases)
        assert phases["routes"]["count"] == sum(not c["deterministic"] for c in routes)
        assert phases["deterministic"]["count"] == sum(bool(c["deterministic"])
                                                       for c in cases + routes)
        assert phases["timings"]["count"] == (0 if "--no-timing" in argv else 4)
        assert all(p["seconds"] == p["count"] * p["seconds_each"] for p in phases.values())
        assert phases["parity"]["seconds_each"] == each["parity"]
        assert phases["timings"]["seconds_each"] == pytest.approx(
            each["timings"] + 4 * (ASCEND_PLAN.timing_warmup + 10) * each["timed call"])
    default, quick = _estimate(_options()), _estimate(_options("--quick"))
    assert (default["parity"]["count"], default["deterministic"]["count"]) == (480, 370)
    assert (quick["parity"]["count"], quick["deterministic"]["count"]) == (30, 21)
    assert _total(quick) < _total(default)
    without = _estimate(_options(), level=None)
    assert without["deterministic"]["seconds_each"] == each["refused"]
    assert _total(without) == pytest.approx(_total(default) - 370 * (each["deterministic"]
                                                                     - each["refused"])
                                            - 3 * (each["deterministic collisions"]
                                                   - each["refused"]))

    phases = _estimate(TINY_OPTIONS, plan=TINY)
    assert {k: p["count"] for k, p in phases.items()} == {
        "self-check": 1, "parity": 2, "routes": 2, "chain": 1, "coordinates": 2, "empty": 1,
        "nan": 1, "default collisions": 1, "timings": 1, "torch_npu": 0, "deterministic": 2,
        "deterministic collisions": 1}
    assert _total(phases) < _total(_estimate(TINY_OPTIONS))
    out = io.StringIO()
    _report.print_estimate(list(phases.values()), out)
    assert re.search(r"^  parity\s+2 cases\s+x\s+1 s =\s+2 s$", out.getvalue(), re.M)
    assert out.getvalue().endswith(f"estimated run time: about {_total(phases) / 60:.0f} min "
                                   f"({_total(phases):.0f} s)\n")


def test_acceptance_estimate_is_the_one_documented():
    """docs/ascend.md's table of the estimate has the acceptance's counts and seconds per unit,
    for the default run and --quick, and its totals."""
    text = (ROOT / "docs" / "ascend.md").read_text()
    section = text[text.index("## Hardware acceptance"):]
    section = section[:section.index("\n## ", 1)]
    table = section[section.index("| phase |"):]
    table = table[:table.index("\n\n")]
    rows = dict(re.findall(r"^\| `([\w -]+)` \| (.+) \|$", table, re.M))
    default, quick = _estimate(_options()), _estimate(_options("--quick"))
    for phase, p in default.items():
        cells = [c.strip() for c in rows[phase].split("|")]
        assert cells[:3] == [str(p["count"]), str(quick[phase]["count"]),
                             f"{p['seconds_each']:g}"], (phase, cells)
    without = _estimate(_options(), level=None)
    without_quick = _estimate(_options("--quick"), level=None)
    for name, phases in (("default, with the level", default),
                         ("--quick, with the level", quick),
                         ("default, without it", without),
                         ("--quick, without it", without_quick)):
        assert f"{name}: {_total(phases):.0f} s" in section, name
    assert "python -m jax_gridsample --full" in section


# --- the checks one by one ---------------------------------------------------------------------

def test_acceptance_quick_covers_default_and_deterministic_backwards():
    for cases in (_cases.covered_cases(ASCEND_PLAN, quick=True),
                  _cases.route_cases(ASCEND_PLAN, quick=True)):
        kinds = {(c["op"], c["deterministic"]) for c in cases}
        assert kinds == {("forward", None), ("backward", False), ("backward", True)}
    assert {c["route"] for c in _cases.route_cases(ASCEND_PLAN)} == {
        "wide-c", "wide-c-3d", "large-plane", "large-volume", "batch-64", "batch-64-3d"}
    assert all(c["input_shape"][1] > _ascend.AICORE_MAX_CHANNELS
               for c in _cases.route_cases(ASCEND_PLAN, pattern="^wide-c"))


def test_acceptance_checks_catch_a_wrong_kernel(sim, ascend_kernel):
    """Results off by 1e-3: every case, the route cases, the chain and the timed calls fail;
    the exact coordinates report it (they are not judged); without the start-up level the
    deterministic backward is refused, which is EXPECTED."""
    cpu = jax.devices("cpu")[0]
    sim.lib.sim_set_wrong_results(b"", 1e-3)
    cases = _cases.covered_cases(TINY, quick=True) + _cases.route_cases(TINY, quick=True)
    cases = [c for c in cases if c["name"].endswith("-fwd") or c["route"]]
    results = {r["name"]: r["status"] for r in
               (_cases.check_case(case, cpu, cpu, level=None) for case in cases)}
    assert results == {"2d-bilinear-border-noac-float32-fwd": "fail",
                       "wide-c-2d-bilinear-zeros-noac-float32-fwd": "fail",
                       "wide-c-2d-bilinear-zeros-noac-float32-bwd-both-nondet": "fail",
                       "wide-c-2d-bilinear-zeros-noac-float32-bwd-both-det": "expected"}
    assert _checks.check_chain(cpu, cpu, TINY)["status"] == "fail"
    assert _timings.time_cases(cpu, cpu, TINY, repeats=1)[0]["check"]["status"] == "fail"
    coordinates = _checks.check_coordinates(cpu, cpu, TINY, quick=True)
    assert coordinates["status"] == "reported"
    assert all(c["differs"] for c in coordinates["checks"])


def test_acceptance_checks_catch_a_failing_call(sim, ascend_kernel):
    cpu = jax.devices("cpu")[0]
    for check, entry_point in (
            (lambda: _checks.check_chain(cpu, cpu, TINY), "aclnnGridSampler2DBackward"),
            (lambda: _checks.check_coordinates(cpu, cpu, TINY, quick=True),
             "aclnnGridSampler2D"),
            (lambda: _checks.check_collisions(cpu, cpu, False, TINY),
             "aclnnGridSampler2DBackward")):
        sim.fail_next(entry_point, 561000)
        result = check()
        assert result["status"] == "fail"
        assert f"{entry_point} failed with ACLNN_ERR_INNER (561000)" in result["checks"][0]["error"]


def test_acceptance_chain_reads_every_run_before_it_fails(sim, ascend_kernel, monkeypatch):
    """The chain's runs are dispatched together; one that fails is reported only after every
    run was read, so that none is still running into the next check (where it could take the
    failure that check asks the simulator for, or queue behind its calls)."""
    cpu = jax.devices("cpu")[0]
    device_get, read = jax.device_get, []
    monkeypatch.setattr(jax, "device_get", lambda x: read.append(x) or device_get(x))
    sim.fail_next("aclnnGridSampler2DBackward", 561000)
    assert _checks.check_chain(cpu, cpu, TINY)["status"] == "fail"
    assert len(read) == TINY.chain_runs > 1


def test_acceptance_empty_checks_see_a_result_nobody_wrote(sim, ascend_kernel):
    """The handler zeroes grad_input of a call without output points with aclrtMemsetAsync;
    the simulator makes the next one succeed without writing: the pre-filled result shows it."""
    cpu = jax.devices("cpu")[0]
    assert _checks.check_empty(cpu, cpu, ascend_kernel, TINY)["status"] == "pass"
    sim.fail_next("aclrtMemsetAsync", 0)
    result = _checks.check_empty(cpu, cpu, ascend_kernel, TINY)
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
    rows = [dict(input_shape=[1, 2, 3, 4], out_spatial=[2, 2], dtype="float32")]
    _timings.time_torch(rows, jax.devices("cpu")[0], "npu", repeats=1, warmup=0)
    match = re.fullmatch(r"not installed \(ImportError: torch_npu stand-in in process (\d+)\)",
                         rows[0]["torch"])
    assert match and int(match.group(1)) != os.getpid(), rows
    assert "torch_npu" not in sys.modules


def test_acceptance_without_an_npu(capsys):
    """Without an Ascend device: one line; exit status 0, or 1 where --platform asked for it."""
    assert _main.main(["--full"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no CUDA GPU or Ascend NPU visible to JAX") and out.count("\n") == 1
    assert _main.main(["--full", "--platform", "ascend"]) == 1
    assert capsys.readouterr().out == ("no Ascend NPU visible to JAX (platforms: cpu): nothing "
                                       "to check\n")


# --- the quick check's Ascend path ------------------------------------------------------------

QUICK_CASES = [c for c in _quick.quick_cases(("zeros", "constant", "wrap"))
               if c["name"] in ("2d-bicubic-zeros-noac", "3d-nearest-constant-ac",
                                "2d-bilinear-wrap-noac")]


def test_quick_check_on_aclnn(sim, kernels, ascend_kernel):
    """The quick check of the Ascend platform on the simulator: the plugin contract met, the
    cases aclnn takes run on it (their programs call its targets) and match the oracle, wrap
    routed to the reference; with aclnn's results off by 1e-3 it fails (the plugin check's
    end-to-end call and the cases alike)."""
    assert len(QUICK_CASES) == 3
    cpu = jax.devices("cpu")[0]
    platform = _platform(sim, kernels, ascend_kernel)
    result = _quick.check_platform(platform, cpu, cpu, QUICK_CASES)
    assert result["verdict"] == "PASS", result["line"]
    assert re.fullmatch(r"ascend: PASS \(2 cases on cpu:0, max scaled error \d\.\de-\d\d; 1 "
                        r"routed to the reference: 2d-bilinear-wrap-noac\)", result["line"])
    assert [v["status"] for v in result["plugin"]] == ["PASS"] * 7 + ["INFO"]
    routed = {r["name"]: r for r in result["cases"]}["2d-bilinear-wrap-noac"]
    assert routed["status"] == "routed" and "aclnn has no wrap padding" in routed["reason"]
    calls = [line.split()[0] for line in sim.log()]
    assert {"aclnnGridSampler2D", "aclnnGridSampler3DBackward"} <= set(calls)

    sim.lib.sim_set_wrong_results(b"", 1e-3)
    result = _quick.check_platform(platform, cpu, cpu, QUICK_CASES[1:2])
    assert result["verdict"] == "FAIL"
    assert result["line"].startswith("ascend: FAIL (plugin contract not met: end-to-end: "
                                      'implementation="native" differs from the float64 host')
    assert "; 1 of 1 cases failed, first 2d-bicubic-zeros-noac: output: error" in result["line"]


def test_quick_check_on_aclnn_needs_the_plugin_contract(sim, kernels, ascend_kernel):
    """The quick check fails a plugin that does not meet the contract, whatever the cases
    give."""
    cpu = jax.devices("cpu")[0]
    platform = dataclasses.replace(_platform(sim, kernels, ascend_kernel),
                                   plugin_check=lambda: ascend_plugin_check.check(("ascend",)))
    result = _quick.check_platform(platform, cpu, cpu, QUICK_CASES[1:2])
    assert result["verdict"] == "FAIL"
    assert result["detail"].startswith("plugin contract not met: platform: no Ascend platform "
                                       "known to JAX")
