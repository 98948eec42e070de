"""Helpers for the switch lab tests: a small lab, netmiko sessions, SNMP reads (pysnmp 7, numeric OIDs).

The clients are netmiko and pysnmp themselves, never fleetctl's drivers: the
lab is the drivers' peer, and these tests pin the lab's own behaviour.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from fleetctl_lab.switch.spec import LabNeighbor, LabSwitchPort, LabSwitchSpec

IF_OPER = "1.3.6.1.2.1.2.2.1.8"
IF_ADMIN = "1.3.6.1.2.1.2.2.1.7"
IF_LAST_CHANGE = "1.3.6.1.2.1.2.2.1.9"
IF_IN_ERRORS = "1.3.6.1.2.1.2.2.1.14"
IF_HC_IN = "1.3.6.1.2.1.31.1.1.1.6"
IF_ALIAS = "1.3.6.1.2.1.31.1.1.1.18"
SYS_UPTIME = "1.3.6.1.2.1.1.3.0"
SYS_NAME = "1.3.6.1.2.1.1.5.0"
LLDP_REM_SYSNAME = "1.0.8802.1.1.2.1.4.1.1.9"
LLDP_REM_PORTID = "1.0.8802.1.1.2.1.4.1.1.7"
SENSOR_VALUE = "1.3.6.1.2.1.99.1.1.1.4"


def need_deps() -> None:
    """Skip, saying why, where a library the lab or its clients need is missing."""
    import importlib.util

    import pytest

    for dep in ("asyncssh", "netmiko", "snmpsim", "pysnmp"):
        if importlib.util.find_spec(dep) is None:
            pytest.skip(f"the switch lab tests need {dep} (pip install asyncssh snmpsim pysmi)")


def small_specs() -> list[LabSwitchSpec]:
    """A leaf pair's worth: an EOS switch and a SONiC switch, servers on both, a cable between them."""
    def srv(name: str, nic: str, mac: str) -> LabNeighbor:
        return LabNeighbor(system=name, port=nic, chassis_id=mac)

    eos = LabSwitchSpec(name="lab-eos-1", platform="eos", vlans=[10, 100], ports=[
        LabSwitchPort(name="Ethernet1", speed_mbps=25_000, neighbor=srv("srv-01", "eth0", "02:00:00:00:01:01"), vlans=[100]),
        LabSwitchPort(name="Ethernet2", speed_mbps=25_000, neighbor=srv("srv-02", "eth0", "02:00:00:00:02:01")),
        LabSwitchPort(name="Ethernet3", speed_mbps=25_000, neighbor=srv("srv-03", "eth0", "02:00:00:00:03:01")),
        LabSwitchPort(name="Ethernet4", speed_mbps=25_000, neighbor=srv("srv-04", "eth0", "02:00:00:00:04:01")),
        LabSwitchPort(name="Ethernet5", speed_mbps=25_000),
        LabSwitchPort(name="Ethernet49/1", neighbor=LabNeighbor(system="lab-sonic-1", port="Ethernet120", kind="switch"),
                      mode="trunk", vlans=[10, 100, 200]),
    ])  # fmt: skip
    sonic = LabSwitchSpec(name="lab-sonic-1", platform="sonic", vlans=[100, 200], ports=[
        LabSwitchPort(name="Ethernet0", neighbor=srv("srv-01", "eth1", "02:00:00:00:01:02"), vlans=[100]),
        LabSwitchPort(name="Ethernet4", neighbor=srv("srv-02", "eth1", "02:00:00:00:02:02")),
        LabSwitchPort(name="Ethernet8", neighbor=srv("srv-03", "eth1", "02:00:00:00:03:02")),
        LabSwitchPort(name="Ethernet12", neighbor=srv("srv-04", "eth1", "02:00:00:00:04:02")),
        LabSwitchPort(name="Ethernet16"),
        LabSwitchPort(name="Ethernet120", neighbor=LabNeighbor(system="lab-eos-1", port="Ethernet49/1", kind="switch"),
                      mode="trunk", vlans=[10, 100, 200]),
    ])  # fmt: skip
    return [eos, sonic]


