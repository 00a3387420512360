"""Durable metadata beside the segment files: what ``ebb verify --repair`` rebuilds a
lost or damaged catalog from (engine/integrity/rebuild.py), as Kafka rebuilds its
state from its log directories.

    engine.json                  whether all deletion is paused (``ebb pause``)
    topics/<topic>/topic.json    partition count, creation time, policy overrides,
                                 each partition's log start
    topics/<topic>/groups.json   each group's kind, start, creation time, and its
                                 positions with their commit times

Each file is replaced whole (written to a temporary file, fsynced, renamed over the
old one, the directory fsynced), so a crash leaves the old version or the new one.
The catalog (engine/catalog/catalog.py) writes them after the transaction that
changed what they hold has committed, holding the catalog's write lock while it
reads and writes them, so that two processes never write them out of order:

- ``engine.json`` on every pause and resume;
- ``topic.json`` on every change of a topic, a policy or a log start;
- ``groups.json`` on every group created or deleted and every position moved back;
  a position moved forward (a consumer's commit) at least at the end of every prune
  cycle and when the process that committed it closes the catalog. A position in the
  file may lag the catalog (a rebuilt group reads some records again), never lead it
  (records a group never acknowledged would be skipped).
"""

from __future__ import annotations

import json
import os
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.digits import is_digits
from engine.store.segment import describe

TOPIC_FILE = "topic.json"
GROUPS_FILE = "groups.json"
#: in the data directory itself: whether all deletion is paused (``ebb pause``)
ENGINE_FILE = "engine.json"
#: the names the metadata takes in a topic's directory, beside its partitions
METADATA_NAMES = frozenset({TOPIC_FILE, GROUPS_FILE, f".{TOPIC_FILE}.tmp", f".{GROUPS_FILE}.tmp"})
FORMAT = 1


class MetadataInvalid(ValueError):
    """A metadata file that is not one this module wrote."""


@dataclass(frozen=True)
class TopicMeta:
    name: str
    partitions: int
    created_at: int
    policy: dict[str, str]
    #: partition -> log start offset
    log_starts: dict[int, int]


@dataclass(frozen=True)
class GroupMeta:
    name: str
    kind: str
    start_from: str
    created_at: int
    #: partition -> (position, committed at ms)
    positions: dict[int, tuple[int, int]] = field(default_factory=dict)


def topic_bytes(meta: TopicMeta) -> bytes:
    return _encode(
        {
            "format": FORMAT,
            "name": meta.name,
            "partitions": meta.partitions,
            "created_at": meta.created_at,
            "policy": dict(sorted(meta.policy.items())),
            "log_starts": {str(p): o for p, o in sorted(meta.log_starts.items())},
        }
    )


def groups_bytes(groups: list[GroupMeta]) -> bytes:
    return _encode(
        {
            "format": FORMAT,
            "groups": [
                {
                    "name": g.name,
                    "kind": g.kind,
                    "start_from": g.start_from,
                    "created_at": g.created_at,
                    "positions": {str(p): list(pos) for p, pos in sorted(g.positions.items())},
                }
                for g in sorted(groups, key=lambda g: g.name)
            ],
        }
    )


def engine_bytes(paused: bool) -> bytes:
    return _encode({"format": FORMAT, "paused": paused})


def read_paused(root: Path) -> bool:
    """Whether the data directory's engine file says deletion is paused (False
    without a file); :class:`MetadataInvalid` if it is damaged."""
    value = _load(root / ENGINE_FILE)
    return value is not None and value.get("paused") is True


def _encode(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, ensure_ascii=False) + "\n").encode()


def write_topic_files(topic_dir: Path, meta: TopicMeta, groups: list[GroupMeta]) -> None:
    replace_file(topic_dir / TOPIC_FILE, topic_bytes(meta))
    replace_file(topic_dir / GROUPS_FILE, groups_bytes(groups))


def replace_file(path: Path, data: bytes) -> bool:
    """Make ``path`` hold ``data`` atomically and durably; False if it did already
    (nothing written)."""
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write_durably(tmp, data, os.O_TRUNC)
        os.replace(tmp, path)
    except OSError:
        # A full disk keeps the old file, and no partial copy takes room meanwhile.
        with suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)
    return True


def write_durably(path: Path, data: bytes, flags: int = os.O_EXCL) -> None:
    """Write ``data`` to ``path`` (owner-only; a new file unless ``flags`` says
    otherwise) and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_files(topic_dir: Path) -> None:
    """Remove a deleted topic's metadata (its directory may outlive it for a moment)."""
    removed = False
    for name in METADATA_NAMES:
        try:
            (topic_dir / name).unlink()
            removed = True
        except FileNotFoundError:
            pass
    if removed:
        _fsync_dir(topic_dir)


def _fsync_dir(directory: Path) -> None:
    # Not the store's fault seam (engine/faults.py): a fault injected for a segment
    # operation must reach it, not be spent on a metadata file.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _load(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as error:
        raise MetadataInvalid(f"cannot be read: {describe(error)}") from None
    except ValueError as error:
        raise MetadataInvalid(f"{path} cannot be read: {error}") from None
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise MetadataInvalid(f"{path} is not a metadata file of format {FORMAT}")
    return value


def _int(value: Any, what: str, path: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MetadataInvalid(f"{path}: {what} is {value!r}, not a whole number")
    return value


def read_topic(topic_dir: Path) -> TopicMeta | None:
    """The topic's metadata, None if it has no file; :class:`MetadataInvalid` if the
    file is damaged."""
    path = topic_dir / TOPIC_FILE
    value = _load(path)
    if value is None:
        return None
    policy = value.get("policy")
    starts = value.get("log_starts")
    if not isinstance(policy, dict) or not all(isinstance(v, str) for v in policy.values()):
        raise MetadataInvalid(f"{path}: the policy is not a table of text values")
    if not isinstance(starts, dict):
        raise MetadataInvalid(f"{path}: log_starts is not a table")
    return TopicMeta(
        str(value.get("name")),
        _int(value.get("partitions"), "partitions", path),
        _int(value.get("created_at"), "created_at", path),
        {str(k): v for k, v in policy.items()},
        {_int(int(p), "a partition", path): _int(o, "a log start", path) for p, o in starts.items() if is_digits(p)},
    )


def read_groups(topic_dir: Path) -> list[GroupMeta]:
    """The topic's groups ([] without a file); :class:`MetadataInvalid` if damaged."""
    path = topic_dir / GROUPS_FILE
    value = _load(path)
    if value is None:
        return []
    groups = value.get("groups")
    if not isinstance(groups, list):
        raise MetadataInvalid(f"{path}: groups is not a list")
    out = []
    for g in groups:
        if not isinstance(g, dict) or not isinstance(g.get("positions"), dict):
            raise MetadataInvalid(f"{path}: a group entry is not a table with positions")
        positions = {}
        for p, pos in g["positions"].items():
            if not (is_digits(p) and isinstance(pos, list) and len(pos) == 2):
                raise MetadataInvalid(f"{path}: group {g.get('name')!r} has a bad position entry {p!r}")
            positions[int(p)] = (_int(pos[0], "a position", path), _int(pos[1], "a commit time", path))
        out.append(
            GroupMeta(
                str(g.get("name")),
                str(g.get("kind")),
                str(g.get("start_from")),
                _int(g.get("created_at"), "created_at", path),
                positions,
            )
        )
    return out
