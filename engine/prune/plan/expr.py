"""Expressions over named columns, written once and read two ways: rendered as Spark
SQL (``str(expr)``, for the planner's query and the forecast's timeline query) and
evaluated over numpy arrays with SQL's nulls (engine/forecast/vectorised.py, for the
parts of the forecast that move with time per instant).

A retention rule stated as an :class:`Expr` is one statement: the planner asks it at
its instant in Spark, the forecast asks the same tree at each of its instants over
the virtual topic's columns. Only what Spark SQL and the evaluator both read is
here: columns, literals, ``+`` and ``-``, comparisons, ``AND``, ``OR``, ``NOT``,
``IS [NOT] NULL``, ``greatest``, ``least``, ``coalesce`` and ``CASE``; a fragment
the evaluator cannot read (a bit test of the planner's packed flags) is
:class:`Sql`, which only renders.

Python operators build the tree (``col("a") <= col("b")``, ``&``, ``|``, ``~``);
``==`` keeps its Python meaning: equality is :meth:`Expr.eq`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal as TypingLiteral

#: the operators :class:`Binary` holds, by how tightly they bind (Spark SQL's order)
PRECEDENCE = {"OR": 1, "AND": 2, "=": 4, "<>": 4, "<": 4, "<=": 4, ">": 4, ">=": 4, "+": 5, "-": 5}
_NOT_PRECEDENCE = 3
#: the precedence of a term that never needs parentheses
_ATOM = 9

Scalar = int | bool | str | None


@dataclass(frozen=True, eq=False)
class Expr:
    """An expression; ``str()`` is its Spark SQL."""

    def sql(self) -> str:
        raise NotImplementedError

    @property
    def precedence(self) -> int:
        return _ATOM

    def __str__(self) -> str:
        return self.sql()

    @property
    def children(self) -> tuple[Expr, ...]:
        return ()

    def __add__(self, other: Expr | int) -> Expr:
        return Binary("+", self, lit(other))

    def __sub__(self, other: Expr | int) -> Expr:
        return Binary("-", self, lit(other))

    def __lt__(self, other: Expr | int) -> Expr:
        return Binary("<", self, lit(other))

    def __le__(self, other: Expr | int) -> Expr:
        return Binary("<=", self, lit(other))

    def __gt__(self, other: Expr | int) -> Expr:
        return Binary(">", self, lit(other))

    def __ge__(self, other: Expr | int) -> Expr:
        return Binary(">=", self, lit(other))

    def __and__(self, other: Expr | bool) -> Expr:
        return Binary("AND", self, lit(other))

    def __or__(self, other: Expr | bool) -> Expr:
        return Binary("OR", self, lit(other))

    def __invert__(self) -> Expr:
        return Not(self)

    def eq(self, other: Expr | Scalar) -> Expr:
        return Binary("=", self, lit(other))

    def is_null(self) -> Expr:
        return IsNull(self, negated=False)

    def is_not_null(self) -> Expr:
        return IsNull(self, negated=True)


@dataclass(frozen=True, eq=False)
class Column(Expr):
    """A column by name; a name Spark SQL reserves is quoted."""

    name: str

    def sql(self) -> str:
        return f"`{self.name}`" if self.name in _QUOTED else self.name


#: column names the query texts quote (keywords of Spark SQL)
_QUOTED = frozenset({"position", "row"})


@dataclass(frozen=True, eq=False)
class Literal(Expr):
    value: Scalar

    def sql(self) -> str:
        if self.value is None:
            return "NULL"
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        if isinstance(self.value, str):
            return "'" + self.value.replace("'", "''") + "'"
        return str(self.value)


@dataclass(frozen=True, eq=False)
class Sql(Expr):
    """SQL text the planner reads as it is; the evaluator cannot."""

    text: str

    def sql(self) -> str:
        return self.text


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr

    @property
    def precedence(self) -> int:
        return PRECEDENCE[self.op]

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def sql(self) -> str:
        # Left-associative: an operand binding as loosely as the operator is
        # parenthesised on the right only ("a - (b - c)").
        left = _operand(self.left, self.precedence)
        right = _operand(self.right, self.precedence + 1)
        return f"{left} {self.op} {right}"


@dataclass(frozen=True, eq=False)
class Not(Expr):
    operand: Expr

    @property
    def precedence(self) -> int:
        return _NOT_PRECEDENCE

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def sql(self) -> str:
        return f"NOT {_operand(self.operand, _ATOM)}"


@dataclass(frozen=True, eq=False)
class IsNull(Expr):
    operand: Expr
    negated: bool

    @property
    def precedence(self) -> int:
        return PRECEDENCE["="]

    @property
    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def sql(self) -> str:
        return f"{_operand(self.operand, _ATOM)} IS {'NOT ' if self.negated else ''}NULL"


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """``greatest`` and ``least`` skip nulls (null only if every argument is);
    ``coalesce`` is its first argument not null."""

    function: TypingLiteral["greatest", "least", "coalesce"]
    arguments: tuple[Expr, ...]

    @property
    def children(self) -> tuple[Expr, ...]:
        return self.arguments

    def sql(self) -> str:
        return f"{self.function}({', '.join(a.sql() for a in self.arguments)})"


@dataclass(frozen=True, eq=False)
class Case(Expr):
    """``CASE WHEN c THEN v ... ELSE otherwise END``: the value of the first condition
    that is true (a null one is not); ``otherwise`` (null if absent) if none is."""

    whens: tuple[tuple[Expr, Expr], ...]
    otherwise: Expr | None

    @property
    def children(self) -> tuple[Expr, ...]:
        return (*(e for when in self.whens for e in when), *((self.otherwise,) if self.otherwise else ()))

    def sql(self) -> str:
        whens = " ".join(f"WHEN {condition} THEN {value}" for condition, value in self.whens)
        otherwise = "" if self.otherwise is None else f" ELSE {self.otherwise}"
        return f"CASE {whens}{otherwise} END"


def names(expr: Expr) -> set[str]:
    """The columns ``expr`` reads."""
    found = {expr.name} if isinstance(expr, Column) else set()
    return found.union(*(names(child) for child in expr.children))


def substituted(expr: Expr, by: Mapping[str, Expr]) -> Expr:
    """``expr`` with the columns named in ``by`` replaced by their expressions."""
    if isinstance(expr, Column):
        return by.get(expr.name, expr)
    if isinstance(expr, Binary):
        return Binary(expr.op, substituted(expr.left, by), substituted(expr.right, by))
    if isinstance(expr, Not):
        return Not(substituted(expr.operand, by))
    if isinstance(expr, IsNull):
        return IsNull(substituted(expr.operand, by), expr.negated)
    if isinstance(expr, Call):
        return Call(expr.function, tuple(substituted(argument, by) for argument in expr.arguments))
    if isinstance(expr, Case):
        whens = tuple((substituted(condition, by), substituted(value, by)) for condition, value in expr.whens)
        return Case(whens, None if expr.otherwise is None else substituted(expr.otherwise, by))
    return expr


def _operand(expr: Expr, binding: int) -> str:
    return f"({expr.sql()})" if expr.precedence < binding else expr.sql()


def lit(value: Expr | Scalar) -> Expr:
    return value if isinstance(value, Expr) else Literal(value)


def col(name: str) -> Column:
    return Column(name)


def greatest(*terms: Expr | int) -> Expr:
    """``greatest`` of the terms; one term is itself."""
    return _call("greatest", terms)


def least(*terms: Expr | int) -> Expr:
    return _call("least", terms)


def coalesce(*terms: Expr | Scalar) -> Expr:
    return _call("coalesce", terms)


def _call(function: TypingLiteral["greatest", "least", "coalesce"], terms: Sequence[Expr | Scalar]) -> Expr:
    if not terms:
        raise ValueError(f"{function} of nothing")
    return lit(terms[0]) if len(terms) == 1 else Call(function, tuple(lit(t) for t in terms))


def case(*whens: tuple[Expr, Expr | Scalar], otherwise: Expr | Scalar = None) -> Expr:
    return Case(tuple((c, lit(v)) for c, v in whens), None if otherwise is None else lit(otherwise))


def all_of(*terms: Expr) -> Expr:
    """The terms joined by ``AND``, left to right."""
    result = terms[0]
    for term in terms[1:]:
        result = result & term
    return result


def any_of(*terms: Expr) -> Expr:
    result = terms[0]
    for term in terms[1:]:
        result = result | term
    return result


def flag(condition: Expr) -> Expr:
    """A rule with an infinite limit compares with null: never true."""
    return coalesce(condition, False)
