"""GPU session script (issue 7): build, test and time the CUDA kernels on one NVIDIA GPU.

Not a test. One prepared run for a lent GPU machine (an H200, 15 minutes of device time in all):

    PYTHONUNBUFFERED=1 python3 benchmarks/gpu.py 2>&1 | tee $OUT/gpu.log

Phases (``--phases build,check,bench,test``; all by default, run in that order), each guarded
so a failure in one still prints the others:

1. build: ``pip install --no-build-isolation --no-deps .`` (nvcc, scikit-build-core, nanobind,
   cmake and ninja are on the machine; nothing can be downloaded there), or with ``--wheel W``
   a wheel built beforehand elsewhere (same Python, jaxlib and CUDA major version) when its
   CUDA module loads; then checks that ``jax_gridsample._cuda_kernels`` imported and JAX sees
   a GPU.
2. check: on the benchmark shapes, our CUDA kernel against our jnp reference under XLA:GPU
   (float32, forward and both gradients, default and deterministic backward), bitwise
   reproducibility of the deterministic backward, jitted steps inside CUDA graphs (command
   buffers), and a >2^31-element input (64-bit indexing).
3. bench: medians of our CUDA kernel, our jnp reference under XLA:GPU and
   ``torch.nn.functional.grid_sample`` on CUDA, for the cases of benchmarks/cpu.py with the batch
   raised (N=32 to 256) so that each input is several times the L2, forward and forward+backward
   (default and deterministic), with ours/torch and achieved GB/s against the measured device
   copy bandwidth. The table is written to ``$OUT/gpu_results.md`` when ``OUT`` is set.
4. test: the torch-comparison and reference-parity suite on the GPU,
   ``pytest tests/test_semantics.py tests/test_native_parity.py -k native`` with
   ``JAX_GRIDSAMPLE_TEST_PLATFORM=cuda`` (tests/conftest.py makes the GPU JAX's default device),
   once with the default (atomic) backward and once, for the FFI parity tests, with the
   deterministic one (``JAX_GRIDSAMPLE_TEST_DETERMINISTIC=1``); with pytest-xdist workers where
   it is installed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# JAX in this process (check, bench) takes GPU memory as it goes, not 75% up front, which would
# leave little to torch here and to the test workers started afterwards.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
OUT = os.environ.get("OUT")

# (name, input NC+spatial, output spatial, mode, padding, channels_last): benchmarks/cpu.py's
# cases with the batch raised until each input is 100-270 MB, several times the H200's 60 MB L2,
# and one call runs well past the launch and dispatch overhead.
CASES = [
    ("2d bilinear zeros", (256, 32, 64, 64), (64, 64), "bilinear", "zeros", False),
    ("2d bilinear reflection", (256, 32, 64, 64), (64, 64), "bilinear", "reflection", False),
    ("2d nearest border", (256, 32, 64, 64), (64, 64), "nearest", "border", False),
    ("2d bicubic zeros", (256, 32, 64, 64), (64, 64), "bicubic", "zeros", False),
    ("2d 512x512 C3 bilinear border", (32, 3, 512, 512), (512, 512), "bilinear", "border", False),
    ("3d bilinear zeros", (64, 16, 32, 32, 32), (32, 32, 32), "bilinear", "zeros", False),
    ("3d nearest reflection", (64, 16, 32, 32, 32), (32, 32, 32), "nearest", "reflection", False),
    ("2d bilinear zeros NHWC", (256, 32, 64, 64), (64, 64), "bilinear", "zeros", True),
    ("2d bicubic zeros NHWC", (256, 32, 64, 64), (64, 64), "bicubic", "zeros", True),
    ("3d bilinear zeros NDHWC", (64, 16, 32, 32, 32), (32, 32, 32), "bilinear", "zeros", True),
]

FAILURES: list[str] = []


def banner(text: str) -> None:
    print(f"\n=== {text} ({time.strftime('%H:%M:%S')}) ===", flush=True)


def run(cmd, env=None, cwd=None, timeout=None) -> int:
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    try:
        rc = subprocess.run(cmd, env=env, cwd=cwd, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"timed out after {timeout} s", flush=True)
        rc = 124
    print(f"-> rc={rc} in {time.perf_counter() - t0:.1f} s", flush=True)
    return rc


# --- 1. build --------------------------------------------------------------------------------

def phase_build(wheel: str | None) -> None:
    banner("build")
    if wheel:
        # A wheel built beforehand on another machine (same Python, jaxlib and CUDA major
        # version): install it and use it if its CUDA module loads here, else build from source.
        rc = run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                  "--force-reinstall", "-q", wheel])
        if rc == 0 and _installed_ok():
            return
        print("the prebuilt wheel did not load here; building from source", flush=True)
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 8))
    if not shutil.which("nvcc") and "CUDACXX" not in env:
        for nvcc in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc"):
            if os.path.exists(nvcc):
                env["CUDACXX"] = nvcc  # CMake's check_language(CUDA) reads it
                break
    print(f"nvcc: {shutil.which('nvcc') or env.get('CUDACXX')}", flush=True)
    rc = run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
              "--no-cache-dir", "-q", REPO], env=env, timeout=300)
    if rc != 0:
        FAILURES.append("build")
        raise SystemExit("build failed")
    if not _installed_ok():
        FAILURES.append("import")
        raise SystemExit("the CUDA kernels did not build or load, or JAX sees no GPU")


def _installed_ok() -> bool:
    """Whether the installed package's CUDA module loads and JAX sees a GPU."""
    # A fresh interpreter, outside the source tree (which would shadow the installed package).
    code = ("import jax, jax_gridsample; from jax_gridsample import _native; "
            "print(jax_gridsample.__file__); print(jax.devices()); print(_native.native_status()); "
            "assert _native.native_status()['cuda'] == 'available'; "
            "assert jax.devices()[0].platform == 'gpu'")
    return run([sys.executable, "-c", code], cwd=tempfile.gettempdir()) == 0


