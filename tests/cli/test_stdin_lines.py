"""``ebb produce``'s standard input read as it arrives (console/cli/stdin_lines.py),
through a real pipe, and a real producer process on one."""

from __future__ import annotations

import io
import json
import os
import re
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli.stdin_lines import lines_as_they_arrive
from engine.producing import LULL, InterruptedWaiting
from tests.support.cli import REPO, ebb_command, subprocess_env


@pytest.fixture
def pipe() -> Iterator[tuple[io.BufferedReader, int]]:
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "rb")
    try:
        yield reader, write_fd
    finally:
        reader.close()
        try:
            os.close(write_fd)
        except OSError:
            pass


def test_lines_written_together_come_before_one_lull(pipe: tuple[io.BufferedReader, int]) -> None:
    reader, write_fd = pipe
    os.write(write_fd, b"one\ntwo\nthr")
    got = lines_as_they_arrive(reader, linger_seconds=0.05)
    assert [next(got), next(got), next(got)] == [b"one", b"two", LULL]
    os.write(write_fd, b"ee\nfour")  # the rest of a line, and a last one without its newline
    os.close(write_fd)
    assert list(got) == [b"three", b"four"]


def test_a_line_that_arrives_alone_is_handed_on_before_the_next_one(pipe: tuple[io.BufferedReader, int]) -> None:
    """An open pipe with a line now and then (``tail -f``): each line and its lull
    come while the writer is still waiting to write the next."""
    reader, write_fd = pipe
    handed: list[tuple[bytes | object, int]] = []
    written = 0

    def writer() -> None:
        nonlocal written
        for line in (b"a\n", b"b\n"):
            written += 1
            os.write(write_fd, line)
            time.sleep(1.0)
        os.close(write_fd)

    thread = threading.Thread(target=writer)
    thread.start()
    for item in lines_as_they_arrive(reader, linger_seconds=0.05):
        handed.append((item, written))
    thread.join()
    assert handed == [(b"a", 1), (LULL, 1), (b"b", 2), (LULL, 2)]


def test_input_that_never_pauses_is_handed_on_every_linger_all_the_same(pipe: tuple[io.BufferedReader, int]) -> None:
    """A line every 20 ms never leaves 100 ms of silence: the lull comes 100 ms after
    the first line not yet handed on (Kafka's ``linger.ms``), not when input stops."""
    reader, write_fd = pipe
    lines = 60

    def writer() -> None:
        for n in range(lines):
            os.write(write_fd, b"%d\n" % n)
            time.sleep(0.02)
        os.close(write_fd)

    thread = threading.Thread(target=writer)
    thread.start()
    got = list(lines_as_they_arrive(reader, linger_seconds=0.1))
    thread.join()
    assert [item for item in got if item is not LULL] == [b"%d" % n for n in range(lines)]
    # 1.2 s of lines: a lull about every 0.1 s, each after lines (a few, on a loaded
    # machine); waiting for silence gave one, at the end
    assert got.count(LULL) >= 4


def test_a_long_line_arriving_in_pieces_is_one_line(pipe: tuple[io.BufferedReader, int]) -> None:
    reader, write_fd = pipe
    piece = b"y" * 70_000  # more than one read

    def writer() -> None:
        for _ in range(5):
            os.write(write_fd, piece)
        os.write(write_fd, b"\nz")
        os.close(write_fd)

    thread = threading.Thread(target=writer)
    thread.start()
    got = list(lines_as_they_arrive(reader, linger_seconds=0.05))
    thread.join()
    assert [item for item in got if item is not LULL] == [piece * 5, b"z"]


def test_a_stream_without_a_descriptor_is_read_as_lines() -> None:
    stream = io.BytesIO(b"x\ny\n")
    assert list(lines_as_they_arrive(stream)) == [b"x", b"y"]


