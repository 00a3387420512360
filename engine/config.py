"""The TOML config file (SPEC §7): policy defaults, prune interval, Spark, console.

The file defaults to ``ebb.toml`` in the data directory and may be missing (all
defaults then). Anything it holds is checked strictly: a typo in a key would
otherwise silently leave a default in force, which for a retention engine means
keeping or deleting data the operator did not intend to.

Layout::

    [policy]
    retention_time = "7d"
    [engine]
    prune_interval = "1m"
    fsync = "batch"                # "never" is UNSAFE: see Config.fsync
    journal_retention = "90d"      # or "infinite"
    producer_hold_timeout = "30s"  # producer_request_hold: how long an append waits
    metrics = "127.0.0.1:9464"     # serve Prometheus metrics (loopback only; off by default)
    disk_budget = "500GiB"         # what `ebb forecast` checks the topics against
    [spark]
    master = "local[*]"            # or: remote = "sc://host:15002"; neither: the shared Spark service
    idle_timeout = "15m"           # the shared Spark service stops after this long unused
    transport = "auto"             # how the snapshot reaches Spark: "files" or "arrow"
    scratch = "s3a://bucket/ebb"   # where "files" go when Spark cannot read the data directory
    [spark.conf]
    "spark.sql.shuffle.partitions" = "4"
    [console]
    theme = "ebbtide-dark"
    refresh = "2s"
"""

from __future__ import annotations

import difflib
import reprlib
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import InvalidInput, InvalidPolicy
from engine.metrics.address import parse_address
from engine.policy.effective import resolve
from engine.policy.fields import FIELDS
from engine.policy.units import MS_PER_DAY, InvalidValue, parse_duration, parse_size, shown

_KEYS: dict[str, tuple[str, ...]] = {
    "policy": tuple(FIELDS),
    "engine": ("prune_interval", "fsync", "journal_retention", "producer_hold_timeout", "metrics", "disk_budget"),
    "spark": ("master", "remote", "conf", "idle_timeout", "transport", "scratch"),
    "console": ("theme", "refresh"),
}


@dataclass(frozen=True)
class Config:
    """Settings of one data directory; every field has the default of SPEC §5, §7, §8."""

    policy_defaults: dict[str, str] = field(default_factory=dict)
    """Engine policy defaults as configured texts; fields left out keep SPEC §3's."""
    prune_interval_ms: int = 60_000
    fsync: bool = True
    """Whether an append returns only after an fsync of its batches (``fsync = "batch"``).
    ``fsync = "never"`` is UNSAFE: a power loss or kernel crash may lose acknowledged
    records (a killed process does not); it exists for benchmarks and scratch data."""
    spark_master: str | None = None
    """A master for an in-process Spark (``local[*]``, ``spark://...``); None with no
    remote either: plans run on the data directory's shared Spark service."""
    spark_remote: str | None = None
    """A Spark Connect URL (``sc://host:port``); when set, it replaces the master."""
    spark_idle_timeout_ms: int = 15 * 60_000
    """How long the shared Spark service stays up with no plan and no client attached."""
    spark_conf: dict[str, str] = field(default_factory=dict)
    spark_transport: str = "auto"
    """How the snapshot reaches Spark (engine/prune/transport.py): ``files``, ``arrow``,
    or ``auto``: files where Spark can read them, else Arrow."""
    spark_scratch: str | None = None
    """A URI (``file://``, ``s3a://``, ``hdfs://``...) both this process and Spark reach,
    for the snapshot's files; None: the data directory's ``snapshots/``."""
    console_theme: str = "ebbtide-dark"
    console_refresh_ms: int = 2000
    journal_retention_ms: int | None = 90 * MS_PER_DAY
    """How long journal rows (cycles, actions, policy changes) are kept; None keeps
    them forever. Zero is refused: it would erase each cycle's record as it is written."""
    producer_hold_timeout_ms: int | None = 30_000
    """With ``backlog_policy = producer_request_hold``, how long an append waits for
    its topic's backlog quota to clear before it fails (Pulsar's sendTimeout, 30 s).
    0 fails at once; None (``infinite``) waits as long as it takes."""
    metrics: str | None = None
    """``HOST:PORT`` (loopback) where ``ebb engine`` and the console serve Prometheus
    metrics; None: not served (engine/metrics)."""
    disk_budget: int | None = None
    """Bytes ``ebb forecast`` checks the topics against; None: no budget."""


