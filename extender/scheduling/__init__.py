"""Scheduling decisions over a cluster snapshot: claims of a pod, fit per node, allocations."""
