"""The planner's rules (engine/prune/plan/expr.py expressions) evaluated over numpy
arrays, as Spark SQL evaluates them over rows: the forecast reads the very
statement the planner's query renders, at every instant at once.

A value is a :class:`Nullable`: its values and where they are not null, each
broadcast as numpy broadcasts (a column per partition against a grid of instants and
partitions). Nulls follow SQL: arithmetic and comparisons with a null are null;
``AND`` is false if either side is false, ``OR`` true if either is true, null
otherwise when a side is; ``greatest`` and ``least`` skip nulls; a ``CASE``
condition that is null is not true.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from engine.prune.plan.expr import Binary, Call, Case, Column, Expr, IsNull, Literal, Not, Sql


@dataclass(frozen=True)
class Nullable:
    """Values, and where they are not null."""

    values: np.ndarray
    valid: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray | int | bool | str, valid: np.ndarray | bool = True) -> Nullable:
        return cls(np.asarray(values), np.asarray(valid, bool))

    @classmethod
    def of_arrow(cls, column: pa.ChunkedArray | pa.Array) -> Nullable:
        """A numeric Arrow column, its nulls kept."""
        return cls(column.fill_null(0).to_numpy(), column.is_valid().to_numpy(zero_copy_only=False))

    def __getitem__(self, index: Any) -> Nullable:
        """The values and validity at ``index``, alike."""
        return Nullable(self.values[index], np.broadcast_to(self.valid, self.values.shape)[index])


#: a null of every shape
NULL = Nullable.of(0, False)


#: a column's value by name: a ``Nullable``, or values never null
Value = Nullable | np.ndarray | int | bool | str
Columns = Mapping[str, Value]

_COMPUTED: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "+": np.add,
    "-": np.subtract,
    "=": np.equal,
    "<>": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def evaluate(expr: Expr, columns: Columns) -> Nullable:
    """``expr`` over ``columns`` (every column it names), broadcast together."""
    if isinstance(expr, Column):
        found = columns[expr.name]
        return found if isinstance(found, Nullable) else Nullable.of(found)
    if isinstance(expr, Literal):
        return NULL if expr.value is None else Nullable.of(expr.value)
    if isinstance(expr, Binary):
        left, right = evaluate(expr.left, columns), evaluate(expr.right, columns)
        if expr.op in ("AND", "OR"):
            return _logical(expr.op, left, right)
        return Nullable(_COMPUTED[expr.op](left.values, right.values), left.valid & right.valid)
    if isinstance(expr, Not):
        operand = evaluate(expr.operand, columns)
        return Nullable(~operand.values, operand.valid)
    if isinstance(expr, IsNull):
        operand = evaluate(expr.operand, columns)
        return Nullable.of(operand.valid if expr.negated else ~operand.valid)
    if isinstance(expr, Call):
        return _call(expr.function, [evaluate(a, columns) for a in expr.arguments])
    if isinstance(expr, Case):
        result = NULL if expr.otherwise is None else evaluate(expr.otherwise, columns)
        for condition, value in reversed(expr.whens):
            chosen, then = truth(evaluate(condition, columns)), evaluate(value, columns)
            result = Nullable(np.where(chosen, then.values, result.values), np.where(chosen, then.valid, result.valid))
        return result
    if isinstance(expr, Sql):
        raise TypeError(f"SQL text cannot be evaluated over arrays: {expr.text}")
    raise TypeError(f"not an expression the evaluator reads: {expr!r}")


def truth(value: Nullable) -> np.ndarray:
    """Where a condition holds: true and not null."""
    return value.values.astype(bool) & value.valid


def holds(expr: Expr, columns: Columns) -> np.ndarray:
    """Where the condition ``expr`` holds over ``columns``."""
    return truth(evaluate(expr, columns))


def values(expr: Expr, columns: Columns, null: int | np.ndarray) -> np.ndarray:
    """``expr`` over ``columns``, ``null`` where it is null."""
    result = evaluate(expr, columns)
    return np.where(result.valid, result.values, null)


def _logical(op: str, left: Nullable, right: Nullable) -> Nullable:
    left_true, right_true = truth(left), truth(right)
    left_false, right_false = left.valid & ~left.values.astype(bool), right.valid & ~right.values.astype(bool)
    if op == "AND":
        decided_false = left_false | right_false
        return Nullable(left_true & right_true, decided_false | (left.valid & right.valid))
    decided_true = left_true | right_true
    return Nullable(decided_true, decided_true | (left.valid & right.valid))


def _call(function: str, arguments: list[Nullable]) -> Nullable:
    result = arguments[0]
    for argument in arguments[1:]:
        if function == "coalesce":
            chosen = np.where(result.valid, result.values, argument.values)
        else:
            pick = np.maximum if function == "greatest" else np.minimum
            both = pick(result.values, argument.values)
            chosen = np.where(
                result.valid & argument.valid, both, np.where(result.valid, result.values, argument.values)
            )
        result = Nullable(chosen, result.valid | argument.valid)
    return result


def first_holding(
    rule: Expr, columns_at: Callable[[np.ndarray, np.ndarray], Columns], size: int, end: int
) -> np.ndarray:
    """Per row of ``size``, the first index from 0 at which ``rule`` holds over
    ``columns_at(rows, at)`` (the columns of ``rows`` at index ``at``, one per row),
    for a rule that holds from some index on, as every retention rule does as time
    passes; ``end`` where it does not before ``end``.

    A binary search over every row at once, after one look at index 0 that settles
    the rows whose rule holds already."""

    def holds_at(rows: np.ndarray, at: np.ndarray) -> np.ndarray:
        return np.broadcast_to(holds(rule, columns_at(rows, at)), rows.shape)

    first = np.zeros(size, np.int64)
    rows = np.flatnonzero(~holds_at(np.arange(size), first))
    low = np.full(len(rows), min(1, end), np.int64)
    high = np.full(len(rows), end, np.int64)
    while len(searching := np.flatnonzero(low < high)):
        middle = (low[searching] + high[searching]) // 2
        found = holds_at(rows[searching], middle)
        high[searching[found]] = middle[found]
        low[searching[~found]] = middle[~found] + 1
    first[rows] = low
    return first