def connect(lab: Any, name: str, **kw: Any) -> Any:
    from netmiko import ConnectHandler

    host, port = lab.ssh_of(name)
    platform = lab.status()["switches"][name]["device_type"]
    args = {"device_type": platform, "host": host, "port": port, "username": "admin", "password": "labpass",
            "fast_cli": True, "conn_timeout": 10, **kw}  # fmt: skip
    return ConnectHandler(**args)


def snmp_get(lab: Any, name: str, *oids: str) -> dict[str, Any]:
    """{oid: value} (ints where the value is a number) read with pysnmp 7."""
    from pysnmp.hlapi.v3arch.asyncio import (
        CommunityData,
        ContextData,
        ObjectIdentity,
        ObjectType,
        SnmpEngine,
        UdpTransportTarget,
        get_cmd,
    )  # fmt: skip

    async def run() -> dict[str, Any]:
        engine = _engine(SnmpEngine)
        target = await UdpTransportTarget.create(lab.snmp_of(name), timeout=2, retries=2)
        err, status, _, vbs = await get_cmd(engine, CommunityData(lab.community(name)), target, ContextData(),
                                            *[ObjectType(ObjectIdentity(o)) for o in oids])  # fmt: skip
        assert err is None and not status, (err, status)
        return {str(o): _py(v) for o, v in vbs}

    return _loop().run_until_complete(run())


def snmp_walk(lab: Any, name: str, oid: str) -> dict[str, Any]:
    from pysnmp.hlapi.v3arch.asyncio import (
        CommunityData,
        ContextData,
        ObjectIdentity,
        ObjectType,
        SnmpEngine,
        UdpTransportTarget,
        bulk_walk_cmd,
    )  # fmt: skip

    async def run() -> dict[str, Any]:
        engine = _engine(SnmpEngine)
        out: dict[str, Any] = {}
        target = await UdpTransportTarget.create(lab.snmp_of(name), timeout=2, retries=2)
        async for err, status, _, vbs in bulk_walk_cmd(engine, CommunityData(lab.community(name)), target, ContextData(),
                                                       0, 50, ObjectType(ObjectIdentity(oid)), lexicographicMode=False):  # fmt: skip
            assert err is None and not status, (err, status)
            out.update({str(o): _py(v) for o, v in vbs})
        return out

    return _loop().run_until_complete(run())


def snmp_walk_typed(lab: Any, name: str, oid: str = "1.0") -> list[tuple[str, Any]]:
    """Every (oid, pysnmp value) the switch's agent serves after ``oid``, in order: the values as
    pysnmp decoded them (types kept), for comparing with what the lab rendered."""
    from pysnmp.hlapi.v3arch.asyncio import (
        CommunityData,
        ContextData,
        ObjectIdentity,
        ObjectType,
        SnmpEngine,
        UdpTransportTarget,
        bulk_walk_cmd,
    )  # fmt: skip

    async def run() -> list[tuple[str, Any]]:
        engine = _engine(SnmpEngine)
        out: list[tuple[str, Any]] = []
        target = await UdpTransportTarget.create(lab.snmp_of(name), timeout=2, retries=2)
        async for err, status, _, vbs in bulk_walk_cmd(engine, CommunityData(lab.community(name)), target, ContextData(),
                                                       0, 50, ObjectType(ObjectIdentity(oid)), lexicographicMode=True):  # fmt: skip
            assert err is None and not status, (err, status)
            out += [(str(o), v) for o, v in vbs]
        return out

    return _loop().run_until_complete(run())


# One event loop and one SNMP engine for the test session: building an engine costs ~0.3 s.
_STATE: dict[str, Any] = {}


def _loop() -> asyncio.AbstractEventLoop:
    if "loop" not in _STATE:
        _STATE["loop"] = asyncio.new_event_loop()
    return _STATE["loop"]


def _engine(factory: Any) -> Any:
    if "engine" not in _STATE:
        _STATE["engine"] = factory()
    return _STATE["engine"]


def close_snmp() -> None:
    engine, loop = _STATE.pop("engine", None), _STATE.pop("loop", None)
    if engine is not None:
        engine.close_dispatcher()
    if loop is not None:
        pending = asyncio.all_tasks(loop)
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()


def _py(v: Any) -> Any:
    text = v.prettyPrint()
    try:
        return int(text)
    except ValueError:
        return text


def wait_for(pred: Callable[[], Any], timeout: float = 8.0, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s (last: {last!r})")
