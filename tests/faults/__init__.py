"""Faults: kills, torn writes, full and failing disks, concurrent processes, load, hostile input."""
