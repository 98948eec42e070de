"""The Redfish BMC driver for fleetctl.

    from fleetctl_drivers.redfish import RedfishDriver
    async with RedfishDriver(target) as bmc:
        await bmc.power.state()
    results = await RedfishDriver.sweep(targets, lambda bmc: bmc.power.state())

The entry point (``redfish`` in ``fleetctl.bmc``) hands fleetctl the class;
fleet-wide operations go through its ``sweep`` (:func:`.sweep.run_many`: one
shared HTTP session, per-BMC bounds, results as data), so the core never
imports this package by name.

Transport on aiohttp (see :mod:`.client` for why, and why the DMTF ``redfish``
library is kept as the benchmark baseline rather than used); vendor
differences in :mod:`.quirks`; JSON parsing in :mod:`.parse`; accelerator PCI
ids in ``accelerators.yaml``.
"""

from .client import FleetSession, RedfishClient, RedfishError, decode_error, format_fingerprint
from .driver import RedfishDriver
from .quirks import Quirks, detect_vendor, quirks_for
from .sweep import TargetResult, run_many, run_many_sync

__all__ = [
    "FleetSession",
    "Quirks",
    "RedfishClient",
    "RedfishDriver",
    "RedfishError",
    "TargetResult",
    "decode_error",
    "detect_vendor",
    "format_fingerprint",
    "quirks_for",
    "run_many",
    "run_many_sync",
]
