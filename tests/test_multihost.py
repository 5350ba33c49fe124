"""grid_sample across processes: 2 processes of 4 CPU devices each, joined by
``jax.distributed.initialize`` on localhost (multihost_check.py, started when collection ends).

Sharded along the batch, the grid's points and the channels over the 8 devices of both
processes, the op gives each process the shards of the unsharded result and gradients, with the
collectives it needs on one host (test_sharding.py) and no more; a data-parallel training loop
ends with the same parameters in every process as on one device. A process that hangs is killed
by its own deadline (multihost_check.DEADLINE_SECONDS), and the test fails.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import background
import pytest

PROCESSES = 2
NONE = {"all-gather": 0, "all-reduce": 0, "reduce-scatter": 0, "all-to-all": 0,
        "collective-permute": 0}
ONE_SUM = dict(NONE, **{"all-reduce": 1})
# multihost_check.CASES -> the collectives of the program running the forward and the backward
EXPECTED = {
    "batch-native": NONE,
    "points-native": ONE_SUM,  # grad_input summed over the point shards
    "points-reference": ONE_SUM,
    "channels-native": ONE_SUM,  # grad_grid summed over the channel shards
}

BACKGROUND = pytest.StashKey[dict]()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def start_background(names: list[str]) -> dict:
    """The processes of multihost_check.py, one coordinator port (see background.py)."""
    script, port = str(Path(__file__).with_name("multihost_check.py")), str(_free_port())
    return {f"process-{i}": background.start_python(script, str(i), str(PROCESSES), port)
            for i in range(PROCESSES)}


@pytest.fixture(scope="module")
def findings(request) -> list[dict]:
    module = sys.modules[__name__]
    return [background.result_of(request, module, f"process-{i}", timeout=150)
            for i in range(PROCESSES)]


def test_every_process_joined(findings):
    assert [f["process_index"] for f in findings] == list(range(PROCESSES))
    assert all(f["devices"] == 4 * PROCESSES and f["local_devices"] == 4 for f in findings)
    assert all(sorted(f["cases"]) == sorted(EXPECTED) for f in findings)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sharded_across_processes(findings, name):
    for found in findings:
        case = found["cases"][name]
        assert case["collectives"] == EXPECTED[name]
        assert case["max_difference"] < 1e-12  # output and both gradients, this process's shards


def test_data_parallel_training(findings):
    first = findings[0]["training"]
    for found in findings:
        training = found["training"]
        assert training["params"] == first["params"]  # bitwise, in every process
        assert training["local_copies_equal"]
        assert training["unsharded_difference"] < 1e-6
        assert training["losses"] == first["losses"]
    assert first["losses"][-1] < 0.6 * first["losses"][0]
