"""jit, vmap (every in_axes), grad and their compositions, against plain Python loops.

The batching rules rewrite a vmapped call into one call on folded shapes before it is lowered,
the same for both implementations. So the vmap tests take every in_axes with every rank and
layout (forward) or every output_mask (backward), each with one implementation, alternating so
that every in_axes, rank, layout and mask meets both; vmap of grad and the lowering checks take
every in_axes with both.
"""

from __future__ import annotations

import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracle import implementations

import jax_gridsample

IMPLEMENTATIONS = implementations()
KWARGS = dict(mode="bilinear", padding_mode="border", align_corners=False)
B = 3  # the vmapped size


def _data(dims, rng, channels_last=False):
    spatial, out_spatial = (4, 5, 6)[-dims:], (3, 2, 4)[-dims:]
    x = rng.standard_normal((2,) + spatial + (3,) if channels_last else (2, 3) + spatial)
    grid = rng.uniform(-1.2, 1.2, (2,) + out_spatial + (dims,))
    return jnp.asarray(x), jnp.asarray(grid)


def _batched(x, axis, rng):
    """B different copies of x stacked on ``axis`` (None: x itself, unbatched)."""
    if axis is None:
        return x
    stacked = jnp.stack([x * (1 + 0.5 * b) + 0.1 * b for b in range(B)], 0)
    return jnp.moveaxis(stacked, 0, axis)


def _take(x, axis, b):
    return x if axis is None else jnp.take(x, b, axis=axis)


AXES = [(0, 0), (1, 2), (0, None), (3, None), (None, 0), (None, 2), (2, 1)]


# (in_axes, rank, layout, implementation): every in_axes x rank x layout.
FORWARD_CASES = [(axes, dims, layout, IMPLEMENTATIONS[(i + dims + (layout == "last")) % 2])
                 for i, axes in enumerate(AXES) for dims in (2, 3) for layout in ("first", "last")]


@pytest.mark.parametrize("in_axes, dims, layout, implementation", FORWARD_CASES,
                         ids=["-".join(map(str, case)) for case in FORWARD_CASES])
def test_vmap_forward_matches_a_loop(in_axes, dims, layout, implementation):
    rng = np.random.default_rng(20)
    channels_last = layout == "last"
    layout_name = {(2, False): "NCHW", (2, True): "NHWC", (3, False): "NCDHW",
                   (3, True): "NDHWC"}[dims, channels_last]
    x, grid = _data(dims, rng, channels_last)
    xs, gs = _batched(x, in_axes[0], rng), _batched(grid, in_axes[1], rng)

    def f(x, g):
        return jax_gridsample.grid_sample(x, g, layout=layout_name,
                                          implementation=implementation, **KWARGS)

    got = jax.vmap(f, in_axes=in_axes)(xs, gs)
    expected = jnp.stack([f(_take(xs, in_axes[0], b), _take(gs, in_axes[1], b))
                          for b in range(B)])
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-12, atol=1e-12)


BACKWARD_AXES = list(itertools.product((0, None), (0, 2, None), (0, 1, None)))
BACKWARD_AXES = [a for a in BACKWARD_AXES if a != (None, None, None)]
MASKS = [(True, True), (True, False), (False, True)]
# (in_axes, output_mask, implementation): every in_axes x output_mask.
BACKWARD_CASES = [(axes, mask, IMPLEMENTATIONS[(i + j) % 2])
                  for i, axes in enumerate(BACKWARD_AXES) for j, mask in enumerate(MASKS)]


@pytest.mark.parametrize("in_axes, output_mask, implementation", BACKWARD_CASES,
                         ids=["-".join(map(str, case)) for case in BACKWARD_CASES])
def test_vmap_backward_matches_a_loop(in_axes, output_mask, implementation):
    rng = np.random.default_rng(21)
    x, grid = _data(2, rng)
    gout = jnp.asarray(rng.standard_normal((2, 3, 2, 4)))
    args = [_batched(a, ax, rng) for a, ax in zip((gout, x, grid), in_axes, strict=True)]

    def f(go, x, g):
        grads = jax_gridsample.grid_sample_backward(go, x, g, output_mask=output_mask,
                                                    implementation=implementation, **KWARGS)
        return tuple(g for g in grads if g is not None)

    got = jax.vmap(f, in_axes=in_axes)(*args)
    loop = [f(*(_take(a, ax, b) for a, ax in zip(args, in_axes, strict=True)))
            for b in range(B)]
    for i, g in enumerate(got):
        np.testing.assert_allclose(np.asarray(g), np.asarray(jnp.stack([r[i] for r in loop])),
                                   rtol=1e-12, atol=1e-12)


