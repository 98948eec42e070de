"""`sweep --level host`: what only the host sees, read over SSH through the accelerator parsers.

For each server whose OS should answer (ready, in service, in maintenance),
one SSH session runs the accelerator tools the inventory's host variables
name (``fleetctl_smi_cmd``, ``fleetctl_nvidia_smi_cmd``,
``fleetctl_dev_glob``, ``fleetctl_dmesg_cmd``; the playbooks read the same
ones) and the driver package's parsers read their output:

- MN-Core 2: ``gpfn3-smi list`` (boards by device name) and the device
  nodes present;
- GPUs: ``nvidia-smi --query-gpu`` (temperature, ECC, retired pages, PCIe
  link now and at most) and the kernel's Xid lines.

A host that does not answer, or a tool whose output cannot be read, is that
part's finding; nothing here raises for one host.
"""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import dataclass, field
from typing import Any

from fleetctl import hostio
from fleetctl.interfaces.host import HostRef

#: Lifecycle states in which the installed OS should answer over SSH.
HOST_STATES = frozenset({"ready", "in-service", "maintenance"})

#: What ``nvidia-smi --query-gpu`` is asked for.
GPU_FIELDS = ("index", "serial", "pci.bus_id", "temperature.gpu", "ecc.errors.uncorrected.volatile.total",
              "retired_pages.single_bit_ecc.count", "retired_pages.double_bit.count", "retired_pages.pending",
              "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max")  # fmt: skip


@dataclass
class HostReading:
    """What the host said; a part is None when it could not be read (``errors`` says why)."""

    error: str | None = None  # the host did not answer (no part read)
    mncore: list[Any] | None = None  # MnCoreDevice from gpfn3-smi list
    device_nodes: list[str] | None = None
    gpus: list[Any] | None = None  # GpuQuery
    xids: list[Any] | None = None  # XidEvent
    errors: dict[str, str] = field(default_factory=dict)


#: The most stdout kept per tool (fleetctl.hostio stops a command that prints more, naming the host and the command):
#: a tool's listing of 8 boards is a few kB; a server's kernel log is ~1 MB at most in practice.
MAX_TOOL_BYTES = 1 << 20
MAX_DMESG_BYTES = hostio.MAX_OUTPUT_BYTES


async def _run(conn: Any, host: str, argv: list[str], timeout: float, *, max_bytes: int = MAX_TOOL_BYTES) -> str:
    done = await hostio.run(conn, " ".join(shlex.quote(a) for a in argv), host=host, timeout=timeout, max_bytes=max_bytes)
    if done.exit_status != 0:
        err = done.last_error_line()
        raise RuntimeError(f"`{argv[0]}` exited {done.exit_status}" + (f": {err}" if err else ""))
    return done.stdout


async def read_host(ref: HostRef, *, timeout: float = 20.0) -> HostReading:
    """One SSH session to the host; each tool on its own (one that fails is that part's error)."""
    r = HostReading()
    name, hostvars, board_kind = ref.target.name, ref.hostvars, ref.board_kind
    try:
        opened = hostio.connect(ref.target, timeout=timeout)
        host = await opened.__aenter__()
    except hostio.HostUnreachable as e:
        r.error = f"{name}: {e}"
        return r
    conn = host.conn

    async def part(label: str, coro: Any) -> Any:
        try:
            return await coro
        except Exception as e:  # noqa: BLE001 - a tool that fails or prints what its parser refuses is that part's finding
            r.errors[label] = str(e) if isinstance(e, hostio.HostOutputError) else f"{name}: {e}"  # the former names the host
            return None

    from fleetctl_drivers.accel.mncore import parse_gpfn3_list
    from fleetctl_drivers.accel.nvidia import parse_query_gpu_csv, parse_xid

    try:
        if board_kind in ("mncore2", "mncore"):
            smi = str(hostvars.get("fleetctl_smi_cmd") or "gpfn3-smi")
            glob = str(hostvars.get("fleetctl_dev_glob") or "/dev/mnc2p*")

            async def nodes() -> list[str]:
                out = await _run(conn, name, ["sh", "-c", f'for f in {glob}; do [ -e "$f" ] && echo "$f"; done; true'], timeout)
                return [ln for ln in out.splitlines() if ln.strip()]

            async def smi_list() -> list[Any]:
                return parse_gpfn3_list(await _run(conn, name, [smi, "list"], timeout))

            r.mncore, r.device_nodes = await asyncio.gather(part("gpfn3-smi", smi_list()), part("device nodes", nodes()))
        if board_kind == "gpu":
            nvsmi = str(hostvars.get("fleetctl_nvidia_smi_cmd") or "nvidia-smi")
            dmesg = str(hostvars.get("fleetctl_dmesg_cmd") or "dmesg")

            async def gpus() -> list[Any]:
                return parse_query_gpu_csv(await _run(conn, name, [nvsmi, f"--query-gpu={','.join(GPU_FIELDS)}", "--format=csv"], timeout))

            async def xids() -> list[Any]:
                return parse_xid(await _run(conn, name, [dmesg], timeout, max_bytes=MAX_DMESG_BYTES))

            r.gpus, r.xids = await asyncio.gather(part("nvidia-smi", gpus()), part("dmesg", xids()))
    finally:
        await opened.__aexit__(None, None, None)
    return r


async def read_hosts(hosts: dict[str, HostRef], *, concurrency: int = 50, timeout: float = 20.0) -> dict[str, HostReading]:
    """Every host of ``hosts`` (``fleetctl.targets.resolve_hosts``), at most ``concurrency`` at once."""

    async def one(ref: HostRef) -> HostReading:
        try:
            return await asyncio.wait_for(read_host(ref, timeout=timeout), timeout * 3)
        except TimeoutError:
            return HostReading(error=f"{ref.target.name}: the host did not finish within {timeout * 3:g} s")

    return dict(zip(hosts, await hostio.each(hosts.values(), one, concurrency=concurrency), strict=True))
