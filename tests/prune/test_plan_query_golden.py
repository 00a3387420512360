"""The planning query as a reviewer reads it: ``tests/prune/golden/plan_query.sql`` is
:data:`engine.prune.plan.query.PLAN_QUERY` pretty-printed, so a change to the query shows
as a diff of that file in the same commit. ``EBB_REGENERATE_GOLDEN=1`` rewrites it.
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlparse

from engine.prune.plan.query import PLAN_QUERY

GOLDEN = Path(__file__).parent / "golden" / "plan_query.sql"


def test_the_plan_query_is_the_golden_file() -> None:
    rendered = sqlparse.format(PLAN_QUERY, reindent=True, indent_width=2, wrap_after=100) + "\n"
    # Pretty-printing moves whitespace only: the file is the query Spark runs.
    assert "".join(rendered.split()) == "".join(PLAN_QUERY.split())
    if os.environ.get("EBB_REGENERATE_GOLDEN") == "1":
        GOLDEN.write_text(rendered)
    assert GOLDEN.read_text() == rendered, (
        "PLAN_QUERY changed: check the diff of tests/prune/golden/plan_query.sql (EBB_REGENERATE_GOLDEN=1 rewrites it)"
    )
