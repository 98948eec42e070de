"""The switch driver: netmiko over SSH, platforms as data (``platforms/*.yaml``).

Registered as ``netmiko`` in the ``fleetctl.switch`` entry-point group. As
for BMCs, the registry hands out the class and fleet-wide work goes through
its ``sweep`` (a bounded thread pool, results as data).
"""

from .driver import NetmikoSwitch, SessionDropped
from .platform import Platform, load_platform, platform_names
from .sweep import TargetResult, run_many

__all__ = [
    "NetmikoSwitch",
    "Platform",
    "SessionDropped",
    "TargetResult",
    "load_platform",
    "platform_names",
    "run_many",
]