DEFAULT_CONFIG = Config()


def load_config(path: Path) -> Config:
    """The config in ``path``; defaults if the file does not exist.

    Raises :class:`~engine.errors.InvalidInput` naming the file (and the key, for a
    bad value) if the file cannot be read, is not valid TOML, has an unknown table
    or key, or holds a value that breaks its rule.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return DEFAULT_CONFIG
    except OSError as error:
        raise InvalidInput(f"config file {path}: cannot read it ({error.strerror})") from None
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput(f"config file {path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise InvalidInput(f"config file {path}: {error}") from None
    except RecursionError:
        # tomllib recurses once per level of nested arrays and inline tables.
        raise InvalidInput(f"config file {path}: arrays or tables nested too deeply") from None
    try:
        return _config_from(document)
    except InvalidInput as error:
        raise InvalidInput(f"config file {path}: {error}") from None


def _config_from(document: Mapping[str, Any]) -> Config:
    """Check and convert a parsed document; messages start with the table name."""
    _refuse_unknown(document, _KEYS, "at the top level", hint_policy=True)
    tables = {name: _table(document, name) for name in _KEYS}
    for name, table in tables.items():
        _refuse_unknown(table, _KEYS[name], f"in [{name}]")

    policy_defaults = {key: _text("policy", key, value) for key, value in tables["policy"].items()}
    try:
        resolve({}, policy_defaults)
    except InvalidPolicy as error:
        raise InvalidInput(f"[policy] {error}") from None

    spark = tables["spark"]
    if "remote" in spark and "master" in spark:
        raise InvalidInput(
            "[spark] set either master or remote, not both (remote is a Spark Connect server, which has its own master)"
        )
    remote = spark.get("remote")
    if remote is not None and (not isinstance(remote, str) or not remote.startswith("sc://")):
        raise InvalidInput(
            f"[spark] remote must be a Spark Connect URL like 'sc://host:15002', got {_shown_value(remote)}"
        )
    conf = _table(spark, "conf", "spark.conf")
    transport = spark.get("transport", DEFAULT_CONFIG.spark_transport)
    if transport not in ("auto", "files", "arrow"):
        raise InvalidInput(f'[spark] transport must be "auto", "files" or "arrow", got {_shown_value(transport)}')
    scratch = spark.get("scratch")
    if scratch is not None and (not isinstance(scratch, str) or "://" not in scratch):
        raise InvalidInput(
            "[spark] scratch must be a URI like 'file:///shared/ebb' or 's3a://bucket/ebb',"
            f" got {_shown_value(scratch)}"
        )

    fsync = tables["engine"].get("fsync", "batch")
    if fsync not in ("batch", "never"):
        raise InvalidInput(f'[engine] fsync must be "batch" or "never" (unsafe), got {_shown_value(fsync)}')

    return Config(
        policy_defaults=policy_defaults,
        fsync=fsync == "batch",
        prune_interval_ms=_interval(tables["engine"], "engine", "prune_interval", DEFAULT_CONFIG.prune_interval_ms),
        spark_master=_name(spark, "spark", "master", "local[*]") if "master" in spark else None,
        spark_remote=remote,
        spark_conf={key: _text("spark.conf", key, value) for key, value in conf.items()},
        spark_idle_timeout_ms=_interval(spark, "spark", "idle_timeout", DEFAULT_CONFIG.spark_idle_timeout_ms),
        spark_transport=transport,
        spark_scratch=scratch,
        console_theme=_name(tables["console"], "console", "theme", DEFAULT_CONFIG.console_theme),
        console_refresh_ms=_interval(tables["console"], "console", "refresh", DEFAULT_CONFIG.console_refresh_ms),
        journal_retention_ms=_retention(
            tables["engine"], "engine", "journal_retention", DEFAULT_CONFIG.journal_retention_ms
        ),
        producer_hold_timeout_ms=_timeout(
            tables["engine"], "engine", "producer_hold_timeout", DEFAULT_CONFIG.producer_hold_timeout_ms
        ),
        metrics=_metrics(tables["engine"]),
        disk_budget=_budget(tables["engine"]),
    )


def _metrics(table: Mapping[str, Any]) -> str | None:
    if "metrics" not in table:
        return None
    address = _name(table, "engine", "metrics", "")
    try:
        parse_address(address)
    except InvalidInput as error:
        raise InvalidInput(f"[engine] {error}") from None
    return address


def _budget(table: Mapping[str, Any]) -> int | None:
    if "disk_budget" not in table:
        return None
    text = _text("engine", "disk_budget", table["disk_budget"])
    try:
        return parse_size(text)
    except InvalidValue as error:
        raise InvalidInput(f"[engine] invalid value for disk_budget: {shown(text)} ({error.reason})") from None


_VALUE_REPR = reprlib.Repr()
_VALUE_REPR.maxlevel = 3
_VALUE_REPR.maxstring = 40


def _shown_value(value: Any) -> str:
    """A value of the file for a message: short, and bounded for deeply nested ones
    (a plain ``repr`` of those recurses past Python's limit)."""
    return _VALUE_REPR.repr(value)


def _refuse_unknown(table: Mapping[str, Any], known: Iterable[str], where: str, hint_policy: bool = False) -> None:
    """Refuse a key that is not in ``known``, suggesting the closest valid one."""
    known = tuple(known)
    for key in table:
        if key in known:
            continue
        if hint_policy and key in FIELDS:
            hint = "policy fields go under [policy]"
        else:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(known)}"
        raise InvalidInput(f"unknown key {shown(key)} {where} ({hint})")