# (fill, grad_output, input, grid): the fill value batched, every other operand batched or shared.
FILL_AXES = [(0, *axes) for axes in itertools.product((0, None), repeat=3)]


@pytest.mark.parametrize("in_axes, implementation",
                         [(axes, IMPLEMENTATIONS[i % 2]) for i, axes in enumerate(FILL_AXES)],
                         ids=str)
def test_vmap_of_a_batched_fill_value_matches_a_loop(in_axes, implementation):
    """Under "constant", a batched fill value (which cannot fold into the channels with a shared
    input): the forward and every gradient against a loop, with the other operands batched or
    shared, the fill value alone included."""
    rng = np.random.default_rng(22)
    x, grid = _data(2, rng)
    gout = jnp.asarray(rng.standard_normal((2, 3, 2, 4)))
    args = [_batched(a, ax, rng) for a, ax in zip((jnp.asarray([0.5, -1.5, 2.0]), gout, x, grid),
                                                   in_axes, strict=True)]
    kwargs = dict(KWARGS, padding_mode="constant", implementation=implementation)

    def f(fill, go, x, g):
        out = jax_gridsample.grid_sample(x, g, fill_value=fill, **kwargs)
        return out, *jax_gridsample.grid_sample_backward(go, x, g, fill_value=fill,
                                                         output_mask=(True, True, True), **kwargs)

    got = jax.vmap(f, in_axes=in_axes)(*args)
    loop = [f(*(_take(a, ax, b) for a, ax in zip(args, in_axes, strict=True))) for b in range(B)]
    for i, name in enumerate(("output", "input_grad", "grid_grad", "fill_grad")):
        np.testing.assert_allclose(np.asarray(got[i]), np.asarray(jnp.stack([r[i] for r in loop])),
                                   rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("in_axes", AXES, ids=str)
def test_vmap_of_grad_matches_a_loop(in_axes, implementation):
    rng = np.random.default_rng(22)
    x, grid = _data(2, rng)
    xs, gs = _batched(x, in_axes[0], rng), _batched(grid, in_axes[1], rng)
    weights = jnp.asarray(rng.standard_normal((2, 3, 2, 4)))

    def loss(x, g):
        out = jax_gridsample.grid_sample(x, g, implementation=implementation, **KWARGS)
        return jnp.sum(jnp.sin(out) * weights)

    grad = jax.grad(loss, argnums=(0, 1))
    got = jax.vmap(grad, in_axes=in_axes)(xs, gs)
    loop = [grad(_take(xs, in_axes[0], b), _take(gs, in_axes[1], b)) for b in range(B)]
    for i in range(2):
        np.testing.assert_allclose(np.asarray(got[i]), np.asarray(jnp.stack([r[i] for r in loop])),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_forward_mode_is_refused_and_reverse_over_reverse_gives_the_hessian(implementation):
    """docs/guide.md: forward mode (jax.jvp, so jax.jacfwd and jax.hessian) raises JAX's
    TypeError for a custom_vjp; jax.jacrev of jax.jacrev gives the Hessian with respect to the
    grid, that of the jnp reference function (plain jax.numpy, which jax.hessian takes)."""
    from jax_gridsample._enums import Interpolation, Padding
    from jax_gridsample._reference import grid_sample_reference

    rng = np.random.default_rng(23)
    x, grid = _data(2, rng)
    x, grid = x[:1], grid[:1, :1]  # a Hessian of 8 x 8

    def loss(g):
        out = jax_gridsample.grid_sample(x, g, padding_mode="border",
                                         implementation=implementation)
        return jnp.sum(out**2)

    with pytest.raises(TypeError, match="forward-mode"):
        jax.jvp(loss, (grid,), (grid,))
    with pytest.raises(TypeError, match="forward-mode"):
        jax.hessian(loss)(grid)
    expected = jax.jit(jax.hessian(lambda g: jnp.sum(grid_sample_reference(
        x, g, Interpolation.BILINEAR, Padding.BORDER, False) ** 2)))(grid)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.jacrev(jax.jacrev(loss)))(grid)),
                               np.asarray(expected), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_jit_grad_and_nested_vmap(implementation):
    rng = np.random.default_rng(23)
    x, grid = _data(3, rng)
    weights = jnp.asarray(rng.standard_normal((2, 3, 3, 2, 4)))

    def loss(x, g):
        out = jax_gridsample.grid_sample(x, g, implementation=implementation, **KWARGS)
        return jnp.sum(out * weights)

    eager = jax.grad(loss, argnums=(0, 1))(x, grid)
    for transformed in (jax.jit(jax.grad(loss, argnums=(0, 1))),
                        jax.grad(jax.jit(loss), argnums=(0, 1))):
        for e, g in zip(eager, transformed(x, grid), strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-12, atol=1e-12)

    # vmap over two extra axes (input batched on both, grid on the outer one only)
    xs = jnp.stack([jnp.stack([x + i + 2 * j for j in range(2)]) for i in range(3)])
    gs = jnp.stack([grid * (1 - 0.1 * i) for i in range(3)])

    def f(x, g):
        return jax_gridsample.grid_sample(x, g, implementation=implementation, **KWARGS)

    got = jax.jit(jax.vmap(jax.vmap(f, in_axes=(0, None)), in_axes=(0, 0)))(xs, gs)
    for i in range(3):
        for j in range(2):
            np.testing.assert_allclose(np.asarray(got[i, j]), np.asarray(f(xs[i, j], gs[i])),
                                       rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_remat_and_scan_match_an_unrolled_loop(implementation):
    """Iterative warping, as optical-flow refinement does it: jax.grad through a lax.scan of
    jax.checkpoint-ed steps (rematerialized in the backward pass) equals the gradient of the
    same steps written out in Python."""
    rng = np.random.default_rng(29)
    x, grid = _data(2, rng)
    x = x[:, :, :2, :4]  # the output's spatial shape, so that a step can warp its own output

    def step(image, g):
        return 0.5 * image + jax_gridsample.grid_sample(image, g, implementation=implementation,
                                                        padding_mode="wrap")

    def scanned(x, g):
        out, _ = jax.lax.scan(lambda c, _: (jax.checkpoint(step)(c, g), None), x, None, length=3)
        return jnp.sum(out**2)

    def unrolled(x, g):
        for _ in range(3):
            x = step(x, g)
        return jnp.sum(x**2)

    expected = jax.grad(unrolled, argnums=(0, 1))(x, grid)
    got = jax.jit(jax.grad(scanned, argnums=(0, 1)))(x, grid)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-12, atol=1e-12)


