"""The defaults of the flags operators set, in one leaf module (no imports): the command line
builds its parser from them without importing the server stack, so ``--help`` and ``--version``
answer at once."""

#: kube-scheduler's extender endpoint the shipped configuration points at; ``explain --server``.
DEFAULT_SERVER = "http://127.0.0.1:8888"
#: Largest request body accepted (kube-scheduler's ExtenderArgs with every node listed).
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
#: Listener bounds (see extender.service.listeners.Limits).
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_MAX_REQUESTS = 64
DEFAULT_MAX_BINDS = 512
#: How long one bind waits for binding conditions (seconds): below the shipped httpTimeout (10 s)
#: with room for the claim writes and the Binding.
DEFAULT_BINDING_WAIT = 5.0
#: DynamicResourcesArgs.bindingTimeout default (config.DynamicResourcesBindingTimeoutDefault).
DEFAULT_BINDING_TIMEOUT = 600.0
#: Node scoring policies prioritize knows.
SCORE_POLICIES = ("binpack", "spread")
#: How prioritize breaks ties among its best nodes: not at all, or by the free devices a
#: placement strands for the common shapes (issue 51; off by default, docs/performance.md).
SCORE_TIE_BREAKS = ("none", "fragmentation")
#: Seconds a verb waits for the cache to catch up with kube-scheduler's view of a pod, and a
#: preemptor's bind for its victims' claims to be released (kube-controller-manager's
#: resourceclaim controller: milliseconds, seconds when its client rate limit bites).
DEFAULT_CATCH_UP_WAIT = 2.0
DEFAULT_RELEASE_WAIT = 5.0
#: The scheduler the shipped manifests run (a second scheduler beside the default one).
DEFAULT_SCHEDULER_NAME = "dra-extender-scheduler"
#: A state file larger than this is refused (``--max-state-bytes`` raises it): an exported
#: cluster of thousands of nodes fits, a stray binary or log does not.
DEFAULT_MAX_STATE_BYTES = 64 * 1024 * 1024
#: Cluster mode: the API server's answer time budget, and how old the cache may get before it
#: counts as stale.
DEFAULT_API_TIMEOUT = 30.0
DEFAULT_CACHE_STALE_AFTER = 30.0

#: kube-scheduler's httpTimeout for the extender, as scheduler-config/ ships it (seconds).
DEFAULT_SCHEDULER_HTTP_TIMEOUT = 10.0

#: Response headers of every debug view (extender/service/debug_http.py) that ``kubectl dra`` reads
#: (extender/cluster/extender_proxy.py): the replica that answered, and how many seconds before
#: it had last decided, or "never".
REPLICA_HEADER = "X-Dra-Extender-Replica"
LAST_DECISION_HEADER = "X-Dra-Extender-Last-Decision-Seconds"

#: Make room: pods that started less than this many seconds ago are never moved (a pod just
#: placed is not moved again at once; the descheduler's minPodAge plays the same part).
DEFAULT_MAKE_ROOM_MIN_AGE = 300.0
#: Make room: the most pods one plan moves.
DEFAULT_MAKE_ROOM_MAX_MOVES = 3
#: The mover (``--make-room``): how long a pod waits for devices before pods are moved for it.
DEFAULT_MAKE_ROOM_AFTER = 120.0
#: The mover: evictions a minute, cluster-wide.
DEFAULT_MAKE_ROOM_RATE = 6.0
#: The mover: a workload (a moved pod's controller) is moved at most once in this many seconds.
DEFAULT_MAKE_ROOM_COOLDOWN = 600.0
#: The mover: from a plan's start until every moved pod's claims are released, at most (seconds).
DEFAULT_MAKE_ROOM_TIMEOUT = 300.0
