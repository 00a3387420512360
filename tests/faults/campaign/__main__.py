"""``python -m tests.faults.campaign [--kills N] [--seed S] [--engine-every K] [--json]``
from the repository root: a long crash campaign; exit status 1 on a violation."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from tests.faults.campaign.runner import KILLS_ENV, run_campaign


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.campaign", description=__doc__)
    parser.add_argument(
        "--kills",
        type=int,
        default=int(os.environ.get(KILLS_ENV, "300")),
        help=f"rounds, each ended by SIGKILL [${KILLS_ENV}, else 300]",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--engine-every", type=int, default=50, metavar="K", help="every K-th round runs `ebb engine` (Spark); 0: never"
    )
    parser.add_argument(
        "--data-dir", type=Path, help="where to run (default: a temporary directory, kept on a violation)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON (the text goes to stderr)")
    args = parser.parse_args(argv)

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="ebb-campaign-")) / "data"
    summary = run_campaign(data_dir, seed=args.seed, kills=args.kills, engine_every=args.engine_every)
    print(summary.text(), file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    if summary.violations:
        print(f"data directory kept for inspection: {data_dir}", file=sys.stderr)
        return 1
    if args.data_dir is None:
        shutil.rmtree(data_dir.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
