"""Run by test_export.py in a subprocess: exports grid_sample, then loads it in a fresh process.

``export_runner.py`` exports ``sample`` (CALLS: every mode and padding, 2D and 3D, float32 and
float64, channels first and last) with ``vjp_order=1`` for each entry of ARTIFACTS, writes the
serialized artifacts to a temporary folder with their inputs, cotangents and what calling the
function and its vjp here gives, runs ``export_runner.py load FOLDER`` in a new process and
prints one JSON line: this process's results ("expected") and the new one's. Before importing
jax_gridsample it registers a stand-in for an Ascend PJRT plugin (a backend factory that fails,
quietly, to start), so that JAX knows the platform "ascend" and the package registers its Ascend
lowering there, as with the real plugin.

``export_runner.py load FOLDER`` imports jax, numpy and nothing else at first, and reports what
an artifact does there (the reference one must run; one with our custom calls must fail with a
clear error); then imports jax_gridsample and calls every artifact and its vjp.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

# name: (platforms, implementation)
ARTIFACTS = {
    "cpu": (("cpu",), "auto"),
    "cpu-cuda": (("cpu", "cuda"), "auto"),
    "cpu-cuda-tpu-ascend": (("cpu", "cuda", "tpu", "ascend"), "auto"),
    "reference": (("cpu", "cuda", "tpu"), "reference"),
}
# (spatial rank, dtype, channels, mode, padding, align_corners, channels last)
CALLS = [
    (2, "float32", 3, "bilinear", "zeros", False, False),
    (2, "float32", 3, "nearest", "border", True, False),
    (2, "float32", 8, "bicubic", "reflection", False, True),
    (3, "float64", 2, "bilinear", "reflection", True, False),
    (3, "float64", 8, "nearest", "zeros", False, True),
    (3, "float64", 2, "bicubic", "border", True, False),
]


def operands(rng) -> list[np.ndarray]:
    arrays = []
    for dims, dtype, channels, *_, channels_last in CALLS:
        spatial = (4, 5, 6)[-dims:]
        shape = (1, *spatial, channels) if channels_last else (1, channels, *spatial)
        arrays.append(rng.standard_normal(shape).astype(dtype))
        arrays.append(rng.uniform(-1.2, 1.2, (1, *(2, 3, 4)[-dims:], dims)).astype(dtype))
    return arrays


def sample_function(implementation: str):
    import jax_gridsample as gs

    def sample(*args):
        results = []
        for i, (dims, _, _, mode, padding, align_corners, channels_last) in enumerate(CALLS):
            layout = ("NHWC" if dims == 2 else "NDHWC") if channels_last else None
            results.append(gs.grid_sample(args[2 * i], args[2 * i + 1], mode=mode,
                                          padding_mode=padding, align_corners=align_corners,
                                          layout=layout, implementation=implementation))
        return tuple(results)

    return jax.jit(sample)


def tolist(arrays) -> list:
    return [np.asarray(a).tolist() for a in arrays]


def call(exported, args, cotangents) -> dict:
    outputs, vjp = jax.vjp(exported.call, *args)
    return dict(outputs=tolist(outputs), vjp=tolist(vjp(tuple(cotangents))))


def export_all() -> dict:
    from jax._src import xla_bridge

    def no_device():
        raise RuntimeError("a stand-in for the Ascend PJRT plugin, without a device")

    xla_bridge.register_backend_factory("ascend", no_device, priority=-100, fail_quietly=True)
    from jax import export

    import jax_gridsample as gs

    rng = np.random.default_rng(0)
    args = operands(rng)
    cotangents = [rng.standard_normal(o.shape).astype(o.dtype)
                  for o in jax.eval_shape(sample_function("reference"), *args)]
    folder = Path(tempfile.mkdtemp(prefix="jax_gridsample_export_"))
    targets = {}
    for name, (platforms, implementation) in ARTIFACTS.items():
        function = sample_function(implementation)
        checks = gs.export_safety_checks() if implementation != "reference" else ()
        blob = export.export(function, platforms=platforms, disabled_checks=checks)(
            *args).serialize(vjp_order=1)
        (folder / f"{name}.bin").write_bytes(blob)
        exported = export.deserialize(bytearray(blob))
        text = exported.mlir_module() + exported.vjp().mlir_module()
        targets[name] = sorted(set(re.findall(r"custom_call @(\w+)", text)))
        np.savez(folder / f"{name}.npz", *args, *cotangents)
    loader = subprocess.Popen([sys.executable, __file__, "load", str(folder)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # meanwhile, what calling the function gives here (the same for each implementation)
    expected = {}
    for implementation in {implementation for _, implementation in ARTIFACTS.values()}:
        outputs, vjp = jax.vjp(sample_function(implementation), *args)
        expected[implementation] = dict(outputs=tolist(outputs),
                                        vjp=tolist(vjp(tuple(cotangents))))
    stdout, stderr = loader.communicate(timeout=600)
    shutil.rmtree(folder)
    if loader.returncode != 0:
        raise RuntimeError(f"the loading process failed:\n{stderr[-3000:]}")
    return dict(expected={name: expected[implementation]
                          for name, (_, implementation) in ARTIFACTS.items()},
                loaded=json.loads(stdout.splitlines()[-1]), targets=targets)

def load_all(folder: Path) -> dict:
    from jax import export

    def artifact(name):
        data = np.load(folder / f"{name}.npz")
        arrays = [data[f"arr_{i}"] for i in range(len(data.files))]
        blob = (folder / f"{name}.bin").read_bytes()
        return export.deserialize(bytearray(blob)), arrays[:2 * len(CALLS)], \
            arrays[2 * len(CALLS):]

    report = dict(results={}, package_imported_first="jax_gridsample" in sys.modules)
    # without jax_gridsample: the reference artifact runs; one that calls our kernels fails
    report["without_package"] = call(*artifact("reference"))
    try:
        call(*artifact("cpu"))
        report["error_without_package"] = None
    except Exception as exc:  # noqa: BLE001 - reported, the test checks it
        report["error_without_package"] = f"{type(exc).__name__}: {exc}"
    import jax_gridsample  # noqa: F401 - registers the FFI targets

    for name in ARTIFACTS:
        report["results"][name] = call(*artifact(name))
    report["modules"] = sorted({m.split(".")[0] for m in sys.modules})
    return report


if __name__ == "__main__":
    if sys.argv[1:2] == ["load"]:
        print(json.dumps(load_all(Path(sys.argv[2]))))
    else:
        print(json.dumps(export_all()))