def test_a_producer_fed_by_an_open_pipe_writes_each_line_as_it_comes(ebb, data_dir: Path) -> None:
    """``tail -f app.log | ebb produce logs``: each line is durable and acknowledged
    while the pipe is still open (it waited for 1000 lines, and a producer killed
    before them had written nothing), and the lines go round-robin as they come."""
    assert ebb("topic", "create", "logs", "--partitions", "2").code == 0
    producer = subprocess.Popen(
        ebb_command(data_dir, "produce", "logs", "--json"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
        env=subprocess_env(),
    )  # fmt: skip
    assert producer.stdin is not None and producer.stdout is not None
    try:
        acks = []
        for line in (b"first\n", b"second\n"):
            producer.stdin.write(line)
            producer.stdin.flush()
            ready, _, _ = select.select([producer.stdout], [], [], 60)
            assert ready, "no acknowledgement while the pipe is open"
            acks.append(json.loads(producer.stdout.readline()))
        assert [(a["partition"], a["base_offset"], a["count"]) for a in acks] == [(0, 0, 1), (1, 0, 1)]
        described = json.loads(ebb("topic", "describe", "logs", "--json").out)
        assert [p["next_offset"] for p in described["partitions"]] == [1, 1]
    finally:
        producer.kill()
        producer.wait()


def test_a_producer_stopped_with_ctrl_c_says_what_it_wrote(ebb, data_dir: Path) -> None:
    """Ctrl-C is how ``tail -f | ebb produce`` stops: without ``--json`` its one line
    says which records were acknowledged, so that they are not sent again."""
    assert ebb("topic", "create", "logs").code == 0
    producer = subprocess.Popen(
        ebb_command(data_dir, "produce", "logs"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
        env=subprocess_env(),
    )  # fmt: skip
    assert producer.stdin is not None
    producer.stdin.write(b"first\nsecond\n")
    producer.stdin.flush()
    deadline = time.monotonic() + 60
    while json.loads(ebb("topic", "describe", "logs", "--json").out)["partitions"][0]["next_offset"] < 2:
        assert time.monotonic() < deadline, "the lines were not written while the pipe was open"
        time.sleep(0.05)
    producer.send_signal(signal.SIGINT)
    _, err = producer.communicate(timeout=60)
    assert producer.returncode == 130
    # "all ... read" where Ctrl-C came as it waited for input (as it usually does); the
    # other form where it came as the producer still finished acknowledging.
    (line,) = err.decode().splitlines()
    assert re.fullmatch(
        r"ebb: interrupted; (all 2 record\(s\) read|2 record\(s\) before it) were acknowledged"
        r" \(partition 0 offsets 0\.\.1\)(, the rest were not acknowledged)?",
        line,
    ), line


#: os.read itself, whatever a test put in its place
_READ = os.read


def _interrupted_read(monkeypatch: pytest.MonkeyPatch, reader: io.BufferedReader, *, after: int) -> None:
    """``os.read`` of ``reader`` returns ``after`` chunks, then is interrupted (Ctrl-C
    while it waits for input); other descriptors' (pytest's) are read as ever."""
    calls = 0

    def read(fd: int, n: int) -> bytes:
        nonlocal calls
        if fd != reader.fileno():
            return _READ(fd, n)
        calls += 1
        if calls > after:
            raise KeyboardInterrupt
        return _READ(fd, n)

    monkeypatch.setattr("console.cli.stdin_lines.os.read", read)


def test_ctrl_c_while_waiting_says_every_line_read_was_given(
    pipe: tuple[io.BufferedReader, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What lets ``ebb produce`` say that every record it read was acknowledged: the
    interrupt came while it waited, with every whole line handed on. A line still
    without its newline makes it a plain interrupt ("the rest were not")."""
    reader, write_fd = pipe
    os.write(write_fd, b"one\ntwo\n")
    _interrupted_read(monkeypatch, reader, after=1)
    got = lines_as_they_arrive(reader, linger_seconds=0)
    assert [next(got), next(got), next(got)] == [b"one", b"two", LULL]
    with pytest.raises(InterruptedWaiting):
        next(got)
    os.write(write_fd, b"three\nfou")
    got = lines_as_they_arrive(reader, linger_seconds=0)
    _interrupted_read(monkeypatch, reader, after=1)
    assert [next(got), next(got)] == [b"three", LULL]
    with pytest.raises(KeyboardInterrupt) as interrupt:
        next(got)
    assert type(interrupt.value) is KeyboardInterrupt
