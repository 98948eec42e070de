"""The health sweep against third-party peers: what it reads and what its checks find.

The sweep's own path is taken (``sweep_fixtures``): ``collect.bmc_operation``
through the registry's Redfish driver with ``read_once=True`` inside
``FleetSessions`` (as ``engine.sweep_targets``), then ``engine._evaluate`` and
``server_checks.explained``; switches through ``sweep_async("snmp", ...)``,
a cursor stored as JSON, ``previous_poll`` and the poller class's ``rates``.

- Every recorded BMC in ``shared/redfish-mockups``: the health the sweep
  reads (system, chassis, each PSU, fan and temperature) equals what the
  test reads from the recording's JSON files itself, the findings are the
  ones the recording holds, and the parts it reports unknown (``bmc.read``)
  are the ones the recording lacks.
- sushy-tools: system health as sushy says it; the parts it lacks (firmware
  inventory, log services, chassis power) are ``bmc.read`` unknowns naming
  the part, never healthy, never a crash.
- Debian's snmpd in a namespace (live counters): up ports no finding, a port
  brought down critical, a clean link no error rate, no reboot.
- snmpsim with generated data: a port whose ifInErrors grows 100/s is
  critical; an agent whose sysUpTime went down is ``switch.rebooted``.

Known sweep bugs are data (:data:`KNOWN_BUGS`): the test xfails with the
reason after every other assertion, and fails once the bug is fixed so the
entry goes.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import time
import urllib.request
from base64 import b64encode
from pathlib import Path
from typing import Any

import pytest
from mockup_server import MockupServer, mockups_dir
from peers import SUSHY_SYSTEMS
from sweep_fixtures import BAD, Recorded, poll_switches, stored_cursor, sweep_bmcs, switch_reading, word

from fleetctl.interfaces.bmc import BMCTarget
from fleetctl.interfaces.snmp import SnmpTarget
from fleetctl.sweep import server_checks
from fleetctl.sweep.collect import ServerExpect, SwitchExpect
from fleetctl.sweep.engine import _evaluate
from fleetctl.sweep.model import Finding, Status
from fleetctl.workflows.network import Expected

HEALTH_CHECKS = {"system.health", "chassis.health", "psu", "psu.redundancy", "fan", "temperature"}
# Compared exactly on recordings; accel.* (boards, judged by the facts suites) and bmc.log (a first sweep
# keeps only the last day's entries: every recording is years old) are left to their own tests.
JUDGED = HEALTH_CHECKS | {"bmc.read", "bmc.clock", "bmc.reachable", "bmc.login", "bmc.certificate", "inventory.drift",
                          "firmware.baseline"}  # fmt: skip
MAX_SKEW_S = 30.0

#: (peer, what) -> why: a sweep bug found here and reported, not fixed in this file's scope.
KNOWN_BUGS: dict[tuple[str, str], str] = {
    # (peer, part): why; none known now (log services, PSUs and same-named sensors were fixed)
}


def judge(peer: str, failures: dict[str, list[str]]) -> None:
    """Fail on an unexplained difference or on a known bug that is gone; xfail when only known bugs remain."""
    unknown = [f"{what}: {m}" for what, ms in failures.items() for m in ms if (peer, what) not in KNOWN_BUGS]
    assert not unknown, "\n".join(unknown)
    fixed = [what for (p, what) in KNOWN_BUGS if p == peer and not failures.get(what)]
    assert not fixed, f"{peer}: {fixed} read right now: remove their KNOWN_BUGS entries"
    seen = {what: ms for what, ms in failures.items() if ms}
    if seen:
        pytest.xfail("; ".join(f"known sweep bug ({peer}, {w}): {KNOWN_BUGS[(peer, w)]} -- now: {' | '.join(ms)}"
                               for w, ms in seen.items()))  # fmt: skip


def findings_of(name: str, reading: Any, expect: ServerExpect) -> list[Finding]:
    """What the engine journals for one server (``server_verdict``)."""
    found = server_checks.explained(_evaluate("server", name, reading, expect, "bmc"))
    broken = [f for f in found if f.evidence.get("bug")]
    assert not broken, f"a check crashed on {name}: {[f.message for f in broken]}"
    return found


def duplicate_keys(found: list[Finding]) -> list[str]:
    """Findings that share a key (the recorder keeps the first of each key only)."""
    seen: dict[tuple[str, str, str, str], list[Finding]] = {}
    for f in found:
        seen.setdefault(f.key, []).append(f)
    return [f"{k[2]} {k[3]!r}: {len(v)} findings ({', '.join(f.status.value for f in v)})" for k, v in seen.items() if len(v) > 1]


# --------------------------------------------------------------------------
# Recorded BMCs
# --------------------------------------------------------------------------

_BASE = mockups_dir()
RECORDINGS = sorted(d.name for d in _BASE.iterdir() if d.is_dir()) if _BASE else ["(shared/redfish-mockups absent)"]


def _health_rows(items: list[Any]) -> list[tuple[Any, ...]]:
    return sorted(((i.health, i.state) for i in items), key=repr)


def _temp_rows(items: list[Any]) -> list[tuple[Any, ...]]:
    return sorted(((t.name, t.reading, t.health, t.upper_critical, t.upper_fatal) for t in items), key=repr)


@pytest.mark.parametrize("folder", RECORDINGS)
def test_recorded_bmc_sweep_reads_and_judges_what_the_recording_holds(folder: str, mockup_farm: Any) -> None:
    srv = mockup_farm(folder)  # skips when shared/redfish-mockups is absent
    rec = Recorded.read(srv.root)
    name = f"mockup-{folder}"
    target = BMCTarget(name=name, url=srv.url, username="admin", password="secret", timeout=10, retries=0)
    reading = sweep_bmcs([target])[name]
    serial = word((rec.system or {}).get("SerialNumber")) or ""
    expect = ServerExpect(name, serial, word((rec.system or {}).get("Model")) or "", "lab", "r1", 1, max_skew_s=MAX_SKEW_S)
    found = findings_of(name, reading, expect)

    if rec.system is None:  # the PDU: no system to sweep; said once, as the BMC's, never healthy
        assert reading.session_error and name in reading.session_error, reading
        assert "no Systems" in reading.session_error, reading.session_error
        assert [f.check for f in found] == ["bmc.reachable"], [(f.check, f.status, f.message) for f in found]
        assert found[0].status in (Status.UNKNOWN, Status.CRITICAL)
        return

    assert reading.session_error is None, reading.session_error
    # The parts the sweep could not read are the parts the recording lacks, each one bmc.read unknown naming it.
    assert set(reading.errors) == rec.lacking(), (reading.errors, rec.lacking())
    unread = {f.subject: f for f in found if f.check == "bmc.read"}
    assert set(unread) == rec.lacking()
    assert all(f.status is Status.UNKNOWN and f.subject in f.message for f in unread.values())

    # The health read, field by field, against the recording read by hand.
    h = reading.health
    assert h is not None, reading.errors
    sys_status = rec.system.get("Status") or {}
    assert h.system_health == word(sys_status.get("Health"))
    assert h.system_health_rollup == word(sys_status.get("HealthRollup"))
    assert h.chassis_health == word(((rec.chassis or {}).get("Status") or {}).get("Health"))
    assert _health_rows(h.psus) == _health_rows(rec.psus), "PSUs"
    assert _health_rows(h.fans) == _health_rows(rec.fans), "fans"
    assert _temp_rows(h.temperatures) == _temp_rows(rec.temperatures), "temperatures"
    assert set((h.source or "").split("+")) - {""} == set(rec.sources)

    # The findings: exactly those the recording holds, one per key (the recorder keeps the first of a key).
    assert not duplicate_keys(found), duplicate_keys(found)
    got = {(f.check, "*" if f.check in ("psu", "fan") else f.subject, f.status.value) for f in found if f.check in JUDGED}
    want = rec.expected_findings(expect.now, MAX_SKEW_S)
    assert got == want, {"unexpected": sorted(got - want), "missing": sorted(want - got)}
    bad_psus = [p for p in rec.psus if p.bad]
    judged = [f for f in found if f.status is not Status.UNKNOWN]  # "reports none" is unknown, not a judgement
    assert (not bad_psus) == (not any(f.check == "psu" for f in judged)), "a Warning/Critical PSU gives a psu finding, and only then"
    if not bad_psus and not any(i.bad for i in rec.fans + rec.temperatures) and word(sys_status.get("Health")) not in BAD:
        assert not [f for f in judged if f.check in ("psu", "fan", "system.health", "chassis.health")]


def test_every_recording_is_swept(mockup_farm: Any) -> None:
    """The parametrisation covers the folder as it is now (a recording added is swept too)."""
    base = mockups_dir()
    assert base is not None
    assert sorted(d.name for d in base.iterdir() if d.is_dir()) == RECORDINGS


# --------------------------------------------------------------------------
# sushy-tools
# --------------------------------------------------------------------------


def _sushy_get(url: str, path: str) -> dict[str, Any]:
    req = urllib.request.Request(url + path, headers={"Authorization": "Basic " + b64encode(b"admin:secret").decode()})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_sushy_sweep_reads_system_health_and_names_what_sushy_lacks(sushy_peer: str) -> None:
    """sushy lacks FirmwareInventory, LogServices and Chassis Power (PEERS.md): each must be an unknown, never healthy."""
    uuid = SUSHY_SYSTEMS["contract-ro"][0]
    system = _sushy_get(sushy_peer, f"/redfish/v1/Systems/{uuid}")
    chassis = _sushy_get(sushy_peer, system["Links"]["Chassis"][0]["@odata.id"])
    name = "sushy-ro"
    target = BMCTarget(name=name, url=sushy_peer, username="admin", password="secret", system_id=uuid, timeout=10, retries=0)
    reading = sweep_bmcs([target])[name]
    assert reading.session_error is None, reading.session_error
    expect = ServerExpect(name, word(system.get("SerialNumber")) or "", "", "lab", "r1", 1, max_skew_s=MAX_SKEW_S)
    found = findings_of(name, reading, expect)  # never a crash

    # What sushy has, read as sushy says it.
    h = reading.health
    assert h is not None and reading.facts is not None and reading.manager is not None, reading.errors
    assert h.system_health == word((system.get("Status") or {}).get("Health")) == "OK"
    assert h.chassis_health == word((chassis.get("Status") or {}).get("Health"))
    assert not [f for f in found if f.check in ("system.health", "chassis.health", "bmc.reachable", "bmc.login")]
    assert "Power" not in chassis and "PowerSubsystem" not in chassis and "LogServices" not in system  # the premise

    unread = {f.subject: f for f in found if f.check == "bmc.read"}
    failures: dict[str, list[str]] = {"firmware": [], "logs": [], "psus": [], "finding keys": duplicate_keys(found)}
    for part in ("firmware", "logs"):
        f = unread.get(part)
        if f is None:
            failures[part].append(f"read as {getattr(reading, part)!r}, errors={reading.errors}, no bmc.read finding")
        else:
            assert f.status is Status.UNKNOWN and part in f.message and name in f.message, f.message
    # No chassis power: the PSUs are not known; the sweep must say so (bmc.read on health, or a PSU finding), not pass.
    said = ("health" in unread or any(f.check in ("psu", "psu.redundancy") for f in found)
            or any("Power" in w or "PSU" in w for w in h.warnings))  # fmt: skip
    if not said:
        failures["psus"].append(f"psus={h.psus}, warnings={h.warnings}, no finding")
    judge("sushy", failures)


def test_recording_without_logs_and_firmware_inventory_is_unknown_there(tmp_path: Path) -> None:
    """A recorded iLO 5 with its LogServices and FirmwareInventory links removed: both parts are bmc.read unknowns."""
    base = mockups_dir()
    if base is None or not (base / "hpe-dl325-ilo5").is_dir():
        pytest.skip("shared/redfish-mockups/hpe-dl325-ilo5 not found beside the repository (set FLEETCTL_SHARED)")
    root = tmp_path / "dl325"
    shutil.copytree(base / "hpe-dl325-ilo5", root)
    for rel in ("Systems/1", "Managers/1", "UpdateService"):
        f = root / rel / "index.json"
        d = json.loads(f.read_text())
        d.pop("LogServices", None)
        d.pop("FirmwareInventory", None)
        f.write_text(json.dumps(d))
    for rel in ("Systems/1/LogServices", "Managers/1/LogServices", "UpdateService/FirmwareInventory"):
        shutil.rmtree(root / rel)
    rec = Recorded.read(root)
    assert rec.lacking() == {"logs", "firmware"}
    name = "stripped-dl325"
    with MockupServer(root) as srv:
        reading = sweep_bmcs([BMCTarget(name=name, url=srv.url, username="admin", password="secret", timeout=10, retries=0)])[name]
    assert reading.session_error is None, reading.session_error
    found = findings_of(name, reading, ServerExpect(name, "", "", "lab", "r1", 1, max_skew_s=MAX_SKEW_S))
    assert reading.health is not None and reading.facts is not None, reading.errors  # the other parts are still judged
    unread = {f.subject: f for f in found if f.check == "bmc.read"}
    failures: dict[str, list[str]] = {"firmware": [], "logs": []}
    for part in sorted(rec.lacking()):
        if part not in unread:
            failures[part].append(f"read as {getattr(reading, part)!r}, errors={reading.errors}, no bmc.read finding")
        else:
            assert unread[part].status is Status.UNKNOWN and part in unread[part].message
    assert set(unread) <= rec.lacking(), unread
    judge(name, failures)


# --------------------------------------------------------------------------
# Debian's snmpd in a namespace (the fixture of test_snmp_snmpd_netns.py)
# --------------------------------------------------------------------------

from test_snmp_snmpd_netns import Lab, lab, sh  # noqa: E402,F401  (lab: its module-scoped fixture, reused)

UP_PAIR = ("port0", "port1")  # a veth pair inside the namespace, both ends brought up here


def _wait_port(target: SnmpTarget, port: str, up: bool, deadline_s: float = 20.0) -> Any:
    """Poll through the sweep's path until ``port`` reads ``up`` (net-snmp caches ifTable a few seconds)."""
    end = time.monotonic() + deadline_s
    while True:
        (p,) = poll_switches([target])
        assert p.ok, p.error
        i = {x.label: x for x in p.interfaces}.get(port)
        if (i is not None and i.oper_up is up) or time.monotonic() > end:
            return p
        time.sleep(0.5)


