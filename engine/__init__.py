"""Ebbtide's engine: store, catalog, policies, planner, executor, journal, scheduler.

sqlite-utils imports pandas and numpy when they are installed (PySpark brings them)
for optional column types we never use, and those imports cost most of a second at
every start of the CLI and the console. So sqlite-utils is imported here first, with
the two hidden from that one import; they stay importable for PySpark afterwards.
"""

import sys

if "sqlite_utils" not in sys.modules:
    _hidden = [name for name in ("pandas", "numpy") if name not in sys.modules]
    for _name in _hidden:
        sys.modules[_name] = None  # type: ignore[assignment]  # `import NAME` now raises ImportError
    try:
        import sqlite_utils  # noqa: F401
    finally:
        for _name in _hidden:
            del sys.modules[_name]
