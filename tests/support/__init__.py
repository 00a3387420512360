"""Helpers the tests share: fixtures, data builders, the prune crash driver."""