def test_snmpd_sweep_port_status_errors_and_reboot(lab: Lab) -> None:  # noqa: F811
    for p in UP_PAIR:
        sh("ip", "-n", lab.ns, "link", "set", p, "up")
    target = lab.target(name="netns-sw")
    try:
        first = _wait_port(target, UP_PAIR[0], True)
        cabled = {p: Expected(f"host-{p}", {"eth0"}, "eth0") for p in (lab.veth_ns, *UP_PAIR)}
        expect = SwitchExpect("netns-sw", "lab", "r1", cabled=cabled)
        labels = {i.label for i in first.interfaces}
        assert set(cabled) <= labels, labels
        lab.ping(count=20, size=500)
        time.sleep(1.0)
        (second,) = poll_switches([target])
        assert second.ok, second.error
        reading = switch_reading(target, second, stored_cursor(first))
        assert reading.rates is not None and reading.rates.interval_s, reading.rates
        found = _evaluate("switch", "netns-sw", reading, expect, "bmc")
        by = {(f.check, f.subject): f for f in found}
        assert not [f for f in found if f.check == "port.status"], [f.message for f in found]
        assert not [f for f in found if f.check == "port.errors"], [f.message for f in found]
        assert not [f for f in found if f.check in ("switch.rebooted", "switch.reachable", "port.flaps")], [f.message for f in found]
        # no lldpd in the namespace: each up cabled port is "up, no LLDP neighbour" (a warning), nothing else
        assert {k for k in by if k[0] == "lldp"} == {("lldp", p) for p in cabled}
        assert all(by[("lldp", p)].status is Status.WARNING for p in cabled)

        sh("ip", "-n", lab.ns, "link", "set", UP_PAIR[0], "down")
        third = _wait_port(target, UP_PAIR[0], False)
        reading = switch_reading(target, third, stored_cursor(second))
        found = _evaluate("switch", "netns-sw", reading, expect, "bmc")
        status = {f.subject: f for f in found if f.check == "port.status"}
        assert set(status) >= {UP_PAIR[0]}, [f.message for f in found]
        assert status[UP_PAIR[0]].status is Status.CRITICAL
        assert lab.veth_ns not in status  # the link the agent answers on is still up
        # the far end of the veth goes down with it (lowerlayerdown): also cabled, also critical
        assert set(status) <= set(UP_PAIR) and all(f.status is Status.CRITICAL for f in status.values())
        assert not [f for f in found if f.check in ("switch.rebooted", "port.errors")], [f.message for f in found]
    finally:
        for p in UP_PAIR:
            sh("ip", "-n", lab.ns, "link", "set", p, "down", check=False)