def _lowered(fn, *args) -> str:
    return jax.jit(fn).lower(*args).as_text()


def _broadcasts_an_argument(text: str) -> bool:
    """Whether the program's main function copies an argument (input or grid) along a new axis."""
    main = text.split("func.func public @main")[1].split("func.func")[0]
    return re.search(r"broadcast_in_dim %arg\d", main) is not None


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("in_axes", AXES, ids=str)
def test_vmap_is_one_call_without_loops_or_broadcasts(in_axes, implementation):
    """The vmapped axis folds into N, C or the output extent: no loop, no copy per batch."""
    rng = np.random.default_rng(24)
    x, grid = _data(2, rng)
    xs, gs = _batched(x, in_axes[0], rng), _batched(grid, in_axes[1], rng)

    def f(x, g):
        return jax_gridsample.grid_sample(x, g, implementation=implementation, **KWARGS)

    text = _lowered(jax.vmap(f, in_axes=in_axes), xs, gs)
    assert "stablehlo.while" not in text
    assert not _broadcasts_an_argument(text)
    if implementation == "native":
        assert text.count("custom_call @jax_gridsample_forward") == 1


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)], ids=str)
@pytest.mark.parametrize("argnums", [0, 1], ids=["input-grad", "grid-grad"])
def test_vmap_of_grad_is_one_backward_call_without_loops(argnums, in_axes):
    rng = np.random.default_rng(25)
    x, grid = _data(2, rng)
    xs, gs = _batched(x, in_axes[0], rng), _batched(grid, in_axes[1], rng)

    def loss(x, g):
        return jnp.sum(jax_gridsample.grid_sample(x, g, implementation="native", **KWARGS) ** 2)

    text = _lowered(jax.vmap(jax.grad(loss, argnums=argnums), in_axes=in_axes), xs, gs)
    assert "stablehlo.while" not in text
    assert text.count("custom_call @jax_gridsample_backward") == 1
    # the gradient of a mapped argument with respect to itself needs no copy of the shared one
    if in_axes[argnums] == 0 and in_axes[1 - argnums] is None:
        assert not _broadcasts_an_argument(text)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("argnums, mask", [(0, (True, False)), (1, (False, True)),
                                           ((0, 1), (True, True))], ids=str)
