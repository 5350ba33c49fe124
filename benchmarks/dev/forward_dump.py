"""Bitwise comparison of the native forward between two builds (a development check, not a test).

Dumps the native float32 forward outputs of many small channels-first configurations, so that a
change meant to keep the arithmetic can be checked against the previous build:

- "all": 2D / 3D, every mode x padding x align_corners, 1 or 3 batch elements, 1 / 3 / 5
  channels, the first six coordinates NaN, +-inf, +-1e30, 3e9;
- "edge2d" / "edge3d": bilinear with widths 1, 2, 6, 33 (the pair path's edges), coordinates
  also exactly +-1, inputs with inf, -0.0 and NaN.

    PYTHONPATH=/path/to/old/build python benchmarks/dev/forward_dump.py dump old.npz
    PYTHONPATH=/path/to/new/build python benchmarks/dev/forward_dump.py dump new.npz
    python benchmarks/dev/forward_dump.py compare old.npz new.npz
"""

from __future__ import annotations

import itertools

import numpy as np
from dump_compare import main

SPECIALS = [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, 1.0, -1.0, 1.0, 1.0, -1.0, -1.0]


def dump(path: str) -> None:
    import jax.numpy as jnp

    import jax_gridsample as gs

    out = {}

    def run(key, x, g, mode, pad, ac):
        y = gs.grid_sample(jnp.asarray(x), jnp.asarray(g), mode=mode, padding_mode=pad,
                           align_corners=ac, implementation="native")
        out[key] = np.asarray(y)

    rng = np.random.default_rng(5)
    for dims, mode, pad, ac, n, c in itertools.product(
            (2, 3), ("bilinear", "nearest", "bicubic"), ("zeros", "border", "reflection"),
            (False, True), (1, 3), (1, 3, 5)):
        if dims == 3 and mode == "bicubic":
            continue
        spatial = (13, 17) if dims == 2 else (5, 7, 6)
        out_spatial = (11, 19) if dims == 2 else (6, 5, 7)
        x = rng.standard_normal((n, c) + spatial).astype(np.float32)
        g = rng.uniform(-1.3, 1.3, (n,) + out_spatial + (dims,)).astype(np.float32)
        g.reshape(-1)[:6] = SPECIALS[:6]
        run(f"all/{dims}d {mode} {pad} {ac} n{n} c{c}", x, g, mode, pad, ac)

    widths = ((5, 2), (4, 1), (1, 6), (2, 2), (9, 33))
    for dims, seed in ((2, 7), (3, 11)):
        rng = np.random.default_rng(seed)
        batches = ((2, 1), (2, 3), (2, 8)) if dims == 2 else ((1, 1), (1, 4), (3, 2))
        for (h, w), pad, ac, (n, c) in itertools.product(
                widths, ("zeros", "border", "reflection"), (False, True), batches):
            spatial = (h, w) if dims == 2 else (max(1, h // 2), h, w)
            out_spatial = (7, 21) if dims == 2 else (3, 5, 7)
            x = rng.standard_normal((n, c) + spatial).astype(np.float32)
            g = rng.uniform(-1.3, 1.3, (n,) + out_spatial + (dims,)).astype(np.float32)
            g.reshape(-1)[:12] = SPECIALS
            x.reshape(-1)[:3] = [np.inf, -0.0, np.nan]
            run(f"edge{dims}d/{spatial} {pad} {ac} n{n} c{c}", x, g, "bilinear", pad, ac)

    np.savez(path, **out)
    print(f"{len(out)} arrays written to {path}")


if __name__ == "__main__":
    main(dump, __doc__)
