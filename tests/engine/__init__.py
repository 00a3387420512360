"""The engine's parts on their own: store, catalog, policies, journal, config, integrity, demo."""