# --------------------------------------------------------------------------
# snmpsim with generated data
# --------------------------------------------------------------------------

_AGENTS = Path(__file__).resolve().parents[1] / "unit" / "snmp" / "snmp_agents.py"
if "snmp_agents" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("snmp_agents", _AGENTS)
    assert _spec and _spec.loader
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["snmp_agents"] = _mod
    _spec.loader.exec_module(_mod)
import snmp_agents as A  # type: ignore[import-not-found]  # noqa: E402

ERROR_PORT, ERROR_RATE = 2, 100
SIM = A.SwitchSpec(name="sweep01", ports=4, error_port=ERROR_PORT, error_rate=ERROR_RATE, lldp_ports=4)
REBOOTED = A.SwitchSpec(name="sweep01", ports=4, error_port=ERROR_PORT, error_rate=ERROR_RATE, lldp_ports=4, uptime_ticks=500)


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Any:
    missing = A.snmpsim_missing()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("snmpsim-sweep")
    data = root / "data"
    A.write_snmprec(data / "sweep01.snmprec", A.switch_records(SIM))
    # the same switch after a reboot: sysUpTime starts at 5 s (the first data file's starts at 123456 s)
    A.write_snmprec(data / "sweep01-rebooted.snmprec", A.switch_records(REBOOTED))
    A.readiness_file(data)
    port = A.free_udp_port()
    with A.Snmpsim(data, [("127.0.0.1", port)], cache_dir=root / "cache", log_path=root / "snmpsim.log"):
        yield port


