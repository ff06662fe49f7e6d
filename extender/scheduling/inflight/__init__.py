"""In flight: what the extender has decided or written that the cache does not show yet (the
in-tree plugin's assume cache and in-flight allocations, upstream ``dra_manager.go``): claim
writes assumed, binds kube-scheduler has decided but not sent, pods placed, what kube-scheduler
saw before the cache did, devices held after prioritize.

May import :mod:`extender.scheduling.decide` and :mod:`extender.scheduling.preempt`; never the API
client or :mod:`extender.scheduling.write`.
"""
