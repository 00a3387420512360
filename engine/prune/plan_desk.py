"""The planning desk: a warm planner beside the shared Spark service, for one-shot commands.

A one-shot ``ebb explain`` or ``ebb prune`` attached to the warm service still spent
about a second before its plan was on Spark: importing the Spark Connect client
(which imports pandas) and the server's first plan in a new session. The desk is a
process of the service (:mod:`engine.prune.spark_supervisor` starts it once the
warm-up has ended) that keeps one warm Connect session on the data directory's
server and plans the snapshots sent to it. A command builds its snapshot as before,
sends it as Arrow over loopback and gets the plan's tables back: the same
:class:`~engine.prune.planner.Planner` on the same Spark, the same files transport
and scratch directory, so the same plan.

The desk only speeds a plan up. Whatever it cannot do (no desk, a desk of another
server, a refused or broken connection, any failure while planning), the command
plans on its own Connect session as before (:meth:`DeskClient.plan` returns None),
and that reports a failure the usual way.

Security, as the server's: the desk listens on 127.0.0.1 only, and a request must
begin with the service's token (the 0600 file only the data directory's owner can
read); a request without it is answered "refused" and closed, unread.

Wire format, both ways: a header (4-byte length, JSON) then the tables it lists,
each an 8-byte length and an Arrow IPC stream.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import json
import os
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from engine.errors import SparkUnavailable
from engine.prune.planner import Plan
from engine.prune.scratch import scratch_dir
from engine.prune.snapshot import Snapshot
from engine.prune.spark_service import DESK_NAME, ServerState, ServiceDir, answers, running, silence
from engine.prune.spark_warmup import service_planner, synthetic_snapshot
from engine.prune.tables import PLAN_TABLES, SNAPSHOT_TABLES
from engine.prune.transport import Scratch

_CONNECT_SECONDS = 2.0
#: how often a client waiting for the desk checks that the server still answers
_WATCH_SECONDS = 5.0
#: how long the server may not answer before a client stops waiting for the desk
SILENT_SECONDS = 30.0
_HEADER = struct.Struct(">I")
_TABLE = struct.Struct(">Q")
#: a header is a few hundred bytes; more is not a client of ours
_MAX_HEADER = 1 << 16


@dataclass(frozen=True)
class DeskState:
    """``desk.json``: where the desk of which server listens."""

    supervisor_pid: int
    pid: int
    port: int


# -- wire ---------------------------------------------------------------------------------


def _send(sock: socket.socket, header: dict[str, Any], tables: list[pa.Table]) -> None:
    head = json.dumps(header).encode()
    parts = [_HEADER.pack(len(head)), head]
    for table in tables:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        body = sink.getvalue()
        parts += [_TABLE.pack(body.size), body]
    for part in parts:
        sock.sendall(part)


def _read_exactly(stream: Any, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise ConnectionError("the connection closed mid-message")
    return bytes(data)


def _receive_header(stream: Any) -> dict[str, Any]:
    (size,) = _HEADER.unpack(_read_exactly(stream, _HEADER.size))
    if size > _MAX_HEADER:
        raise ConnectionError(f"a header of {size} bytes")
    header = json.loads(_read_exactly(stream, size))
    if not isinstance(header, dict):
        raise ConnectionError("a header that is not an object")
    return header


def _receive_tables(stream: Any, count: int) -> list[pa.Table]:
    tables = []
    for _ in range(count):
        (size,) = _TABLE.unpack(_read_exactly(stream, _TABLE.size))
        tables.append(pa.ipc.open_stream(pa.py_buffer(_read_exactly(stream, size))).read_all())
    return tables


# -- client -------------------------------------------------------------------------------


class DeskClient:
    """Plans through the desk of ``data_root``'s service, if one serves its server,
    while that server answers."""

    def __init__(self, data_root: Path) -> None:
        self.service = ServiceDir(data_root)

    def _desk(self) -> tuple[DeskState, ServerState, str] | None:
        """The desk, the server it plans on and the server's token."""
        state = running(self.service)
        desk = read_desk(self.service)
        if state is None or desk is None or desk.supervisor_pid != state.supervisor_pid:
            return None
        try:
            return desk, state, Path(state.token_file).read_text().strip()
        except OSError:
            return None

    def available(self) -> bool:
        """Whether a desk of the running server is recorded (it may still refuse)."""
        return self._desk() is not None

    def plan(self, snapshot: Snapshot, *, every_segment: bool = True) -> Plan | None:
        """The plan of ``snapshot`` made at the desk; None if the desk did not make it."""
        found = self._desk()
        if found is None:
            return None
        desk, state, token = found
        # Attached while it plans, as a client of the server: it does not stop for idleness meanwhile.
        with contextlib.closing(self.service.attach_lock()):
            return ask(desk.port, token, snapshot, every_segment=every_segment, server=state)