def _sim_target(port: int, community: str) -> SnmpTarget:
    # one switch (one name): the community picks the data file, so swapping it is the switch rebooting
    return SnmpTarget(name="sweep01", host="127.0.0.1", port=port, community=community, timeout=2, retries=1)


def _sim_expect() -> SwitchExpect:
    cabled = {SIM.port_name(i): Expected(SIM.neighbour(i)[0], {SIM.neighbour(i)[1]}, SIM.neighbour(i)[1]) for i in range(1, 5)}
    return SwitchExpect("sweep01", "lab", "r1", cabled=cabled)


def test_snmpsim_sweep_growing_errors_are_critical_on_that_port(sim: int) -> None:
    t = _sim_target(sim, "sweep01")
    (first,) = poll_switches([t])
    assert first.ok, first.error
    time.sleep(1.2)
    (second,) = poll_switches([t])
    assert second.ok, second.error
    reading = switch_reading(t, second, stored_cursor(first))
    found = _evaluate("switch", "sweep01", reading, _sim_expect(), "bmc")
    errors = {f.subject: f for f in found if f.check == "port.errors"}
    assert set(errors) == {SIM.port_name(ERROR_PORT)}, [f.message for f in found]
    f = errors[SIM.port_name(ERROR_PORT)]
    assert f.status is Status.CRITICAL
    assert f.evidence["in_errors_ps"] == pytest.approx(ERROR_RATE, rel=0.35), f.evidence
    # everything else on this switch is as generated: all ports up, LLDP as cabled, sensors below 75 C
    assert [x.check for x in found] == ["port.errors"], [(x.check, x.message) for x in found]


def test_snmpsim_sweep_sysuptime_down_is_a_reboot(sim: int) -> None:
    (first,) = poll_switches([_sim_target(sim, "sweep01")])
    assert first.ok, first.error
    t2 = _sim_target(sim, "sweep01-rebooted")
    (second,) = poll_switches([t2])
    assert second.ok, second.error
    assert (second.sys_uptime_ticks or 0) < (first.sys_uptime_ticks or 0)
    reading = switch_reading(t2, second, stored_cursor(first))
    found = _evaluate("switch", "sweep01", reading, _sim_expect(), "bmc")
    reboot = [f for f in found if f.check == "switch.rebooted"]
    assert len(reboot) == 1 and reboot[0].status is Status.WARNING, [(f.check, f.message) for f in found]
    assert reboot[0].evidence["previous_uptime_s"] == pytest.approx((first.sys_uptime_ticks or 0) / 100)
    # counters restarted: no error rate, no flap is judged across a reboot
    assert not [f for f in found if f.check in ("port.errors", "port.flaps")], [(f.check, f.message) for f in found]

