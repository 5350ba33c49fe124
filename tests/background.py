"""Checks that run in a separate Python process, started early so that they overlap the suite.

A test module that has such checks defines ``BACKGROUND`` (a ``pytest.StashKey``) and
``start_background(names)``, which starts the processes the selected tests ``names`` need and
returns them by name; conftest.py calls it when collection ends and stashes the result under
``BACKGROUND``. The processes then run on another core while this one runs the other tests; a
test takes its process's result with ``result_of``, which starts the processes itself if they were
not started (as in a pytest-xdist worker, see conftest.py). Each process prints one JSON line
last.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import jax_gridsample


def start_python(*args: str) -> subprocess.Popen:
    """``python ARGS...`` importing the same jax_gridsample as this process."""
    env = dict(os.environ)
    package_root = str(Path(jax_gridsample.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root, env.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def start(config: pytest.Config, items: list, module) -> None:
    """Starts the processes of the selected tests (`items`) of `module`; stashes them."""
    names = [item.originalname for item in items if getattr(item, "module", None) is module]
    config.stash[module.BACKGROUND] = module.start_background(names)


def result_of(request: pytest.FixtureRequest, module, name: str, timeout: float = 900):
    """The JSON that process `name` of `module` printed last (it must exit with 0 within
    `timeout` seconds of this call, or it is killed and the test fails)."""
    if module.BACKGROUND not in request.config.stash:
        start(request.config, request.session.items, module)
    run = request.config.stash[module.BACKGROUND][name]
    try:
        stdout, stderr = run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        run.kill()
        stdout, stderr = run.communicate()
        pytest.fail(f"{name} did not finish within {timeout} s; its stderr ends:\n"
                    f"{stderr[-3000:]}")
    finally:
        run.kill()  # a no-op once it has exited
    assert run.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


def stop(runs: dict) -> None:
    """Stops the processes that are still running (no test waited for them)."""
    for run in runs.values():
        if run.poll() is None:
            run.kill()
            run.wait()
