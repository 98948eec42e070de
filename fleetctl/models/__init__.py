"""The inventory's tables (SQLModel), one module per family.

Importing this package registers every table on ``SQLModel.metadata``.
"""

from fleetctl.models.burnin import BoardRma, BurninResult, BurninRun
from fleetctl.models.hardware import BiosProfile, FirmwareBaseline, HardwareModel
from fleetctl.models.history import Event, Job, JobStep
from fleetctl.models.k8s import K8sMaintenance
from fleetctl.models.network import Link, Switch, SwitchPort
from fleetctl.models.server import AcceleratorBoard, Nic, Server, ServerTag
from fleetctl.models.site import PowerAdmission, Rack, RackUnit, Site
from fleetctl.models.sweep import Finding, FindingAck, FindingState, SweepCursor, SweepRun, SweepTarget

__all__ = [
    "AcceleratorBoard",
    "BiosProfile",
    "BoardRma",
    "BurninResult",
    "BurninRun",
    "Event",
    "Finding",
    "FindingAck",
    "FindingState",
    "FirmwareBaseline",
    "HardwareModel",
    "Job",
    "JobStep",
    "K8sMaintenance",
    "Link",
    "Nic",
    "PowerAdmission",
    "Rack",
    "RackUnit",
    "Server",
    "ServerTag",
    "Site",
    "SweepCursor",
    "SweepRun",
    "SweepTarget",
    "Switch",
    "SwitchPort",
]
