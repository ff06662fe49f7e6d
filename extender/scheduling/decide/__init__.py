"""Deciding: a snapshot in, answers out (the in-tree plugin's PreFilter and Filter, and the
structured allocator's caller; upstream ``dynamicresources.go`` around ``structured/``).

Pure: no I/O, no clock but the one passed in, nothing here changes in-flight state or writes.
May import the model, the allocator, CEL and the cluster cache's records; never the API client,
:mod:`extender.scheduling.inflight`, :mod:`extender.scheduling.preempt` or
:mod:`extender.scheduling.write` (``tests/test_code_quality.py`` walks the imports).
"""
