"""The platforms the checks run on (CPU, CUDA, Ascend): their native kernel, how to find their
devices, and what differs between them (determinism, the self-check, the plugin contract,
the workspace cache, torch's device)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

import jax

from .. import _ascend, _native, _primitives, ascend_plugin_check
from ._plan import ASCEND_PLAN, CUDA_PLAN, Plan

QUICK_PADDINGS = ("zeros", "border", "reflection", "constant", "wrap")


def _always_one() -> int:
    return 1


@dataclasses.dataclass(frozen=True)
class Platform:
    """A platform the checks run on.

    Attributes
    ----------
    name : str
        "cpu", "cuda" or "ascend": the key of ``native_status()``.
    label : str
        What the messages call its devices ("CUDA GPU", "Ascend NPU").
    kernel_name : str
        What the messages call its native kernel ("aclnn", "CUDA", "CPU").
    kernel : Any
        Its FFI targets (``forward_target``, ``backward_target``, ``backward_attributes``,
        ...): an ``_ascend.AscendKernel`` or a ``_primitives.NativeKernel``.
    available : Callable[[], bool]
        Whether its native module loaded and registered.
    devices : Callable[[], list[jax.Device]]
        This process's devices of the platform ([] without them).
    plan : Plan
        What its hardware acceptance runs.
    quick_paddings : tuple[str, ...]
        The padding modes its quick check covers (those its kernel takes).
    deterministic_level : Callable[[], int | None]
        1 where ``deterministic=True`` runs on the kernel; None where it cannot in this process
        (Ascend without ``JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1`` at start-up).
    self_check, plugin_check, workspace_paths : Callable or None
        Ascend's ``ascend_self_check``, ``ascend_plugin_check.check`` and the handlers'
        workspace counters; None elsewhere.
    torch_device_type : str or None
        torch's name of the device ("npu", "cuda") for the timings; None: torch is not timed.
    torch_label : str
        The timing table's column (and the run-time estimate's phase) for torch.
    """

    name: str
    label: str
    kernel_name: str
    kernel: Any
    available: Callable[[], bool]
    devices: Callable[[], list[jax.Device]]
    plan: Plan = dataclasses.field(default_factory=Plan)
    quick_paddings: tuple[str, ...] = QUICK_PADDINGS
    deterministic_level: Callable[[], int | None] = _always_one
    self_check: Callable[[], dict] | None = None
    plugin_check: Callable[[], list] | None = None
    workspace_paths: Callable[[], dict | None] | None = None
    torch_device_type: str | None = None
    torch_label: str = "torch"

    @property
    def targets(self) -> tuple[str, str]:
        """The forward and backward FFI targets a native call lowers to."""
        return self.kernel.forward_target, self.kernel.backward_target


def backend_devices(name: str) -> list[jax.Device]:
    """This process's devices of JAX backend ``name`` ([] when JAX has none or it failed)."""
    try:
        return list(jax.local_devices(backend=name))
    except Exception:  # noqa: BLE001 - an unknown or broken backend: no devices
        return []


def ascend_devices() -> list[jax.Device]:
    """This process's Ascend devices, whichever spelling the plugin uses."""
    with contextlib.suppress(Exception):
        found = _ascend.find_local_device(_ascend.PLATFORM_NAMES)
        if found is not None:
            return list(jax.local_devices(backend=found[0]))
    return []


def cpu() -> Platform:
    """The host: our CPU kernels."""
    return Platform("cpu", "CPU", "CPU", _primitives.NATIVE_KERNELS["cpu"],
                    _native.cpu_available, lambda: backend_devices("cpu"))


def cuda() -> Platform:
    """NVIDIA GPUs: our CUDA kernels."""
    return Platform("cuda", "CUDA GPU", "CUDA", _primitives.NATIVE_KERNELS["cuda"],
                    _native.cuda_available, lambda: backend_devices("cuda"), plan=CUDA_PLAN,
                    torch_device_type="cuda")


def _ascend_level() -> int | None:
    return _ascend.deterministic_level()[0]


def ascend() -> Platform:
    """Ascend NPUs: CANN's aclnn kernels through our handlers."""
    import jax_gridsample

    return Platform("ascend", "Ascend NPU", "aclnn", _ascend.KERNEL, _ascend.available,
                    ascend_devices, plan=ASCEND_PLAN,
                    quick_paddings=("zeros", "border", "reflection", "constant"),
                    deterministic_level=_ascend_level,
                    self_check=jax_gridsample.ascend_self_check,
                    plugin_check=ascend_plugin_check.check,
                    workspace_paths=_ascend.workspace_paths, torch_device_type="npu",
                    torch_label="torch_npu")


def all_platforms() -> list[Platform]:
    """CPU, CUDA and Ascend, in the order the command reports them."""
    return [cpu(), cuda(), ascend()]


def jax_platforms() -> list[str]:
    """Every backend JAX has in this process (those that failed to start left out; none when
    JAX could not start one it was told to)."""
    try:
        from jax._src import xla_bridge

        return sorted(xla_bridge.backends())
    except Exception:  # noqa: BLE001 - say "none"; devices() reports the error
        return []
