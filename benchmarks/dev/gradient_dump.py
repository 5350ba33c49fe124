"""Bitwise comparison of the native backward between two builds (a development check, not a test).

Dumps the native gradients of many small configurations (2D / 3D shapes with 1-3 batch elements,
some with few points, so one band; every mode x padding x align_corners, float32 / float64 /
bfloat16, both layouts, some NaN coordinates; grad of input and grid, and of the grid alone), so
that a change meant to keep the arithmetic can be checked against the previous build:

    PYTHONPATH=/path/to/old/build python benchmarks/dev/gradient_dump.py dump old.npz
    PYTHONPATH=/path/to/new/build python benchmarks/dev/gradient_dump.py dump new.npz
    python benchmarks/dev/gradient_dump.py compare old.npz new.npz   # bitwise (dump_compare.py)
"""

from __future__ import annotations

import numpy as np
from dump_compare import main

SHAPES = [((1, 3, 96, 80), (70, 90)), ((2, 5, 40, 40), (64, 48)), ((1, 17, 64, 32), (40, 40)),
          ((3, 2, 33, 31), (8, 9)), ((1, 4, 20, 24, 18), (22, 20, 16)),
          ((1, 9, 30, 8, 8), (16, 16, 8)), ((1, 2, 300, 7), (200, 30)),
          ((1, 40, 63, 65), (16, 16)), ((2, 12, 10, 12, 14), (6, 7, 8)),
          ((2, 32, 40, 40), (48, 48)), ((1, 11, 19, 29, 31), (10, 11, 9))]


def dump(path: str) -> None:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    import jax_gridsample as gs

    res = {}
    rng = np.random.default_rng(0)
    for si, (ish, osp) in enumerate(SHAPES):
        k = len(osp)
        for mode in ["bilinear", "nearest", "bicubic"][: 3 if k == 2 else 2]:
            for pad in ["zeros", "border", "reflection"]:
                for ac in [False, True]:
                    for dt in [np.float32, np.float64, jnp.bfloat16]:
                        for cl in [False, True]:
                            x = rng.standard_normal(ish).astype(np.float32)
                            g = rng.uniform(-1.2, 1.2, (ish[0],) + osp + (k,)).astype(np.float32)
                            if si == 1:  # some NaN coordinates
                                g[..., 0] = np.where(rng.random(osp) < 0.02, np.nan, g[..., 0])
                            xj, gj = jnp.asarray(x, dt), jnp.asarray(g, dt)
                            layout = None
                            if cl:
                                xj = jnp.moveaxis(xj, 1, -1)
                                layout = "NHWC" if k == 2 else "NDHWC"

                            def f(a, b, mode=mode, pad=pad, ac=ac, layout=layout):
                                return gs.grid_sample(a, b, mode=mode, padding_mode=pad,
                                                      align_corners=ac, implementation="native",
                                                      layout=layout)

                            out, vjp = jax.vjp(f, xj, gj)
                            ct = jnp.asarray(rng.standard_normal(out.shape), dt)
                            gi, gg = vjp(ct)
                            gg_only = jax.grad(lambda b, f=f, xj=xj, ct=ct: jnp.sum(
                                (f(xj, b) * ct).astype(jnp.float32)))(gj)
                            key = f"{si}_{mode}_{pad}_{ac}_{np.dtype(dt).name}_{cl}"
                            for name, v in (("gi", gi), ("gg", gg), ("gg_only", gg_only)):
                                res[f"{key}_{name}"] = np.asarray(v.astype(jnp.float64))
    np.savez(path, **res)
    print(f"{len(res)} arrays ({len(res) // 3} configurations) written to {path}")


if __name__ == "__main__":
    main(dump, __doc__)
