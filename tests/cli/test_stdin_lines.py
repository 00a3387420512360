"""``ebb produce``'s standard input read as it arrives (console/cli/stdin_lines.py),
through a real pipe, and a real producer process on one."""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli.stdin_lines import lines_as_they_arrive
from engine.producing import LULL
from tests.support.cli import REPO, ebb_command


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
        env={**os.environ, "PYTHONPATH": str(REPO)},
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
