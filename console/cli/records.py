"""``ebb produce`` and ``ebb consume``."""

from __future__ import annotations

import argparse
import base64
import sys
from collections.abc import Iterator

from console.cli.parser import command, finite, non_negative_int, positive_int, warn
from console.cli.render import emit_json
from console.cli.standard_streams import OutputFailed
from console.cli.stdin_lines import lines_as_they_arrive
from engine.broker import Broker, Consumed
from engine.clock import MAX_INSTANT_MS, format_instant, parse_instant
from engine.errors import InvalidInput
from engine.policy.units import describe_size, parse_duration, parse_size
from engine.producing import Acked, Lull, described
from engine.store.batch import NewRecord

#: Largest value ``--size`` may ask for; a segment must still hold one record.
MAX_GENERATED_SIZE = 64 << 20


def register(commands: argparse._SubParsersAction) -> None:
    produce = commands.add_parser(
        "produce", help="append records: --count N --size B generated ones, else one per line of stdin"
    )
    produce.add_argument("topic")
    produce.add_argument("--partition", type=non_negative_int, help="default: by key hash, else round-robin")
    produce.add_argument("--key", help="key of every record")
    produce.add_argument("--timestamp", help="record timestamp: ISO 8601 or epoch ms [default: now]")
    produce.add_argument(
        "--timestamp-step",
        metavar="DURATION",
        help="with --timestamp: add this much to each next record's timestamp (backfill a time range)",
    )
    produce.add_argument("--count", type=positive_int, help="generate this many records")
    produce.add_argument("--size", help="bytes per generated record value (with --count) [default: 100]")
    produce.add_argument(
        "--json",
        action="store_true",
        help="print a JSON line per acknowledged run of records (spread a record at a time: one per record)",
    )
    command(produce, run_produce, mutates=True)

    consume = commands.add_parser("consume", help="read records as a group and commit its positions")
    consume.add_argument("topic")
    consume.add_argument("--group", required=True)
    consume.add_argument("--partition", type=non_negative_int)
    consume.add_argument("--max", type=positive_int, default=100, help="at most this many records [default: 100]")
    consume.add_argument(
        "--no-commit",
        action="store_true",
        help="read without moving the group's positions or creating it: writes nothing",
    )
    consume.add_argument("--json", action="store_true", help="one JSON object per record")
    command(consume, run_consume, mutates=_commits)


def _commits(args: argparse.Namespace) -> bool:
    """``consume`` writes (positions, a group it creates) unless ``--no-commit``."""
    return not args.no_commit


def generated_value(index: int, size: int) -> bytes:
    """Value ``index`` of a generated run: its zero-padded index repeated, so that a
    reader can check every byte of it."""
    unit = b"%015d|" % index
    return (unit * (size // len(unit) + 1))[:size]


def _records(args: argparse.Namespace, now: int) -> Iterator[NewRecord | Lull]:
    key = args.key.encode() if args.key is not None else None
    timestamp = parse_instant(args.timestamp) if args.timestamp is not None else None
    step = 0
    if args.timestamp_step is not None:
        if timestamp is None:
            raise InvalidInput("--timestamp-step needs --timestamp (the first record's time)")
        step = finite("--timestamp-step", args.timestamp_step, parse_duration, "duration")

    def stamp(i: int) -> int | None:
        if timestamp is None:
            return None
        if timestamp + i * step > MAX_INSTANT_MS:
            raise InvalidInput(
                f"record {i}: --timestamp plus {i} times --timestamp-step is past {format_instant(MAX_INSTANT_MS)}"
            )
        return timestamp + i * step

    if args.count is not None:
        value_size = parse_size(args.size) if args.size is not None else 100
        if value_size is None or value_size > MAX_GENERATED_SIZE:
            raise InvalidInput(f"invalid --size {args.size!r}: use 0 to {describe_size(MAX_GENERATED_SIZE)}")
        # the last timestamp is known: refuse before writing any
        _warn_if_ahead(stamp(args.count - 1), now)
        for i in range(args.count):
            yield NewRecord(generated_value(i, value_size), key, stamp(i))
        return
    if args.size is not None:
        raise InvalidInput("--size goes with --count (records from stdin take their size from each line)")
    i = 0
    for line in lines_as_they_arrive(sys.stdin.buffer):
        if isinstance(line, Lull):
            yield line
            continue
        if i == 0:
            _warn_if_ahead(stamp(0), now)
        yield NewRecord(line.rstrip(b"\r"), key, stamp(i))
        i += 1


def run_produce(broker: Broker, args: argparse.Namespace) -> int:
    # Resolve everything that can be refused before the first record is written.
    broker.policy(args.topic)
    records = _records(args, broker.clock())

    def ack(acked: Acked) -> None:
        emit_json(
            {
                "partition": acked.partition,
                "base_offset": acked.base_offset,
                "next_offset": acked.next_offset,
                "count": acked.count,
            }
        )

    first = next(records, None)
    if first is None:
        raise InvalidInput("no records to produce (empty stdin and no --count)")
    spans = broker.produce(args.topic, _chain(first, records), args.partition, on_ack=ack if args.json else None)
    if not args.json:
        count, where = described(spans)
        said = f"produced {count} record(s) to {args.topic}: {where}"
        try:
            print(said)
            sys.stdout.flush()
        except OutputFailed as error:
            # The records are written and acknowledged: a script that retries on the
            # error alone would write them twice.
            raise OutputFailed(f"{said}, but {error}") from None
    return 0


def _warn_if_ahead(timestamp: int | None, now: int) -> None:
    """A record stamped after now keeps its segment, and every later one of the
    partition, from time retention until then (KEEP_FUTURE_TIMESTAMP): said once, for
    the last record of a --count run (the first from stdin), as the records are written
    anyway (a producer's clock may run ahead)."""
    if timestamp is not None and timestamp > now:
        warn(
            f"--timestamp {format_instant(timestamp)} is after now ({format_instant(now)}): time retention "
            "keeps the segment it goes to, and the partition's later ones, until then (KEEP_FUTURE_TIMESTAMP)"
        )


def _chain(first: NewRecord | Lull, rest: Iterator[NewRecord | Lull]) -> Iterator[NewRecord | Lull]:
    yield first
    yield from rest


def _text(data: bytes | None) -> dict[str, str | None]:
    if data is None:
        return {"": None}
    try:
        return {"": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"_base64": base64.b64encode(data).decode("ascii")}


def run_consume(broker: Broker, args: argparse.Namespace) -> int:
    def write(consumed: list[Consumed]) -> None:
        """The records on stdout, flushed: the group's position moves only after."""
        for item in consumed:
            record = item.record
            if args.json:
                payload: dict[str, object] = {
                    "partition": item.partition,
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                }
                payload.update({"key" + k: v for k, v in _text(record.key).items()})
                payload.update({"value" + k: v for k, v in _text(record.value).items()})
                emit_json(payload)
            else:
                sys.stdout.write(record.value.decode("utf-8", "replace") + "\n")
        sys.stdout.flush()

    broker.consume(
        args.topic, args.group, partition=args.partition, max_records=args.max, commit=not args.no_commit, deliver=write
    )
    return 0
