"""What this machine has: versions, the CANN and CUDA toolkits found, JAX's devices and
``native_status()``."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

import jax_gridsample

from .. import _ascend, _native
from ._data import error_text

CANN_VARIABLES = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")
CANN_VERSION_FILES = ("version.cfg", "version.info")
CUDA_VARIABLES = ("CUDA_HOME", "CUDA_PATH")
# The environment the reports show: what decides where and how the checks run.
REPORTED_VARIABLES = (
    "JAX_PLATFORMS", "XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE", "CUDA_VISIBLE_DEVICES",
    *CUDA_VARIABLES, *CANN_VARIABLES, "ASCEND_OPP_PATH", "ASCEND_RT_VISIBLE_DEVICES",
    "JAX_GRIDSAMPLE_ACLNN_LIBS", _ascend.DETERMINISTIC_ENV_VAR, "JAX_GRIDSAMPLE_ASCEND_SELF_CHECK",
    "JAX_GRIDSAMPLE_ASCEND_CACHE")


def call(fn: Callable[[], Any]) -> Any:
    """fn(), or "error: ..." when it raised."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported
        return f"error: {error_text(exc)}"


def distribution_version(name: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, Any]:
    """jax_gridsample, jax, jaxlib, numpy and Python, the machine, and the installed
    distributions that look like JAX plugins or Ascend/CUDA pieces (name -> version)."""
    names = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        if re.search(r"jax|pjrt|ascend|npu|cann|^nvidia-cu", name, re.I) and \
                name.lower().replace("_", "-") not in ("jax", "jaxlib", "jax-gridsample"):
            names.add((name, dist.version))
    return dict(jax_gridsample=jax_gridsample.__version__, jax=jax.__version__,
                jaxlib=distribution_version("jaxlib"), numpy=np.__version__,
                python=sys.version.split()[0],
                python_implementation=platform.python_implementation(),
                machine=platform.machine(), system=platform.platform(),
                distributions=dict(sorted(names)))


def _read_version_file(path: str) -> str | None:
    """The version a CANN version file names (``Version=8.0.RC1`` in version.info,
    ``runtime_running_version=[8.0.RC1:...]`` in version.cfg), or None."""
    try:
        with open(path) as f:
            text = f.read(20000)
    except OSError:
        return None
    match = re.search(r"^\s*version\s*=\s*(\S+)", text, re.I | re.M) or \
        re.search(r"running_version\s*=\s*\[([^:\]]+)", text)
    return match.group(1) if match else None


def cann() -> dict[str, Any]:
    """The CANN toolkit: the variables CANN's set_env.sh sets, the version its files name,
    and, where the handlers load CANN's libraries, the version and chip CANN reports."""
    found: dict[str, Any] = dict(
        variables={v: os.environ[v] for v in CANN_VARIABLES if os.environ.get(v)},
        version_files={})
    for var in CANN_VARIABLES:
        home = os.environ.get(var)
        for name in CANN_VERSION_FILES if home else ():
            path = os.path.join(home, name)
            version = _read_version_file(path)
            if version is not None:
                found["version_files"][path] = version
    libraries = call(_ascend._libraries) if _ascend.available() else None
    loaded = isinstance(libraries, tuple) and bool(libraries[0])
    found["libraries_loaded"] = loaded
    if loaded:
        found["version"] = call(_ascend.cann_version)
        found["soc_name"] = call(_ascend.soc_name)
    return found


def cann_line(info: dict[str, Any]) -> str:
    """The CANN toolkit in one line."""
    versions = sorted(set(info["version_files"].values()))
    if info.get("version") and isinstance(info["version"], str):
        versions.insert(0, info["version"])
    where = ", ".join(f"{k}={v}" for k, v in info["variables"].items())
    if not versions and not where and not info["libraries_loaded"]:
        return f"not found ({' and '.join(CANN_VARIABLES)} unset, no CANN library loads)"
    parts = [f"version {' / '.join(dict.fromkeys(versions))}" if versions
             else "version unknown"]
    parts += [where] if where else []
    parts += [f"chip {info['soc_name']}"] if info.get("soc_name") else []
    parts += ["libraries load" if info["libraries_loaded"] else "libraries do not load"]
    return "; ".join(parts)


