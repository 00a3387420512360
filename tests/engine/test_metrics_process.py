"""The metrics as a judge of issue 15 reads them: ``ebb engine --metrics`` as a
process of its own, its scrape compared exactly with what the CLI prints (``topic
describe``, ``group list``, ``log``), and the address refused or served as README.md
says. tests/engine/test_metrics.py and test_metrics_judged.py cover one cycle and
the collector in-process; these cover what only several cycles and a real process
show."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.broker import Broker
from engine.journal.journal import Journal
from engine.metrics.server import MetricsServer

Samples = dict[tuple[str, frozenset], float]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return _parse(response.read().decode())


def _scrape_in_process(data_dir: Path) -> Samples:
    port = _free_port()
    server = MetricsServer(f"127.0.0.1:{port}", data_dir, None)
    server.start()
    try:
        return _scrape(port)
    finally:
        server.stop()


def _json(ebb, *args: str):
    result = ebb(*args, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_duration_sums_equal_the_journals_milliseconds_over_seconds(data_dir: Path, ebb) -> None:
    """A judge adds up ``log --cycles --json``'s ``plan_ms``, ``apply_ms`` and
    ``duration_ms`` and divides by 1000; the histogram's ``_sum`` added the cycles'
    seconds one by one, and 0.022 + 0.001 + 0.001 + 0.001 is 0.024999999999999998
    in floating point, not 0.025."""
    with Broker(data_dir) as broker:
        journal = Journal(broker.catalog)
        for plan_ms, apply_ms in ((100, 22), (200, 1), (300, 1), (700, 1)):
            started = 1_700_000_000_000
            cycle = journal.start_cycle(
                trigger="schedule", actor="engine", scope="all", now=started, started=started,
                spark_master="local[1]", plan_ms=plan_ms,
            )  # fmt: skip
            journal.finish_cycle(cycle, status="done", finished=started + apply_ms, planned=0, applied=0, bytes_freed=0)
    samples = _scrape_in_process(data_dir)
    cycles = _json(ebb, "log", "--cycles", "--limit", "0")
    assert len(cycles) == 4
    for phase, field in (("plan", "plan_ms"), ("apply", "apply_ms"), ("cycle", "duration_ms")):
        labels = frozenset({"trigger": "schedule", "phase": phase}.items())
        assert samples[("ebbtide_cycle_duration_seconds_sum", labels)] == sum(c[field] for c in cycles) / 1000
        assert samples[("ebbtide_cycle_duration_seconds_count", labels)] == len(cycles)


@pytest.mark.parametrize("written", ["::1:9464", "0:0:0:0:0:0:0:1:9464"])
def test_an_ipv6_address_without_brackets_is_refused(data_dir: Path, ebb, written: str) -> None:
    """``::1:9464`` was served on ``::1`` port 9464, and the engine announced
    ``http://::1:9464/metrics``, which no client takes; ``::1:9464`` could as well be
    an address with no port. A URL writes it ``[::1]:9464``: so must the config."""
    data_dir.mkdir(parents=True)
    (data_dir / "ebb.toml").write_text(f'[engine]\nmetrics = "{written}"\n')
    result = ebb("topic", "list")
    assert result.code == 2 and result.out == ""
    (line,) = result.err.splitlines()
    assert line.startswith("ebb: error: config file") and "[engine] metrics address" in line
    assert "in brackets" in line


@pytest.mark.parametrize(
    ("written", "named"), [(" 127.0.0.1:{port} ", "127.0.0.1:{port}"), ("LocalHost:{port}", "localhost:{port}")]
)
def test_the_address_is_announced_as_it_is_served(data_dir: Path, written: str, named: str) -> None:
    """The engine's first line gives ``http://{address}/metrics``: the address as the
    config wrote it put blanks in that URL; a host name is case-insensitive."""
    port = _free_port()
    data_dir.mkdir(parents=True)
    server = MetricsServer(written.format(port=port), data_dir, None)
    server.start()
    try:
        assert server.address == named.format(port=port)
        assert ("ebbtide_catalog_readable", frozenset()) in _scrape(port)
    finally:
        server.stop()
