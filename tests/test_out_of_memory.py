"""A native call whose host buffer cannot be allocated fails with RESOURCE_EXHAUSTED naming the
buffer and its size, and the process goes on: nothing escapes the FFI handler, and a failure in a
parallel task reaches the caller only after every helper thread has stopped (ffi/cpu/parallel.h).

memory_limit_check.py provokes the failures in a subprocess under an address-space limit.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import background
import pytest

from jax_gridsample import _native

pytestmark = pytest.mark.skipif(not _native.cpu_available(), reason="native CPU kernel not built")

BACKGROUND = pytest.StashKey[dict]()


def start_background(names: list[str]) -> dict:
    """memory_limit_check.py, which every test here reads (see background.py)."""
    script = str(Path(__file__).with_name("memory_limit_check.py"))
    return {"findings": background.start_python(script)}


@pytest.fixture(scope="module")
def findings(request) -> dict:
    found = background.result_of(request, sys.modules[__name__], "findings", timeout=120)
    if found.get("limit_not_enforced"):
        pytest.skip("this system lets a process allocate past its RLIMIT_AS (qemu-user does)")
    return found


def _assert_resource_exhausted(found: dict, buffer: str) -> None:
    """The handler's error as JAX raises it (older jaxlibs name the exception XlaRuntimeError
    and put "Buffer Definition Event: " before the handler's message)."""
    message = f"grid_sample (cpu): could not allocate the {buffer} ({found['bytes']} bytes)"
    assert re.fullmatch(r"(Jax|Xla)RuntimeError: RESOURCE_EXHAUSTED: "
                        r"(Buffer Definition Event: )?" + re.escape(message),
                        found["error"]), found["error"]


def test_allocation_failure_in_a_parallel_task(findings):
    found = findings["forward"]
    _assert_resource_exhausted(found, "row of zeros")
    assert found["after"] == [1.0, 1.0]  # the same call, without the limit


def test_allocation_failure_in_the_handler(findings):
    found = findings["backward"]
    _assert_resource_exhausted(found, "float32 input")
    assert found["after"] == 1.0
