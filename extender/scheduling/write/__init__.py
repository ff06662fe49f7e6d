"""Writing: the only callers of API writes (the in-tree plugin's PreBind, Unreserve and
PostFilter): claim allocations and reservations under optimistic concurrency, the pod's
extended-resource claim and status, the Binding, and what undoes them.
"""
