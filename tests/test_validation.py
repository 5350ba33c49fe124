"""Bad input raises ValueError/TypeError at trace time, with a message naming the problem."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_gridsample

X4 = jnp.zeros((2, 3, 4, 5))
G4 = jnp.zeros((2, 3, 3, 2))
X5 = jnp.zeros((2, 3, 4, 5, 6))
G5 = jnp.zeros((2, 3, 3, 3, 3))


@pytest.mark.parametrize(
    "input, grid, kwargs, error, match",
    [
        (jnp.zeros((2, 3, 4)), jnp.zeros((2, 3, 2)), {}, ValueError, r"input must have rank 4"),
        (jnp.zeros((1, 2, 3, 4, 5, 6)), G5, {}, ValueError, r"input must have rank 4"),
        (X4, jnp.zeros((2, 3, 3, 3, 2)), {}, ValueError, r"grid must have the same rank"),
        (X4, jnp.zeros((2, 3, 3, 3)), {}, ValueError, r"grid's last dimension must be 2"),
        (X5, jnp.zeros((2, 3, 3, 3, 2)), {}, ValueError, r"grid's last dimension must be 3"),
        (X4, jnp.zeros((3, 3, 3, 2)), {}, ValueError, r"same batch size.*\(2, 3, 4, 5\)"),
        (jnp.zeros((2, 3, 0, 5)), G4, {}, ValueError, r"non-zero spatial sizes.*\(2, 3, 0, 5\)"),
        (X4, G4, {"mode": "linear"}, ValueError, r"mode='linear' is not supported.*'bilinear'"),
        (X4, G4, {"mode": 3}, ValueError, r"mode=3 is not a valid code"),
        (X4, G4, {"mode": 1.0}, TypeError, r"mode must be a string"),
        (X4, G4, {"mode": True}, TypeError, r"mode must be a string"),
        (X4, G4, {"padding_mode": "periodic"}, ValueError,
         r"padding_mode='periodic' is not supported.*'constant', 'wrap'"),
        (X4, G4, {"padding_mode": -1}, ValueError, r"padding_mode=-1 is not a valid code"),
        (X4, G4, {"padding_mode": 5}, ValueError, r"padding_mode=5 is not a valid code"),
        (X4, G4, {"padding_mode": ("wrap",)}, ValueError,
         r"has 1 entries; a tuple needs one per spatial axis of the grid \(2: \(x, y\)\)"),
        (X5, G5, {"padding_mode": ("wrap", "border")}, ValueError, r"\(3: \(x, y, z\)\)"),
        (X4, G4, {"padding_mode": ("wrap", "mirror")}, ValueError,
         r"padding_mode\[1\]='mirror' is not supported"),
        (X4, G4, {"padding_mode": ("wrap", 2.0)}, TypeError, r"padding_mode\[1\] must be a string"),
        (X4, G4, {"padding_mode": ("zeros", "constant")}, ValueError,
         r"mixes 'zeros' and 'constant'"),
        (X4, G4, {"fill_value": 1.0}, ValueError,
         r"fill_value is given, but padding_mode \('zeros', 'zeros'\) has no 'constant' axis"),
        (X4, G4, {"padding_mode": "wrap", "fill_value": 0.0}, ValueError, r"no 'constant' axis"),
        (X4, G4, {"padding_mode": "constant", "fill_value": jnp.zeros(2)}, ValueError,
         r"fill_value must be a scalar or have shape \(C,\) = \(3,\).*\(2, 3, 4, 5\); got shape "
         r"\(2,\)"),
        (X4, G4, {"padding_mode": "constant", "fill_value": jnp.zeros((1, 3))}, ValueError,
         r"got shape \(1, 3\)"),
        (X4, G4, {"padding_mode": "constant", "fill_value": "white"}, TypeError,
         r"fill_value must be a real number"),
        (X4, G4, {"padding_mode": "constant", "fill_value": True}, TypeError,
         r"fill_value must be a real number"),
        (X4, G4, {"padding_mode": "constant", "fill_value": 1j}, TypeError,
         r"fill_value must be a real number"),
        (X4, G4, {"padding_mode": "constant", "fill_value": jnp.zeros(3, jnp.complex64)},
         TypeError, r"fill_value must have a real \(integer or floating\) dtype, got complex64"),
        (X4, G4, {"align_corners": 1}, TypeError, r"align_corners must be a bool"),
        (X4, G4, {"implementation": "gpu"}, ValueError, r"implementation='gpu'"),
        (X4, G4, {"layout": "NDHWC"}, ValueError, r"layout='NDHWC' is not valid for a rank-4"),
        (X4.astype(jnp.int32), G4, {}, TypeError, r"input must have a floating dtype.*int32"),
        (X4, G4.astype(jnp.int32), {}, TypeError, r"grid must have a floating dtype.*int32"),
        (X4, G4.astype(jnp.float32), {}, TypeError, r"same dtype.*float64.*float32"),
        ("image", G4, {}, TypeError, r"input must be an array"),
        # empty, but the non-zero dimensions multiply to 2^62 or more (int64 sizes overflow)
        (jnp.zeros((1, 0) + (2**22,) * 3), jnp.zeros((1, 2, 2, 2, 3)), {}, ValueError,
         r"input shape \(1, 0, 4194304, 4194304, 4194304\) is too large.*below 2\*\*62"),
        (jnp.zeros((0, 1, 2, 2, 2)), jnp.zeros((0,) + (2**21,) * 3 + (3,)), {}, ValueError,
         r"grid shape \(0, 2097152, 2097152, 2097152, 3\) is too large"),
        (jnp.zeros((0, 2**31, 2, 2)), jnp.zeros((0, 2**32, 1, 2)), {}, ValueError,
         r"output shape \(0, 2147483648, 4294967296, 1\) is too large"),
    ],
)
def test_grid_sample_rejects(input, grid, kwargs, error, match):
    with pytest.raises(error, match=match):
        jax_gridsample.grid_sample(input, grid, **kwargs)
    if hasattr(input, "shape"):  # also at trace time, inside jit
        with pytest.raises(error, match=match):
            jax.jit(lambda x, g: jax_gridsample.grid_sample(x, g, **kwargs))(input, grid)


@pytest.mark.parametrize(
    "grad_output, kwargs, error, match",
    [
        (jnp.zeros((2, 3, 3, 4)), {}, ValueError, r"grad_output must have shape \(2, 3, 3, 3\)"),
        (jnp.zeros((2, 3, 3, 3), jnp.float32), {}, TypeError, r"grad_output must have the input"),
        (jnp.zeros((2, 3, 3, 3)), {"output_mask": (True,)}, ValueError, r"output_mask must be two"),
        (jnp.zeros((2, 3, 3, 3)), {"output_mask": (True,) * 4}, ValueError,
         r"or three \(input_grad, grid_grad, fill_grad\)"),
        (jnp.zeros((2, 3, 3, 3)), {"output_mask": (1, 0)}, ValueError, r"output_mask must be two"),
        (jnp.zeros((2, 3, 3, 3)), {"output_mask": "tt"}, ValueError, r"output_mask must be two"),
    ],
)
def test_grid_sample_backward_rejects(grad_output, kwargs, error, match):
    with pytest.raises(error, match=match):
        jax_gridsample.grid_sample_backward(grad_output, X4, G4, **kwargs)


@pytest.mark.parametrize(
    "theta, size, error, match",
    [
        (jnp.zeros((2, 2, 3)), (2, 3, 4, 5, 6), ValueError, r"theta must have shape \(2, 3, 4\)"),
        (jnp.zeros((2, 3, 4)), (2, 3, 4, 5), ValueError, r"theta must have shape \(2, 2, 3\)"),
        (jnp.zeros((3, 2, 3)), (2, 3, 4, 5), ValueError, r"theta must have shape \(2, 2, 3\)"),
        (jnp.zeros((2, 2, 3)), (2, 3, 4), ValueError, r"size must be \(N, C, H, W\)"),
        (jnp.zeros((2, 2, 3)), (2, 3, 0, 5), ValueError, r"size must be positive"),
        (jnp.zeros((2, 2, 3), jnp.int32), (2, 3, 4, 5), TypeError, r"theta must have a floating"),
        (jnp.zeros((2, 2, 3)), 5, TypeError, r"size must be a sequence of ints"),
    ],
)
def test_affine_grid_rejects(theta, size, error, match):
    with pytest.raises(error, match=match):
        jax_gridsample.affine_grid(theta, size)


@pytest.mark.parametrize("platform", ["tpu", "rocm"])
def test_native_on_a_platform_without_a_kernel_is_a_clear_error(platform):
    traced = jax.jit(lambda x, g: jax_gridsample.grid_sample(x, g, implementation="native")).trace(
        X4, G4
    )
    with pytest.raises(NotImplementedError, match=rf"implementation='native'.*'{platform}'"):
        traced.lower(lowering_platforms=(platform,))
    # 'auto' lowers there (to the reference)
    jax.jit(lambda x, g: jax_gridsample.grid_sample(x, g)).trace(X4, G4).lower(
        lowering_platforms=(platform,)
    )


def test_enums_carry_the_aclnn_codes():
    assert [int(m) for m in jax_gridsample.Interpolation] == [0, 1, 2]
    assert [m.name for m in jax_gridsample.Interpolation] == ["BILINEAR", "NEAREST", "BICUBIC"]
    # 0-2 are aclnn's; 3 and 4 continue them
    assert [int(m) for m in jax_gridsample.Padding] == [0, 1, 2, 3, 4]
    assert [m.name for m in jax_gridsample.Padding] == ["ZEROS", "BORDER", "REFLECTION",
                                                        "CONSTANT", "WRAP"]
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((1, 1, 4, 4)))
    g = jnp.asarray(rng.uniform(-1, 1, (1, 2, 2, 2)))
    by_name = jax_gridsample.grid_sample(x, g, mode="bicubic", padding_mode="reflection")
    by_code = jax_gridsample.grid_sample(x, g, mode=2, padding_mode=2)
    by_enum = jax_gridsample.grid_sample(x, g, mode=jax_gridsample.Interpolation.BICUBIC,
                                         padding_mode=jax_gridsample.Padding.REFLECTION)
    by_other_case = jax_gridsample.grid_sample(x, g, mode="BiCubic", padding_mode="Reflection")
    for other in (by_code, by_enum, by_other_case):
        np.testing.assert_array_equal(np.asarray(by_name), np.asarray(other))
    g = 3 * g  # taps outside: the modes differ
    for name, code in (("constant", 3), ("wrap", 4)):
        kw = dict(fill_value=0.5) if name == "constant" else {}
        by_name = jax_gridsample.grid_sample(x, g, padding_mode=(name, "border"), **kw)
        by_code = jax_gridsample.grid_sample(x, g, padding_mode=(code, 1), **kw)
        by_list = jax_gridsample.grid_sample(x, g, padding_mode=[name, "border"], **kw)
        for other in (by_code, by_list):
            np.testing.assert_array_equal(np.asarray(by_name), np.asarray(other))
        assert not np.array_equal(np.asarray(by_name),
                                  np.asarray(jax_gridsample.grid_sample(x, g, padding_mode=1)))


def test_the_native_cpu_kernel_is_built_and_loaded():
    """`pip install .` builds it; a missing kernel is a failure here, never a silent skip."""
    assert jax_gridsample.native_status()["cpu"] == "available", jax_gridsample.native_status()
