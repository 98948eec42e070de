"""`sweep --level host`: what only the host sees, read over SSH by the accelerator driver of the server's boards.

For each server whose OS should answer (ready, in service, in maintenance),
one SSH session (``fleetctl.hostio``) in which the accelerator driver that
serves the server's board kind (``fleetctl.plugins.accel_driver``, found
through the ``fleetctl.accel`` entry points) reads the boards and their
counters with the tools the inventory's host variables name (the playbooks
read the same ones). The driver gives vendor-neutral readings
(:class:`~fleetctl.interfaces.accel.AccelReading`): the boards its tool lists
with their counters, the device nodes present (for a kind that has them), the
events the host logged about its boards. The host checks
(``fleetctl.sweep.host_checks``) judge only those, whatever the kind.

A host that does not answer, or a tool whose output cannot be read, is that
part's finding; nothing here raises for one host.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetctl import hostio
from fleetctl.interfaces.accel import BoardEvent, BoardReading
from fleetctl.interfaces.host import HostRef

#: Lifecycle states in which the installed OS should answer over SSH.
HOST_STATES = frozenset({"ready", "in-service", "maintenance"})


@dataclass
class HostReading:
    """What the host said; a part is None when it could not be read (``errors`` says why)."""

    error: str | None = None  # the host did not answer (no part read)
    boards: list[BoardReading] | None = None  # what the host tool lists (AccelReading.boards)
    tool: str = ""  # that tool, for findings
    device_nodes: list[str] | None = None  # None: not read, or the kind has none
    events: list[BoardEvent] | None = None  # what the host logged about its boards
    errors: dict[str, str] = field(default_factory=dict)


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
    r.boards, r.tool, r.device_nodes, r.events = got.boards, got.tool, got.device_nodes, got.events
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
