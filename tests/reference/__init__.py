"""A reference model of docs/RETENTION.md: an in-memory catalog
(:mod:`tests.reference.catalog`), the model itself (:mod:`tests.reference.model`),
written to be read, not to be fast, and random catalogs for hypothesis
(:mod:`tests.reference.strategies`). bench/plan.py imports the model: it needs no
test tools."""
