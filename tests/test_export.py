"""Deploying with jax.export: single- and multi-platform artifacts that load in a fresh process.

- export_runner.py (a background process, see background.py) exports grid_sample (every mode and
  padding, 2D and 3D) with ``vjp_order=1`` for cpu; cpu+cuda; cpu+cuda+tpu+ascend (the Ascend
  platform known to JAX through a stand-in plugin without a device, so its branch runs the
  reference: aclnn is used only where the device could be asked and checked); and
  with ``implementation="reference"`` for cpu+cuda+tpu. A new process that imports only jax
  (then the package) loads them: calling each artifact and its vjp there gives the same bits as
  calling the function in the exporting one.
- ``export_safety_checks()`` is what ``jax.export`` needs for our custom calls, and the reference
  needs none: it exports no custom call.
- Shape polymorphism: a symbolic batch exports and serves every batch size; any other symbolic
  dimension is a ValueError naming the argument.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import background
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import jax_gridsample
from jax_gridsample import _contract

BACKGROUND = pytest.StashKey[dict]()
CURRENT = [_contract.FORWARD_TARGET, _contract.CPU_BACKWARD_TARGET]


def start_background(names: list[str]) -> dict:
    """export_runner.py, which the round-trip tests read (see background.py)."""
    if not any(name.startswith("test_round_trip") for name in names):
        return {}
    return {"round_trip": background.start_python(str(Path(__file__).with_name(
        "export_runner.py")))}


@pytest.fixture(scope="module")
def round_trip(request) -> dict:
    return background.result_of(request, sys.modules[__name__], "round_trip")


ARTIFACT_TARGETS = {
    "cpu": CURRENT,
    "cpu-cuda": CURRENT,
    # Without an Ascend device nothing can be asked of CANN nor checked (docs/ascend.md, "First
    # use"): the Ascend branch runs the reference.
    "cpu-cuda-tpu-ascend": CURRENT,
    "reference": [],
}


@pytest.mark.parametrize("name", sorted(ARTIFACT_TARGETS))
def test_round_trip(round_trip, name):
    """Each artifact calls the targets it should, and gives the exporting process's bits."""
    assert sorted(round_trip["targets"][name]) == sorted(ARTIFACT_TARGETS[name])
    expected, loaded = round_trip["expected"][name], round_trip["loaded"]["results"][name]
    for key in ("outputs", "vjp"):
        assert len(loaded[key]) == len(expected[key]) == (6 if key == "outputs" else 12)
        for got, want in zip(loaded[key], expected[key], strict=True):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_round_trip_loading_process(round_trip):
    """The loading process imported nothing of the tests' (torch, pytest, ...); before it
    imported jax_gridsample, the reference artifact ran and one with our custom calls failed
    with an error that names the missing target (an exception, not a crash)."""
    loaded = round_trip["loaded"]
    assert not loaded["package_imported_first"]
    assert not {"torch", "pytest", "flax", "oracle", "background"} & set(loaded["modules"])
    for key in ("outputs", "vjp"):
        for got, want in zip(loaded["without_package"][key],
                             round_trip["expected"]["reference"][key], strict=True):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    # jaxlib's wording (older releases: "No registered implementation for FFI custom call to")
    assert re.search(r"(No FFI handler registered for|No registered implementation for FFI "
                     rf"custom call to) {_contract.FORWARD_TARGET}\b",
                     loaded["error_without_package"]), loaded["error_without_package"]


def _sample(implementation="auto"):
    def loss(x, grid):
        return jnp.sum(jax_gridsample.grid_sample(x, grid, implementation=implementation) ** 2)
    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def _operands():
    return jnp.ones((1, 2, 4, 5), jnp.float32), jnp.zeros((1, 3, 3, 2), jnp.float32)


def test_export_safety_checks_are_what_export_needs():
    """Without them jax.export refuses our custom calls; with them it serializes the forward
    and backward; they name every released target and nothing else."""
    with pytest.raises(ValueError, match="Cannot serialize code with custom calls"):
        export.export(_sample(), platforms=("cpu",))(*_operands())
    exported = export.export(_sample(), platforms=("cpu",),
                             disabled_checks=jax_gridsample.export_safety_checks())(*_operands())
    assert set(re.findall(r"custom_call @(\w+)", exported.mlir_module())) == set(CURRENT)
    assert exported.serialize()
    checks = jax_gridsample.export_safety_checks()
    assert checks == [export.DisabledSafetyCheck.custom_call(name)
                      for name in _contract.RELEASED_TARGETS]
    assert {"jax_gridsample_forward", "jax_gridsample_backward", *CURRENT,
            _contract.ASCEND_FORWARD_TARGET, _contract.ASCEND_BACKWARD_TARGET} \
        <= set(_contract.RELEASED_TARGETS)


