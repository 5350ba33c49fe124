"""``python -m jax_gridsample``: does jax_gridsample work here? (the command line)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import jax

from .. import _native
from . import _environment, _quick
from ._full import run_acceptance
from ._plan import Options
from ._platforms import Platform, all_platforms, backend_devices, jax_platforms
from ._report import write_json

DESCRIPTION = """\
Does jax_gridsample work here? Prints the versions (jax_gridsample, jax, jaxlib, numpy, Python),
the CANN and CUDA toolkits found, JAX's devices and native_status(), then for every platform JAX
has a device of (CPU, CUDA GPU, Ascend NPU) a short parity check of the native kernels
(implementation="native", whose jitted program must call the platform's own kernels) against
the float64 host oracle (the jnp reference in float64 on the CPU): forward and both gradients,
2D and 3D, every mode and every padding the kernel takes; on an Ascend NPU also the PJRT
plugin's contract (python -m jax_gridsample.ascend_plugin_check). One verdict line per
platform: "<platform>: PASS (...)", "FAIL (...)" or "SKIPPED (...)". Paste the output into a
bug report.

--full runs the complete hardware acceptance of each CUDA GPU or Ascend NPU platform instead
(minutes to half an hour; it prints its estimate first): parity tables of every dtype and output
mask, large shapes, a jitted chain, exact and NaN coordinates, empty tensors, reproducibility,
timings against the reference and torch (torch_npu on Ascend), with a VERDICT line per section
and an overall one. See docs/ascend.md, "Hardware acceptance"."""

EPILOG = """\
exit status: 0 when a platform passed and none failed (a platform JAX_PLATFORMS leaves out is
SKIPPED), 1 otherwise. --full: 0 when no section failed (EXPECTED, SLOW and SKIPPED sections
fail nothing), 1 otherwise; without a GPU or NPU it says so and exits 0, or 1 when --platform
asked for the missing one."""

FULL_ONLY = ("platform", "quick", "cases", "repeats", "no_timing", "no_torch")


def parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    p = argparse.ArgumentParser(prog="python -m jax_gridsample", description=DESCRIPTION,
                                epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", metavar="PATH",
                   help="write a machine-readable report to PATH ('-': to standard output, the "
                        "text then going to standard error). With --full the report is "
                        "written after each section; its default there is "
                        "<platform>_acceptance.json")
    p.add_argument("--full", action="store_true",
                   help="run the complete hardware acceptance of each CUDA GPU or Ascend NPU")
    full = p.add_argument_group("with --full")
    full.add_argument("--platform", choices=("all", "cuda", "ascend"), default=None,
                      help="the platform to check (default: all present)")
    full.add_argument("--quick", action="store_true",
                      help="a shorter acceptance: float32 parity cases, one align_corners per "
                           "mode x padding x dimension")
    full.add_argument("--cases", metavar="REGEX",
                      help="only the parity and route cases whose name matches, e.g. "
                           "'2d-bilinear.*float16'")
    full.add_argument("--repeats", type=int, default=None, help="timed calls per median (10)")
    full.add_argument("--no-timing", action="store_true", help="skip the timings")
    full.add_argument("--no-torch", action="store_true", help="skip torch's timings")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (default ``sys.argv[1:]``); returns the exit status.
    Enables ``jax_enable_x64`` (the host oracle computes in float64)."""
    p = parser()
    args = p.parse_args(argv)
    if not args.full:
        given = [f"--{name.replace('_', '-')}" for name in FULL_ONLY
                 if getattr(args, name) not in (None, False)]
        if given:
            p.error(f"{', '.join(given)} go with --full")
    jax.config.update("jax_enable_x64", True)
    out = sys.stderr if args.json == "-" else sys.stdout
    return _full(args, out) if args.full else _quick_check(args, out)


# --- the quick check ---------------------------------------------------------------------------

def _print_machine(machine: dict[str, Any], out: TextIO) -> None:
    v = machine["versions"]
    print(f"jax_gridsample {v['jax_gridsample']}: does it work here?", file=out)
    print(f"versions: jax_gridsample {v['jax_gridsample']}, jax {v['jax']}, jaxlib "
          f"{v['jaxlib']}, numpy {v['numpy']}, Python {v['python']} "
          f"({v['python_implementation']}) on {v['system']}", file=out)
    others = ", ".join(f"{k} {d}" for k, d in v["distributions"].items())
    print(f"related distributions: {others or 'none'}", file=out)
    print(f"CANN: {_environment.cann_line(machine['cann'])}", file=out)
    print(f"CUDA: {_environment.cuda_line(machine['cuda'])}", file=out)
    devices = "; ".join(f"{name}: {', '.join(found)}" for name, found in
                        machine["devices"].items())
    print(f"devices: {devices or 'none'}", file=out)
    if machine["environment"]:
        print("environment: " + ", ".join(f"{k}={val}" for k, val in
                                          machine["environment"].items()), file=out)
    print("native_status():", file=out)
    for name, status in machine["native_status"].items():
        isa = machine["cpu_instruction_set"]
        extra = f" (instruction set {isa})" if name == "cpu" and isinstance(isa, str) else ""
        print(f"  {name}: {status}{extra}", file=out)


def _absent(platform: Platform) -> dict | None:
    """The report of a platform without JAX devices whose hardware is there all the same (the
    CUDA runtime sees a GPU JAX does not), or None."""
    if platform.name != "cuda" or _native.cuda_status() != "available":
        return None
    count = _environment.call(_native._CUDA_MODULE.device_count)
    chosen = os.environ.get("JAX_PLATFORMS", "")
    if chosen and not {"cuda", "gpu"} & {p.strip().lower() for p in chosen.split(",")}:
        return _quick.unchecked(platform, "SKIPPED", f"the CUDA runtime sees {count} GPU(s), "
                                                     f"but JAX_PLATFORMS={chosen} leaves them out")
    reason = (f"the CUDA runtime sees {count} GPU(s), but JAX has no CUDA backend (platforms: "
              f"{', '.join(jax_platforms())}): install JAX's CUDA plugin (pip install "
              "'jax[cuda12]' or 'jax[cuda13]')")
    return _quick.unchecked(platform, "FAIL", reason)


def _quick_check(args: argparse.Namespace, out: TextIO) -> int:
    started = time.perf_counter()
    machine = _environment.machine()
    _print_machine(machine, out)
    print("\nparity: implementation=\"native\" against the float64 host oracle (the jnp "
          "reference in float64 on the CPU); forward, input and grid gradients; 2D and 3D; "
          "every mode and padding the kernel takes", file=out, flush=True)
    hosts = backend_devices("cpu")
    results = {}
    for platform in all_platforms():
        devices = platform.devices()
        if not devices:
            result = _absent(platform)
        elif not hosts:
            result = _quick.unchecked(platform, "SKIPPED", "JAX has no CPU backend for the "
                                      "float64 host oracle: run with JAX_PLATFORMS unset or "
                                      "including cpu")
        else:
            result = _quick.check_platform(platform, devices[0], hosts[0])
        if result is not None:
            results[platform.name] = result
            print(result["line"], file=out, flush=True)
    words = {name: r["verdict"] for name, r in results.items()}
    passed = [n for n, w in words.items() if w == "PASS"]
    status = 0 if passed and "FAIL" not in words.values() else 1
    word = "PASS" if status == 0 else "FAIL"
    seconds = time.perf_counter() - started
    summary = ", ".join(f"{n}: {w}" for n, w in words.items()) or "no platform checked"
    print(f"overall: {word} ({summary}) in {seconds:.1f} s", file=out, flush=True)
    if args.json:
        report = dict(command="python -m jax_gridsample", machine=machine, platforms=results,
                      verdict=word, exit_status=status, seconds=seconds)
        _emit(args.json, report)
    return status


def _emit(path: str, report: dict) -> None:
    if path == "-":
        json.dump(report, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        write_json(path, report)


# --- the hardware acceptance -----------------------------------------------------------------

def options_of(args: argparse.Namespace, json_path: str | None) -> Options:
    """The hardware acceptance's options from the command line's arguments."""
    return Options(json=json_path, quick=args.quick, cases=args.cases,
                   repeats=Options.repeats if args.repeats is None else args.repeats,
                   timing=not args.no_timing, torch=not args.no_torch)


def _report_path(args: argparse.Namespace, platform: Platform, several: bool) -> str | None:
    if args.json == "-":
        return None
    if args.json is None:
        return f"{platform.name}_acceptance.json"
    if not several:
        return args.json
    path = Path(args.json)
    return str(path.with_name(f"{path.stem}-{platform.name}{path.suffix}"))


def _full(args: argparse.Namespace, out: TextIO) -> int:
    wanted = args.platform or "all"
    platforms = [p for p in all_platforms() if p.name != "cpu" and wanted in ("all", p.name)]
    present = [(p, devices[0]) for p in platforms if (devices := p.devices())]
    if not present:
        labels = " or ".join(p.label for p in platforms)
        print(f"no {labels} visible to JAX (platforms: {', '.join(jax_platforms()) or 'none'}): "
              "nothing to check", file=out)
        return 0 if wanted == "all" else 1
    hosts = backend_devices("cpu")
    if not hosts:
        print("JAX has no CPU backend, which the float64 host reference needs: run with "
              "JAX_PLATFORMS unset or including cpu", file=out)
        return 1
    status, reports = 0, {}
    for platform, device in present:
        options = options_of(args, _report_path(args, platform, len(present) > 1))
        code, reports[platform.name] = run_acceptance(platform, device, hosts[0], options, out)
        status = max(status, code)
    if args.json == "-":
        _emit("-", reports)
    return status
