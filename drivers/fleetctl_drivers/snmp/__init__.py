"""SNMP poller for switches (asyncio): IF-MIB, LLDP-MIB, ENTITY-SENSOR-MIB.

SNMPv2c and SNMPv3 authPriv with SHA and AES go through fleetctl's own BER
codec (``ber``, ``usm``, ``v2c``) on one shared UDP socket; the other SNMPv3
protocols (and agents the strict decoder refuses) through pysnmp 7.

Public API::

    results = await poll_many(targets, what=("if", "lldp", "sensors"), concurrency=100)
    results = await poll_many(targets, what=("counters",))  # IF-MIB traffic/error counters only
    results = poll_many_sync(targets)            # no event loop (the CLI)
    r = rates(previous_result, current_result)   # pure, wrap-safe

Models live in :mod:`fleetctl.interfaces.snmp`.
"""

from __future__ import annotations

from .poller import SnmpPoller, poll_many, poll_many_sync
from .rates import counter_delta, rates, rebooted

__all__ = ["SnmpPoller", "counter_delta", "poll_many", "poll_many_sync", "rates", "rebooted"]