@pytest.mark.parametrize("implementation", ["reference", "native"])
def test_a_symbolic_batch_serves_every_batch_size(implementation):
    """An artifact exported with a symbolic batch, serialized with its vjp: its output and its
    gradients (input, grid, per-channel fill value) for 3 and for 1 batch elements are those of
    the call itself, to float64 rounding."""
    rng = np.random.default_rng(30)
    x = jnp.asarray(rng.standard_normal((3, 2, 5, 6)))
    grid = jnp.asarray(rng.uniform(-1.3, 1.3, (3, 4, 3, 2)))
    fill = jnp.asarray([0.5, -2.0])

    def warp(x, g, fill):
        return jax_gridsample.grid_sample(x, g, padding_mode=("constant", "wrap"),
                                          fill_value=fill, implementation=implementation)

    (b,) = export.symbolic_shape("b")
    exported = export.export(jax.jit(warp), disabled_checks=jax_gridsample.export_safety_checks())(
        jax.ShapeDtypeStruct((b, 2, 5, 6), x.dtype), jax.ShapeDtypeStruct((b, 4, 3, 2), x.dtype),
        jax.ShapeDtypeStruct((2,), x.dtype))
    restored = export.deserialize(exported.serialize(vjp_order=1))
    for n in (3, 1):
        args = (x[:n], grid[:n], fill)
        for what, got, want in (
                ("output", restored.call(*args), warp(*args)),
                ("gradients", jax.grad(lambda *a: jnp.sum(restored.call(*a) ** 2),
                                       argnums=(0, 1, 2))(*args),
                 jax.grad(lambda *a: jnp.sum(warp(*a) ** 2), argnums=(0, 1, 2))(*args))):
            for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-12,
                                           err_msg=f"{what}, batch {n}")


@pytest.mark.parametrize("symbolic", ["input channels", "input height", "grid points"])
def test_a_symbolic_dimension_after_the_batch_is_a_value_error(symbolic):
    """Channels, spatial sizes and points are static: a symbolic one names its argument."""
    n, c, h, w, p, q = (3, 2, 5, 6, 4, 3)
    if symbolic == "input channels":
        (c,) = export.symbolic_shape("c")
    elif symbolic == "input height":
        (h,) = export.symbolic_shape("h")
    else:
        p, q = export.symbolic_shape("p, q")
    name = symbolic.split()[0]
    with pytest.raises(ValueError, match=rf"^{name} shape .* symbolic dimension after the batch"):
        export.export(jax.jit(jax_gridsample.grid_sample))(
            jax.ShapeDtypeStruct((n, c, h, w), jnp.float32),
            jax.ShapeDtypeStruct((n, p, q, 2), jnp.float32))


def test_the_cuda_backward_refuses_a_symbolic_batch(monkeypatch):
    """The CUDA backward's workspace size is not proportional to the batch: a symbolic batch is
    a ValueError before the compiled module is asked (a stand-in here, no CUDA build needed)."""
    from jax_gridsample import _native

    monkeypatch.setattr(_native, "_CUDA_MODULE", object())
    (b,) = export.symbolic_shape("b")
    x = jax.ShapeDtypeStruct((b, 2, 5, 6), jnp.float32)
    grid = jax.ShapeDtypeStruct((b, 4, 3, 2), jnp.float32)
    with pytest.raises(ValueError, match=r"input shape \(b, 2, 5, 6\): the CUDA kernels' backward "
                                         r"needs a static batch"):
        _native.cuda_backward_workspace_bytes(None, x, grid, interpolation=0,
                                              channels_last=False, output_mask=(True, True),
                                              deterministic=False)


def test_reference_exports_portable_stablehlo():
    """implementation="reference" for three platforms needs no disabled check and holds no
    custom call of any kind."""
    exported = export.export(_sample("reference"), platforms=("cpu", "cuda", "tpu"))(*_operands())
    assert "custom_call" not in exported.mlir_module()


def test_native_names_the_platform_without_a_kernel():
    """implementation="native" in a multi-platform export: the error names the branch's
    platform that has no kernel (tpu), not the first of the list."""
    with pytest.raises(NotImplementedError, match="for platform 'tpu'"):
        export.export(_sample("native"), platforms=("cpu", "tpu"),
                      disabled_checks=jax_gridsample.export_safety_checks())(*_operands())


WITHOUT_ABSL = """
import sys
sys.modules["absl"] = None  # as if absl-py were not installed: importing it fails
import jax, jax.numpy as jnp
import jax_gridsample as gs
x, grid = jnp.ones((1, 1, 3, 3)), jnp.zeros((1, 2, 2, 2))
print(float(jax.grad(lambda x: gs.grid_sample(x, grid).sum())(x).sum()))
try:
    gs.export_safety_checks()
    print("exports")
except ModuleNotFoundError as exc:
    print(exc)
"""


def test_import_needs_no_absl():
    """The package imports and differentiates without absl-py, which jax 0.6.0 and 0.6.1's
    jax.export import without declaring it; there, asking for the export checks says what to
    install, and every later jax exports without it."""
    import subprocess

    run = subprocess.run([sys.executable, "-c", WITHOUT_ABSL], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    gradient, exports = run.stdout.splitlines()
    assert float(gradient) == 4.0  # 4 points, each reading the centre pixel with weight 1
    if jax.__version_info__ < (0, 6, 2):
        assert "needs absl-py" in exports and "pip install absl-py" in exports
    else:
        assert exports == "exports"
