"""Run by test_examples.py in a subprocess: ``example_runner.py JSON``, JSON a list of [name,
args], runs each examples/NAME.py's main(ARGS) in turn with its figure written to a temporary
file, and prints one JSON line: for each name, what main returned, and the size and first bytes
of the PNG it wrote.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))  # as `python examples/NAME.py` has it: their flax_compat.py


def run(name: str, args: list[str]) -> dict:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as tmp:
        png = Path(tmp) / f"{name}.png"
        result = module.main([*args, "--out", str(png)])
        data = png.read_bytes() if png.is_file() else b""
    result = dict(result, png_size=len(data), png_magic=list(data[:8]))
    return json.loads(json.dumps(result, default=lambda value: np.asarray(value).tolist()))


if __name__ == "__main__":
    print(json.dumps({name: run(name, args) for name, args in json.loads(sys.argv[1])}))
