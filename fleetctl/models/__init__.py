"""The inventory's tables (SQLModel), one module per family.

Importing this package registers every table on ``SQLModel.metadata``.
"""

from fleetctl.models.hardware import BiosProfile, FirmwareBaseline, HardwareModel
from fleetctl.models.history import Event, Job, JobStep
from fleetctl.models.network import Link, Switch, SwitchPort
from fleetctl.models.server import AcceleratorBoard, Nic, Server, ServerTag
from fleetctl.models.site import Rack, RackUnit, Site

__all__ = [
    "AcceleratorBoard",
    "BiosProfile",
    "Event",
    "FirmwareBaseline",
    "HardwareModel",
    "Job",
    "JobStep",
    "Link",
    "Nic",
    "Rack",
    "RackUnit",
    "Server",
    "ServerTag",
    "Site",
    "Switch",
    "SwitchPort",
]
