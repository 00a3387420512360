"""Output helpers: stable JSON, aligned text tables, humanized figures."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from engine.clock import format_instant
from engine.policy.units import describe_size


def emit_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, sort_keys=False) + "\n")
    sys.stdout.flush()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def size(n: int | None) -> str:
    return describe_size(n)


def instant(ms: int | None) -> str:
    return format_instant(ms)
