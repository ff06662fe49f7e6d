"""dra-extender: Kubernetes Dynamic Resource Allocation for any kube-scheduler, as an HTTP extender."""
