"""``python -m jax_gridsample``, "does it work here?", on the CPU: the quick check passes with
the native CPU kernel and fails without it, on a wrong answer and when the native kernel did
not run; its JSON report; ``--full``'s paths without a GPU, and the hardware acceptance's
checks run on the CPU kernel (the CUDA platform's code path, without a GPU). The Ascend paths
run on the simulator in test_ascend_acceptance.py.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import subprocess
import sys
from types import MappingProxyType

import jax
import pytest

import jax_gridsample
from jax_gridsample import _native
from jax_gridsample._acceptance import _full, _main, _platforms, _quick, _timings
from jax_gridsample._acceptance._plan import CUDA_PLAN, Options

CPU_TARGETS = ("jax_gridsample_forward_v2", "jax_gridsample_backward_v3")
MACHINE_KEYS = {"versions", "cann", "cuda", "devices", "native_status", "cpu_instruction_set",
                "environment"}


def _command(*args: str, preamble: str = "") -> subprocess.CompletedProcess:
    """``python -m jax_gridsample ARGS`` in a process of its own, after ``preamble``."""
    code = (f"import runpy, sys\n{preamble}\nsys.argv = ['jax_gridsample', *{list(args)!r}]\n"
            "runpy.run_module('jax_gridsample', run_name='__main__', alter_sys=True)")
    # -I: not the source tree in the working directory (no compiled modules there) but the
    # installed package, as a user's command runs it
    return subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.skipif(not _native.cpu_available(), reason="the native CPU kernel is not built")
def test_quick_check_passes_on_the_cpu(tmp_path):
    """The versions, the devices, native_status() and one verdict line per platform present
    (here the CPU: every case run on its kernel), exit status 0, and the JSON report."""
    path = tmp_path / "report.json"
    proc = _command("--json", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"jax_gridsample {jax_gridsample.__version__}: does it work here?"
    assert lines[1].startswith(f"versions: jax_gridsample {jax_gridsample.__version__}, jax "
                               f"{jax.__version__}, jaxlib ")
    assert any(line.startswith("CANN: ") for line in lines)
    assert any(line.startswith("CUDA: ") for line in lines)
    assert any(line.startswith("devices: cpu: ") for line in lines)
    assert "  cpu: available (instruction set " in proc.stdout
    verdicts = [line for line in lines if re.match(r"(cpu|cuda|ascend): ", line)]
    assert len(verdicts) == 1, proc.stdout
    assert re.fullmatch(r"cpu: PASS \(25 cases on cpu:0, max scaled error \d\.\de-\d\d\)",
                        verdicts[0])
    assert re.fullmatch(r"overall: PASS \(cpu: PASS\) in [\d.]+ s", lines[-1])

    report = json.loads(path.read_text())
    assert {"command", "machine", "platforms", "verdict", "exit_status", "seconds"} <= set(report)
    assert MACHINE_KEYS <= set(report["machine"])
    assert report["machine"]["versions"]["jax"] == jax.__version__
    assert report["machine"]["native_status"]["cpu"] == "available"
    assert (report["verdict"], report["exit_status"]) == ("PASS", 0)
    assert list(report["platforms"]) == ["cpu"]
    cpu = report["platforms"]["cpu"]
    assert (cpu["verdict"], cpu["line"]) == ("PASS", verdicts[0])
    cases = cpu["cases"]
    assert {(c["dim"], c["mode"]) for c in cases} == {
        (2, "bilinear"), (2, "nearest"), (2, "bicubic"), (3, "bilinear"), (3, "nearest")}
    assert {c["padding"] for c in cases} == {"zeros", "border", "reflection", "constant", "wrap"}
    assert {c["align_corners"] for c in cases} == {False, True}
    assert all(c["status"] == "pass" and set(c["errors"]) == {"output", "grad_input",
                                                               "grad_grid"} for c in cases)


def test_quick_check_fails_without_the_cpu_kernel():
    """With the compiled CPU module missing, "auto" would run the reference and every call
    would work, but the check says the native kernel is unavailable and fails; the JSON report
    goes to standard output and the text to standard error."""
    proc = _command("--json", "-",
                    preamble="sys.modules['jax_gridsample._cpu_kernels'] = None")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    cpu = report["platforms"]["cpu"]
    assert cpu["verdict"] == "FAIL" and report["verdict"] == "FAIL"
    assert cpu["line"].startswith("cpu: FAIL (native kernel unavailable: the compiled module "
                                  "jax_gridsample._cpu_kernels could not be imported")
    assert cpu["line"] in proc.stderr.splitlines()
    assert report["machine"]["native_status"]["cpu"] != "available"


@pytest.fixture
def cpu():
    if not _native.cpu_available():
        pytest.skip("the native CPU kernel is not built")
    return jax.devices("cpu")[0]


CASES = [c for c in _quick.quick_cases(("zeros", "wrap")) if c["mode"] == "bilinear"]


def test_quick_check_fails_on_a_wrong_answer(cpu):
    """A native call whose results are off by 0.1%: every case fails, naming the output."""
    def wrong(x, g, **kw):
        return jax_gridsample.grid_sample(x, g, **kw) * 1.001

    result = _quick.check_platform(_platforms.cpu(), cpu, cpu, CASES, sample=wrong)
    assert result["verdict"] == "FAIL"
    assert result["line"].startswith(f"cpu: FAIL ({len(CASES)} of {len(CASES)} cases failed, "
                                     f"first {CASES[0]['name']}: output: error 0.001 > "
                                     "tolerance 1e-05; grad_input: error 0.001")
    assert _quick.check_platform(_platforms.cpu(), cpu, cpu, CASES)["verdict"] == "PASS"


def test_quick_check_fails_when_the_native_kernel_did_not_run(cpu):
    """Calls that give the right answer on the reference do not pass: the program must call
    the platform's FFI targets."""
    def on_the_reference(x, g, **kw):
        return jax_gridsample.grid_sample(x, g, **dict(kw, implementation="reference"))

    result = _quick.check_platform(_platforms.cpu(), cpu, cpu, CASES[:1],
                                   sample=on_the_reference)
    assert result["verdict"] == "FAIL"
    assert (f"first {CASES[0]['name']}: the native kernel did not run: the jitted program "
            f"calls no {', '.join(CPU_TARGETS)}") in result["line"]
    assert _platforms.cpu().targets == CPU_TARGETS


