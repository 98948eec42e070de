"""SNMP for the lab switches: .snmprec data rendered from the switch state, served by snmpsim.

snmpsim serves every switch, from one process per 100 switches up to the
cores (``SwitchLabConfig.snmp_processes``). Each switch has its own UDP
endpoint (its own 127.x address, port 161 where that can be bound) and its
own community, ``<community>@<switch name>``: snmpsim picks the data file by
community. (snmpsim can also pick data by endpoint, but with pysnmp 7 its
responder never consults the transport: verified with snmpsim 1.2.2.)

What a switch's data holds (numeric OIDs; IF-MIB, LLDP-MIB, ENTITY-MIB and
ENTITY-SENSOR-MIB are not bundled with pysnmp):

- system: sysDescr, sysObjectID, sysUpTime (moves; a reboot resets it),
  sysContact, sysName, sysLocation;
- IF-MIB ifTable/ifXTable per port: ifDescr/ifName, ifType 6, ifMtu, speed,
  ifPhysAddress, ifAdminStatus, ifOperStatus (up where the plan cables the
  port and it is enabled), ifLastChange, octet and packet counters that grow
  at the port's share of line rate (32- and 64-bit; the 32-bit ones wrap),
  ifInErrors/ifInDiscards/ifOutErrors, ifAlias (the description);
- LLDP-MIB: the local system and port tables and lldpRemTable from the
  cabling (indexed timeMark 0, local port = ifIndex, remIndex 1);
- ENTITY-MIB/ENTITY-SENSOR-MIB: a chassis and five temperature sensors;
- BRIDGE-MIB dot1dBasePortIfIndex (bridge port = ifIndex) and Q-BRIDGE-MIB
  dot1qTpFdbPort/Status: the MAC table the CLIs print (``SimSwitch.mac_table``).

Faults re-render the file; snmpsim notices the new mtime and re-reads it.
Values that move are evaluated by ``snmp_variation/fleetlab.py`` from
parameters in the file, because snmpsim's ``numeric`` module caches its
parameters per OID for the life of the process (a rewritten rate would be
ignored).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fleetctl.errors import FleetError
from fleetctl_lab.switch.state import SimSwitch

log = logging.getLogger("fleetctl_lab.switch")

VARIATION_DIR = Path(__file__).with_name("snmp_variation")

SYS = "1.3.6.1.2.1.1"
IF_NUMBER = "1.3.6.1.2.1.2.1.0"
IF_ENTRY = "1.3.6.1.2.1.2.2.1"
IFX_ENTRY = "1.3.6.1.2.1.31.1.1.1"
LLDP_LOC = "1.0.8802.1.1.2.1.3"
LLDP_REM = "1.0.8802.1.1.2.1.4.1.1"
ENT_PHYS = "1.3.6.1.2.1.47.1.1.1.1"
ENT_SENSOR = "1.3.6.1.2.1.99.1.1.1"
DOT1D_BASE_PORT = "1.3.6.1.2.1.17.1.4.1"  # dot1dBasePortEntry: .1 port, .2 ifIndex
DOT1Q_TP_FDB = "1.3.6.1.2.1.17.7.1.2.2.1"  # dot1qTpFdbEntry: .2 port, .3 status; index FDB id (the VLAN) + MAC

SYS_OBJECT_ID = {"eos": "1.3.6.1.4.1.30065.1.3011.7050.3741.48", "sonic": "1.3.6.1.4.1.8072.3.2.10"}
# snmpsim's responder, made to die with the lab (PR_SET_PDEATHSIG) even if the
# lab is killed with SIGKILL; set in the child itself, no preexec_fn needed.
# snmpsim keeps at most 32 data files open (DataFile.max_queue_entries) and
# closes the oldest to open another; where Python has no gdbm/ndbm its index
# is dbm.dumb, whose open parses the whole index with ast.literal_eval. Past
# 32 switches nearly every request reopened a file: 4.7x the agent CPU per
# switch (measured, 40 switches). The child keeps every switch's file open
# (``FLEETLAB_DATA_FILES``, one descriptor each, the limit raised to fit).
_SNMPSIM_MAIN = (
    "import ctypes, os, resource, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL('libc.so.6').prctl(1, signal.SIGTERM)\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "from snmpsim import datafile\n"
    "n = int(os.environ.get('FLEETLAB_DATA_FILES') or 0)\n"
    "datafile.DataFile.max_queue_entries = max(datafile.DataFile.max_queue_entries, n + 1)\n"
    "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
    "want = 3 * n + 256\n"
    "if soft != resource.RLIM_INFINITY and soft < want:\n"
    "    resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))\n"
    "from snmpsim.commands.responder import main\n"
    "sys.exit(main())\n"
)
_PLAIN = re.compile(r"^[ -{}~]*$")  # printable ASCII without '|'


def community_of(base: str, switch: str) -> str:
    return f"{base}@{switch}"


def _oid_key(oid: str) -> tuple[int, ...]:
    return tuple(int(x) for x in oid.split("."))


def _s(text: str) -> tuple[str, str]:
    if _PLAIN.match(text):
        return "4", text
    return "4x", text.encode().hex()


def _mac_hex(mac: str) -> tuple[str, str]:
    return "4x", mac.replace(":", "").lower()


def _octets_of_name(name: str) -> str:
    return ".".join(str(b) for b in name.encode())


def render_snmprec(sw: SimSwitch, now: float | None = None) -> str:
    """The .snmprec text of a switch as it is now."""
    now = time.time() if now is None else now
    rec: list[tuple[str, str, Any]] = []
    spec = sw.spec
    if sw.platform == "eos":
        descr = f"Arista Networks EOS version {spec.os_version} running on an Arista Networks {spec.model}"
    else:
        descr = f"SONiC Software Version: {spec.os_version} - HwSku: Mellanox-SN2700 - Distribution: Debian 12.5 - Kernel: 6.1.0-11-2-amd64"
    boot = sw.boot_time
    rec += [
        (f"{SYS}.1.0", *_s(descr)),
        (f"{SYS}.2.0", "6", SYS_OBJECT_ID[sw.platform]),
        (f"{SYS}.3.0", "67:fleetlab", f"fn=uptime,boot={boot:.3f}"),
        (f"{SYS}.4.0", "4", "netops@example.com"),
        (f"{SYS}.5.0", *_s(sw.hostname)),
        (f"{SYS}.6.0", "4", "fleetctl lab"),
        (f"{SYS}.7.0", "2", 6),
        (IF_NUMBER, "2", len(sw.ports)),
    ]

    def counter(oid: str, c: Any, bits: int, scale: float = 1.0) -> None:
        base = c.value(now) * scale
        rec.append((oid, "70:fleetlab" if bits == 64 else "65:fleetlab",
                    f"fn=counter,base={base:.0f},rate={c.rate * scale:.3f},t0={now:.3f},bits={bits}"))  # fmt: skip

    mtu = 9214 if sw.platform == "eos" else 9100
    for p in sw.ports.values():
        i = p.ifindex
        up = sw.oper_up(p, now)
        flap = p.faults.get("flap") if p.cfg.enabled and sw.cabled(p) else None
        rec += [
            (f"{IF_ENTRY}.1.{i}", "2", i),
            (f"{IF_ENTRY}.2.{i}", *_s(p.name)),
            (f"{IF_ENTRY}.3.{i}", "2", 6),
            (f"{IF_ENTRY}.4.{i}", "2", mtu),
            (f"{IF_ENTRY}.5.{i}", "66", min(p.speed_mbps * 1_000_000, 4_294_967_295)),
            (f"{IF_ENTRY}.6.{i}", *_mac_hex(spec.mac)),
            (f"{IF_ENTRY}.7.{i}", "2", 1 if p.cfg.enabled else 2),
        ]
        if flap:
            rec.append((f"{IF_ENTRY}.8.{i}", "2:fleetlab", f"fn=flap,period={flap['period']},t0={flap['t0']:.3f}"))
            rec.append((f"{IF_ENTRY}.9.{i}", "67:fleetlab", f"fn=flapchange,period={flap['period']},t0={flap['t0']:.3f},boot={boot:.3f}"))
        else:
            rec.append((f"{IF_ENTRY}.8.{i}", "2", 1 if up else 2))
            rec.append((f"{IF_ENTRY}.9.{i}", "67", int(max(0.0, p.last_change - boot) * 100) % 2**32))
        counter(f"{IF_ENTRY}.10.{i}", p.in_octets, 32)
        counter(f"{IF_ENTRY}.11.{i}", p.in_octets, 32, 1 / 800)
        rec.append((f"{IF_ENTRY}.13.{i}", "65", 0))
        counter(f"{IF_ENTRY}.14.{i}", p.in_errors, 32)
        rec.append((f"{IF_ENTRY}.15.{i}", "65", 0))
        counter(f"{IF_ENTRY}.16.{i}", p.out_octets, 32)
        counter(f"{IF_ENTRY}.17.{i}", p.out_octets, 32, 1 / 800)
        rec.append((f"{IF_ENTRY}.19.{i}", "65", 0))
        rec.append((f"{IF_ENTRY}.20.{i}", "65", 0))
        rec.append((f"{IFX_ENTRY}.1.{i}", *_s(p.name)))
        counter(f"{IFX_ENTRY}.6.{i}", p.in_octets, 64)
        counter(f"{IFX_ENTRY}.7.{i}", p.in_octets, 64, 1 / 800)
        counter(f"{IFX_ENTRY}.10.{i}", p.out_octets, 64)
        counter(f"{IFX_ENTRY}.11.{i}", p.out_octets, 64, 1 / 800)
        rec.append((f"{IFX_ENTRY}.15.{i}", "66", p.speed_mbps))
        rec.append((f"{IFX_ENTRY}.17.{i}", "2", 1))
        rec.append((f"{IFX_ENTRY}.18.{i}", *_s(p.cfg.description)))
        # LLDP: local port table, and what the port hears.
        rec += [
            (f"{LLDP_LOC}.7.1.2.{i}", "2", 5),
            (f"{LLDP_LOC}.7.1.3.{i}", *_s(p.name)),
            (f"{LLDP_LOC}.7.1.4.{i}", *_s(p.cfg.description)),
        ]
        nb = sw.lldp_neighbor(p, now)
        if nb is not None:
            idx = f"0.{i}.1"
            nb_descr = nb.description or ("Debian GNU/Linux 12 (bookworm) Linux 6.1.0-18-amd64" if nb.kind == "server" else "Switch")
            caps = "28" if nb.kind == "switch" else "20"  # bridge+router / router (BITS)
            rec += [
                (f"{LLDP_REM}.4.{idx}", "2", 4),
                (f"{LLDP_REM}.5.{idx}", *_mac_hex(nb.chassis_id)),
                (f"{LLDP_REM}.6.{idx}", "2", 5),
                (f"{LLDP_REM}.7.{idx}", *_s(nb.port)),
                (f"{LLDP_REM}.8.{idx}", *_s(nb.port)),
                (f"{LLDP_REM}.9.{idx}", *_s(nb.system)),
                (f"{LLDP_REM}.10.{idx}", *_s(nb_descr)),
                (f"{LLDP_REM}.11.{idx}", "4x", caps),
                (f"{LLDP_REM}.12.{idx}", "4x", caps),
            ]
    # BRIDGE-MIB / Q-BRIDGE-MIB: bridge port n is ifIndex n; the FDB as the CLI's MAC table.
    for p in sw.ports.values():
        rec += [(f"{DOT1D_BASE_PORT}.1.{p.ifindex}", "2", p.ifindex), (f"{DOT1D_BASE_PORT}.2.{p.ifindex}", "2", p.ifindex)]
    for vlan, mac, p in sw.mac_table(now):
        idx = f"{vlan}." + ".".join(str(int(x, 16)) for x in mac.split(":"))
        rec += [(f"{DOT1Q_TP_FDB}.2.{idx}", "2", p.ifindex), (f"{DOT1Q_TP_FDB}.3.{idx}", "2", 3)]  # learned(3)
    rec += [
        (f"{LLDP_LOC}.1.0", "2", 4),
        (f"{LLDP_LOC}.2.0", *_mac_hex(spec.mac)),
        (f"{LLDP_LOC}.3.0", *_s(sw.hostname)),
        (f"{LLDP_LOC}.4.0", *_s(descr)),
    ]
    # ENTITY-MIB: the chassis (1) and its temperature sensors (100 + n).
    rec += [
        (f"{ENT_PHYS}.2.1", *_s(spec.model)),
        (f"{ENT_PHYS}.5.1", "2", 3),
        (f"{ENT_PHYS}.7.1", *_s(spec.model)),
        (f"{ENT_PHYS}.11.1", *_s(spec.serial)),
    ]
    for n, (label, celsius) in enumerate(sw.temperatures(), start=1):
        e = 100 + n
        rec += [
            (f"{ENT_PHYS}.2.{e}", *_s(f"{label} temperature sensor")),
            (f"{ENT_PHYS}.5.{e}", "2", 8),
            (f"{ENT_PHYS}.7.{e}", *_s(f"Temp {label}")),
            (f"{ENT_SENSOR}.1.{e}", "2", 8),  # celsius
            (f"{ENT_SENSOR}.2.{e}", "2", 9),  # units
            (f"{ENT_SENSOR}.3.{e}", "2", 0),
            (f"{ENT_SENSOR}.4.{e}", "2", celsius),
            (f"{ENT_SENSOR}.5.{e}", "2", 1),  # ok
            (f"{ENT_SENSOR}.6.{e}", "4", "C"),
        ]
    rec.sort(key=lambda r: _oid_key(r[0]))
    return "".join(f"{o}|{t}|{v}\n" for o, t, v in rec)


# --- an SNMP GET, to know when snmpsim answers ---------------------------------------------------


def snmp_get_packet(community: str, oid: str, request_id: int = 1) -> bytes:
    """An SNMPv2c GetRequest of ``oid`` (value NULL), BER-encoded by pysnmp's codec (pyasn1).

    The lab has no BER code of its own: it is the drivers' peer, so it uses
    neither the drivers' codec nor a third one. Built once per start
    (the readiness probe), so the codec's cost does not matter here.
    The community goes out as its UTF-8 bytes.
    """
    from pyasn1.codec.ber import encoder
    from pysnmp.proto import api

    v2c = api.PROTOCOL_MODULES[api.SNMP_VERSION_2C]
    pdu = v2c.GetRequestPDU()
    v2c.apiPDU.set_defaults(pdu)
    v2c.apiPDU.set_request_id(pdu, request_id)
    v2c.apiPDU.set_varbinds(pdu, [(oid, v2c.null)])
    msg = v2c.Message()
    v2c.apiMessage.set_defaults(msg)
    v2c.apiMessage.set_community(msg, community.encode())
    v2c.apiMessage.set_pdu(msg, pdu)
    return bytes(encoder.encode(msg))


def udp_endpoint(host: str, port: int) -> tuple[str, int]:
    """(host, port) if ``port`` binds on ``host``, else (host, a free port)."""
    for p in (port, 0):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((host, p))
            return host, s.getsockname()[1]
        except OSError:
            continue
        finally:
            s.close()
    raise FleetError(f"lab: cannot bind a UDP port on {host}")


#: Switches one snmpsim process serves, at most, when the lab chooses how many it runs (``SwitchLabConfig.snmp_processes``
#: 0): snmpsim answers from one thread, and 500 switches polled at once kept one process on a core for 77 s while the
#: other core idled (bench/sweep.py, 1,000 BMCs + 500 switches: the sweep's wall was snmpsim's, 1.7x the machine's limit).
SWITCHES_PER_PROCESS = 100


def snmpsim_processes(switches: int, asked: int = 0) -> int:
    """How many snmpsim processes serve ``switches``: ``asked`` when given, else one per :data:`SWITCHES_PER_PROCESS`
    switches up to the cores this process may use; never more than one per switch."""
    if asked <= 0:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        asked = min(cores, -(-switches // SWITCHES_PER_PROCESS))
    return max(1, min(asked, switches))


class SnmpAgents:
    """snmpsim processes serving a data file per switch, each the endpoints of every n-th switch.

    Every process reads the same data folder (snmpsim picks the file by community) with its own index cache.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.data_dir = self.root / "data"
        self.cache_dir = self.root / "cache"
        self.procs: list[subprocess.Popen[bytes]] = []
        self._mtimes: dict[str, int] = {}
        self._probes: dict[str, bytes] = {}
        self.log_path = self.root / "snmpsim.log"

    @property
    def running(self) -> bool:
        return bool(self.procs)

    def path_of(self, community: str) -> Path:
        return self.data_dir / f"{community}.snmprec"

    def write(self, community: str, text: str) -> None:
        """Replace a data file atomically, with an mtime snmpsim will see as new.

        snmpsim compares whole-second mtimes, so two writes in one second
        would look like one: each write gets a later second than the last.
        """
        path = self.path_of(community)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        stamp = max(int(time.time()), self._mtimes.get(community, 0) + 1)
        os.utime(tmp, (stamp, stamp))
        os.replace(tmp, path)
        self._mtimes[community] = stamp

    async def start(self, agents: list[tuple[tuple[str, int], str]], timeout: float = 60.0, processes: int = 0) -> None:
        """Start snmpsim on the agents' endpoints (``[(endpoint, community)]``), in ``processes`` processes (0: as
        :func:`snmpsim_processes` says), each serving every n-th agent; wait until each answers its first agent's
        community."""
        import snmpsim  # type: ignore[import-untyped]

        snmpsim_var = Path(snmpsim.__file__).parent / "variation"  # the built-in modules (numeric ...)
        n = snmpsim_processes(len(agents), processes)
        # Dealt round-robin, not cut in contiguous shares: a client polls the switches in their order, so the switches
        # in flight at once are neighbours, and contiguous shares put them all on one process (1,000 BMCs + 500
        # switches, 2 processes in shares of 250: 75.7 s, where one process took 82.9).
        groups = [agents[k::n] for k in range(n)]
        # Popen returns once the child is forked; starting it off the loop buys nothing.
        logf = open(self.log_path, "ab")  # noqa: SIM115 - handed to the children
        try:
            for k, group in enumerate(groups):
                cache = self.cache_dir / f"p{k}"  # an index cache each: two processes never write the same index
                cache.mkdir(parents=True, exist_ok=True)
                args = [sys.executable, "-c", _SNMPSIM_MAIN,
                        f"--data-dir={self.data_dir}", f"--cache-dir={cache}",
                        f"--variation-modules-dir={VARIATION_DIR}", f"--variation-modules-dir={snmpsim_var}",
                        "--log-level=error"]  # fmt: skip
                args += [f"--agent-udpv4-endpoint={h}:{p}" for (h, p), _c in group]
                # the files this process may open: its switches' (its descriptor limit is raised to fit)
                env = {**os.environ, "SNMPSIM_ALLOW_ROOT": "true", "FLEETLAB_DATA_FILES": str(len(group))}
                self.procs.append(subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env,
                                                   close_fds=True))  # fmt: skip
        finally:
            logf.close()
        for group in groups:
            endpoint, community = group[0]
            if not await self.answered(endpoint, community, timeout=timeout):
                await self.stop()
                raise FleetError(f"lab: snmpsim did not answer within {timeout:.0f}s (see {self.log_path})")

    def probe_packet(self, community: str) -> bytes:
        """The GET of sysUpTime ``answered`` sends, built once per community.

        Built ahead, at start, for every switch: the lab's thread then runs no
        pysnmp code later, beside the SNMP clients of a process that runs the
        lab in a thread (the tests').
        """
        packet = self._probes.get(community)
        if packet is None:
            packet = self._probes[community] = snmp_get_packet(community, f"{SYS}.3.0")
        return packet

    async def answered(self, addr: tuple[str, int], community: str, timeout: float) -> bool:
        """Whether snmpsim answers a GET of sysUpTime with ``community`` within ``timeout`` seconds.

        The first request after a data file changed makes snmpsim index that
        file again (a dbm.dumb index where Python has no gdbm: seconds on a
        busy machine), so the lab asks once itself after a fault is set or
        cleared: the client that comes next is answered at once.
        """
        if not self.procs:
            return False
        packet = self.probe_packet(community)
        deadline = time.monotonic() + timeout
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        try:
            while time.monotonic() < deadline:
                dead = next((p for p in self.procs if p.poll() is not None), None)
                if dead is not None:
                    tail = self.log_path.read_text(errors="replace").strip().splitlines()[-3:]
                    raise FleetError(f"lab: snmpsim exited with status {dead.returncode}: {' | '.join(tail)}")
                sock.sendto(packet, addr)
                try:
                    await asyncio.wait_for(loop.sock_recv(sock, 4096), 0.3)
                    return True
                except (TimeoutError, OSError):
                    await asyncio.sleep(0.1)
        finally:
            sock.close()
        return False

    async def stop(self) -> None:
        procs, self.procs = self.procs, []
        live = [p for p in procs if p.poll() is None]
        for p in live:
            p.send_signal(signal.SIGTERM)
        for _ in range(50):
            if all(p.poll() is not None for p in live):
                return
            await asyncio.sleep(0.05)
        for p in live:
            if p.poll() is None:
                with contextlib.suppress(OSError):
                    p.kill()
                p.wait(5)
