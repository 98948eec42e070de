"""Kubernetes cluster clients (``fleetctl.k8s`` entry points): the lightkube one."""

from fleetctl_drivers.k8s.lightkube_client import LightkubeCluster

__all__ = ["LightkubeCluster"]
