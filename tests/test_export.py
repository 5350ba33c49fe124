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
