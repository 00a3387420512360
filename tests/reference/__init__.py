"""A reference model of docs/RETENTION.md for the tests: an in-memory catalog
(:mod:`reference.catalog`), random catalogs for hypothesis, and the model itself
(:mod:`reference.model`), written to be read, not to be fast."""
