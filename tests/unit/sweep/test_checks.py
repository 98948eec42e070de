"""Each built-in check on readings made by hand: the fault gives its finding, a healthy reading none."""

from __future__ import annotations

import datetime as dt

import pytest

from fleetctl.interfaces.bmc import (
    Board,
    FirmwareComponent,
    HealthItem,
    HealthReport,
    LogEntry,
    ManagerFacts,
    PCIeDevice,
    SystemFacts,
    Temperature,
)
from fleetctl.interfaces.snmp import InterfaceCounters, LldpRemote, PollResult, Sensor
from fleetctl.sweep import server_checks
from fleetctl.sweep.collect import BoardExpect, ServerExpect, ServerReading, SwitchExpect, SwitchReading
from fleetctl.sweep.engine import _evaluate
from fleetctl.sweep.model import Status
from fleetctl.workflows.network import Expected

NOW = dt.datetime(2026, 12, 1, 6, 0, tzinfo=dt.UTC)


def healthy() -> ServerReading:
    dev = PCIeDevice(id="d0", link_gen=5, link_width=16, max_link_gen=5, max_link_width=16)
    return ServerReading(
        facts=SystemFacts(serial="S1", pcie_devices=[dev], boards=[Board(kind="mncore2", serial="B1", slot="0", pcie_device_id="d0",
                                                                          health="OK")]),  # fmt: skip
        health=HealthReport(system_health="OK", chassis_health="OK",
                            psus=[HealthItem(name="PSU1", health="OK", state="Enabled"),
                                  HealthItem(name="PSU2", health="OK", state="Enabled")],
                            fans=[HealthItem(name="Fan1", health="OK", reading=8000, units="RPM")],
                            temperatures=[Temperature(name="Inlet", health="OK", reading=25, upper_critical=45)]),  # fmt: skip
        manager=ManagerFacts(clock_skew_seconds=1.5),
        logs=[LogEntry(id="1", log="/l", created=NOW, severity="OK", message="boot")],
        log_cursor=NOW.isoformat(),
        firmware=[FirmwareComponent(id="BMC", name="BMC", version="1.2"), FirmwareComponent(id="BIOS", name="BIOS", version="3.4")],
    )


def expect(**kw) -> ServerExpect:  # type: ignore[no-untyped-def]
    base = dict(name="srv", serial="S1", model="m", site="s", rack="r", position=1, board_kind="mncore2", board_count=1,
                boards=[BoardExpect(0, "mncore2", "B1")], baseline={"BMC": "1.2", "BIOS": "3.4"}, log_cursor="x", now=NOW)  # fmt: skip
    base.update(kw)
    return ServerExpect(**base)  # type: ignore[arg-type]


def found(reading: ServerReading, e: ServerExpect | None = None) -> set[tuple[str, str, str]]:
    fs = server_checks.explained(_evaluate("server", "srv", reading, e or expect(), "bmc"))
    return {(f.check, f.subject, f.status.value) for f in fs}


def test_a_healthy_server_has_no_finding() -> None:
    assert found(healthy()) == set()


def _psu_failed(r: ServerReading) -> None:
    r.health.psus[0].health, r.health.system_health, r.health.chassis_health = "Critical", "Critical", "Critical"


def _fan(r: ServerReading) -> None:
    r.health.fans[0].health, r.health.system_health = "Critical", "Critical"


def _hot(r: ServerReading) -> None:
    r.health.temperatures[0].reading = 47


def _warm(r: ServerReading) -> None:
    r.health.temperatures[0].reading = 41


def _pcie(r: ServerReading) -> None:
    r.facts.pcie_devices[0].link_width = 8


def _board_gone(r: ServerReading) -> None:
    r.facts.boards = []


def _board_sick(r: ServerReading) -> None:
    r.facts.boards[0].health = "Warning"


def _skew(r: ServerReading) -> None:
    r.manager.clock_skew_seconds = -120


def _skew_far(r: ServerReading) -> None:
    r.manager.clock_skew_seconds = 3600


def _firmware(r: ServerReading) -> None:
    r.firmware[1].version = "3.3"


def _log(r: ServerReading) -> None:
    r.logs.append(LogEntry(id="2", log="/l", created=NOW, severity="Critical", message="CPU IERR"))


def _memory(r: ServerReading) -> None:
    r.health.system_health = "Warning"


def _serial(r: ServerReading) -> None:
    r.facts.serial = "OTHER"


