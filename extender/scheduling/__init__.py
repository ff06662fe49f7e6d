"""The scheduling core: how a pod flows through the extender's verbs.

Rooms, each allowed to import only the ones listed before it (``tests/test_code_quality.py``
walks the imports):

* :mod:`~extender.scheduling.decide` (pure): a snapshot in, answers out. PreFilter (the pod's
  claims), Filter (per-node decisions around the structured allocator), scores' inputs.
* :mod:`~extender.scheduling.preempt` (pure): the preempt verb's victims, and the devices
  nominated pods keep.
* :mod:`~extender.scheduling.inflight`: the one :class:`Tracker` of everything decided or written
  but not in the cache yet, and the :class:`Snapshots` that lay it over the cache.
* :mod:`~extender.scheduling.write`: the only API writers (PreBind, Unreserve, PostFilter).
* :mod:`~extender.scheduling.engine`: the verbs, each in its order; built by
  :mod:`~extender.scheduling.assembly`.

A filter: engine.filter_request -> inflight (catch-up, expected binds) -> snapshots -> decide
(and preempt for nominations) -> write (PostFilter, when no node fits). A bind: engine.bind ->
write.binder -> snapshots -> decide/preempt (the same pure functions: extenders keep no
CycleState between verbs) -> tracker (assume) -> the API writes. The make-room mover
(:mod:`~extender.scheduling.make_room_mover`, beside the engine): the planner's plans ->
preempt (its bounds, whether a plan holds) -> tracker (the hold) -> write (the evictions).
"""
