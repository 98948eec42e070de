"""Lifecycle states of servers and accelerator boards.

The values are what the database stores and what operators type
(``--state ready``); the transition table that moves between them arrives
with the provisioning workflow. Kept free of heavy imports.
"""

from __future__ import annotations

from enum import StrEnum


class ServerState(StrEnum):
    REGISTERED = "registered"  # declared in a site file, never touched
    INSPECTED = "inspected"  # the BMC was read and matches the inventory
    PREPARING = "preparing"  # firmware, BIOS, switch ports
    INSTALLING = "installing"  # OS install in progress
    CONFIGURING = "configuring"  # Ansible: base OS, accelerator runtime, k8s join
    VALIDATING = "validating"  # accelerator quick check
    READY = "ready"  # provisioned, not yet handed to users
    IN_SERVICE = "in-service"  # serving workloads
    MAINTENANCE = "maintenance"  # taken out by an operator
    FAILED = "failed"  # a workflow failed; last_error says why
    RMA = "rma"  # hardware returned to the vendor


class BoardState(StrEnum):
    OK = "ok"
    SUSPECT = "suspect"
    FAILED = "failed"
    RMA = "rma"
    UNKNOWN = "unknown"


# Colours for the rack elevation and tables, one place.
STATE_STYLE: dict[str, str] = {
    "registered": "grey62",
    "inspected": "cyan",
    "preparing": "yellow",
    "installing": "yellow",
    "configuring": "yellow",
    "validating": "yellow",
    "ready": "green",
    "in-service": "bold green",
    "maintenance": "magenta",
    "failed": "bold red",
    "rma": "red",
}
