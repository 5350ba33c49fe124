"""Writes the back-compatibility artifacts of one version of the FFI targets (a tool, not a test).

    python tests/export_compat/make_artifacts.py NAME

exports, with the installed jax_gridsample, two small functions for the CPU and writes them to
``tests/export_compat/NAME/`` with their inputs and the results they give here:

- ``forward.bin``: grid_sample calls serialized with ``vjp_order=1`` (the forward and the
  backward target with both gradients), between them every interpolation, padding (version 2:
  "constant" with the fill value FILL_VALUE, "wrap", and padding per axis too), align_corners
  and layout, float32 and float64, 2D and 3D;
- ``backward.bin``: grid_sample_backward calls that ask for some of the gradients each (the
  output mask; version 3: the fill value's too);
- ``data.npz``: their inputs, results, and the vjp's cotangents and results, each kind as one
  float64 vector of the arrays one after another (their shapes and dtypes are the artifacts');
- ``about.json``: the calls' parameters, the fill value, the targets the artifacts call, who
  exported them.

tests/test_export_compat.py loads every folder's artifacts with the package under test. Run this
once per new version of the targets (jax_gridsample/_contract.py says when) and commit the
folder; never rewrite a folder that was committed: it stands for artifacts users hold.
"""

from __future__ import annotations

import json
import re
import sys
from importlib import metadata
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import export  # noqa: E402

import jax_gridsample as gs  # noqa: E402

# (spatial rank, dtype, channels, mode, padding, align_corners, channels last); 8 channels where
# channels last, so that the CPU kernels take that layout themselves (fewer go through copies).
FORWARD_CALLS = [
    (2, "float32", 2, "bilinear", "zeros", False, False),
    (2, "float32", 2, "nearest", "border", True, False),
    (2, "float32", 8, "bicubic", "reflection", False, True),
    (3, "float64", 2, "bilinear", "reflection", True, False),
    (3, "float64", 8, "nearest", "zeros", False, True),
    (3, "float64", 2, "bicubic", "border", True, False),
    (2, "float32", 2, "bilinear", "constant", False, False),
    (2, "float32", 8, "bicubic", ("wrap", "border"), True, True),
    (3, "float64", 2, "bilinear", ("constant", "wrap", "reflection"), False, False),
    (3, "float64", 2, "nearest", "wrap", True, False),
]
# the same fields, then the output mask
BACKWARD_CALLS = [
    (2, "float32", 2, "bilinear", "border", False, False, (True, False)),
    (3, "float64", 2, "bilinear", "zeros", True, False, (False, True)),
    (2, "float64", 2, "bicubic", ("constant", "wrap"), False, False, (False, True)),
    (2, "float32", 2, "bilinear", ("constant", "border"), True, False, (False, True, True)),
]
FILL_VALUE = 0.75  # of every "constant" axis
SPATIAL = {2: (4, 3), 3: (2, 3, 3)}
POINTS = {2: (2, 3), 3: (2, 2, 2)}


def kwargs(call) -> dict:
    _, _, _, mode, padding, align_corners, channels_last = call[:7]
    kw = dict(mode=mode, padding_mode=padding, align_corners=align_corners,
              layout=("NHWC" if len(SPATIAL[call[0]]) == 2 else "NDHWC") if channels_last
              else None)
    if "constant" in (padding if isinstance(padding, tuple) else (padding,)):
        kw["fill_value"] = FILL_VALUE
    return kw


def operands(call, rng) -> tuple[np.ndarray, np.ndarray]:
    dims, dtype, channels, *_, channels_last = call[:7]
    spatial = SPATIAL[dims]
    shape = (1, *spatial, channels) if channels_last else (1, channels, *spatial)
    x = rng.standard_normal(shape).astype(dtype)
    grid = rng.uniform(-1.2, 1.2, (1, *POINTS[dims], dims)).astype(dtype)
    return x, grid


def forward(*args):
    return tuple(gs.grid_sample(args[2 * i], args[2 * i + 1], **kwargs(call))
                 for i, call in enumerate(FORWARD_CALLS))


def backward(*args):
    results = []
    for i, call in enumerate(BACKWARD_CALLS):
        grad_output, x, grid = args[3 * i:3 * i + 3]
        grads = gs.grid_sample_backward(grad_output, x, grid, output_mask=call[7], **kwargs(call))
        results.extend(g for g in grads if g is not None)
    return tuple(results)


def flat(arrays) -> np.ndarray:
    """The arrays raveled one after another, in float64 (which holds float32 values exactly)."""
    return np.concatenate([np.asarray(a, np.float64).ravel() for a in arrays])


def targets(exported: export.Exported) -> list[str]:
    return sorted(set(re.findall(r"custom_call @(\w+)", exported.mlir_module())))


def main(name: str) -> None:
    folder = Path(__file__).resolve().parent / name
    folder.mkdir()
    rng = np.random.default_rng(47)
    data = {}
    checks = gs.export_safety_checks()

    args = [a for call in FORWARD_CALLS for a in operands(call, rng)]
    exported = export.export(jax.jit(forward), platforms=("cpu",), disabled_checks=checks)(*args)
    outputs, vjp = jax.vjp(forward, *args)
    cotangents = [rng.standard_normal(o.shape).astype(o.dtype) for o in outputs]
    grads = vjp(tuple(jnp.asarray(c) for c in cotangents))
    (folder / "forward.bin").write_bytes(exported.serialize(vjp_order=1))
    called = targets(exported) + targets(exported.vjp())
    data.update(forward_args=flat(args), forward_outputs=flat(outputs),
                forward_cotangents=flat(cotangents), forward_vjp=flat(grads))

    args = []
    for call in BACKWARD_CALLS:
        x, grid = operands(call, rng)
        out_shape = gs.grid_sample(x, grid, **kwargs(call)).shape
        args += [rng.standard_normal(out_shape).astype(x.dtype), x, grid]
    exported = export.export(jax.jit(backward), platforms=("cpu",), disabled_checks=checks)(*args)
    (folder / "backward.bin").write_bytes(exported.serialize())
    called += targets(exported)
    data.update(backward_args=flat(args), backward_outputs=flat(backward(*args)))

    np.savez_compressed(folder / "data.npz", **data)
    versions = f"jax_gridsample {gs.__version__}, jax {jax.__version__}, " \
               f"jaxlib {metadata.version('jaxlib')}"

    def one_per_line(calls):
        return ",\n".join(f"  {json.dumps(call)}" for call in calls)

    (folder / "about.json").write_text(
        f'{{\n "exported_by": {json.dumps(versions)},\n'
        f' "targets": {json.dumps(sorted(set(called)))},\n'
        f' "fill_value": {FILL_VALUE},\n'
        f' "forward_calls": [\n{one_per_line(FORWARD_CALLS)}\n ],\n'
        f' "backward_calls": [\n{one_per_line(BACKWARD_CALLS)}\n ]\n}}\n')

if __name__ == "__main__":
    main(sys.argv[1])
