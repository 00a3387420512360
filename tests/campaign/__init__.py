"""The crash campaign: producers, consumers and prune cycles in child processes on
one data directory, killed with SIGKILL at random points, over and over; after each
kill the store is reopened and its invariants checked (:mod:`campaign.invariants`).

Run it long with ``python -m tests.campaign --kills 300 --json out.json`` from the
repository root; ``tests/test_crash_campaign.py`` runs a short one in CI.

Kept free of imports: ``python -m tests.campaign`` imports this package under a
second name before its ``__main__`` puts ``tests/`` on the path.
"""
