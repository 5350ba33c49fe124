"""Shared test configuration: float64 on, XLA's CPU compilation made cheap, memory bounded.

The tests run tiny tensors through hundreds of small programs (the jnp reference under every mode,
padding, align_corners, dtype and rank), so compiling them, not running them, is where the suite's
time goes. Hence:

- XLA's CPU backend optimizations off (``--xla_backend_optimization_level=0``): LLVM's
  optimization of the reference's many small programs costs far more compile time than it saves.
- XLA's CPU elemental emitters instead of its fusion emitters
  (``--xla_cpu_use_fusion_emitters=false``): about a third of the compile time, where the
  installed jaxlib has the flag (XLA aborts on a flag it does not know; set it in XLA_FLAGS
  yourself, either way, to decide).
- Tests share compiled programs: they use the same shapes where they can (``oracle.random_case``)
  and call the operations eagerly, so one compiled program serves every test with that
  configuration; jax's caches are cleared when this process grows past ``_RSS_LIMIT``, which keeps
  the suite's memory bounded (cleared caches only cost recompiles).
- Two processes run the tests, one file each at a time (pytest-xdist's ``-n 2 --dist loadfile``,
  in pyproject.toml's ``addopts``), so that both cores compile; a file's tests stay in one
  process, where they share its compiled programs and module fixtures. ``-n 0`` runs them all in
  this process.
- The checks that need a process of their own (8 host devices, the examples) run beside the
  tests: without workers they start when collection ends; in a worker, which cannot know then
  which files it will get, when the first test that reads them runs (background.py).

Neither flag changes results beyond rounding the tests' tolerances cover; the native kernels are
compiled C++ and unaffected.
"""

import ctypes
import gc
import os
import subprocess
import sys
from importlib import metadata

# The Ascend tests' fixtures: the simulated aclnn library, the handlers on it (ascend_support.py).
from ascend_support import (  # noqa: F401
    _session_sim,
    ascend_kernel,
    kernels,
    self_check_on,
    sim,
    sim_path,
    start_up_level,
)

# jaxlib releases known to have --xla_cpu_use_fusion_emitters (0.6.0, the oldest supported, and
# 0.10.2 were checked); for any other, a subprocess asks XLA, which aborts on a flag it lacks.
_FUSION_EMITTERS_FLAG_RELEASES = ((0, 6), (0, 10))


def _jaxlib_release():
    try:
        return tuple(int(part) for part in metadata.version("jaxlib").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return None


def _xla_accepts(flags: str) -> bool:
    probe = subprocess.run(
        [sys.executable, "-c", "import jax.numpy as jnp; jnp.zeros(1).block_until_ready()"],
        env=dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu"), capture_output=True,
        timeout=600,
    )
    return probe.returncode == 0


# No on-disk cache of first uses on Ascend (the simulator's) unless a test asks for one.
os.environ["JAX_GRIDSAMPLE_ASCEND_CACHE"] = "off"

_FLAGS = os.environ.get("XLA_FLAGS", "")
if "--xla_backend_optimization_level" not in _FLAGS:
    _FLAGS = f"{_FLAGS} --xla_backend_optimization_level=0".strip()
if "--xla_cpu_use_fusion_emitters" not in _FLAGS:
    _release = _jaxlib_release()
    _with = f"{_FLAGS} --xla_cpu_use_fusion_emitters=false"
    if (_release is not None
            and _FUSION_EMITTERS_FLAG_RELEASES[0] <= _release <= _FUSION_EMITTERS_FLAG_RELEASES[1]
            or _xla_accepts(_with)):
        _FLAGS = _with
os.environ["XLA_FLAGS"] = _FLAGS

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

# JAX_GRIDSAMPLE_TEST_PLATFORM=cuda runs the tests on the GPU (benchmarks/gpu.py does): JAX's
# default device becomes the GPU, so implementation="native" exercises the CUDA kernels and the
# FFI-level parity tests call the CUDA targets. Unset (the default): whatever JAX picks (CI: cpu).
TEST_PLATFORM = os.environ.get("JAX_GRIDSAMPLE_TEST_PLATFORM", "").lower()
if TEST_PLATFORM and TEST_PLATFORM != "cpu":
    jax.config.update("jax_platforms", f"{TEST_PLATFORM},cpu")

# Past this resident size, jax's compilation caches are cleared after a test and the freed memory
# is handed back to the system (each compiled program holds a few MB).
_RSS_LIMIT = 2 * 2**30
_clear_above = _RSS_LIMIT


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0  # not Linux: never clear


def _trim_heap() -> None:
    try:
        ctypes.CDLL(None).malloc_trim(0)  # glibc: return freed heap pages to the system
    except (OSError, AttributeError):
        pass


def pytest_runtest_teardown(item, nextitem):
    global _clear_above
    if _resident_bytes() > _clear_above:
        jax.clear_caches()
        gc.collect()
        _trim_heap()
        # what is left is not compiled programs: clear again only after as much growth again
        _clear_above = max(_RSS_LIMIT, _resident_bytes() + _RSS_LIMIT / 2)



def pytest_collection_finish(session):
    """Starts the separate-process checks of the selected tests (see background.py)."""
    import background

    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a worker starts them when a test first asks (background.result_of)
    modules = dict.fromkeys(getattr(item, "module", None) for item in session.items)
    for module in modules:
        if hasattr(module, "start_background"):
            background.start(session.config, session.items, module)


def pytest_sessionfinish(session):
    """Stops those that no test waited for (a run stopped early, say)."""
    import background

    modules = {getattr(item, "module", None) for item in getattr(session, "items", ())}
    for module in modules:
        if hasattr(module, "BACKGROUND"):
            background.stop(session.config.stash.get(module.BACKGROUND, {}))
