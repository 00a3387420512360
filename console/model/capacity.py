"""The console's capacity forecasts (the Forecast view, the policy editor's what-if):
``ebb forecast``'s defaults, a week ahead hourly with rates observed over the last
hour."""

from __future__ import annotations

from engine.forecast.forecast import Request, instants

HOUR = 3_600_000
HORIZON_MS, STEP_MS, WINDOW_MS = 7 * 24 * HOUR, HOUR, HOUR


def week_ahead(now: int, disk_budget: int | None = None) -> Request:
    return Request(instants(now, HORIZON_MS, STEP_MS), WINDOW_MS, disk_budget=disk_budget)
