"""The code itself: linters, the import graph, layering, SQL kept behind the catalog."""
