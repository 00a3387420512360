"""The ``ebb`` command line (SPEC §7), run in-process and as a subprocess."""
