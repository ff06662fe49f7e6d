"""Typed, compact records of the Kubernetes objects DRA scheduling reads, built from raw API dicts."""
