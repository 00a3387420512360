"""What a forecast looks at unless told otherwise: ``ebb forecast``'s ``--horizon``,
``--step`` and ``--window``, and the console's forecasts, which follow it. A light
module: the CLI reads these while it builds its parser, before any Arrow is loaded."""

from __future__ import annotations

HOUR_MS = 3_600_000

#: a week ahead
HORIZON_MS = 7 * 24 * HOUR_MS
#: an instant every hour
STEP_MS = HOUR_MS
#: ingest rates observed over the last hour
WINDOW_MS = HOUR_MS
