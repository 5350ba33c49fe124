"""How the hardware acceptance reports: its tables, its verdict lines, the JSON report written
after each section, and the run-time estimate printed before it starts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import Any, TextIO

from .._ascend import DETERMINISTIC_ENV_VAR
from ._cases import covered_cases, not_reproducible, route_cases
from ._data import TOLERANCES
from ._plan import Options, Plan
from ._timings import slower

EXPECTED_DETERMINISM = (
    f"a known limitation: CANN's deterministic backward runs only in a process started with "
    f"{DETERMINISTIC_ENV_VAR}=1, and without it deterministic=True runs on the reference; start "
    f"Python with {DETERMINISTIC_ENV_VAR}=1 and run `python -m jax_gridsample --full` again to "
    "check it")

# The run-time estimate: seconds per unit of each phase, compiling included (every case is a
# few small programs compiled for the device and the host), times how many units the phase has
# (:func:`estimate`). Assumed, not yet measured on an NPU: the report records each phase's
# actual seconds next to its estimate, so that a run can correct them.
SECONDS_EACH = MappingProxyType({
    "self-check": 30.0,  # the run: about 30 small aclnn and reference programs
    "parity": 1.0,  # per case: the native program, the device reference's and the host's
    "routes": 4.0,  # per case: the same on large shapes
    "chain": 15.0,  # per shape: two jitted chains (native, host reference), each run's
    "coordinates": 2.0,  # per grid: forward and backward, native and host reference
    "empty": 3.0,  # per case and dtype: three direct calls and the API's forward and backward
    "nan": 2.0,  # per grid: forward and backward, native and host reference
    "default collisions": 3.0,  # per shape: one program run twice, the host reference
    "timings": 10.0,  # per row: four programs compiled, the host reference of two
    "timed call": 0.02,  # per timed or warm-up call of those four programs
    "torch": 20.0,  # per row, in its own process (importing torch or torch_npu included)
    "deterministic": 1.5,  # per case: as a parity case, the native one run twice
    "deterministic collisions": 3.0,  # per shape
    "refused": 0.05,  # per deterministic call "native" refuses without the start-up level
})


def fmt(v: Any) -> str:
    """A number as the tables print it ("-" for None)."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2g}" if v < 1e-2 or v >= 1e3 else f"{v:.3g}"
    return str(v)


def print_parity_table(results: Sequence[dict], out: TextIO) -> None:
    """One row per (route,) dimension x mode x forward/backward x dtype: counts and largest
    errors; then every failed case and the routed combinations."""
    rows: dict[tuple, list[dict]] = {}
    for r in results:
        key = (r.get("route") or "", r["dim"], r["mode"],
               "fwd" if r["op"] == "forward" else "bwd", r["dtype"])
        rows.setdefault(key, []).append(r)
    print(f"{'case':<38}{'pass':>5}{'fail':>5}{'routed':>7}{'expected':>9}{'vs host f64':>13}"
          f"{'vs dev ref':>12}{'tol':>8}  result", file=out)
    for (route, dim, mode, op, dtype), grouped in rows.items():
        counts = {s: sum(r["status"] == s for r in grouped)
                  for s in ("pass", "fail", "routed", "expected")}
        host = [r["max_error_host"] for r in grouped if r.get("max_error_host") is not None]
        ref = [r["max_error_reference"] for r in grouped
               if r.get("max_error_reference") is not None]
        verdict = next(word for status, word in (("fail", "FAIL"), ("pass", "pass"),
                                                 ("expected", "expected"), ("routed", "routed"))
                       if counts[status] or status == "routed")
        label = f"{route} {dim}d {mode} {op} {dtype}".strip()
        print(f"{label:<38}{counts['pass']:>5}{counts['fail']:>5}{counts['routed']:>7}"
              f"{counts['expected']:>9}{fmt(max(host, default=None)):>13}"
              f"{fmt(max(ref, default=None)):>12}{TOLERANCES[dtype]:>8g}  {verdict}", file=out)
    failed = [r for r in results if r["status"] == "fail"]
    for r in failed[:40]:
        why = r.get("error") or "; ".join(r["problems"])
        print(f"FAIL {r['name']}: {why[:300]}", file=out)
    if len(failed) > 40:
        print(f"... and {len(failed) - 40} more failures (see the JSON file)", file=out)
    for status, label in (("routed", "routed to reference"),
                          ("expected", "expected (no start-up determinism)")):
        grouped_by: dict[str, list[dict]] = {}
        for r in results:
            if r["status"] == status:
                prefix = f"{r['route']} " if r.get("route") else ""
                grouped_by.setdefault(f"{prefix}{r['dim']}d {r['mode']} {r['op']}", []).append(r)
        for key, grouped in grouped_by.items():
            dtypes = sorted({r["dtype"] for r in grouped})
            reasons = sorted({r["reason"][:200] for r in grouped})
            print(f"{label}: {key}, {len(grouped)} cases ({', '.join(dtypes)}): "
                  f"{' | '.join(reasons)}", file=out)


