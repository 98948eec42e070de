"""SNMP poller for switches (pysnmp 7, asyncio): IF-MIB, LLDP-MIB, ENTITY-SENSOR-MIB.

Public API::

    results = await poll_many(targets, what=("if", "lldp", "sensors"), concurrency=100)
    results = poll_many_sync(targets)            # no event loop (the CLI)
    r = rates(previous_result, current_result)   # pure, wrap-safe

Models live in :mod:`fleetctl.interfaces.snmp`.
"""

from __future__ import annotations

from .poller import SnmpPoller, poll_many, poll_many_sync
from .rates import counter_delta, rates, rebooted

__all__ = ["SnmpPoller", "counter_delta", "poll_many", "poll_many_sync", "rates", "rebooted"]
