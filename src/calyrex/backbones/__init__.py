"""Base models: names resolved to a directory (the offline SmolLM2 among them) and the
precision chosen for this machine."""