def test_quick_check_says_a_native_kernel_is_unavailable(cpu):
    """A platform whose native module did not load fails at once, with native_status()'s
    reason."""
    platform = dataclasses.replace(_platforms.cuda(), available=lambda: False)
    result = _quick.check_platform(platform, cpu, cpu)
    assert result == dict(result, verdict="FAIL", cases=[])
    assert result["detail"] == (f"native kernel unavailable: "
                                f"{jax_gridsample.native_status()['cuda']}; \"auto\" would run "
                                "the jnp reference")


def test_command_line(capsys):
    """--help documents --json and --full; --full's options without it are refused; without a
    GPU or NPU --full says so in one line: exit status 0, or 1 where --platform asked for one."""
    with pytest.raises(SystemExit) as exit_:
        _main.main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "--json PATH" in text and "--full" in text and "exit status:" in text
    with pytest.raises(SystemExit) as exit_:
        _main.main(["--quick"])
    assert exit_.value.code == 2
    assert "--quick go with --full" in capsys.readouterr().err
    assert _main.main(["--full"]) == 0
    assert capsys.readouterr().out == ("no CUDA GPU or Ascend NPU visible to JAX (platforms: "
                                       "cpu): nothing to check\n")
    assert _main.main(["--full", "--platform", "cuda", "--no-torch"]) == 1
    assert capsys.readouterr().out == ("no CUDA GPU visible to JAX (platforms: cpu): nothing "
                                       "to check\n")


