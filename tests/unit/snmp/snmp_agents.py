"""Real SNMP agents for tests and the benchmark: snmpsim data and processes.

snmpsim ships no switch recordings, so this module writes them: a switch of N
ports with IF-MIB (ifTable + ifXTable, 64-bit octet counters that grow at a
known rate), LLDP-MIB (local ports and a remote table), ENTITY-MIB names and
ENTITY-SENSOR-MIB sensors, and a sysUpTime that ticks. ``Snmpsim`` starts
``snmpsim-command-responder`` on 127.0.0.1 UDP ports and always stops it by
its pid.

Used by ``tests/contract/test_snmp_snmpsim.py`` and ``bench/snmp.py`` (both
load this file by path). The expected values live here too, next to the data
that produces them, so tests compare against one source of truth.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# --------------------------------------------------------------------------
# OIDs (numeric: pysnmp 7 bundles no IF-MIB)
# --------------------------------------------------------------------------
SYS = "1.3.6.1.2.1.1"
IF_TABLE = "1.3.6.1.2.1.2.2.1"
IFX_TABLE = "1.3.6.1.2.1.31.1.1.1"
LLDP_LOC_PORT = "1.0.8802.1.1.2.1.3.7.1"
LLDP_REM = "1.0.8802.1.1.2.1.4.1.1"
ENT_PHYS_NAME = "1.3.6.1.2.1.47.1.1.1.1.7"
ENT_SENSOR = "1.3.6.1.2.1.99.1.1.1"

# snmprec tags
OCTETS, HEX, INTEGER, OID, COUNTER32, GAUGE32, TIMETICKS, COUNTER64 = "4", "4x", "2", "6", "65", "66", "67", "70"

SNMPSIM = Path(sys.executable).with_name("snmpsim-command-responder")


# --------------------------------------------------------------------------
# What a simulated switch looks like (the expected values of the tests)
# --------------------------------------------------------------------------


@dataclass
class SwitchSpec:
    """One simulated switch; the properties below are what a poll must read."""

    name: str = "leaf01"
    ports: int = 64
    uptime_ticks: int = 123_456_00  # initial sysUpTime (grows 100/s)
    # ifHCInOctets of port i grows by in_rate(i) bytes/s, ifHCOutOctets by out_rate(i)
    base_rate: int = 125_000  # 1 Mbit/s per port number
    error_port: int = 3  # this port's ifInErrors grows by error_rate/s
    error_rate: int = 2
    lldp_ports: int = 8  # ports 1..lldp_ports have an LLDP neighbour
    sensors: list[tuple[int, str, int, int, int, int, int, str]] = field(
        default_factory=lambda: [
            # index, name, type, scale, precision, value, oper status, units
            (1001, "Ambient", 8, 9, 1, 452, 1, "degrees C"),  # 45.2 C
            (1002, "ASIC", 8, 9, 0, 71, 1, "degrees C"),
            (1003, "PSU1 Input", 6, 9, 0, 310, 1, "W"),
            (1004, "PSU2 Input", 6, 9, 0, 0, 2, "W"),  # unavailable
            (1005, "Fan1", 10, 9, 0, 8800, 1, "RPM"),
            (1006, "12V rail", 4, 8, 0, 12050, 1, "mV"),  # milli: 12.05 V
        ]
    )

    def in_rate(self, i: int) -> int:
        return self.base_rate * i

    def out_rate(self, i: int) -> int:
        return self.base_rate * i // 2

    def in_initial(self, i: int) -> int:
        return 10**12 + i  # beyond 2**32: proves the 64-bit column is read

    def out_initial(self, i: int) -> int:
        return 2 * 10**12 + i

    def oper_up(self, i: int) -> bool:
        return i % 8 != 0

    def admin_up(self, i: int) -> bool:
        return i != self.ports

    def port_name(self, i: int) -> str:
        return f"Ethernet{i}"

    def alias(self, i: int) -> str:
        return f"{self.name} port {i}"

    def speed_mbps(self, i: int) -> int:
        return 100_000 if i > self.ports - 4 else 25_000

    def last_change(self, i: int) -> int:
        return 1000 + i

    def in_discards(self, i: int) -> int:
        return i * 10

    def out_discards(self, i: int) -> int:
        return i * 11

    def out_errors(self, i: int) -> int:
        return i % 5

    def neighbour(self, i: int) -> tuple[str, str]:
        """(remote sysname, remote port id) of LLDP neighbour on port i."""
        return f"node{i:03d}", f"eth{i % 2}"


def switch_records(spec: SwitchSpec, *, what: tuple[str, ...] = ("if", "lldp", "sensors")) -> list[tuple[str, str, str]]:
    """The snmprec records (oid, tag, value) of one simulated switch."""
    r: list[tuple[str, str, str]] = [
        (f"{SYS}.1.0", OCTETS, f"fleetctl snmpsim switch {spec.name}"),
        (f"{SYS}.2.0", OID, "1.3.6.1.4.1.8072.3.2.10"),
        (f"{SYS}.3.0", f"{TIMETICKS}:numeric", f"rate=100,initial={spec.uptime_ticks}"),
        (f"{SYS}.5.0", OCTETS, spec.name),
    ]
    n = spec.ports
    if "if" in what:
        r.append(("1.3.6.1.2.1.2.1.0", INTEGER, str(n)))
        for i in range(1, n + 1):
            mbps = spec.speed_mbps(i)
            r += [
                (f"{IF_TABLE}.1.{i}", INTEGER, str(i)),
                (f"{IF_TABLE}.2.{i}", OCTETS, spec.port_name(i)),
                (f"{IF_TABLE}.3.{i}", INTEGER, "6"),
                (f"{IF_TABLE}.4.{i}", INTEGER, "9100"),
                (f"{IF_TABLE}.5.{i}", GAUGE32, str(min(mbps * 1_000_000, 4294967295))),
                (f"{IF_TABLE}.6.{i}", HEX, f"0200000000{i:02x}"),
                (f"{IF_TABLE}.7.{i}", INTEGER, "1" if spec.admin_up(i) else "2"),
                (f"{IF_TABLE}.8.{i}", INTEGER, "1" if spec.oper_up(i) else "2"),
                (f"{IF_TABLE}.9.{i}", TIMETICKS, str(spec.last_change(i))),
                # 32-bit octets: wrap at 2**32 like a real agent
                (f"{IF_TABLE}.10.{i}", f"{COUNTER32}:numeric", f"rate={spec.in_rate(i)},initial={spec.in_initial(i) % 2**32},wrap=1"),
                (f"{IF_TABLE}.13.{i}", COUNTER32, str(spec.in_discards(i))),
                (
                    f"{IF_TABLE}.14.{i}",
                    f"{COUNTER32}:numeric" if i == spec.error_port else COUNTER32,
                    f"rate={spec.error_rate},initial=0" if i == spec.error_port else "0",
                ),
                (f"{IF_TABLE}.16.{i}", f"{COUNTER32}:numeric", f"rate={spec.out_rate(i)},initial={spec.out_initial(i) % 2**32},wrap=1"),
                (f"{IF_TABLE}.19.{i}", COUNTER32, str(spec.out_discards(i))),
                (f"{IF_TABLE}.20.{i}", COUNTER32, str(spec.out_errors(i))),
                (f"{IFX_TABLE}.1.{i}", OCTETS, spec.port_name(i)),
                (f"{IFX_TABLE}.6.{i}", f"{COUNTER64}:numeric", f"rate={spec.in_rate(i)},initial={spec.in_initial(i)}"),
                (f"{IFX_TABLE}.10.{i}", f"{COUNTER64}:numeric", f"rate={spec.out_rate(i)},initial={spec.out_initial(i)}"),
                (f"{IFX_TABLE}.15.{i}", GAUGE32, str(mbps)),
                (f"{IFX_TABLE}.18.{i}", OCTETS, spec.alias(i)),
            ]
    if "lldp" in what:
        for i in range(1, n + 1):
            r += [
                (f"{LLDP_LOC_PORT}.2.{i}", INTEGER, "5"),  # interfaceName
                (f"{LLDP_LOC_PORT}.3.{i}", OCTETS, spec.port_name(i)),
                (f"{LLDP_LOC_PORT}.4.{i}", OCTETS, spec.alias(i)),
            ]
        for i in range(1, spec.lldp_ports + 1):
            sysname, port = spec.neighbour(i)
            idx = f"0.{i}.1"  # lldpRemTimeMark.lldpRemLocalPortNum.lldpRemIndex
            r += [
                (f"{LLDP_REM}.4.{idx}", INTEGER, "4"),  # chassis id is a MAC
                (f"{LLDP_REM}.5.{idx}", HEX, f"0c42a1{i:06x}"),
                (f"{LLDP_REM}.6.{idx}", INTEGER, "5"),  # port id is an interface name
                (f"{LLDP_REM}.7.{idx}", OCTETS, port),
                (f"{LLDP_REM}.8.{idx}", OCTETS, f"{sysname} {port}"),
                (f"{LLDP_REM}.9.{idx}", OCTETS, sysname),
            ]
    if "sensors" in what:
        for idx, name, typ, scale, prec, value, status, units in spec.sensors:
            r += [
                (f"{ENT_PHYS_NAME}.{idx}", OCTETS, name),
                (f"{ENT_SENSOR}.1.{idx}", INTEGER, str(typ)),
                (f"{ENT_SENSOR}.2.{idx}", INTEGER, str(scale)),
                (f"{ENT_SENSOR}.3.{idx}", INTEGER, str(prec)),
                (f"{ENT_SENSOR}.4.{idx}", INTEGER, str(value)),
                (f"{ENT_SENSOR}.5.{idx}", INTEGER, str(status)),
                (f"{ENT_SENSOR}.6.{idx}", OCTETS, units),
            ]
    return r


def _oid_key(oid: str) -> tuple[int, ...]:
    return tuple(int(x) for x in oid.split("."))


def write_snmprec(path: Path, records: list[tuple[str, str, str]]) -> Path:
    """Write records in OID order (snmpsim answers GETNEXT from the file order)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{o}|{t}|{v}\n" for o, t, v in sorted(records, key=lambda rec: _oid_key(rec[0]))]
    path.write_text("".join(lines), encoding="iso-8859-1")
    return path


