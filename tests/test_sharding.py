"""Sharded grid_sample on 8 host devices: the op runs where its data lies.

One subprocess (sharded_check.py) runs every case and reports; the tests here say what each case
must give: the compiled program's collectives, counted (forward and backward together: the
forward needs none, each backward one sum, the fill value's gradient one more unless XLA
combines it with another), the shardings of the output and the gradients, and
the same numbers as on unsharded operands. Specs are written with trailing unsharded axes dropped.
"""

from __future__ import annotations

import sys
from pathlib import Path

import background
import pytest

NONE = {"all-gather": 0, "all-reduce": 0, "reduce-scatter": 0, "all-to-all": 0,
        "collective-permute": 0}
ONE_SUM = dict(NONE, **{"all-reduce": 1})
# the fill value's gradient adds a sum: one all-reduce more, or none where XLA combines the two
# (jax 0.10 does, jax 0.6 does not)
SUMS_WITH_FILL = [ONE_SUM, dict(NONE, **{"all-reduce": 2})]


def _expect(collectives, specs, kernel_calls=2):
    return {"collectives": collectives, "specs": specs, "kernel_calls": kernel_calls}


# case name (sharded_check.CASES) -> the collectives, the [output, gradients...] specs and, for
# the native kernels, the custom calls in one device's program.
EXPECTED = {
    # points: output sharded like the grid's points; grad_grid stays so; grad_input is summed
    "points-2d-ho": _expect(ONE_SUM, [[None, None, "d"], [], [None, "d"]]),
    "points-2d-wo-nhwc-bicubic-native": _expect(
        ONE_SUM, [[None, None, "d"], [], [None, None, "d"]]),
    "points-3d-do-native": _expect(ONE_SUM, [[None, None, "d"], [], [None, "d"]]),
    "points-3d-wo-ndhwc-bicubic": _expect(
        ONE_SUM, [[None, None, None, "d"], [], [None, None, None, "d"]]),
    # channels: output and grad_input sharded on C; grad_grid is summed
    "channels-2d-bicubic-native": _expect(ONE_SUM, [[None, "d"], [None, "d"], []]),
    "channels-3d-ndhwc": _expect(ONE_SUM, [[None, None, None, None, "d"]] * 2 + [[]]),
    "channels-2d-nhwc-native-auto": _expect(ONE_SUM, [[None, None, None, "d"]] * 2 + [[]]),
    # two-dimensional meshes: the batch stays sharded through everything
    "batch-points-2d-native": _expect(ONE_SUM, [["b", None, "d"], ["b"], ["b", "d"]]),
    "batch-channels-2d-bicubic": _expect(ONE_SUM, [["b", "d"], ["b", "d"], ["b"]]),
    "points-channels-2d": _expect(dict(NONE, **{"all-reduce": 2}),
                                  [[None, "c", None, "d"], [None, "c"], [None, None, "d"]]),
    # the input sharded on a spatial axis: gathered once, the rest as above
    "spatial-2d-native": _expect(dict(NONE, **{"all-gather": 1}),
                                 [[], [None, None, "d"], []]),
    "spatial-points-3d": _expect(dict(NONE, **{"all-gather": 1, "all-reduce": 1}),
                                 [[None, None, "d"], [None, None, "d"], [None, "d"]]),
    "batch-3d-native": _expect(NONE, [["b"], ["b"], ["b"]]),
    # only one gradient: its sum goes with the other one
    "points-2d-grid-grad-only-native": _expect(NONE, [[None, None, "d"], [None, "d"]]),
    "channels-3d-bicubic-input-grad-only-native": _expect(NONE, [[None, "d"], [None, "d"]]),
    # vmap over grids sharded on the mapped axis: it folds into the points (the backward binds
    # the two gradients separately, each with its own fold: three kernel calls)
    "vmap-grids-2d-native": _expect(ONE_SUM, [["d"], [], ["d"]], kernel_calls=3),
    # constant: the fill gradient sums over the batch and the points (XLA may combine that
    # sum with grad_input's), is sharded with the channels; the backward kernel computes it
    # (two kernel calls); wrap as any other mode
    "points-2d-constant-native": _expect(SUMS_WITH_FILL,
                                         [[None, None, "d"], [], [None, "d"], []]),
    "channels-2d-constant-native": _expect(SUMS_WITH_FILL,
                                           [[None, "d"], [None, "d"], [], ["d"]]),
    "batch-3d-constant-wrap-native": _expect(ONE_SUM, [["b"], ["b"], ["b"], []]),
    "points-2d-wrap": _expect(ONE_SUM, [[None, None, "d"], [], [None, "d"]]),
}
# the same under the partitioner jax does not use by default (Shardy or GSPMD)
OTHER_PARTITIONER = ("points-2d-ho", "channels-2d-nhwc-native-auto", "batch-points-2d-native")
EXPECTED.update({f"other-partitioner-{name}": EXPECTED[name] for name in OTHER_PARTITIONER})


BACKGROUND = pytest.StashKey[dict]()


def start_background(names: list[str]) -> dict:
    """sharded_check.py, which every test here reads (see background.py)."""
    return {"findings": background.start_python(str(Path(__file__).with_name("sharded_check.py")))}


@pytest.fixture(scope="module")
def findings(request) -> dict:
    return background.result_of(request, sys.modules[__name__], "findings")


def test_every_case_ran_on_8_devices(findings):
    assert findings["devices"] == 8
    assert sorted(findings["cases"]) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sharded_case(findings, name):
    found, expected = findings["cases"][name], EXPECTED[name]
    allowed = expected["collectives"]
    assert found["collectives"] in (allowed if isinstance(allowed, list) else [allowed])
    assert found["specs"] == expected["specs"]
    assert found["max_difference"] < 1e-12
    if "native" in name:
        assert found["kernel_calls"] == expected["kernel_calls"]  # once per device program


def test_inside_shard_map(findings):
    assert findings["shard_map_difference"] < 1e-12


def test_a_symbolic_batch_export_is_right_but_not_partitioned(findings):
    """docs/sharding.md: an artifact exported with a symbolic batch sharded over 8 devices gives
    the unsharded results for two batch sizes; custom_partitioning takes static shapes only, so
    its program gathers the operands."""
    found = findings["symbolic_batch_export"]
    assert found["max_difference"] < 1e-12
    assert found["all_gathers"] > 0


def test_sharded_volume_example(findings):
    """examples/sharded_volume.py: points sharded, the fit's only collective the sum of the
    volume's partial gradients (XLA may fuse the loss's own sum into it), and it learns."""
    found = findings["example"]
    collectives = found["collectives"]
    assert collectives["all-reduce"] in (1, 2)
    assert dict(collectives, **{"all-reduce": 0}) == NONE
    assert found["samples_spec"] == [None, None, "points"]
    assert found["last_loss"] < 0.5 * found["first_loss"]
