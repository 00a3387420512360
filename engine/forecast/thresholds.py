"""Where a rule starts to hold, solved from its own statement.

A rule of engine/prune/plan/rules.py that compares a quantity rising with time (the
instant ``now``, the bytes after a segment, a record cut) with the rest holds from
where that quantity reaches a threshold: an expression of the rest, which the
forecast evaluates once over its columns (engine/forecast/vectorised.py) and then
finds the first instant the quantity reaches, instead of asking the rule at every
instant. ``max_timestamp < now - retention_time`` holds from ``now`` at
``max_timestamp + retention_time + 1``: the columns are integers (milliseconds,
bytes, offsets), so a strict bound is the next integer.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.prune.plan.expr import Binary, Call, Column, Expr, Literal, lit, names

#: a sum of terms, each added (+1) or subtracted (-1)
_Terms = tuple[tuple[int, Expr], ...]


@dataclass(frozen=True)
class _Linear:
    """An expression as ``coefficient * rising + terms``."""

    coefficient: int
    terms: _Terms


def threshold(rule: Expr, rising: str) -> Expr:
    """The expression ``t`` such that ``rule`` holds exactly where the column
    ``rising`` is at least ``t``: never where ``t`` is null. ``rule`` is a comparison
    (or its ``flag``) whose two sides are sums and differences, ``rising`` in them
    once, on the side where the rule comes to hold as it rises."""
    comparison = _unflagged(rule)
    if not (isinstance(comparison, Binary) and comparison.op in ("<", "<=", ">", ">=")):
        raise ValueError(f"not a comparison: {rule}")
    left, right = _linear(comparison.left, rising), _linear(comparison.right, rising)
    # left - right = coefficient * rising + rest, compared with 0
    coefficient = left.coefficient - right.coefficient
    rest = left.terms + _negated(right.terms)
    if coefficient == 1 and comparison.op in (">", ">="):
        bound = _negated(rest)
    elif coefficient == -1 and comparison.op in ("<", "<="):
        bound = rest
    else:
        raise ValueError(f"{rule} does not come to hold as {rising} rises")
    strict = comparison.op in ("<", ">")
    return _sum(bound + (((1, lit(1)),) if strict else ()))


def _unflagged(rule: Expr) -> Expr:
    """A rule inside ``flag`` (``coalesce(rule, false)``): a null threshold already
    says it never holds."""
    if isinstance(rule, Call) and rule.function == "coalesce" and len(rule.arguments) == 2:
        fallback = rule.arguments[1]
        if isinstance(fallback, Literal) and fallback.value is False:
            return rule.arguments[0]
    return rule


def _linear(expr: Expr, rising: str) -> _Linear:
    if isinstance(expr, Column) and expr.name == rising:
        return _Linear(1, ())
    if isinstance(expr, Binary) and expr.op in ("+", "-"):
        left, right = _linear(expr.left, rising), _linear(expr.right, rising)
        if expr.op == "+":
            return _Linear(left.coefficient + right.coefficient, left.terms + right.terms)
        return _Linear(left.coefficient - right.coefficient, left.terms + _negated(right.terms))
    if rising in names(expr):
        raise ValueError(f"{rising} is not a term of a sum in {expr}")
    return _Linear(0, ((1, expr),))


def _negated(terms: _Terms) -> _Terms:
    return tuple((-sign, term) for sign, term in terms)


def _sum(terms: _Terms) -> Expr:
    """The terms added up, those added first."""
    added = [term for sign, term in terms if sign > 0]
    total = added[0] if added else lit(0)
    for term in added[1:]:
        total = total + term
    for term in (term for sign, term in terms if sign < 0):
        total = total - term
    return total