def _part_unreadable(r: ServerReading) -> None:
    r.firmware = None
    r.errors["firmware"] = "srv: GET /redfish/v1/UpdateService: 500"


@pytest.mark.parametrize("fault,want", [
    (_psu_failed, {("psu", "PSU1", "critical"), ("psu.redundancy", "", "critical")}),
    (_fan, {("fan", "Fan1", "critical")}),
    (_hot, {("temperature", "Inlet", "critical")}),
    (_warm, {("temperature", "Inlet", "warning")}),
    (_pcie, {("accel.pcie", "slot 0", "warning")}),
    (_board_gone, {("accel.present", "slot 0", "critical")}),
    (_board_sick, {("accel.health", "slot 0", "warning")}),
    (_skew, {("bmc.clock", "", "warning")}),
    (_skew_far, {("bmc.clock", "", "critical")}),
    (_firmware, {("firmware.baseline", "BIOS", "warning")}),
    (_log, {("bmc.log", "", "critical")}),
    (_memory, {("system.health", "", "warning")}),
    (_serial, {("inventory.drift", "serial", "warning")}),
    (_part_unreadable, {("bmc.read", "firmware", "unknown")}),
])  # fmt: skip
def test_each_fault_gives_its_finding(fault, want) -> None:  # type: ignore[no-untyped-def]
    r = healthy()
    fault(r)
    assert found(r) == want


@pytest.mark.parametrize("etype,check,status", [
    ("Timeout", "bmc.reachable", "critical"), ("BMCError", "bmc.reachable", "critical"),
    ("AuthError", "bmc.login", "critical"), ("TLSMismatch", "bmc.certificate", "critical"),
    ("Inventory", "bmc.reachable", "unknown"),
])  # fmt: skip
def test_a_bmc_that_cannot_be_opened_has_one_verdict(etype, check, status) -> None:  # type: ignore[no-untyped-def]
    r = ServerReading(session_error="srv: it failed", session_error_type=etype)
    assert found(r) == {(check, "", status)}


def test_first_sweep_reads_only_the_last_day_of_logs() -> None:
    r = healthy()
    r.logs = [LogEntry(id="1", log="/l", created=NOW - dt.timedelta(days=30), severity="Critical", message="old")]
    assert found(r, expect(log_cursor=None)) == set()
    assert found(r) == {("bmc.log", "", "critical")}  # with a cursor, anything after it is news


