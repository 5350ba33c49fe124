"""The command line and the bitwise comparison shared by forward_dump.py and gradient_dump.py.

Each script dumps arrays computed by whatever build of the package it imports; `compare` then
says which arrays of two dumps differ in any bit (-0.0 and +0.0 differ, NaN payloads too).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np


def compare(path_a: str, path_b: str) -> int:
    """Prints how many arrays of the two dumps differ bitwise (or are missing in the second)."""
    a, b = np.load(path_a), np.load(path_b)
    differ = [k for k in a.files if k not in b.files or a[k].tobytes() != b[k].tobytes()]
    print(f"{len(a.files)} arrays compared; {len(differ)} differ {differ[:10]}")
    return 1 if differ else 0


def main(dump: Callable[[str], None], usage: str) -> None:
    """`dump PATH` or `compare OLD NEW` from the command line."""
    if len(sys.argv) == 3 and sys.argv[1] == "dump":
        dump(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        raise SystemExit(usage)