def _table(document: Mapping[str, Any], key: str, label: str | None = None) -> Mapping[str, Any]:
    """The sub-table ``key`` of ``document``, empty if absent."""
    value = document.get(key, {})
    if not isinstance(value, dict):
        raise InvalidInput(f"[{label or key}] must be a table, got {_shown_value(value)}")
    return value


def _text(table: str, key: str, value: Any) -> str:
    """A TOML string, number or boolean as the text the parsers read."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise InvalidInput(f"[{table}] {key} must be a string, number or boolean, got {_shown_value(value)}")


def _name(table: Mapping[str, Any], label: str, key: str, default: str) -> str:
    """A non-empty string setting."""
    value = table.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"[{label}] {key} must be a non-empty string, got {_shown_value(value)}")
    return value


def _retention(table: Mapping[str, Any], label: str, key: str, default_ms: int | None) -> int | None:
    """A duration > 0 in ms, or None for ``infinite`` (keep forever)."""
    if key not in table:
        return default_ms
    text, retention = _duration(table, label, key)
    if retention is not None and retention <= 0:
        raise InvalidInput(
            f"[{label}] invalid value for {key}: {shown(text)} (must be above 0, e.g. 90d, "
            "or infinite to keep it forever)"
        )
    return retention


def _timeout(table: Mapping[str, Any], label: str, key: str, default_ms: int | None) -> int | None:
    """A duration >= 0 in ms (0: at once), or None for ``infinite`` (wait for ever)."""
    if key not in table:
        return default_ms
    return _duration(table, label, key)[1]


def _interval(table: Mapping[str, Any], label: str, key: str, default_ms: int) -> int:
    """A finite duration > 0, in ms (Go duration strings, or any duration of SPEC §3)."""
    if key not in table:
        return default_ms
    text, interval = _duration(table, label, key, finite=True)
    if interval is None or interval <= 0:
        raise InvalidInput(
            f"[{label}] invalid value for {key}: {shown(text)} (must be a finite duration above 0, e.g. 1m or 30s)"
        )
    return interval


def _duration(table: Mapping[str, Any], label: str, key: str, *, finite: bool = False) -> tuple[str, int | None]:
    """The text of ``table[key]`` and its duration in ms (None: infinite); a text that
    does not parse is refused without offering infinite where it must be ``finite``."""
    text = _text(label, key, table[key])
    try:
        return text, parse_duration(text)
    except InvalidValue as error:
        reason = error.finite_reason if finite else error.reason
        raise InvalidInput(f"[{label}] invalid value for {key}: {shown(error.text)} ({reason})") from None
