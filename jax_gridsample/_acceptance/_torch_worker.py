"""torch's grid_sample timed in a process of its own, for the hardware acceptance's timings.

Importing torch_npu loads CANN's libraries its own way (the combined ``libopapi.so``) and sets
CANN's options (determinism among them) for its process; next to the JAX plugin and
jax_gridsample's handlers it could change what they run. On CUDA, torch and JAX would share the
GPU's memory. So the acceptance never imports torch, and runs this module instead:

    python -m jax_gridsample._acceptance._torch_worker REQUEST.json

``REQUEST.json``: ``{"device_type": "npu" or "cuda", "device_index", "repeats", "warmup",
"cases": [{"data": an .npz file with x and g, "mode", "padding_mode", "align_corners"}]}``.
Prints one JSON line last: ``{"torch": torch's version, "module": the module that gives the
device, "times": [per case {"forward": ms, "forward+backward": ms}, a value an error's
text]}``, or ``{"error": "not installed (...)"}`` when torch (or torch_npu) does not import or
has no such device.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import numpy as np

from ._timings import median_ms


def _time_case(torch: Any, device_type: str, device: str, case: dict, repeats: int,
               warmup: int) -> dict:
    functional = importlib.import_module("torch.nn.functional")
    synchronize = getattr(torch, device_type).synchronize
    data = np.load(case["data"])
    x, g = data["x"], data["g"]
    dtype = getattr(torch, str(x.dtype))
    xt = torch.from_numpy(x.astype(np.float32)).to(device).to(dtype)
    gt = torch.from_numpy(g.astype(np.float32)).to(device).to(dtype)
    kw = dict(mode=case["mode"], padding_mode=case["padding_mode"],
              align_corners=case["align_corners"])

    def forward() -> None:
        functional.grid_sample(xt, gt, **kw)
        synchronize()

    def both() -> None:
        xr, gr = xt.detach().requires_grad_(), gt.detach().requires_grad_()
        functional.grid_sample(xr, gr, **kw).float().sum().backward()
        synchronize()

    times: dict[str, float | str] = {}
    for key, fn in (("forward", forward), ("forward+backward", both)):
        try:
            times[key] = median_ms(fn, repeats, warmup)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            times[key] = f"{type(exc).__name__}: {exc}"[:500]
    return times


def _import_torch(device_type: str) -> tuple[Any, str]:
    """(torch, the module that gives the device type); raises when it cannot be had."""
    torch = importlib.import_module("torch")
    if device_type == "npu":
        module = importlib.import_module("torch_npu")  # registers the "npu" device with torch
        return torch, f"torch_npu {getattr(module, '__version__', None)}"
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device (a CPU-only torch?)")
    return torch, f"torch {torch.__version__} (CUDA {torch.version.cuda})"


def main(argv: list[str]) -> dict:
    """Time every case of the request ``argv[0]``; the answer to print."""
    with open(argv[0]) as f:
        request = json.load(f)
    device_type = request.get("device_type", "npu")
    try:
        torch, module = _import_torch(device_type)
    except Exception as exc:  # noqa: BLE001 - any failure means no torch column
        return dict(error=f"not installed ({type(exc).__name__}: {exc})"[:300])
    device = f"{device_type}:{request['device_index']}"
    times = []
    for case in request["cases"]:
        try:
            times.append(_time_case(torch, device_type, device, case, request["repeats"],
                                    request["warmup"]))
        except Exception as exc:  # noqa: BLE001 - reported in the table
            text = f"{type(exc).__name__}: {exc}"[:500]
            times.append({"forward": text, "forward+backward": text})
    return dict(torch=torch.__version__, module=module, times=times)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
