"""`sweep --level host`: what only the host sees, read over SSH by the accelerator driver of the server's boards.

For each server whose OS should answer (ready, in service, in maintenance),
one SSH session (``fleetctl.hostio``) in which the accelerator driver that
serves the server's board kind (``fleetctl.plugins.accel_driver``, found
through the ``fleetctl.accel`` entry points) reads the boards and their
counters with the tools the inventory's host variables name (the playbooks
read the same ones). The driver gives its parts by the names the host checks
read (``fleetctl.sweep.host_checks``): the board listing and device nodes of
one kind, the GPUs' counters and the kernel's Xid lines of another.

A host that does not answer, or a tool whose output cannot be read, is that
part's finding; nothing here raises for one host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetctl import hostio
from fleetctl.interfaces.host import HostRef

#: Lifecycle states in which the installed OS should answer over SSH.
HOST_STATES = frozenset({"ready", "in-service", "maintenance"})


@dataclass
class HostReading:
    """What the host said; a part is None when it could not be read (``errors`` says why)."""

    error: str | None = None  # the host did not answer (no part read)
    mncore: list[Any] | None = None  # the board listing (the driver's typed devices)
    device_nodes: list[str] | None = None
    gpus: list[Any] | None = None  # the GPUs' counters (the driver's typed readings)
    xids: list[Any] | None = None  # kernel events
    errors: dict[str, str] = field(default_factory=dict)


_PARTS = ("mncore", "device_nodes", "gpus", "xids")


async def read_host(ref: HostRef, *, timeout: float = 20.0) -> HostReading:
    """One SSH session to the host, in which the board kind's driver reads each tool on its own."""
    from fleetctl.plugins import accel_driver

    r = HostReading()
    got = None
    try:
        async with hostio.connect(ref.target, timeout=timeout) as host:  # a server without boards: is its OS up
            if ref.board_kind:
                got = await accel_driver(ref.board_kind).read(host, ref.hostvars, timeout=timeout)
    except hostio.HostUnreachable as e:
        r.error = f"{ref.target.name}: {e}"
        return r
    if got is None:
        return r
    for part, value in got.parts.items():
        if part in _PARTS:
            setattr(r, part, value)
    r.errors.update(got.errors)
    return r


async def read_hosts(hosts: dict[str, HostRef], *, concurrency: int = 50, timeout: float = 20.0) -> dict[str, HostReading]:
    """Every host of ``hosts`` (``fleetctl.targets.resolve_hosts``), at most ``concurrency`` at once."""
    import asyncio

    async def one(ref: HostRef) -> HostReading:
        try:
            return await asyncio.wait_for(read_host(ref, timeout=timeout), timeout * 3)
        except TimeoutError:
            return HostReading(error=f"{ref.target.name}: the host did not finish within {timeout * 3:g} s")

    return dict(zip(hosts, await hostio.each(hosts.values(), one, concurrency=concurrency), strict=True))