# --- 2. tests --------------------------------------------------------------------------------

def phase_test() -> None:
    # Several pytest workers share the GPU (compilation, not the GPU, bounds the suite's time),
    # so none may take most of its memory up front.
    base = dict(os.environ, JAX_GRIDSAMPLE_TEST_PLATFORM="cuda", JAX_GRIDSAMPLE_REQUIRE_NATIVE="1",
                XLA_PYTHON_CLIENT_PREALLOCATE="false")
    # Run from outside the tree so the installed package (with _cuda_kernels) is imported.
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short",
              "-rf", "-c", os.path.join(REPO, "pyproject.toml"), "--rootdir", REPO]
    try:
        import xdist  # noqa: F401
        pytest += ["-n", str(min(8, os.cpu_count() or 1))]
    except ImportError:
        pass
    tests = [os.path.join(REPO, "tests", f) for f in ("test_semantics.py", "test_native_parity.py")]
    banner("tests on the GPU: default (atomic) backward")
    if run(pytest + tests + ["-k", "native"], env=base, cwd=tempfile.gettempdir(),
           timeout=240) != 0:
        FAILURES.append("tests (default backward)")
    banner("FFI parity tests on the GPU: deterministic backward")
    env = dict(base, JAX_GRIDSAMPLE_TEST_DETERMINISTIC="1")
    if run(pytest + [tests[1], "-k", "float64_matches or low_precision or single_output or empty "
                     "or deterministic or nonfinite"],
           env=env, cwd=tempfile.gettempdir(), timeout=120) != 0:
        FAILURES.append("tests (deterministic backward)")


# --- shared by check and bench ---------------------------------------------------------------

def _imports():
    os.chdir(tempfile.gettempdir())  # import the installed package, not the source tree
    if REPO in sys.path:
        sys.path.remove(REPO)
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    import jax_gridsample
    from jax_gridsample import _native

    return jax, jnp, np, torch, jax_gridsample, _native


