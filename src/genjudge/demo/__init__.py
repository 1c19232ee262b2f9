"""The demo's small models and their training (CPU, fixed seeds)."""
