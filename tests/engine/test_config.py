"""The TOML config file (SPEC §7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import DEFAULT_CONFIG, Config, load_config
from engine.errors import InvalidInput
from engine.policy.effective import resolve

FULL = """\
[policy]
retention_time = "3d"
segment_size = "64 MiB"
max_partition_size = 10737418240
hold = false
max_deletes_per_cycle = 4

[engine]
prune_interval = "30s"

[spark]
master = "local[2]"

[spark.conf]
"spark.sql.shuffle.partitions" = 4
"spark.ui.enabled" = false

[console]
theme = "ebbtide-light"
refresh = "500ms"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ebb.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_full_file(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, FULL)) == Config(
        policy_defaults={
            "retention_time": "3d",
            "segment_size": "64 MiB",
            "max_partition_size": "10737418240",
            "hold": "false",
            "max_deletes_per_cycle": "4",
        },
        prune_interval_ms=30_000,
        spark_master="local[2]",
        spark_remote=None,
        spark_conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"},
        console_theme="ebbtide-light",
        console_refresh_ms=500,
    )


def test_missing_file_gives_the_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path / "ebb.toml")
    assert config == DEFAULT_CONFIG
    assert (config.prune_interval_ms, config.spark_master, config.spark_remote) == (60_000, None, None)
    assert (config.console_theme, config.console_refresh_ms) == ("ebbtide-dark", 2000)
    assert config.policy_defaults == {} and config.spark_conf == {}


def test_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "")) == DEFAULT_CONFIG


def test_spark_connect_remote(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[spark]\nremote = "sc://127.0.0.1:15002"\n'))
    assert config.spark_remote == "sc://127.0.0.1:15002"


def test_syntax_error_names_the_file_and_place(tmp_path: Path) -> None:
    path = write(tmp_path, "[policy]\nretention_time 7d\n")
    with pytest.raises(InvalidInput) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"config file {path}: ")
    assert "line 2" in message and "\n" not in message


def test_unreadable_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "ebb.toml").mkdir()
    with pytest.raises(InvalidInput, match="config file .*ebb.toml: cannot read it"):
        load_config(tmp_path / "ebb.toml")


def test_non_utf8_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ebb.toml"
    path.write_bytes(b'[console]\ntheme = "\xff"\n')
    with pytest.raises(InvalidInput, match="not UTF-8 text"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[polcy]\nretention_time = "1d"\n', "unknown key 'polcy' at the top level (did you mean 'policy'?)"),
        ('retention_time = "1d"\n', "unknown key 'retention_time' at the top level (policy fields go under [policy])"),
        (
            '[policy]\nretention_tme = "1d"\n',
            "unknown key 'retention_tme' in [policy] (did you mean 'retention_time'?)",
        ),
        (
            '[engine]\nprune_intervall = "1m"\n',
            "unknown key 'prune_intervall' in [engine] (did you mean 'prune_interval'?)",
        ),
        ('[spark]\nmastr = "local"\n', "unknown key 'mastr' in [spark] (did you mean 'master'?)"),
        ("[console]\nzzz = 1\n", "unknown key 'zzz' in [console] (valid: theme, refresh)"),
        ('policy = "7d"\n', "[policy] must be a table"),
        ('[spark]\nconf = "x"\n', "[spark.conf] must be a table"),
    ],
)
def test_unknown_or_misplaced_keys_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InvalidInput) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"config file {path}: {message}")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[policy]\nretention_time = "5 parsecs"\n',
            "[policy] invalid value for retention_time: '5 parsecs' (unknown unit 'parsecs'",
        ),
        ("[policy]\nsegment_size = -5\n", "[policy] invalid value for segment_size: '-5' (negative"),
        ("[policy]\nsegment_size = [1]\n", "[policy] segment_size must be a string, number or boolean"),
        ("[policy]\ngranularity = true\n", "[policy] invalid value for granularity: 'true' (use one of"),
        (
            '[policy]\nsegment_size = "200 GiB"\n',
            "[policy] invalid policy: max_partition_size (100 GiB) must be >= segment_size (200 GiB)",
        ),
        ("[policy]\nretention_size = 0\n", "[policy] invalid policy: retention_time (7d) and retention_size (0 B)"),
        ('[engine]\nprune_interval = "0s"\n', "[engine] invalid value for prune_interval: '0s' (must be a finite"),
        (
            '[engine]\nprune_interval = "never"\n',
            "[engine] invalid value for prune_interval: 'never' (expected a number before 'never'",
        ),
        ("[engine]\nprune_interval = -1\n", "[engine] invalid value for prune_interval: '-1' (must be a finite"),
        ('[console]\nrefresh = "infinite"\n', "[console] invalid value for refresh: 'infinite' (must be a finite"),
        ('[console]\ntheme = ""\n', "[console] theme must be a non-empty string"),
        ("[spark]\nmaster = 3\n", "[spark] master must be a non-empty string"),
        ('[spark]\nremote = "http://x:15002"\n', "[spark] remote must be a Spark Connect URL"),
        ('[spark]\nmaster = "local"\nremote = "sc://x:15002"\n', "[spark] set either master or remote, not both"),
    ],
)
def test_bad_values_are_refused_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InvalidInput) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"config file {path}: {message}")


def test_config_defaults_change_the_default_values(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL))
    policy = resolve({"segment_size": "1 MiB"}, config.policy_defaults)
    retention = policy.entry("retention_time")
    assert (retention.text, retention.value, retention.normalized, retention.source) == (
        "3d",
        3 * 86_400_000,
        "259200 s",
        "default",
    )
    assert policy.entry("max_partition_size").normalized == "10737418240 B"
    assert policy.entry("max_deletes_per_cycle").value == 4
    assert policy.entry("segment_size").source == "topic"
    assert policy.entry("granularity").text == "segment"  # not in the file: SPEC default


def test_fsync_switch_defaults_to_batch_and_refuses_unknown_values(tmp_path: Path) -> None:
    path = tmp_path / "ebb.toml"
    assert load_config(path).fsync is True
    path.write_text('[engine]\nfsync = "never"\n')
    assert load_config(path).fsync is False
    path.write_text('[engine]\nfsync = "sometimes"\n')
    with pytest.raises(InvalidInput, match="fsync must be"):
        load_config(path)
