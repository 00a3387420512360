"""Where a rule starts to hold, solved from its statement (engine/forecast/thresholds.py):
the rule holds exactly where the rising quantity is at least the threshold, for the
planner's own rules and for random comparisons of sums, nulls included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.forecast.thresholds import threshold
from engine.forecast.vectorised import Nullable, evaluate, holds
from engine.prune.plan.expr import Expr, col, flag, lit, names
from engine.prune.plan.rules import ELIGIBILITY, PASSED, ROLL, passed_by_record

RISING = "v"
#: the quantity rising with time, at every value the checks try
TRIED = np.arange(-60, 61)


def _assert_holds_from_the_threshold(rule: Expr, rising: str, columns: dict[str, Nullable]) -> None:
    """At every tried value of ``rising``, ``rule`` holds exactly where it is at least
    the threshold (never where the threshold is null)."""
    bound = evaluate(threshold(rule, rising), columns)
    at = {name: value[None, :] if value.values.ndim else value for name, value in columns.items()}
    held = holds(rule, {**at, rising: TRIED[:, None]})
    expected = bound.valid & (TRIED[:, None] >= bound.values)
    assert (np.broadcast_to(held, expected.shape) == expected).all(), str(rule)


def _nullable_columns(names: list[str], draw: st.DrawFn, rows: int) -> dict[str, Nullable]:
    columns = {}
    for name in names:
        drawn = draw(st.lists(st.one_of(st.none(), st.integers(-20, 20)), min_size=rows, max_size=rows))
        columns[name] = Nullable.of(np.array([d or 0 for d in drawn]), np.array([d is not None for d in drawn]))
    return columns


@st.composite
def _comparisons(draw: st.DrawFn) -> tuple[Expr, dict[str, Nullable]]:
    """``sum <op> sum`` over columns a, b, c and literals, ``v`` once on the side
    where the comparison comes to hold as it rises; maybe flagged."""
    others = draw(st.lists(st.sampled_from(["a", "b", "c"]).map(col) | st.integers(-9, 9).map(lit), max_size=3))
    signs = draw(st.lists(st.booleans(), min_size=len(others), max_size=len(others)))
    on_left, op = draw(st.booleans()), draw(st.sampled_from(["<", "<=", ">", ">="]))
    rising_plus = (op in (">", ">=")) == on_left  # where v is added
    split = draw(st.integers(0, len(others)))

    def side(terms: list[Expr], term_signs: list[bool], with_rising: bool) -> Expr:
        total: Expr = col(RISING) if with_rising and rising_plus else lit(0)
        if with_rising and not rising_plus:
            total = total - col(RISING)
        for term, plus in zip(terms, term_signs):
            total = total + term if plus else total - term
        return total

    left = side(others[:split], signs[:split], on_left)
    right = side(others[split:], signs[split:], not on_left)
    comparison = {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    rule = flag(comparison) if draw(st.booleans()) else comparison
    return rule, _nullable_columns(["a", "b", "c"], draw, 6)


@settings(max_examples=300, deadline=None)
@given(_comparisons())
def test_a_comparison_holds_from_its_threshold(drawn: tuple[Expr, dict[str, Nullable]]) -> None:
    rule, columns = drawn
    _assert_holds_from_the_threshold(rule, RISING, columns)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_the_planners_rules_hold_from_their_thresholds(data: st.DataObject) -> None:
    """Each rule the forecast solves: the roll in the instant, the eligibility
    measures in the instant or the bytes after a segment, a record cut passing a
    segment."""
    solved: list[tuple[Expr, str]] = [(ROLL, "now")]
    for rule in ELIGIBILITY.values():
        passed = PASSED[rule.measure](col(rule.limit))
        solved.append((passed, "now" if rule.measure == "age" else "suffix_after"))
        if rule.record_cut:
            solved.append((passed_by_record(rule), f"tc_{rule.record_cut}"))
    for rule, rising in solved:
        columns = _nullable_columns(sorted(names(rule) - {rising}), data.draw, 6)
        _assert_holds_from_the_threshold(rule, rising, columns)


def test_a_rule_that_stops_holding_as_the_quantity_rises_has_no_threshold() -> None:
    with pytest.raises(ValueError, match="does not come to hold"):
        threshold(col("v") < col("a"), "v")
    with pytest.raises(ValueError, match="not a comparison"):
        threshold(col("v") + 1, "v")
    with pytest.raises(ValueError, match="not a term of a sum"):
        threshold(col("a") < col("v").is_null().eq(True), "v")
