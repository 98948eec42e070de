"""Lifecycle states of servers and accelerator boards.

The values are what the database stores and what operators type
(``--state ready``); the tables of transitions between them are
``lifecycle/machine.py`` (servers) and ``lifecycle/boards.py`` (boards).
Kept free of heavy imports.
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
    OK = "ok"  # works: the site file's default, or burn-in passed it
    SUSPECT = "suspect"  # works, but look at it: burn-in judged it degraded, or an operator saw errors
    FAILED = "failed"  # a flash of its firmware failed (firmware campaign), or an operator says so
    RMA = "rma"  # to go back to the vendor: burn-in failed it (an RMA entry is open) or an operator sent it
    UNKNOWN = "unknown"  # declared by a site file before anyone checked it; burn-in or an operator decides


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