def make_data(np, shape, out_spatial, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    k = len(out_spatial)
    grid = rng.uniform(-1.1, 1.1, (shape[0],) + out_spatial + (k,)).astype(np.float32)
    return x, grid


def layout_of(channels_last, k):
    if not channels_last:
        return None
    return "NHWC" if k == 2 else "NDHWC"


def jax_fns(jax, jnp, gs, mode, padding, layout, implementation, deterministic=False):
    kw = dict(mode=mode, padding_mode=padding, align_corners=False,
              implementation=implementation, layout=layout, deterministic=deterministic)
    fwd = jax.jit(lambda a, g: gs.grid_sample(a, g, **kw))
    # 0.5 * sum(out^2): its cotangent is the output itself, so the forward cannot be pruned.
    grad = jax.jit(jax.grad(lambda a, g: 0.5 * jnp.sum(jnp.square(gs.grid_sample(a, g, **kw))),
                            argnums=(0, 1)))
    return fwd, grad


def rel_err(np, a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if not np.all(np.isfinite(a)):
        return float("inf")
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


# The handlers declare the command-buffer trait: run jitted steps with custom calls captured in
# CUDA graphs, several times on fresh data (a replay with stale scratch addresses would show).
_COMMAND_BUFFER_CHECK = """
import jax, jax.numpy as jnp, numpy as np, jax_gridsample as gs
rng = np.random.default_rng(3)
worst = 0.0
for dtype, tol in ((jnp.float32, 1e-4), (jnp.float16, 2e-2)):
    for det in (False, True):
        def loss(x, g, impl):
            out = gs.grid_sample(x, g, mode="bicubic", implementation=impl, deterministic=det)
            return jnp.sum(out.astype(jnp.float32) ** 2)
        step = {i: jax.jit(jax.grad(lambda x, g, i=i: loss(x, g, i), argnums=(0, 1)))
                for i in ("native", "reference")}
        for _ in range(4):
            x = jnp.asarray(rng.standard_normal((4, 8, 33, 35)), dtype)
            g = jnp.asarray(rng.uniform(-1.1, 1.1, (4, 40, 41, 2)), dtype)
            got, want = step["native"](x, g), step["reference"](x, g)
            for a, b in zip(got, want):
                a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
                err = np.linalg.norm(a - b) / np.linalg.norm(b)
                worst = max(worst, err / tol)
print("command-buffer check: worst error / tolerance", worst)
raise SystemExit(0 if worst < 1 else 1)
"""


# --- 3. checks on large shapes -----------------------------------------------------------------

def phase_check() -> None:
    banner("checks: CUDA kernel vs jnp reference on the benchmark shapes")
    jax, jnp, np, torch, gs, _native = _imports()
    print(_native.native_status())
    for name, shape, out_spatial, mode, padding, cl in CASES:
        x, grid = make_data(np, shape, out_spatial, seed=1)
        k = len(out_spatial)
        xj = jnp.asarray(np.moveaxis(x, 1, -1) if cl else x)
        gj = jnp.asarray(grid)
        lay = layout_of(cl, k)
        r_f, r_g = jax_fns(jax, jnp, gs, mode, padding, lay, "reference")
        ref_out, ref_grads = r_f(xj, gj), r_g(xj, gj)
        errs = []
        n_f, n_g = jax_fns(jax, jnp, gs, mode, padding, lay, "native")
        errs.append(rel_err(np, n_f(xj, gj), ref_out))
        for det in (False, True):
            _, g_fn = jax_fns(jax, jnp, gs, mode, padding, lay, "native", det)
            got = g_fn(xj, gj)
            errs += [rel_err(np, got[0], ref_grads[0]), rel_err(np, got[1], ref_grads[1])]
            if det:
                again = g_fn(xj, gj)
                same = all(np.array_equal(np.asarray(a), np.asarray(b))
                           for a, b in zip(got, again, strict=True))
                if not same:
                    FAILURES.append(f"check {name}: deterministic backward not bitwise repeatable")
        # Nearest has no grid gradient (both are exactly 0): rel_err of 0 vs 0 is 0.
        ok = all(e < 1e-4 for e in errs)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: rel err out {errs[0]:.1e}, default gi "
              f"{errs[1]:.1e} gg {errs[2]:.1e}, deterministic gi {errs[3]:.1e} gg {errs[4]:.1e}",
              flush=True)
        if not ok:
            FAILURES.append(f"check {name}")

    banner("check: inside CUDA graphs (XLA command buffers with custom calls)")
    env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") +
                                      " --xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL"
                                      " --xla_gpu_graph_min_graph_size=1"))
    if run([sys.executable, "-c", _COMMAND_BUFFER_CHECK], env=env, cwd=tempfile.gettempdir(),
           timeout=180) != 0:
        FAILURES.append("check command buffers")

    banner("check: 64-bit indexing (input of 2.15e9 float16 elements)")
    try:
        s = 46341  # s * s > 2**31
        yy = jnp.arange(s, dtype=jnp.int32)[:, None]
        xx = jnp.arange(s, dtype=jnp.int32)[None, :]
        big = (((yy * 7 + xx * 3) % 1024).astype(jnp.float16) / 4)[None, None]  # exact in f16
        pix = np.array([[s - 1, s - 1], [s - 2, s - 1], [0, s - 1], [s - 1, 0], [123, s - 7]])
        coords = (2.0 * pix / (s - 1) - 1.0).astype(np.float16)  # align_corners=True
        grid = jnp.asarray(coords[None, None, :, :])  # (x, y) pairs
        out = gs.grid_sample(big, grid, mode="nearest", align_corners=True,
                             implementation="native")
        got = np.asarray(out, np.float64).ravel()
        # Recompute the pixel each rounded coordinate lands on (float16 grid), in numpy.
        ix = np.rint((coords[:, 0].astype(np.float64) + 1) / 2 * (s - 1)).astype(np.int64)
        iy = np.rint((coords[:, 1].astype(np.float64) + 1) / 2 * (s - 1)).astype(np.int64)
        want = ((iy * 7 + ix * 3) % 1024) / 4
        ok = np.array_equal(got, want)
        go = jnp.ones(out.shape, jnp.float16)
        gi, _ = gs.grid_sample_backward(go, big, grid, mode="nearest", align_corners=True,
                                        implementation="native")
        picked = np.asarray(gi[0, 0, iy, ix], np.float64)
        ok = ok and bool(np.all(picked >= 1)) and float(jnp.sum(gi, dtype=jnp.float32)) == 5.0
        print(f"{'ok  ' if ok else 'FAIL'} forward {got} vs {want}; grad_input at taps {picked}",
              flush=True)
        if not ok:
            FAILURES.append("check 64-bit indexing")
        del big, gi
    except Exception:  # noqa: BLE001 - report and go on to the benchmark
        traceback.print_exc()
        FAILURES.append("check 64-bit indexing (exception)")


