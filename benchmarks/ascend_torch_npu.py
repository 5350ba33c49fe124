"""torch_npu's grid_sample timed in a process of its own, for benchmarks/ascend.py.

Importing torch_npu loads CANN's libraries its own way (the combined ``libopapi.so``) and sets
CANN's options (determinism among them) for its process; next to the JAX plugin and
jax_gridsample's handlers it could change what they run. So ascend.py never imports it, and
runs this file instead:

    python benchmarks/ascend_torch_npu.py REQUEST.json

``REQUEST.json``: ``{"device_index", "repeats", "warmup", "cases": [{"data": an .npz file with
x and g, "mode", "padding_mode", "align_corners"}]}``. Prints one JSON line last:
``{"torch_npu": its version, "times": [per case {"forward": ms, "forward+backward": ms}, a value
an error's text]}``, or ``{"error": "not installed (...)"}`` when torch_npu does not import.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np


def _median_ms(fn, repeats: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _time_case(torch, device: str, case: dict, repeats: int, warmup: int) -> dict:
    import torch.nn.functional as F

    data = np.load(case["data"])
    x, g = data["x"], data["g"]
    dtype = getattr(torch, str(x.dtype))
    xt = torch.from_numpy(x.astype(np.float32)).to(device).to(dtype)
    gt = torch.from_numpy(g.astype(np.float32)).to(device).to(dtype)
    kw = dict(mode=case["mode"], padding_mode=case["padding_mode"],
              align_corners=case["align_corners"])

    def forward():
        F.grid_sample(xt, gt, **kw)
        torch.npu.synchronize()

    def both():
        xr, gr = xt.detach().requires_grad_(), gt.detach().requires_grad_()
        F.grid_sample(xr, gr, **kw).float().sum().backward()
        torch.npu.synchronize()

    times = {}
    for key, fn in (("forward", forward), ("forward+backward", both)):
        try:
            times[key] = _median_ms(fn, repeats, warmup)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            times[key] = f"{type(exc).__name__}: {exc}"[:500]
    return times


def main(argv: list[str]) -> dict:
    with open(argv[0]) as f:
        request = json.load(f)
    try:
        import torch
        import torch_npu  # registers the "npu" device with torch
    except Exception as exc:  # noqa: BLE001 - any failure means no torch_npu column
        return dict(error=f"not installed ({type(exc).__name__}: {exc})"[:300])
    device = f"npu:{request['device_index']}"
    times = []
    for case in request["cases"]:
        try:
            times.append(_time_case(torch, device, case, request["repeats"], request["warmup"]))
        except Exception as exc:  # noqa: BLE001 - reported in the table
            text = f"{type(exc).__name__}: {exc}"[:500]
            times.append({"forward": text, "forward+backward": text})
    return dict(torch_npu=getattr(torch_npu, "__version__", None), times=times)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
