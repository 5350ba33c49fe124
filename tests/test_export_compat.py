"""Back-compatibility of the FFI targets: artifacts exported by earlier versions still run.

Each folder of tests/export_compat/ holds CPU artifacts that some version of the package exported
(make_artifacts.py wrote them; its docstring says what they hold): ``v1`` calls version 1 of the
targets by their current names, ``v1-unversioned-names`` by the names the package gave them before
they carried a version (both exported with jax 0.10.2), ``v1-jax0.12`` the same as ``v1``, exported
with jax 0.12.0.1; ``v2`` calls version 2 (one padding mode per axis: wrap, tuples, and "constant"
as "zeros" plus its fill term), ``v3`` version 3 of the CPU backward (the fill value's gradient in
the backward's call), both exported with jax 0.10.2. Each must load with the package under
test, under every jax from the oldest that can load it (OLDEST_LOADER), and give the results stored
with it; those results are checked against the float64 reference too, so that a wrong stored value
cannot pass unseen. A later version of the kernels may sum in another order, hence a tolerance
(1e-5 for float32 values, 1e-12 for float64) and not equality.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import jax_gridsample
from jax_gridsample import _ascend, _contract, _native

FOLDER = Path(__file__).with_name("export_compat")
ARTIFACTS = sorted(p.name for p in FOLDER.iterdir() if (p / "about.json").is_file())
TOLERANCE = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}


def _split(flat: np.ndarray, avals) -> list[np.ndarray]:
    """data.npz's vectors back into arrays of the artifact's shapes and dtypes."""
    arrays, start = [], 0
    for aval in avals:
        size = int(np.prod(aval.shape))
        arrays.append(flat[start:start + size].reshape(aval.shape).astype(aval.dtype))
        start += size
    assert start == flat.size
    return arrays


def _kwargs(call, about) -> dict:
    """A call's arguments; version 2's may have a padding per axis, and a fill value (the
    folder's) with a "constant" axis."""
    dims, _, _, mode, padding, align_corners, channels_last = call[:7]
    padding = tuple(padding) if isinstance(padding, list) else padding
    kw = dict(mode=mode, padding_mode=padding, align_corners=align_corners,
              layout=("NHWC" if dims == 2 else "NDHWC") if channels_last else None)
    if "constant" in (padding if isinstance(padding, tuple) else (padding,)):
        kw["fill_value"] = about["fill_value"]
    return kw


def _close(got, want):
    want = np.asarray(want)
    tolerance = TOLERANCE[want.dtype]
    np.testing.assert_allclose(np.asarray(got, np.float64), want.astype(np.float64),
                               rtol=tolerance, atol=tolerance)


def _reference(function, *arrays, **kwargs):
    """``function`` on float64 copies with implementation="reference" (the oracle)."""
    return function(*(jnp.asarray(a, jnp.float64) for a in arrays), implementation="reference",
                    **kwargs)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


# The oldest jax that loads what a jax release exported, found by loading each folder under
# the releases from 0.6.0 on (JAX promises about a month of forward compatibility, no more).
# jax 0.6.0 to 0.8.1 refuse 0.10.2's artifacts ("exported for 0 devices": they read the device
# count from a field later releases no longer write) and 0.12.0.1's ("deserialize unsupported
# version 12"); jax 0.8.2 to 0.10.2 refuse 0.12.0.1's StableHLO ("Failed to deserialize
# StableHLO"). An exporter missing here fails the tests: find its range and add it.
OLDEST_LOADER = {"0.10.2": "0.8.2", "0.12.0.1": "0.11.0"}


def _load(name: str, which: str):
    about = json.loads((FOLDER / name / "about.json").read_text())
    exporter = re.search(r"\bjax (\S+),", about["exported_by"]).group(1)
    assert exporter in OLDEST_LOADER, f"{name}: say which jax loads jax {exporter}'s artifacts"
    if _release(jax.__version__) < _release(OLDEST_LOADER[exporter]):
        pytest.skip(f"{name} was exported with jax {exporter}, whose artifacts jax "
                    f"{OLDEST_LOADER[exporter]} and later load, not this jax ({jax.__version__})")
    exported = export.deserialize(bytearray((FOLDER / name / f"{which}.bin").read_bytes()))
    return about, exported, np.load(FOLDER / name / "data.npz")


def _targets(*exported) -> set[str]:
    return {t for e in exported for t in re.findall(r"custom_call @(\w+)", e.mlir_module())}


def test_the_current_version_has_artifacts():
    """A new version of the targets comes with its artifacts (_contract.py says how)."""
    assert f"v{_contract.CONTRACT_VERSION}" in ARTIFACTS
    assert {"v1", "v1-unversioned-names"} <= set(ARTIFACTS)


@pytest.mark.parametrize("name", ARTIFACTS)
def test_forward_and_vjp(name):
    about, exported, data = _load(name, "forward")
    assert _targets(exported, exported.vjp()) <= set(about["targets"])
    args = _split(data["forward_args"], exported.in_avals)
    outputs = _split(data["forward_outputs"], exported.out_avals)
    cotangents = _split(data["forward_cotangents"], exported.out_avals)
    grads = _split(data["forward_vjp"], exported.in_avals)

    got, vjp = jax.vjp(exported.call, *args)
    for g, w in zip([*got, *vjp(tuple(cotangents))], [*outputs, *grads], strict=True):
        _close(g, w)
    for i, call in enumerate(about["forward_calls"]):  # the stored results are right
        x, grid = args[2 * i:2 * i + 2]
        _close(_reference(jax_gridsample.grid_sample, x, grid, **_kwargs(call, about)),
               outputs[i])
        want = _reference(jax_gridsample.grid_sample_backward, cotangents[i], x, grid,
                          **_kwargs(call, about))
        for g, w in zip(want, grads[2 * i:2 * i + 2], strict=True):
            _close(g, w)


@pytest.mark.parametrize("name", ARTIFACTS)
def test_backward_with_output_mask(name):
    about, exported, data = _load(name, "backward")
    assert _targets(exported) <= set(about["targets"])
    args = _split(data["backward_args"], exported.in_avals)
    outputs = _split(data["backward_outputs"], exported.out_avals)
    for g, w in zip(exported.call(*args), outputs, strict=True):
        _close(g, w)
    wanted = []
    for i, call in enumerate(about["backward_calls"]):
        grads = _reference(jax_gridsample.grid_sample_backward, *args[3 * i:3 * i + 3],
                           output_mask=tuple(call[7]), **_kwargs(call, about))
        wanted += [g for g in grads if g is not None]
    for g, w in zip(wanted, outputs, strict=True):
        _close(g, w)


@pytest.mark.parametrize("module, targets, platforms", [
    ("_cpu_kernels", (_contract.FORWARD_TARGET, _contract.CPU_BACKWARD_TARGET,
                      _contract.BACKWARD_TARGET, _contract.FILL_BACKWARD_TARGET,
                      _contract.FORWARD_TARGET_V1, _contract.BACKWARD_TARGET_V1), ("cpu",)),
    ("_ascend_kernels", (_ascend.FORWARD_TARGET, _ascend.BACKWARD_TARGET),
     _ascend.PLATFORM_NAMES),
])
def test_every_name_of_a_target_is_registered(monkeypatch, module, targets, platforms):
    """Each target is registered under its name and under its other names (version 1's: the
    name without the version), same handler, for every spelling of its platform."""
    registered = {}
    monkeypatch.setattr(jax.ffi, "register_ffi_target",
                        lambda name, capsule, platform, **_: registered.setdefault(
                            (name, platform), capsule))
    compiled, status, refused = _native.load_and_register(module, targets, platforms)
    assert (status, refused) == ("available", {})
    handlers = compiled.registrations()
    for target in targets:
        names = [target, *(a for a, t in _contract.ALIASES.items() if t == target)]
        assert len(names) == (2 if target.endswith("_v1") else 1)
        for alias in names:
            for platform in platforms:
                assert registered[(alias, platform)] is not None
        # the same handler (one capsule each call: compare the pointers they hold)
        pointers = {_pointer(registered[(alias, platform)]) for alias in names
                    for platform in platforms}
        assert pointers == {_pointer(handlers[target])}


def _pointer(capsule) -> int:
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, None)