def print_checks(result: dict, out: TextIO) -> None:
    """The checks of a section (empty, NaN, chain, coordinates): one line each."""
    for c in result["checks"]:
        detail = c.get("error") or "; ".join(c.get("problems", [])) or c.get("reason", "")
        report = "; ".join(f"{k}: {fmt(v)}" for k, v in c.get("report", {}).items())
        print(f"  {c['status']:<8} {c['name']} {c.get('dtype', '')} {detail} {report}".rstrip(),
              file=out)


def print_collisions(result: dict, out: TextIO) -> None:
    """The reproducibility checks: one line each."""
    for c in result["checks"]:
        kind = "deterministic" if c["deterministic"] else "default"
        if "identical" in c:
            same = "same bits twice" if c["identical"] else \
                f"differs between two runs (max difference {fmt(c['max_difference'])})"
            errors = ", ".join(f"{k} error {fmt(v)}" for k, v in c["errors"].items())
            detail = f"{same}; {errors}"
        else:
            detail = c.get("error") or c.get("reason", "")
        print(f"  {c['status']:<8} {kind} backward, {c['name']} {c['dtype']}: {detail[:400]}",
              file=out)


def _cell(v: Any) -> str:
    return fmt(v) if isinstance(v, float) else str(v)[:13]


def _ratio(v: Any, base: Any) -> str:
    ok = isinstance(v, float) and isinstance(base, float) and base > 0
    return f"{v / base:.2f}" if ok else "-"


def print_timing_table(rows: Sequence[dict], out: TextIO, kernel: str = "aclnn",
                       torch_label: str = "torch_npu") -> None:
    """Median ms per implementation, how many times slower the others are than the native
    kernel (``kernel``: its name), and whether its results matched (SLOW: above the reference
    by more than the margin)."""
    print(f"{'timing (median ms)':<30}{kernel:>9}{'reference':>11}{f'ref/{kernel}':>11}"
          f"{torch_label:>15}{f'torch/{kernel}':>13}  result", file=out)
    for row in rows:
        for key in ("forward", "forward+backward"):
            native = row["native"].get(key)
            ref = row["reference"].get(key)
            torch = row["torch"] if isinstance(row["torch"], str) else row["torch"].get(key)
            torch = "not installed" if isinstance(torch, str) and \
                torch.startswith("not installed") else torch
            errors = [e for k, e in row["check"]["errors"].items() if k.startswith(key + " ")]
            result = "routed" if not errors else \
                f"{'pass' if max(errors) <= TOLERANCES[row['dtype']] else 'FAIL'} (error " \
                f"{fmt(max(errors))})"
            label = f"{row['name']} {row['dtype']} {key}"
            slow = "; SLOW" if slower(native, ref) else ""
            print(f"{label:<30}{_cell(native):>9}{_cell(ref):>11}{_ratio(ref, native):>11}"
                  f"{_cell(torch):>15}{_ratio(torch, native):>13}  {result}{slow}", file=out)
    torch_notes = {row["torch"] for row in rows if isinstance(row["torch"], str)}
    for note in sorted(torch_notes):
        print(f"  {torch_label}: {note[:300]}", file=out)
    for row in rows:
        for problem in row["check"]["problems"]:
            print(f"  FAIL {row['name']} {row['dtype']}: {problem[:300]}", file=out)
        for impl in ("reference", "torch"):
            times = row[impl]
            for text in times.values() if isinstance(times, dict) else []:
                if isinstance(text, str) and text != "routed":
                    print(f"  {row['name']} {row['dtype']} {impl}: {text[:300]}", file=out)


def counts(results: Iterable[dict]) -> dict[str, int]:
    """How many results have each status."""
    found: dict[str, int] = {}
    for r in results:
        found[r["status"]] = found.get(r["status"], 0) + 1
    return found


