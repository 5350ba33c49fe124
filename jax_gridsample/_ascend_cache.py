"""The on-disk cache of what a first use on an Ascend device found: the support probe's answers
and the self-check's outcome, so that later processes on the same installation skip both.

An entry is keyed by everything that could change the answers: CANN's version, the chip, the
NPU driver's version, this package's version, jaxlib's version and the version of the
distribution that provides the PJRT plugin (from its package metadata), plus what was asked
(the probe's cases, the self-check's kinds and tolerances, the start-up determinism level).
``JAX_GRIDSAMPLE_ASCEND_CACHE`` names another directory for it, or ``off`` disables it.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata
from pathlib import Path

ENV_VAR = "JAX_GRIDSAMPLE_ASCEND_CACHE"
# Where the Ascend driver records its version (the driver package's own file).
DRIVER_VERSION_FILE = Path("/usr/local/Ascend/driver/version.info")


def directory() -> Path | None:
    """The cache's directory, or None when it is disabled."""
    value = os.environ.get(ENV_VAR, "").strip()
    if value.lower() in ("off", "0", "false", "none"):
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "jax_gridsample" / "ascend"


def driver_version() -> str:
    """The NPU driver's version from its ``version.info`` ("Version=..."), or "unknown"."""
    try:
        for line in DRIVER_VERSION_FILE.read_text().splitlines():
            if line.startswith("Version="):
                return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def plugin_version(platform: str) -> str:
    """``name==version`` of the distributions whose ``jax_plugins`` entry points name an Ascend
    platform (how JAX finds PJRT plugins), or "unknown"."""
    found = set()
    for entry in metadata.entry_points(group="jax_plugins"):
        text = f"{entry.name} {entry.value}".lower()
        if platform.lower() in text or "ascend" in text or "npu" in text:
            dist = getattr(entry, "dist", None)
            if dist is not None:
                found.add(f"{dist.metadata['Name']}=={dist.version}")
    return ",".join(sorted(found)) or "unknown"


def installation(platform: str, soc_name: str, cann_version: str) -> dict:
    """The key fields that describe the installation a first use ran on."""
    return {"cann": cann_version, "chip": soc_name, "driver": driver_version(),
            "jax_gridsample": _version("jax_gridsample"), "jaxlib": _version("jaxlib"),
            "plugin": plugin_version(platform), "platform": platform}


def _path(kind: str, key: dict) -> Path | None:
    root = directory()
    if root is None:
        return None
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    return root / f"{kind}-{digest}.json"


def load(kind: str, key: dict) -> dict | None:
    """The stored value of ``kind`` ("probe", "self-check") for ``key``, or None."""
    path = _path(kind, key)
    if path is None:
        return None
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return entry.get("value") if entry.get("key") == key else None


def store(kind: str, key: dict, value: dict) -> None:
    """Store a value; a cache that cannot be written is skipped silently (it only saves time)."""
    path = _path(kind, key)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps({"key": key, "value": value}, sort_keys=True))
        partial.replace(path)
    except OSError:
        pass
