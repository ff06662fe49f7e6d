"""Deciding: a snapshot in, answers out (the in-tree plugin's PreFilter, Filter, PostFilter's
choice and Reserve, and the structured allocator's caller; upstream ``dynamicresources.go``
around ``structured/``): the answer for every candidate node, the plan a bind carries out, the
claims PostFilter releases.

Pure: no I/O, no clock but the one passed in, nothing here changes in-flight state or writes.
May import the model, the allocator, CEL and the cluster cache's records; never the API client,
:mod:`extender.scheduling.inflight`, :mod:`extender.scheduling.preempt` or
:mod:`extender.scheduling.write` (``tests/test_code_quality.py`` walks the imports).
"""