def cases_verdict(results: Sequence[dict], why: bool = True) -> tuple[str, str]:
    """PASS/FAIL/EXPECTED/ROUTED and "n passed, m failed, k routed, j expected" for a list of
    case results; EXPECTED when nothing ran or failed but some were the known determinism
    limitation (``why``: its one-line reason appended)."""
    found = counts(results)
    word = next((w for s, w in (("fail", "FAIL"), ("pass", "PASS"), ("expected", "EXPECTED"))
                 if found.get(s)), "ROUTED")
    detail = ", ".join(f"{found[s]} {label}" for s, label in (
        ("pass", "passed"), ("fail", "failed"), ("routed", "routed"), ("expected", "expected"))
        if found.get(s))
    differing = not_reproducible(results)
    if differing:
        detail += f"; {len(differing)} not reproducible"
    if why and found.get("expected"):
        detail += f"; {EXPECTED_DETERMINISM}"
    return word, detail or "no cases"


def checks_verdict(result: dict, why: bool = True) -> tuple[str, str]:
    """:func:`cases_verdict` of a section's checks."""
    return cases_verdict(result["checks"], why)


def determinism_hint(level: int | None) -> str:
    """What to tell a user whose deterministic backwards did not run on aclnn (no start-up
    level) or, with the level, gave different bits twice."""
    if level:
        return (f"HINT: with {DETERMINISTIC_ENV_VAR}={level} set at start-up, deterministic "
                "backwards still differ between two runs: CANN did not honour its own "
                "determinism option here; please send us this report.")
    return (f"HINT: {DETERMINISTIC_ENV_VAR}=1 was not set at start-up, so CANN's deterministic "
            "backward was not checked: deterministic=True ran on the reference (\"auto\") or "
            "was refused (\"native\"), as documented. To check it, start Python with "
            f"{DETERMINISTIC_ENV_VAR}=1 and run `python -m jax_gridsample --full` again (every "
            "aclnn backward of that process is then deterministic).")


def workspace_delta(before: Any, after: Any) -> dict | None:
    """The calls of this run by workspace path (``_ascend.workspace_paths()``'s counts, less
    those before it), and the cache's buffers now."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    delta = {k: after[k] - before[k] for k in ("stream_cache", "none")}
    return dict(delta, cached_buffers=after["cached_buffers"], cached_bytes=after["cached_bytes"])


def workspace_verdict(paths: dict | None) -> tuple[str, str]:
    """The workspace section's verdict: what the counters say (reported, not judged)."""
    if paths is None:
        return "REPORTED", "unknown: the Ascend handlers are not built"
    return "REPORTED", (f"the per-stream cache for {paths['stream_cache']} calls "
                        f"({paths['cached_buffers']} buffers, "
                        f"{paths['cached_bytes'] / 2**20:.1f} MiB), no workspace for "
                        f"{paths['none']}")


# --- the run-time estimate -------------------------------------------------------------------

def estimate(options: Options, level: int | None, plan: Plan, self_check: bool = True,
             torch_label: str | None = "torch_npu") -> list[dict]:
    """The phases of a run with ``options``, in order, each with how many units it runs (cases,
    grids, shapes, timing rows: counted from the same lists the sections run), the seconds
    assumed per unit (:data:`SECONDS_EACH`; a timing row adds its timed calls) and their
    product. Without the start-up ``level`` the deterministic phases cost "refused" per unit:
    "native" refuses those calls at once. ``self_check``: whether the platform has one;
    ``torch_label``: the torch phase's name (None: torch is not timed there)."""
    cases = covered_cases(plan, options.quick, options.cases)
    routes = route_cases(plan, options.quick, options.cases)
    rows = len(plan.timing_shapes) * len(plan.timing_dtypes) if options.timing else 0
    calls = 4 * (plan.timing_warmup + options.repeats)  # per row: 2 programs, native and ref
    each = SECONDS_EACH
    refused = "" if level else "refused without the start-up level"
    phases = [
        ("self-check", int(self_check), "run", each["self-check"], ""),
        ("parity", sum(not c["deterministic"] for c in cases), "cases", each["parity"], ""),
        ("routes", sum(not c["deterministic"] for c in routes), "cases", each["routes"], ""),
        ("chain", len(plan.chain_shapes), "shapes", each["chain"], ""),
        ("coordinates", 2 * len(plan.combinations(options.quick)), "grids",
         each["coordinates"], ""),
        ("empty", len(plan.empty_cases) * len(plan.empty_dtypes), "cases", each["empty"], ""),
        ("nan", sum(len(modes) for modes in plan.modes.values()) * len(plan.paddings), "grids",
         each["nan"], ""),
        ("default collisions", len(plan.collision_shapes), "shapes",
         each["default collisions"], ""),
        ("timings", rows, "rows", each["timings"] + calls * each["timed call"],
         f"{each['timings']:g} s + {calls} timed calls x {each['timed call']:g} s"),
    ]
    if torch_label is not None:
        phases.append((torch_label, rows if options.torch else 0, "rows", each["torch"], ""))
    phases += [
        ("deterministic", sum(bool(c["deterministic"]) for c in cases + routes), "cases",
         each["deterministic" if level else "refused"], refused),
        ("deterministic collisions", len(plan.collision_shapes), "shapes",
         each["deterministic collisions" if level else "refused"], refused),
    ]
    return [dict(phase=phase, count=count, unit=unit, seconds_each=seconds_each,
                 seconds=count * seconds_each, basis=basis)
            for phase, count, unit, seconds_each, basis in phases]


