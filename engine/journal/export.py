"""Journal rows as CSV and JSON files (SPEC §6), with the stable field names of
:mod:`engine.journal.rows` (a row's ``to_json()``) and timestamps in epoch milliseconds.

JSON keeps structure (``details`` and ``scope`` are objects and lists); CSV has one
flat column per field, so structured values are written as compact JSON text and a
missing value as an empty cell.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return value


def write_csv(rows: Iterable[Mapping[str, Any]], fields: Sequence[str], out: TextIO) -> None:
    """A header line, then one line per row, in ``fields`` order."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(fields)
    for row in rows:
        writer.writerow([_cell(row[f]) for f in fields])


def write_json(rows: Iterable[Mapping[str, Any]], fields: Sequence[str], out: TextIO) -> None:
    """A JSON array of objects with exactly ``fields`` as keys."""
    json.dump([{f: row[f] for f in fields} for row in rows], out, ensure_ascii=False)
    out.write("\n")