def test_a_broken_check_is_its_own_unknown(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.sweep import registry

    spec = next(c for c in registry.checks("server") if c.name == "fan")

    def boom(r, e):  # type: ignore[no-untyped-def]
        raise ValueError("parser met something new")

    monkeypatch.setitem(registry._CHECKS, "server:fan", spec.__class__(**{**spec.__dict__, "fn": boom}))
    assert found(healthy()) == {("fan", "check", "unknown")}


# ------------------------------------------------------------------ switches


def poll(uptime: int = 500_000, at: dt.datetime = NOW, **ports) -> PollResult:  # type: ignore[no-untyped-def]
    ifs = []
    for i, (name, spec) in enumerate(sorted(ports.items()), 1):
        ifs.append(InterfaceCounters(index=i, name=name, oper_up=spec.get("up", True), last_change_ticks=spec.get("change", 100),
                                     in_errors=spec.get("err", 0), out_errors=0, in_discards=0, out_discards=0,
                                     in_octets=0, out_octets=0))  # fmt: skip
    lldp = [LldpRemote(local_port_num=i + 1, local_port=name, remote_sysname=spec.get("peer", "h1"), remote_port_id="eth0")
            for i, (name, spec) in enumerate(sorted(ports.items())) if spec.get("up", True) and spec.get("peer", "h1")]  # fmt: skip
    return PollResult(target="sw", host="127.0.0.1", port=161, polled_at=at, sys_uptime_ticks=uptime, interfaces=ifs, lldp=lldp,
                      sensors=[Sensor(index=1, name="ASIC", type="celsius", value=55, oper_status="ok")],
                      what=["if", "lldp", "sensors"])  # fmt: skip


def switch_found(prev: PollResult | None, cur: PollResult) -> set[tuple[str, str, str]]:
    from fleetctl_drivers.snmp.rates import rates

    e = SwitchExpect("sw", "s", "r", cabled={"Ethernet1": Expected("h1", {"eth0"}, "eth0"), "Ethernet2": Expected("h1", {"eth0"}, "eth0")})
    reading = SwitchReading(cur, prev, rates(prev, cur) if prev else None)
    return {(f.check, f.subject, f.status.value) for f in _evaluate("switch", "sw", reading, e, "bmc")}


LATER = NOW + dt.timedelta(days=1)


def test_a_healthy_switch_has_no_finding() -> None:
    p1 = poll(Ethernet1={}, Ethernet2={})
    p2 = poll(uptime=500_000 + 86400 * 100, at=LATER, Ethernet1={}, Ethernet2={})
    assert switch_found(None, p1) == set()
    assert switch_found(p1, p2) == set()


@pytest.mark.parametrize("now,want", [
    (dict(Ethernet1={"up": False}, Ethernet2={}), {("port.status", "Ethernet1", "critical")}),
    (dict(Ethernet1={"err": 86400 * 5}, Ethernet2={}), {("port.errors", "Ethernet1", "critical")}),
    (dict(Ethernet1={"err": 8640}, Ethernet2={}), {("port.errors", "Ethernet1", "warning")}),
    (dict(Ethernet1={"change": 900}, Ethernet2={}), {("port.flaps", "Ethernet1", "warning")}),
    (dict(Ethernet1={"peer": "h9"}, Ethernet2={}), {("lldp", "Ethernet1", "critical")}),
    (dict(Ethernet1={}, Ethernet2={}, Ethernet3={}), {("lldp", "Ethernet3", "warning")}),
])  # fmt: skip
def test_each_switch_fault_gives_its_finding(now, want) -> None:  # type: ignore[no-untyped-def]
    p1 = poll(Ethernet1={}, Ethernet2={}, Ethernet3={"up": False})
    p2 = poll(uptime=500_000 + 86400 * 100, at=LATER, **({"Ethernet3": {"up": False}} | now))
    assert switch_found(p1, p2) == want


def test_a_reboot_is_a_warning_and_gives_no_rates() -> None:
    p1 = poll(Ethernet1={"err": 1000}, Ethernet2={})
    p2 = poll(uptime=3000, at=LATER, Ethernet1={"err": 0, "change": 5}, Ethernet2={})
    assert switch_found(p1, p2) == {("switch.rebooted", "", "warning")}


def test_hot_and_broken_sensors() -> None:
    p = poll(Ethernet1={}, Ethernet2={})
    p.sensors = [Sensor(index=1, name="ASIC", type="celsius", value=97, oper_status="ok"),
                 Sensor(index=2, name="Inlet", type="celsius", value=78, oper_status="ok"),
                 Sensor(index=3, name="PSU", type="watts", value=300, oper_status="nonoperational")]  # fmt: skip
    assert switch_found(None, p) == {("switch.environment", "ASIC", "critical"), ("switch.environment", "Inlet", "warning"),
                                     ("switch.environment", "PSU", "critical")}  # fmt: skip


def test_an_unreachable_switch_is_critical_and_nothing_else() -> None:
    p = PollResult(target="sw", host="h", port=161, polled_at=NOW, error="sw: timeout", error_kind="timeout")
    assert switch_found(None, p) == {("switch.reachable", "", "critical")}


def test_every_check_has_metadata() -> None:
    from fleetctl.sweep.registry import checks

    names = [c.name for c in checks(level="host")]
    assert len(names) == len(set((c.kind, c.name) for c in checks(level="host")))
    for c in checks(level="host"):
        m = c.metadata()
        assert m["description"] and m["reads"] and m["severity"] in ("warning", "critical", "unknown")
    assert Status.CRITICAL.rank > Status.UNKNOWN.rank > Status.WARNING.rank > Status.OK.rank


def test_a_bmc_that_reports_no_psu_fan_or_temperature_is_unknown_there() -> None:
    r = healthy()
    r.health.psus, r.health.fans, r.health.temperatures = [], [], []
    assert found(r) == {("psu", "none", "unknown"), ("fan", "none", "unknown"), ("temperature", "none", "unknown")}


def test_parts_of_one_name_are_distinct_findings() -> None:
    r = healthy()
    r.health.temperatures = [Temperature(name="CPU Temp", reading=t, upper_critical=90) for t in (50, 95, 99)]
    # numbered in the order they are found: the second hot "CPU Temp" is "CPU Temp #2"
    assert found(r) == {("temperature", "CPU Temp", "critical"), ("temperature", "CPU Temp #2", "critical")}


# ----------------------------------------------------------------- host level


def host_found(host, board_kind: str = "gpu", count: int = 2) -> set[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    r = healthy()
    r.host = host
    e = expect(board_kind=board_kind, board_count=count, boards=[])
    fs = [f for f in _evaluate("server", "srv", r, e, "host") if f.check.startswith(("host.", "gpu.", "accel.host"))]
    return {(f.check, f.subject, f.status.value) for f in fs}


def gpu(i: int, **kw):  # type: ignore[no-untyped-def]
    from fleetctl_drivers.accel.nvidia import GpuQuery, board_reading

    base = dict(line=i + 2, index=i, serial=f"S{i}", temperature_gpu_c=40, ecc_uncorrected_volatile_total=0, retired_pages_single_bit=0,
                retired_pages_double_bit=0,
                retired_pages_pending=False, pcie_link_gen_current=5, pcie_link_gen_max=5, pcie_link_width_current=16,
                pcie_link_width_max=16)  # fmt: skip
    base.update(kw)
    return board_reading(GpuQuery(**base))  # type: ignore[arg-type]  # the driver's reading the core judges


def test_a_healthy_host_has_no_host_finding_and_bmc_level_runs_no_host_check() -> None:
    from fleetctl.sweep.host import HostReading

    assert host_found(HostReading(boards=[gpu(0), gpu(1)], tool="nvidia-smi", events=[])) == set()
    r = healthy()
    r.host = HostReading(error="srv: ssh: refused")
    assert not [f for f in _evaluate("server", "srv", r, expect(), "bmc") if f.check.startswith("host.")]


@pytest.mark.parametrize("host,want", [
    ("unreachable", {("host.reachable", "", "critical")}),
    ("missing", {("accel.host_boards", "nvidia-smi", "critical")}),
    ("retired", {("gpu.memory", "GPU 0", "critical")}),
    ("ecc", {("gpu.memory", "GPU 0", "critical")}),
    ("pending", {("gpu.memory", "GPU 0", "warning")}),
    ("hot", {("gpu.temperature", "GPU 1", "warning")}),
    ("link", {("gpu.pcie", "GPU 1", "critical")}),  # burn-in's link_degraded: fail
    ("xid79", {("gpu.xid", "0000:3b:00", "critical")}),
    ("xid13", {("gpu.xid", "0000:3b:00", "warning")}),
    ("unparsable", {("host.reachable", "nvidia-smi", "unknown")}),
])  # fmt: skip
def test_each_host_fault_gives_its_finding(host: str, want: set[tuple[str, str, str]]) -> None:
    from fleetctl_drivers.accel.nvidia import XidEvent, board_event

    from fleetctl.sweep.host import HostReading

    g = [gpu(0), gpu(1)]
    h = HostReading(boards=g, tool="nvidia-smi", events=[])
    if host == "unreachable":
        h = HostReading(error="srv: ssh root@h:22: Connection refused")
    elif host == "missing":
        h.boards = g[:1]
    elif host == "retired":
        h.boards = [gpu(0, retired_pages_single_bit=60, retired_pages_double_bit=4), g[1]]
    elif host == "ecc":
        h.boards = [gpu(0, ecc_uncorrected_volatile_total=3), g[1]]
    elif host == "pending":
        h.boards = [gpu(0, retired_pages_pending=True), g[1]]
    elif host == "hot":
        h.boards = [g[0], gpu(1, temperature_gpu_c=92)]
    elif host == "link":
        h.boards = [g[0], gpu(1, pcie_link_gen_current=3, pcie_link_width_current=8)]
    elif host.startswith("xid"):
        h.events = [board_event(XidEvent(line=1, pci="0000:3b:00", xid=int(host[3:]), message="GPU has fallen off the bus."))]
    elif host == "unparsable":
        h.boards, h.errors = None, {"nvidia-smi": "srv: nvidia-smi --query-gpu: line 2: 3 fields, the header has 11"}
    assert host_found(h) == want


def test_mncore_boards_missing_on_the_host() -> None:
    from fleetctl_drivers.accel.mncore import board_reading, parse_gpfn3_list

    from fleetctl.sweep.host import HostReading

    listed = parse_gpfn3_list("0: mnc2p27s0\n1: mnc2p43s0\n2: mnc2p59s0\n")
    nodes = ["/dev/mnc2p27s0", "/dev/mnc2p43s0", "/dev/mnc2p59s0"]
    h = HostReading(boards=[board_reading(d) for d in listed], tool="gpfn3-smi", device_nodes=nodes)
    want = {("accel.host_boards", "gpfn3-smi", "critical"), ("accel.host_boards", "device nodes", "critical")}
    assert host_found(h, "mncore2", 4) == want
    assert host_found(h, "mncore2", 3) == set()
