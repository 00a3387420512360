"""The journal of cycles and actions, its export, and the engine's own state."""
