"""Flags whose value must be finite (a forecast's step, horizon, window, rate and
budget; the engine's prune interval; a produce's timestamp step) refuse "no limit"
and never offer it: the policy parsers' reasons end "use infinite for no limit",
which such a flag then refused in turn (``--horizon 1000000d`` said to write
``infinite``, and ``--horizon infinite`` that it must be finite), and a produce took
``--timestamp-step infinite`` or ``-1`` for a step of 0."""

from __future__ import annotations

from pathlib import Path

import pytest

#: (the command before the flag, the flag, a value too large to hold)
FINITE_FLAGS = [
    (["forecast", "t"], "--step", "1000000d"),
    (["forecast", "t"], "--horizon", "1000000d"),
    (["forecast", "t"], "--window", "1000000d"),
    (["forecast", "t"], "--rate", "8EiB"),
    (["forecast", "t"], "--disk-budget", "8EiB"),
    (["engine"], "--prune-interval", "1000000d"),
    (["produce", "t", "--count", "2", "--timestamp", "0"], "--timestamp-step", "1000000d"),
]


def _error_line(ebb, *argv: str) -> str:
    result = ebb(*argv)
    assert result.code == 2 and result.out == "", (result.out, result.err)
    (line,) = result.err.splitlines()
    assert line.startswith("ebb: error: ")
    return line


@pytest.fixture
def topic(ebb) -> None:
    assert ebb("topic", "create", "t", "--partitions", "2").code == 0


@pytest.mark.parametrize(("command", "flag", "too_large"), FINITE_FLAGS, ids=[f for _, f, _ in FINITE_FLAGS])
@pytest.mark.usefixtures("topic")
def test_a_finite_flag_refuses_no_limit_and_never_offers_it(
    ebb, data_dir: Path, command: list[str], flag: str, too_large: str
) -> None:
    line = _error_line(ebb, *command, flag, too_large)
    assert f"invalid {flag} {too_large!r}: more than" in line
    assert "infinite" not in line and "no limit" not in line
    for no_limit in ("infinite", "-1", "unlimited"):
        assert f"invalid {flag} {no_limit!r}: must be a finite" in _error_line(ebb, *command, f"{flag}={no_limit}")
    described = ebb("topic", "describe", "t", "--json")
    assert '"next_offset": 0' in described.out and '"next_offset": 2' not in described.out  # nothing produced


@pytest.mark.usefixtures("topic")
def test_a_forecast_window_of_zero_is_refused(ebb) -> None:
    """A window of 0 observes no record: it forecast no ingest whatever came in."""
    assert "invalid --window '0': must be a finite duration, above 0" in _error_line(
        ebb, "forecast", "t", "--window", "0"
    )


def test_a_config_interval_too_large_does_not_offer_infinite(ebb, data_dir: Path) -> None:
    data_dir.mkdir(parents=True)
    (data_dir / "ebb.toml").write_text('[engine]\nprune_interval = "1000000d"\n')
    line = _error_line(ebb, "topic", "list")
    assert "prune_interval: '1000000d' (more than 100 years)" in line
    assert "infinite" not in line