def test_cuda_hidden_from_jax_fails(monkeypatch):
    """Where our CUDA module sees a GPU that JAX does not (no CUDA plugin), the quick check
    says so and fails; JAX_PLATFORMS leaving it out makes it SKIPPED."""
    class Module:
        @staticmethod
        def device_count() -> int:
            return 2

    monkeypatch.setattr(_native, "cuda_status", lambda: "available")
    monkeypatch.setattr(_native, "_CUDA_MODULE", Module)
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    result = _main._absent(_platforms.cuda())
    assert result["verdict"] == "FAIL"
    assert result["line"].startswith("cuda: FAIL (the CUDA runtime sees 2 GPU(s), but JAX has no "
                                     "CUDA backend")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert _main._absent(_platforms.cuda())["line"] == (
        "cuda: SKIPPED (the CUDA runtime sees 2 GPU(s), but JAX_PLATFORMS=cpu leaves them out)")


# --- the hardware acceptance on the CPU kernel --------------------------------------------------

SECTIONS = ["plugin", "self-check", "parity", "routes", "chain", "coordinates", "empty", "nan",
            "timings", "speed", "deterministic", "reproducibility", "workspace", "overall"]
TINY = dataclasses.replace(
    CUDA_PLAN, modes=MappingProxyType({2: ("bicubic",), 3: ("bilinear",)}),
    paddings=("constant", "wrap"),
    route_shapes=(("wide-c", (1, 9, 2, 3), (1, 2, 2, 2), "bilinear", "zeros", False,
                   ("float32",)),),
    chain_shapes=(("2d", (2, 3, 6, 7), (2, 5, 4, 2), (2, 3, 4, 2), "bilinear", "reflection",
                   False),),
    chain_runs=2, collision_shapes=(("2d", (1, 2, 2, 2), (1, 24, 24, 2), "float32"),),
    empty_cases=CUDA_PLAN.empty_cases[::3], empty_dtypes=("float32",),
    timing_shapes=(("2d", (1, 2, 7, 9), (4, 5)),), timing_dtypes=("float32",), timing_warmup=0)


def test_full_acceptance_on_the_cpu_kernel(cpu, tmp_path, monkeypatch):
    """The hardware acceptance's sections as they run on a CUDA GPU (our kernels: no plugin,
    self-check or workspace cache; deterministic=True always runs on the kernel), on the CPU
    kernel with tiny shapes, "constant" and "wrap" padding, tricubic: every judged section
    passes, the empty checks call the CPU backward target (its fill operand) directly."""
    platform = dataclasses.replace(_platforms.cpu(), plan=TINY)
    # The medians, so that the speed verdict does not depend on this machine's load (the calls
    # still run and are checked): the kernel faster than the reference.
    measure = _timings.time_jax

    def fixed(device, x, g, implementation, repeats, warmup):
        measured, results = measure(device, x, g, implementation, repeats, warmup)
        ms = {"native": 1.0, "reference": 2.0}[implementation]
        return {key: ms if isinstance(v, float) else v for key, v in measured.items()}, results

    monkeypatch.setattr(_timings, "time_jax", fixed)
    out = io.StringIO()
    options = Options(json=str(tmp_path / "report.json"), quick=True, repeats=1, torch=False)
    status, report = _full.run_acceptance(platform, cpu, cpu, options, out)
    output = out.getvalue()
    lines = re.findall(r"^VERDICT ([\w-]+): (\w+) \((.*)\)$", output, re.M)
    assert [s for s, _, _ in lines] == SECTIONS, output
    words = {s: w for s, w, _ in lines}
    assert status == 0, output
    assert words == dict.fromkeys(SECTIONS, "PASS") | {
        "plugin": "SKIPPED", "self-check": "SKIPPED", "coordinates": "REPORTED",
        "workspace": "SKIPPED"}
    details = {s: d for s, _, d in lines}
    assert details["self-check"] == "none on CPUs: \"auto\" runs the native kernel there"
    assert details["parity"] == "8 passed"  # 2 dims x 2 paddings x (forward, backward)
    assert details["deterministic"] == "5 passed"
    assert details["empty"] == "2 passed"
    assert json.loads((tmp_path / "report.json").read_text())["verdicts"] == report["verdicts"]
    assert [p["phase"] for p in report["estimate"]][:2] == ["self-check", "parity"]
    assert report["estimate"][0]["count"] == 0  # no self-check on this platform
