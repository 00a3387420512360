"""Integrity of a data directory: ``ebb verify`` finds corruption and inconsistency
(check.py, read-only); ``ebb verify --repair`` fixes what the files prove and
quarantines what is lost (repair.py)."""
