"""The planner's parts: docs/RETENTION.md as one Spark SQL query.

- :mod:`~engine.prune.plan.layout`: what crosses between Python and Spark by
  position (row kinds, the packed facts, flag bits and numbers, reason codes),
  defined once for the side that packs and the side that unpacks;
- :mod:`~engine.prune.plan.inputs`: the snapshot as the rows and facts Spark reads,
  written as a bucketed table's files or sent as Arrow;
- :mod:`~engine.prune.plan.expr`: expressions that render as Spark SQL and that the
  forecast evaluates over numpy arrays (engine/forecast/vectorised.py);
- :mod:`~engine.prune.plan.rules` and :mod:`~engine.prune.plan.query`: the rules
  as expressions, each next to its function in ``tests/reference/model.py``, and
  the one query rendered from them;
- :mod:`~engine.prune.plan.output`: the planning frame split into the plan tables.

:mod:`engine.prune.planner` (``Planner``, ``Plan``) runs them in that order.
"""
