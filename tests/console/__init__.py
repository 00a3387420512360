"""The Textual console: views, modals and steering in a Pilot, and their snapshots."""
