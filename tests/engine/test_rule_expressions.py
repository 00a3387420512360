"""One statement of a rule, read two ways: the SQL an expression renders
(engine/prune/plan/expr.py) and its numpy evaluation (engine/forecast/vectorised.py)
agree on every row, nulls included, for random expressions of every form the
evaluator reads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.forecast.vectorised import Nullable, Value, evaluate, first_holding, holds, values
from engine.prune.plan.expr import Expr, Sql, case, coalesce, col, flag, greatest, least, lit, names, substituted
from engine.prune.plan.round_trips import sql_frame
from engine.prune.session import SparkEngine

INTEGERS, BOOLEANS = ("a", "b", "c"), ("p", "q")


def _integers(depth: int) -> st.SearchStrategy[Expr]:
    leaves = st.one_of(st.sampled_from(INTEGERS).map(col), st.integers(-20, 20).map(lit), st.just(lit(None)))
    if depth == 0:
        return leaves
    smaller, conditions = _integers(depth - 1), _booleans(depth - 1)
    return st.one_of(
        leaves,
        st.tuples(smaller, smaller).map(lambda t: t[0] + t[1]),
        st.tuples(smaller, smaller).map(lambda t: t[0] - t[1]),
        st.lists(smaller, min_size=1, max_size=3).map(lambda t: greatest(*t)),
        st.lists(smaller, min_size=1, max_size=3).map(lambda t: least(*t)),
        st.lists(smaller, min_size=1, max_size=3).map(lambda t: coalesce(*t)),
        st.tuples(conditions, smaller, smaller).map(lambda t: case((t[0], t[1]), otherwise=t[2])),
        st.tuples(conditions, smaller).map(lambda t: case((t[0], t[1]))),
    )


def _booleans(depth: int) -> st.SearchStrategy[Expr]:
    leaves = st.one_of(st.sampled_from(BOOLEANS).map(col), st.booleans().map(lit))
    if depth == 0:
        return leaves
    smaller, numbers = _booleans(depth - 1), _integers(depth - 1)
    comparisons = [
        lambda a, b: a < b, lambda a, b: a <= b, lambda a, b: a > b, lambda a, b: a >= b, lambda a, b: a.eq(b),
    ]  # fmt: skip
    return st.one_of(
        leaves,
        st.tuples(st.sampled_from(comparisons), numbers, numbers).map(lambda t: t[0](t[1], t[2])),
        st.tuples(smaller, smaller).map(lambda t: t[0] & t[1]),
        st.tuples(smaller, smaller).map(lambda t: t[0] | t[1]),
        smaller.map(lambda e: ~e),
        numbers.map(lambda e: e.is_null()),
        numbers.map(lambda e: e.is_not_null()),
        smaller.map(flag),
        st.tuples(smaller, smaller, smaller).map(lambda t: case((t[0], t[1]), otherwise=t[2])),
    )


def _rows() -> st.SearchStrategy[list[dict[str, Any]]]:
    number = st.one_of(st.none(), st.integers(-20, 20))
    truth = st.one_of(st.none(), st.booleans())
    row = st.fixed_dictionaries({**dict.fromkeys(INTEGERS, number), **dict.fromkeys(BOOLEANS, truth)})
    return st.lists(row, min_size=1, max_size=12)


def _columns(table: pa.Table) -> dict[str, Nullable]:
    return {
        name: Nullable.of(
            table[name].fill_null(False if name in BOOLEANS else 0).to_numpy(),
            table[name].is_valid().to_numpy(zero_copy_only=False),
        )
        for name in table.column_names
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    rows=_rows(),
    integers=st.lists(_integers(3), min_size=1, max_size=12),
    booleans=st.lists(_booleans(3), min_size=1, max_size=12),
)
def test_numpy_evaluates_every_expression_as_spark_does(
    spark_engine: SparkEngine, rows: list[dict[str, Any]], integers: list[Expr], booleans: list[Expr]
) -> None:
    _assert_as_spark(spark_engine, rows, [*integers, *booleans])


def test_every_operator_on_every_combination_of_nulls(spark_engine: SparkEngine) -> None:
    """The truth tables: each operator on each pair of null, and two values."""
    a, b, p, q = col("a"), col("b"), col("p"), col("q")
    numbers, truths = (None, 1, 2), (None, True, False)
    rows = [{"a": x, "b": y, "c": 0, "p": t, "q": u} for x in numbers for y in numbers for t in truths for u in truths]
    expressions = [
        p & q, p | q, ~p, flag(p), p.is_null(), a.is_not_null(), a + b, a - b, a < b, a <= b, a > b, a >= b,
        a.eq(b), greatest(a, b), least(a, b), coalesce(a, b), case((p, a), otherwise=b), case((p, a), (q, b)),
    ]  # fmt: skip
    _assert_as_spark(spark_engine, rows, expressions)


def _assert_as_spark(spark_engine: SparkEngine, rows: list[dict[str, Any]], expressions: list[Expr]) -> None:
    schema = pa.schema([*((n, pa.int64()) for n in INTEGERS), *((n, pa.bool_()) for n in BOOLEANS)])
    table = pa.Table.from_pylist(rows, schema)
    query = f"SELECT {', '.join(f'{e} AS e{i}' for i, e in enumerate(expressions))} FROM {{rows}}"
    spark = spark_engine.run(
        lambda session: sql_frame(session, query, rows=session.createDataFrame(table)).toArrow(), "expressions"
    )
    columns = _columns(table)
    for i, expression in enumerate(expressions):
        result = evaluate(expression, columns)
        shaped = np.broadcast_to(result.values, len(rows)), np.broadcast_to(result.valid, len(rows))
        ours = [v.item() if ok else None for v, ok in zip(*shaped)]
        assert ours == spark[f"e{i}"].to_pylist(), str(expression)


def test_sql_is_parenthesised_where_the_operators_need_it() -> None:
    a, b, c = col("a"), col("b"), col("c")
    assert str(a - (b - c)) == "a - (b - c)"
    assert str((a - b) - c) == "a - b - c"
    assert str((a < b) & ~((b < c) | a.is_null())) == "a < b AND NOT (b < c OR a IS NULL)"
    assert str(col("position") + 1) == "`position` + 1"
    assert str(case((a < 1, "x"), otherwise=lit("it's"))) == "CASE WHEN a < 1 THEN 'x' ELSE 'it''s' END"


def test_the_helpers_reduce_and_evaluate_over_grids() -> None:
    a = col("a")
    assert greatest(a) is a
    grid = {"a": np.array([[1, 5], [7, 2]]), "b": Nullable.of(np.array([3, 0]), np.array([True, False]))}
    assert values(greatest(col("a"), col("b")), grid, -1).tolist() == [[3, 5], [7, 2]]
    assert values(col("a") + col("b"), grid, -1).tolist() == [[4, -1], [10, -1]]
    assert holds(col("a") > col("b"), grid).tolist() == [[False, False], [True, False]]


def test_sql_text_is_not_evaluated() -> None:
    with pytest.raises(TypeError, match="cannot be evaluated"):
        evaluate(Sql("(flags & 1) <> 0"), {})


@settings(max_examples=200, deadline=None)
@given(
    thresholds=st.lists(st.one_of(st.none(), st.integers(-5, 3000)), min_size=1, max_size=30),
    step=st.integers(1, 7),
    end=st.integers(0, 600),
)
def test_first_holding_finds_the_first_index_a_monotone_rule_holds(
    thresholds: list[int | None], step: int, end: int
) -> None:
    """The rule ``index * step >= threshold`` holds from some index on (never where the
    threshold is null); a scan of the indices before ``end`` finds the same first one."""
    limit = Nullable.of(np.array([t or 0 for t in thresholds]), np.array([t is not None for t in thresholds]))

    def at(rows: np.ndarray, index: np.ndarray) -> dict[str, Value]:
        return {"reached": index * step, "threshold": limit[rows]}

    found = first_holding(col("reached") >= col("threshold"), at, len(thresholds), end)
    expected = [next((i for i in range(end) if t is not None and i * step >= t), end) for t in thresholds]
    assert found.tolist() == expected


def test_a_column_is_substituted_wherever_it_is_read() -> None:
    a, b = col("a"), col("b")
    rule = case((a.is_null(), greatest(a, b)), otherwise=~(a < b))
    replaced = substituted(rule, {"a": col("x") - col("y")})
    assert str(replaced) == "CASE WHEN (x - y) IS NULL THEN greatest(x - y, b) ELSE NOT (x - y < b) END"
    assert names(replaced) == {"x", "y", "b"}
