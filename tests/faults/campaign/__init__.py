"""The crash campaign: producers, consumers and prune cycles in child processes on
one data directory, killed with SIGKILL at random points, over and over; after each
kill the store is reopened and its invariants checked (:mod:`tests.faults.campaign.invariants`).

Run it long with ``python -m tests.faults.campaign --kills 300 --json out.json`` from
the repository root; ``tests/faults/test_crash_campaign.py`` runs a short one in CI.
"""
