"""Smoke tests of the examples: each main() with tiny settings, checking what it reports.

Each runs in a process of its own (example_runner.py), started early (background.py), except
the panorama example, which needs no Flax: it runs in this process, so that its PNG can be read
back.

They need the example dependencies (flax, optax, scikit-learn, scikit-image, matplotlib, tqdm),
which the `test` extra installs; a missing one is a failure, not a skip.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
from pathlib import Path

import background
import numpy as np
import pytest

# each test's example and its tiny settings
ARGS = {
    # 120 steps: after 40 the test accuracy was 0.13-0.19 over seeds 0-3, too near chance for a
    # threshold of 0.15; after 120 it was 0.22-0.54 over seeds 0-2
    "test_spatial_transformer": (
        "spatial_transformer", ["--steps", "120", "--batch", "32", "--seed", "1"]),
    "test_optical_flow_warp": (
        "optical_flow_warp", ["--size", "48", "--levels", "2", "--steps", "40"]),
    "test_volume_registration_3d": (
        "volume_registration_3d",
        ["--size", "16", "--levels", "1", "--steps", "60", "--lr", "0.02"]),
}
BACKGROUND = pytest.StashKey[dict]()


def start_background(names: list[str]) -> dict:
    """One example_runner.py process for the selected tests' examples (see background.py)."""
    runner = str(Path(__file__).with_name("example_runner.py"))
    runs = [ARGS[n] for n in names if n in ARGS]  # not test_panorama_rotation: in this process
    return {"examples": background.start_python(runner, json.dumps(runs))}


@pytest.fixture(scope="module")
def results(request) -> dict:
    """What each example's main returned, by example name."""
    return background.result_of(request, sys.modules[__name__], "examples")


@pytest.fixture
def example_result(request, results) -> dict:
    result = results[ARGS[request.node.originalname][0]]
    # the PNG it wrote
    assert result["png_size"] > 1000
    assert bytes(result["png_magic"]) == b"\x89PNG\r\n\x1a\n"
    return result


def test_spatial_transformer(example_result):
    result = example_result
    for key in ("stn_losses", "plain_losses"):
        losses = np.asarray(result[key], dtype=float)
        assert losses.shape == (120,) and np.all(np.isfinite(losses))
        assert losses[-10:].mean() < losses[:10].mean()  # the loss goes down
    for key in ("stn_accuracy", "plain_accuracy"):
        assert not math.isnan(result[key]) and result[key] > 0.15  # chance is 0.1


def test_optical_flow_warp(example_result):
    history = example_result["epe_history"]
    assert len(history) == 3 and all(math.isfinite(e) for e in history)
    assert history[-1] < 0.6 * history[0]  # the endpoint error shrinks


def test_volume_registration_3d(example_result):
    result = example_result
    errors = [error for _, _, error in result["history"]]
    assert all(math.isfinite(e) for e in errors)
    assert result["error"] < 0.5 * result["initial_error"]  # the transform error shrinks
    assert result["mse_after"] < 0.5 * result["mse_before"]


def test_panorama_rotation(tmp_path, capsys):
    path = Path(__file__).resolve().parent.parent / "examples" / "panorama_rotation.py"
    spec = importlib.util.spec_from_file_location("example_panorama_rotation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    png = tmp_path / "panorama.png"
    result = module.main(["--height", "64", "--width", "128", "--roll-columns", "21",
                          "--output", str(png)])
    printed = capsys.readouterr().out

    import matplotlib.image

    image = matplotlib.image.imread(png)  # fails unless it is a valid PNG
    assert image.shape == (300, 1000, 4)  # figsize (10, 3) at 100 dpi, RGBA
    assert image[..., :3].std() > 0.1  # not blank

    # a yaw by whole columns is np.roll along x, to rounding, and the example says so
    match = re.search(r"yaw by 21 columns vs np.roll: max \|difference\| (\S+)", printed)
    assert match, printed
    assert float(match.group(1)) < 1e-5 and result["roll_difference"] < 1e-5
    # half a column more: the mean of two rolls with wrap along x; zeros darkens the seam column
    assert result["half_roll_difference_wrap"] < 1e-5
    assert result["half_roll_difference_zeros"] > 0.1
