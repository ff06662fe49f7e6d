"""Preempting: which pods to evict for a preemptor's claims (the preempt verb), and the devices a
nominated pod keeps (kube-scheduler's nominated pods, for devices; upstream has no device-aware
preemption through 1.37).

Pure, like :mod:`extender.scheduling.decide`, which is all it may import of the scheduling core.
"""
