"""Preempting: which pods to evict for a preemptor's claims (the preempt verb), and who is
nominated where and what their preemptions release (kube-scheduler's nominated pods, for
devices; upstream has no device-aware preemption through 1.37), as data that
:mod:`extender.scheduling.decide.what_if` judges with.

Pure, like :mod:`extender.scheduling.decide`, which is all it may import of the scheduling core.
"""
