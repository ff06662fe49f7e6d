"""The cluster as the extender knows it: objects by kind and key, and snapshots for decisions."""
