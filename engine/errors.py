"""Errors that reach an operator.

Every error the engine raises on purpose is an :class:`EbbError`. Its message is one
line that a newcomer can act on; the CLI prints it as is on stderr and exits non-zero.
Anything else that escapes is a bug.
"""

from __future__ import annotations


class EbbError(Exception):
    """An operator-facing error: ``str(error)`` is one clear line."""


class InvalidInput(EbbError):
    """A value, name or argument given by the operator is not acceptable."""


class AddressInUse(InvalidInput):
    """An address to serve on that another process listens on already."""


class InvalidPolicy(InvalidInput):
    """A policy value or combination of values breaks a rule of SPEC §3."""


class InvalidName(InvalidInput):
    """A topic or group name that could not safely become a path."""


class NotFound(EbbError):
    """A topic, partition or group that does not exist."""


class AlreadyExists(EbbError):
    """A topic or group that exists already."""


class StoreError(EbbError):
    """The segment store could not do what was asked (I/O, corruption, lock)."""


class DataQuarantined(StoreError):
    """Offsets a reader asked for were lost to corruption (or a missing file) and
    recorded as such by ``ebb verify --repair``: never skipped silently."""


class CatalogDamaged(StoreError):
    """The catalog database cannot be used as it is: damaged (SQLite reports it
    malformed), cut short, emptied or missing while the data directory holds topics.
    Every command refuses with the remedy, ``ebb verify --repair``, which rebuilds the
    catalog from the data directory (engine/integrity/rebuild.py)."""


class CatalogBusy(StoreError):
    """Another process holds the catalog's write lock past the busy timeout."""


class SparkUnavailable(EbbError):
    """The Spark session could not be started, or is not ready in time."""


class PlanCancelled(EbbError):
    """A prune plan running on Spark was cancelled before it finished."""


class QuotaExceeded(EbbError):
    """An append refused because its topic is over a backlog quota whose policy is
    ``producer_exception`` (at once) or ``producer_request_hold`` (after the hold
    timed out) (SPEC §4)."""
