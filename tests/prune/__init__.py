"""The prune engine: the reference model, the Spark planner against it, the executor, the scheduler."""