def _nvcc() -> str | None:
    candidates = [shutil.which("nvcc")]
    candidates += [os.path.join(os.environ[v], "bin", "nvcc") for v in CUDA_VARIABLES
                   if os.environ.get(v)]
    candidates.append("/usr/local/cuda/bin/nvcc")
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def cuda(distributions: dict[str, str]) -> dict[str, Any]:
    """The CUDA toolkit: nvcc's release, the runtime our CUDA module was built with, JAX's CUDA
    plugin (among ``distributions``, :func:`versions`') and the CUDA backend's version (driver
    and runtime as JAX reports them)."""
    found: dict[str, Any] = {}
    nvcc = _nvcc()
    if nvcc is not None:
        try:
            text = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                                  timeout=20).stdout
            match = re.search(r"release ([\d.]+)", text)
            found["nvcc"] = dict(path=nvcc, release=match.group(1) if match else None)
        except (OSError, subprocess.SubprocessError) as exc:
            found["nvcc"] = dict(path=nvcc, error=str(exc))
    module = _native._CUDA_MODULE
    if module is not None:
        runtime = call(module.cuda_runtime_version)
        found["module_runtime"] = runtime
        found["runtime_devices"] = call(module.device_count)
    plugins = {name: version for name, version in distributions.items()
               if re.match(r"jax[-_]cuda", name, re.I)}
    if plugins:
        found["jax_plugins"] = plugins
    with contextlib.suppress(Exception):
        from jax._src import xla_bridge

        backend = xla_bridge.backends().get("cuda")
        if backend is not None:
            found["backend"] = str(getattr(backend, "platform_version", ""))
    return found


def _cuda_release(version: Any) -> str:
    if isinstance(version, int):
        return f"{version // 1000}.{version % 1000 // 10}"
    return str(version)


def cuda_line(info: dict[str, Any]) -> str:
    """The CUDA toolkit in one line."""
    parts = []
    if "nvcc" in info:
        nvcc = info["nvcc"]
        parts.append(f"nvcc {nvcc.get('release') or nvcc.get('error', '?')} ({nvcc['path']})")
    if "module_runtime" in info:
        parts.append(f"jax_gridsample's CUDA module built with CUDA "
                     f"{_cuda_release(info['module_runtime'])}, sees "
                     f"{info.get('runtime_devices')} device(s)")
    if "jax_plugins" in info:
        parts.append("JAX plugins " + ", ".join(f"{k} {v}" for k, v in
                                                info["jax_plugins"].items()))
    if "backend" in info:
        parts.append(f"JAX's CUDA backend: {info['backend']}")
    return "; ".join(parts) if parts else "not found (no nvcc, no JAX CUDA plugin)"


def devices() -> dict[str, list[str]]:
    """JAX's backends and their devices (this process's), by backend name; under "error", why
    JAX has none (call it before anything else starts JAX's backends: only the first attempt
    says why they failed)."""
    try:
        from jax._src import xla_bridge

        names = sorted(xla_bridge.backends())
    except Exception as exc:  # noqa: BLE001 - reported
        chosen = os.environ.get("JAX_PLATFORMS")
        hint = f" (JAX could not start what JAX_PLATFORMS={chosen} names)" if chosen else ""
        return {"error": [error_text(exc) + hint]}
    found: dict[str, list[str]] = {}
    for name in names:
        try:
            found[name] = [str(d) if d.device_kind == d.platform else f"{d} ({d.device_kind})"
                           for d in jax.local_devices(backend=name)]
        except Exception as exc:  # noqa: BLE001 - reported
            found[name] = [f"error: {error_text(exc)}"]
    return found


def cpu_instruction_set() -> str | None:
    """The instruction set the native float32 CPU kernels use here."""
    return call(_native.cpu_instruction_set)


def reported_variables() -> dict[str, str]:
    """The environment variables that decide where and how the checks run, where set."""
    return {k: os.environ[k] for k in REPORTED_VARIABLES if k in os.environ}


def machine() -> dict[str, Any]:
    """Everything above, as the reports hold it."""
    backends = devices()  # first: it reports why JAX's backends failed to start
    found = versions()
    return dict(versions=found, cann=cann(), cuda=cuda(found["distributions"]), devices=backends,
                native_status=jax_gridsample.native_status(),
                cpu_instruction_set=cpu_instruction_set(), environment=reported_variables())


def device_info(device: jax.Device) -> dict[str, Any]:
    """A device as the reports name it."""
    client = getattr(device, "client", None)
    return dict(platform=device.platform, device_kind=device.device_kind, id=device.id,
                description=str(device),
                platform_version=getattr(client, "platform_version", None))