def print_estimate(phases: Sequence[dict], out: TextIO) -> None:
    """The estimate, one line per phase (count x seconds each = seconds), then the total."""
    print("run-time estimate: count x assumed seconds each (compiling included):", file=out)
    for p in phases:
        basis = f"  ({p['basis']})" if p["basis"] else ""
        print(f"  {p['phase']:<26}{p['count']:>5} {p['unit']:<6} x {p['seconds_each']:>6.3g} s "
              f"= {p['seconds']:>6.0f} s{basis}", file=out)
    total = sum(p["seconds"] for p in phases)
    print(f"estimated run time: about {total / 60:.0f} min ({total:.0f} s)", file=out, flush=True)


# --- the JSON report and the verdict lines ---------------------------------------------------

def write_json(path: str, report: dict) -> None:
    """The report as JSON (what is not JSON as its str)."""
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=str)


class Report:
    """The JSON report, written after each section (to ``path``; None: kept in memory), and
    the verdict lines, printed to ``out``."""

    def __init__(self, path: str | None, out: TextIO, environment: dict, options: dict):
        self.path, self.out = path, out
        self.data: dict[str, Any] = dict(environment=environment, options=options, verdicts={},
                                         seconds={})
        self.words: dict[str, str] = {}
        self._phase: str | None = None
        self._phase_started = time.perf_counter()

    def _write(self) -> None:
        if self.path is not None:
            write_json(self.path, self.data)

    def phase(self, name: str | None) -> None:
        """Start timing phase ``name`` (None: none), recording the last one's seconds (the
        phases of :func:`estimate`)."""
        now = time.perf_counter()
        if self._phase is not None:
            self.data["seconds"][self._phase] = now - self._phase_started
        self._phase, self._phase_started = name, now

    def __setitem__(self, key: str, value: Any) -> None:
        self.data[key] = value
        self._write()

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def section(self, title: str) -> None:
        """A section's heading."""
        print(f"\n== {title} ==", file=self.out, flush=True)

    def verdict(self, section: str, word: str, detail: str) -> None:
        """A section's verdict line: ``VERDICT <section>: <word> (<detail>)``."""
        line = f"VERDICT {section}: {word} ({detail})"
        self.data["verdicts"][section] = line
        self.words[section] = word
        print(line, file=self.out, flush=True)
        self._write()


def overall_verdict(words: dict[str, str], ran: int, kernel: str
                    ) -> tuple[str, str, list[str]]:
    """The overall word and detail, and the failed sections: FAIL if a section failed or
    nothing ran on the native kernel (``kernel``: its name); EXPECTED sections (the known
    determinism limitation), SLOW (a finding) and SKIPPED are counted in the detail, and fail
    nothing."""
    failed = [s for s, w in words.items() if w == "FAIL"]
    expected = [s for s, w in words.items() if w == "EXPECTED"]
    slow = [s for s, w in words.items() if w == "SLOW"]
    notes = []
    if expected:
        notes.append(f"{len(expected)} EXPECTED ({', '.join(expected)}): without "
                     f"{DETERMINISTIC_ENV_VAR}=1 at start-up CANN's deterministic backward is "
                     "not run, a known limitation")
    if slow:
        notes.append(f"{', '.join(slow)} SLOW: {kernel} slower than the reference, a finding to "
                     "report, not a failure")
    tail = "".join(f"; {n}" for n in notes)
    if failed:
        return "FAIL", f"failed: {', '.join(failed)}{tail}", failed
    if not ran:
        return "FAIL", (f"nothing ran on {kernel}: every parity case was routed to the "
                        f"reference (see native_status){tail}"), failed
    return "PASS", f"{len(words)} sections{tail}", failed