# --- 4. benchmark -----------------------------------------------------------------------------

def phase_bench(repeats: int, inner: int) -> None:
    banner("benchmark")
    jax, jnp, np, torch, gs, _native = _imports()
    dev = torch.device("cuda")

    def median_ms(calls, sync):
        """Median over `repeats` batches of `inner` back-to-back calls (rotating inputs)."""
        calls[0]()
        sync()
        times = []
        for r in range(repeats):
            t0 = time.perf_counter()
            for i in range(inner):
                out = calls[(r * inner + i) % len(calls)]()
            sync(out)
            times.append((time.perf_counter() - t0) / inner)
        return 1e3 * statistics.median(times)

    def jsync(out=None):
        if out is not None:
            jax.block_until_ready(out)

    def tsync(out=None):
        torch.cuda.synchronize()

    # Device copy bandwidth (bytes read + written) through torch.
    def copy_bandwidth():
        src = torch.empty(2**28, dtype=torch.float32, device=dev).uniform_()
        dst = torch.empty_like(src)
        copy_ms = median_ms([lambda: dst.copy_(src)], tsync)
        return 2 * src.numel() * 4 / (copy_ms * 1e-3)

    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}; jax {jax.__version__}, torch {torch.__version__}; "
          f"device copy {bw / 1e9:.0f} GB/s; float32, align_corners=False; medians of "
          f"{repeats} x {inner} calls over 4 rotating input sets\n", flush=True)

    def floor_bytes(shape, out_spatial, backward):
        n, c = shape[:2]
        k = len(out_spatial)
        points = int(np.prod(out_spatial))
        inp, grd, out = int(np.prod(shape)) * 4, n * points * k * 4, n * c * points * 4
        fwd = inp + grd + out
        # + grad_output read, input and grid read again, grad_input and grad_grid written
        return fwd if not backward else fwd + out + inp + grd + inp + grd

    def t_fwd(a, g, mode, padding):
        with torch.no_grad():
            return torch.nn.functional.grid_sample(a, g, mode=mode, padding_mode=padding,
                                                   align_corners=False)

    def t_fb(a, g, mode, padding):
        a = a.detach().requires_grad_(True)
        g = g.detach().requires_grad_(True)
        torch.nn.functional.grid_sample(a, g, mode=mode, padding_mode=padding,
                                        align_corners=False).square().sum().mul(0.5).backward()
        return a.grad, g.grad

    def bench_case(name, shape, out_spatial, mode, padding, cl):
        k = len(out_spatial)
        lay = layout_of(cl, k)
        sets = [make_data(np, shape, out_spatial, seed=s) for s in range(4)]
        jx = [(jnp.asarray(np.moveaxis(x, 1, -1) if cl else x), jnp.asarray(g)) for x, g in sets]
        fmt = (torch.channels_last if k == 2 else torch.channels_last_3d) if cl else None
        tx = []
        for x, g in sets:
            t = torch.tensor(x, device=dev)
            tx.append((t.contiguous(memory_format=fmt) if fmt else t, torch.tensor(g, device=dev)))
        o_f, o_g = jax_fns(jax, jnp, gs, mode, padding, lay, "native")
        _, o_gd = jax_fns(jax, jnp, gs, mode, padding, lay, "native", True)
        r_f, r_g = jax_fns(jax, jnp, gs, mode, padding, lay, "reference")
        rows = []
        for label, ours_fn, ref_fn, torch_fn, backward in (
            ("fwd", o_f, r_f, t_fwd, False),
            ("fwd+bwd", o_g, r_g, t_fb, True),
            ("fwd+bwd det", o_gd, None, t_fb, True),
        ):
            jcalls = [lambda a=a, g=g, fn=ours_fn: fn(a, g) for a, g in jx]
            tcalls = [lambda a=a, g=g, fn=torch_fn: fn(a, g, mode, padding) for a, g in tx]
            try:
                t_ours = median_ms(jcalls, jsync)
                t_ref = float("nan")
                if ref_fn is not None:
                    t_ref = median_ms([lambda a=a, g=g, fn=ref_fn: fn(a, g) for a, g in jx],
                                      jsync)
                t_torch = median_ms(tcalls, tsync)
            except Exception:  # noqa: BLE001 - keep the rest of the table
                traceback.print_exc()
                FAILURES.append(f"bench {name} {label}")
                continue
            gbs = floor_bytes(shape, out_spatial, backward) / (t_ours * 1e-3)
            row = (f"| {name} | {label} | {t_ours:.3f} | {t_ref:.3f} | {t_torch:.3f} | "
                   f"{t_ours / t_torch:.2f} | {gbs / 1e9:.0f} | {gbs / bw:.2f} |")
            rows.append(row)
            print(row, flush=True)
        return rows

    header = ("| case | pass | ours ms | reference ms | torch ms | ours/torch | ours GB/s | "
              "of copy bw |")
    rows = []
    for case in CASES:
        rows += bench_case(*case)
    table = "\n".join([header, "|" + "---|" * 8] + rows)
    print("\n" + table, flush=True)
    if OUT:
        with open(os.path.join(OUT, "gpu_results.md"), "w") as f:
            f.write(f"device copy bandwidth {bw / 1e9:.0f} GB/s\n\n{table}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phases", default="build,check,bench,test")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--inner", type=int, default=10)
    parser.add_argument("--wheel", help="install this prebuilt wheel instead of building, if "
                        "its CUDA module loads")
    args = parser.parse_args()
    phases = args.phases.split(",")
    t0 = time.perf_counter()
    if "build" in phases:
        phase_build(args.wheel)
    # check and bench import the installed package into this interpreter; the tests run in
    # subprocesses, last, so that a slow suite cannot cost the table.
    for phase, fn in (("check", phase_check),
                      ("bench", lambda: phase_bench(args.repeats, args.inner)),
                      ("test", phase_test)):
        if phase in phases:
            try:
                fn()
            except Exception:  # noqa: BLE001 - report and continue
                traceback.print_exc()
                FAILURES.append(phase)
    banner(f"done in {time.perf_counter() - t0:.0f} s")
    print("FAILURES: " + ("; ".join(FAILURES) if FAILURES else "none"), flush=True)
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
