"""The HTTP service: kube-scheduler's extender verbs, operations and debug endpoints."""