def test_only_the_needed_gradients_are_computed(argnums, mask, implementation):
    """jit(grad(argnums=...)) calls the backward with the matching output_mask."""
    rng = np.random.default_rng(26)
    x, grid = _data(2, rng)

    def loss(x, g):
        return jnp.sum(jax_gridsample.grid_sample(x, g, implementation=implementation,
                                                  **KWARGS) ** 2)

    grad = jax.jit(jax.grad(loss, argnums=argnums))
    jaxpr = jax.make_jaxpr(grad)(x, grid)
    # the jaxpr before DCE asks for both; the compiled program for only what argnums needs
    compiled = grad.lower(x, grid).compile().as_text()
    if implementation == "native":
        line = next(s for s in compiled.splitlines() if "jax_gridsample_backward" in s)
        outputs = line.split("=", 1)[1].split("custom-call")[0]
        assert outputs.count("f64[2,3,5,6]") == int(mask[0])  # grad_input
        assert outputs.count("f64[2,2,4,2]") == int(mask[1])  # grad_grid
    else:  # the reference: no scatter (input grad) / no gradient gather when not needed
        assert ("scatter" in compiled) == mask[0]
    assert "jax_gridsample_backward" in str(jaxpr)
    full = jax.grad(loss, argnums=(0, 1))(x, grid)
    got = grad(x, grid)
    got = got if isinstance(got, tuple) else (got,)
    wanted = [f for f, m in zip(full, mask, strict=True) if m]
    for g, f in zip(got, wanted, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(f), rtol=1e-12, atol=1e-12)


# (padding_mode, mode, dims, fill per channel): tuples, bicubic, a traced per-channel fill.
NEW_PADDING_CASES = [(("wrap", "border"), "bicubic", 2, False),
                     ("constant", "bilinear", 2, True),
                     (("constant", "wrap", "reflection"), "bicubic", 3, True),
                     ("wrap", "nearest", 3, False)]


@pytest.mark.parametrize("padding, mode, dims, per_channel", NEW_PADDING_CASES, ids=str)
def test_constant_and_wrap_run_the_native_kernel_under_jit_grad_and_vmap(padding, mode, dims,
                                                                         per_channel):
    """implementation="native" on the CPU: jit(vmap(grad)) of "constant" and "wrap" calls our
    forward and backward targets once each and holds no gather or scatter (the reference's)
    and no pad as large as the input (docs/semantics.md: no padded input);
    the values are a loop over the reference's, the fill gradient included (of a batched fill
    value computed in jax.numpy beside the backward target)."""
    rng = np.random.default_rng(27)
    x, grid = _data(dims, rng)
    xs, gs = _batched(x, 0, rng), _batched(grid, 0, rng)
    fill = jnp.asarray([0.5, -1.5, 2.0] if per_channel else 0.75)
    fills = _batched(fill, 0, rng)
    constant = "constant" in (padding if isinstance(padding, tuple) else (padding,))

    def loss(x, g, f, implementation):
        kw = dict(fill_value=f) if constant else {}
        out = jax_gridsample.grid_sample(x, g, mode=mode, padding_mode=padding,
                                         implementation=implementation, **kw)
        return jnp.sum(out**2)

    argnums = (0, 1, 2) if constant else (0, 1)
    native = jax.vmap(jax.grad(lambda x, g, f: loss(x, g, f, "native"), argnums=argnums))
    compiled = jax.jit(native).lower(xs, gs, fills).compile().as_text()
    assert compiled.count('custom_call_target="jax_gridsample_forward_v2"') == 1
    assert compiled.count('custom_call_target="jax_gridsample_backward_v3"') == 1
    assert " gather(" not in compiled and " scatter(" not in compiled
    padded = re.findall(r"= \w+\[([\d,]*)\](?:\{[^}]*\})? pad\(", compiled)
    assert all(np.prod([int(d) for d in shape.split(",") if d]) < xs.size for shape in padded)
    got = jax.jit(native)(xs, gs, fills)
    for b in range(B):
        want = jax.grad(lambda x, g, f: loss(x, g, f, "reference"), argnums=argnums)(
            xs[b], gs[b], fills[b])
        for name, a, e in zip(("input", "grid", "fill"), got, want, strict=False):
            np.testing.assert_allclose(np.asarray(a[b]), np.asarray(e), rtol=1e-10, atol=1e-10,
                                       err_msg=f"{name} gradient, batch {b}")