def ask(
    port: int, token: str, snapshot: Snapshot, *, every_segment: bool = True, server: ServerState | None = None
) -> Plan | None:
    """The plan of ``snapshot`` from the desk on 127.0.0.1:``port``; None if it made none.
    While the desk plans, the ``server`` it plans on is asked whether it still answers: raises
    SparkUnavailable once it has not for :data:`SILENT_SECONDS` (the desk's plan on it
    would never end, nor would this process's own)."""
    tables = [snapshot.tables[name] for name in SNAPSHOT_TABLES]
    header = {"token": token, "now": snapshot.now, "every_segment": every_segment}
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=_CONNECT_SECONDS) as sock:
            sock.settimeout(None)  # a large plan takes as long as it takes; a dead desk closes
            _send(sock, header, tables)
            if server is not None:
                _await_answer(sock, server)
            with sock.makefile("rb") as stream:
                if _receive_header(stream).get("error") is not None:
                    return None
                planned = _receive_tables(stream, len(PLAN_TABLES))
    except (OSError, ValueError, pa.ArrowException):
        return None
    return Plan(snapshot.now, dict(zip(PLAN_TABLES, planned)), snapshot.rejected, every_segment)


def _await_answer(sock: socket.socket, server: ServerState) -> None:
    """Return once the desk begins to answer on ``sock`` (it answers when its plan is
    made); raise SparkUnavailable once ``server`` has left every handshake unanswered
    for :data:`SILENT_SECONDS`. A plan, however long, keeps a live server answering."""
    silent_since: float | None = None
    while not select.select([sock], [], [], _WATCH_SECONDS)[0]:
        if answers(server):
            silent_since = None
            continue
        now = time.monotonic()
        silent_since = now if silent_since is None else silent_since
        if now - silent_since >= SILENT_SECONDS:
            raise SparkUnavailable(silence(server))


def read_desk(service: ServiceDir) -> DeskState | None:
    try:
        return DeskState(**json.loads(service.path(DESK_NAME).read_text()))
    except (OSError, ValueError, TypeError):
        return None


# -- desk ---------------------------------------------------------------------------------


class Desk:
    """Answers plan requests on a listening socket with ``plan`` (a snapshot's plan,
    whole or deletions only); requests without ``token`` are refused."""

    def __init__(self, token: str, plan: Callable[[Snapshot, bool], Plan], note: Callable[[str], None]) -> None:
        self._token = token.encode()
        self._plan = plan
        self._note = note
        self.listener = socket.create_server(("127.0.0.1", 0))

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def serve_forever(self) -> None:
        """Each request on a thread of its own: plans of several clients overlap on Spark."""
        while True:
            try:
                connection, _address = self.listener.accept()
            except OSError:
                return  # closed: the desk is stopping
            threading.Thread(target=self._answer, args=(connection,), name="ebb-desk", daemon=True).start()

    def close(self) -> None:
        # A close alone leaves serve_forever's accept() waiting; a shutdown wakes it (Linux).
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()

    def _answer(self, connection: socket.socket) -> None:
        with connection, connection.makefile("rb") as stream:
            try:
                header = _receive_header(stream)
                if not hmac.compare_digest(str(header.get("token", "")).encode(), self._token):
                    self._note("plan desk: a request without the service's token was refused")
                    _send(connection, {"error": "refused"}, [])
                    return
                tables = _receive_tables(stream, len(SNAPSHOT_TABLES))
                snapshot = Snapshot(int(header["now"]), dict(zip(SNAPSHOT_TABLES, tables)), {})
                plan = self._plan(snapshot, bool(header["every_segment"]))
            except Exception as error:  # noqa: BLE001 - the client plans itself instead; the reason is logged
                self._note(f"plan desk: request not planned: {type(error).__name__}: {str(error)[:300]}")
                with contextlib.suppress(OSError):
                    _send(connection, {"error": "not planned"}, [])
                return
            with contextlib.suppress(OSError):  # a client gone meanwhile
                _send(connection, {}, [plan.tables[name] for name in PLAN_TABLES])


def serve(service_dir: Path, log_dir: Path) -> int:
    """The desk of the running server of ``service_dir``, until this process ends."""
    service = ServiceDir(service_dir.parent)
    found = service_planner(service_dir, log_dir)
    if found is None:
        return 1
    state, token, planner = found
    engine = planner.engine

    def plan(snapshot: Snapshot, every_segment: bool) -> Plan:
        # Chosen again for every plan, as Pruner.plan does: the disk may have filled.
        planner.scratch = Scratch.local(scratch_dir(service.root.parent, "snapshots"))
        made = planner.plan(snapshot, every_segment=every_segment)
        service.record_plan()
        return made

    try:
        # This session's first plans are slower (the server sets the session up): not a client's.
        for every_segment in (True, False):
            planner.plan(synthetic_snapshot(state.started), every_segment=every_segment)
        desk = Desk(token, plan, engine.note)
    except Exception as error:  # noqa: BLE001 - no desk: clients plan themselves, as without one
        engine.note(f"plan desk not started: {type(error).__name__}: {str(error)[:300]}")
        engine.stop()
        return 1
    service.write_private(DESK_NAME, json.dumps(asdict(DeskState(state.supervisor_pid, os.getpid(), desk.port))))
    engine.note(f"plan desk (pid {os.getpid()}) ready on 127.0.0.1:{desk.port}")
    desk.serve_forever()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("service_dir", type=Path)
    parser.add_argument("--log-dir", type=Path, required=True)
    args = parser.parse_args()
    return serve(args.service_dir, args.log_dir)


if __name__ == "__main__":
    sys.exit(main())
