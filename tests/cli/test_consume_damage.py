"""``ebb consume`` at a corrupt batch: it delivers and commits the records before it
(as a Kafka fetch returns the batches before a corrupt one), then says what stopped
it and exits 2. It used to stop there with exit 0 and nothing on stderr, leaving the
next consume to find the damage."""

from __future__ import annotations

import json
from pathlib import Path


def test_a_consume_stopped_by_a_corrupt_batch_says_so_after_what_it_read(ebb, data_dir: Path) -> None:
    assert ebb("topic", "create", "cor", "--segment-size", "4KiB").code == 0
    assert ebb("produce", "cor", "--count", "200", "--size", "100").code == 0
    segments = json.loads(ebb("topic", "describe", "cor", "--json").out)["partitions"][0]["segments"]
    second = segments[1]
    log = data_dir / "topics" / "cor" / "0" / f"{second['base_offset']:020d}.log"
    with log.open("r+b") as damaged:
        damaged.seek(300)
        damaged.write(b"XXXX")

    result = ebb("consume", "cor", "--group", "r", "--max", "1000")
    assert result.code == 2
    assert len(result.out.splitlines()) == second["base_offset"]  # the first segment's records
    (line,) = result.err.splitlines()
    assert line.startswith("ebb: error: corrupt batch in ") and log.name in line
    # committed up to the damage: the next consume starts there, and fails there
    (group,) = json.loads(ebb("group", "list", "cor", "--json").out)
    assert group["positions"]["0"] == second["base_offset"]
