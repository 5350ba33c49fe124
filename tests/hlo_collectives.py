"""Counting the collectives of a compiled program (sharded_check.py, multihost_check.py)."""

from __future__ import annotations

import re

COLLECTIVES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")


def count_collectives(hlo: str) -> dict[str, int]:
    """How many of each collective a compiled HLO module runs (a -start/-done pair is one)."""
    return {op: len(re.findall(rf"\s{op}(?:-start)?\(", hlo)) for op in COLLECTIVES}
