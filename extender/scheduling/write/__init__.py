"""Writing: the only callers of API writes (the in-tree plugin's PreBind, Unreserve and
PostFilter): they carry out what :mod:`extender.scheduling.decide` planned (a bind plan, a
PostFilter release): claim allocations and reservations under optimistic concurrency, the pod's
extended-resource claim and status, the Binding, and what undoes them.
"""