# --------------------------------------------------------------------------
# The snmpsim process
# --------------------------------------------------------------------------


def free_udp_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_udp_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """n distinct free ports (all sockets held open while choosing)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def snmpsim_missing() -> str | None:
    """Why snmpsim cannot run here, or None."""
    if not SNMPSIM.exists() and not shutil.which("snmpsim-command-responder"):
        return "snmpsim is not installed (pip install snmpsim pysmi)"
    try:
        import pysmi  # noqa: F401  (snmpsim imports it without declaring it)
    except ImportError:
        return "pysmi is not installed (snmpsim needs it: pip install pysmi)"
    return None


@dataclass
class V3User:
    user: str
    auth_key: str
    priv_key: str
    auth_proto: str = "SHA"
    priv_proto: str = "AES"


class Snmpsim:
    """``snmpsim-command-responder`` serving DATA_DIR on the given endpoints.

    Use as a context manager; the process is stopped by its pid on exit, also
    when the body raises.
    """

    def __init__(
        self,
        data_dir: Path,
        endpoints: list[tuple[str, int]],
        *,
        cache_dir: Path,
        log_path: Path,
        v3: V3User | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        self.data_dir = data_dir
        self.endpoints = endpoints
        self.cache_dir = cache_dir
        self.log_path = log_path
        self.v3 = v3
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        exe = str(SNMPSIM) if SNMPSIM.exists() else "snmpsim-command-responder"
        args = [exe, f"--data-dir={self.data_dir}", f"--cache-dir={self.cache_dir}", "--log-level=error"]
        if self.v3:
            args += [
                f"--v3-user={self.v3.user}",
                f"--v3-auth-key={self.v3.auth_key}",
                f"--v3-auth-proto={self.v3.auth_proto}",
                f"--v3-priv-key={self.v3.priv_key}",
                f"--v3-priv-proto={self.v3.priv_proto}",
            ]
        args += [f"--agent-udpv4-endpoint={h}:{p}" for h, p in self.endpoints]
        return args

    def start(self) -> Snmpsim:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, SNMPSIM_ALLOW_ROOT="true")
        argv = self.argv()
        argfile = None
        if len(" ".join(argv)) > 100_000:  # many endpoints: keep the command line short
            argfile = self.cache_dir / "args.txt"
            argfile.write_text("\n".join(argv[1:]) + "\n")
            argv = [argv[0], f"--args-from-file={argfile}"]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Wait until every endpoint answers an SNMP GET (any answer will do)."""
        assert self.proc is not None
        deadline = time.monotonic() + self.start_timeout
        pending = list(self.endpoints)
        probe = _v2c_get_packet()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(0.2)
            while pending:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"snmpsim exited with {self.proc.returncode}: {self.log_tail()}")
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"snmpsim not answering after {self.start_timeout}s on {pending[:3]}: {self.log_tail()}")
                ep = pending[0]
                s.sendto(probe, ep)
                try:
                    s.recvfrom(65535)
                except (TimeoutError, OSError):
                    continue
                pending.pop(0)

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if getattr(self, "_log", None):
            self._log.close()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def __enter__(self) -> Snmpsim:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _v2c_get_packet(community: bytes = b"x") -> bytes:
    """A hand-encoded SNMPv2c GET of sysUpTime.0: a readiness probe without pysnmp.

    snmpsim answers an unknown community with nothing, so the probe uses a
    community that exists only when a data file named after it exists; any
    reply (or an ICMP-free silence) is judged by the caller. We send with the
    community of the data file when one is known; otherwise snmpsim still
    answers v2c requests for ``x`` with a report only if ``x.snmprec`` exists,
    hence :func:`readiness_file` below writes one.
    """
    oid = bytes([0x2B, 6, 1, 2, 1, 1, 3, 0])  # 1.3.6.1.2.1.1.3.0
    varbind = _tlv(0x30, _tlv(0x06, oid) + _tlv(0x05, b""))
    pdu = _tlv(0xA0, _tlv(0x02, b"\x01") + _tlv(0x02, b"\x00") + _tlv(0x02, b"\x00") + _tlv(0x30, varbind))
    return _tlv(0x30, _tlv(0x02, b"\x01") + _tlv(0x04, community) + pdu)


def _tlv(tag: int, body: bytes) -> bytes:
    n = len(body)
    if n < 0x80:
        return bytes([tag, n]) + body
    ln = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(ln)]) + ln + body


def readiness_file(data_dir: Path) -> None:
    """A tiny data file for community ``x`` that the readiness probe reads."""
    write_snmprec(data_dir / "x.snmprec", [(f"{SYS}.3.0", TIMETICKS, "1")])
