"""The SNMP poller against snmpsim (a third-party agent) with generated switch data.

Data: ``tests/unit/snmp/snmp_agents.py`` writes a 64-port switch (IF-MIB with
growing 64-bit counters, LLDP-MIB, ENTITY-SENSOR-MIB, sysUpTime); the
expected values come from the same ``SwitchSpec``. snmpsim runs on 127.0.0.1
free UDP ports and is stopped by its pid. Needs PyPI ``snmpsim`` and
``pysmi``; skips with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest
from fleetctl_drivers.snmp import SnmpPoller, poll_many, poll_many_sync, rates

from fleetctl.interfaces.snmp import OperStatus, SensorStatus, SnmpTarget

_AGENTS = Path(__file__).resolve().parents[1] / "unit" / "snmp" / "snmp_agents.py"
if "snmp_agents" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("snmp_agents", _AGENTS)
    assert _spec and _spec.loader
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["snmp_agents"] = _mod
    _spec.loader.exec_module(_mod)
import snmp_agents as A  # noqa: E402

SPEC = A.SwitchSpec(name="leaf01")
V3 = A.V3User(user="fleet", auth_key="authkey-0123", priv_key="privkey-0123", auth_proto="SHA", priv_proto="AES")


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    missing = A.snmpsim_missing()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("snmpsim")
    data = root / "data"
    A.write_snmprec(data / "leaf01.snmprec", A.switch_records(SPEC))
    # an old agent: ifTable only (32-bit octets), no LLDP, no sensors
    old = [r for r in A.switch_records(A.SwitchSpec(name="old32", ports=4), what=("if",)) if not r[0].startswith(A.IFX_TABLE)]
    A.write_snmprec(data / "old32.snmprec", old)
    # the same switch with every moving value pinned: two polls must read exactly the same
    A.write_snmprec(data / "static01.snmprec", static(A.switch_records(SPEC)))
    A.write_snmprec(data / "static32.snmprec", static(old))
    A.readiness_file(data)
    port = A.free_udp_port()
    sim = A.Snmpsim(data, [("127.0.0.1", port)], cache_dir=root / "cache", log_path=root / "snmpsim.log", v3=V3)
    with sim:
        yield port


def static(records: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """snmprec records with ``:numeric`` (growing) values pinned at their initial value."""
    out = []
    for o, tag, value in records:
        if tag.endswith(":numeric"):
            tag, value = tag.split(":")[0], dict(kv.split("=") for kv in value.split(","))["initial"]
        out.append((o, tag, value))
    return out


def v2c(port: int, community: str = "leaf01", **kw: object) -> SnmpTarget:
    base: dict[str, object] = dict(name=community, host="127.0.0.1", port=port, community=community, timeout=2, retries=1)
    base.update(kw)
    return SnmpTarget(**base)  # type: ignore[arg-type]


def v3(port: int, **kw: object) -> SnmpTarget:
    base: dict[str, object] = dict(
        name="leaf01-v3", host="127.0.0.1", port=port, version="3", user=V3.user, auth_key=V3.auth_key,
        priv_key=V3.priv_key, auth_protocol="SHA", priv_protocol="AES", context_name="leaf01", timeout=2, retries=1,
    )
    base.update(kw)
    return SnmpTarget(**base)  # type: ignore[arg-type]


def check_switch(r) -> None:  # type: ignore[no-untyped-def]
    assert r.ok, r.error
    assert r.sys_name == "leaf01"
    assert r.sys_uptime_ticks is not None and r.sys_uptime_ticks >= SPEC.uptime_ticks
    assert [i.index for i in r.interfaces] == list(range(1, 65))
    elapsed = None
    for i in r.interfaces:
        n = i.index
        assert i.name == i.descr == SPEC.port_name(n)
        assert i.alias == SPEC.alias(n)
        assert i.admin_up is SPEC.admin_up(n)
        assert i.oper_up is SPEC.oper_up(n)
        assert i.oper_status is (OperStatus.UP if SPEC.oper_up(n) else OperStatus.DOWN)
        assert i.last_change_ticks == SPEC.last_change(n)
        assert (i.in_discards, i.out_discards, i.out_errors) == (SPEC.in_discards(n), SPEC.out_discards(n), SPEC.out_errors(n))
        assert i.speed_mbps == SPEC.speed_mbps(n)
        assert i.octets_bits == 64
        # growing counters: initial + rate * seconds since snmpsim started, the same seconds for every port
        assert i.in_octets is not None and i.in_octets >= SPEC.in_initial(n) > 2**32
        seconds = (i.in_octets - SPEC.in_initial(n)) / SPEC.in_rate(n)
        elapsed = seconds if elapsed is None else elapsed
        assert seconds == pytest.approx(elapsed, abs=1.0)
        if n != SPEC.error_port:
            assert i.in_errors == 0
    assert len(r.lldp) == SPEC.lldp_ports
    for n, rem in enumerate(r.lldp, start=1):
        assert (rem.local_port_num, rem.local_port) == (n, SPEC.port_name(n))
        assert (rem.remote_sysname, rem.remote_port_id) == SPEC.neighbour(n)
        assert rem.remote_chassis_id == f"0c:42:a1:00:00:{n:02x}"
    sensors = {s.name: s for s in r.sensors}
    assert set(sensors) == {"Ambient", "ASIC", "PSU1 Input", "PSU2 Input", "Fan1", "12V rail"}
    assert (sensors["Ambient"].value, sensors["Ambient"].type, sensors["Ambient"].oper_status) == (45.2, "celsius", SensorStatus.OK)
    assert sensors["12V rail"].value == pytest.approx(12.05) and sensors["12V rail"].type == "volts_dc"
    assert sensors["PSU2 Input"].oper_status is SensorStatus.UNAVAILABLE
    assert sensors["Fan1"].value == 8800 and sensors["Fan1"].type == "rpm"


def test_v2c_poll_reads_exact_values(agent: int) -> None:
    (r,) = poll_many_sync([v2c(agent)])
    check_switch(r)
    assert r.warnings == [] and r.rebooted_since_last is None


def test_v3_authpriv_sha_aes(agent: int) -> None:
    (r,) = asyncio.run(poll_many([v3(agent)]))
    check_switch(r)


def test_v3_wrong_keys_and_user_are_auth_errors(agent: int) -> None:
    targets = [
        v3(agent, name="bad-auth", auth_key="wrong-auth-key", timeout=1, retries=0),
        v3(agent, name="bad-priv", priv_key="wrong-priv-key", timeout=1, retries=0),
        v3(agent, name="bad-user", user="nobody", timeout=1, retries=0),
        v3(agent, name="good"),
    ]
    rs = asyncio.run(poll_many(targets))
    assert [r.error_kind for r in rs] == ["auth", "auth", "auth", None]
    assert rs[3].sys_name == "leaf01"


def test_two_polls_seconds_apart_give_the_configured_rates(agent: int) -> None:
    async def twice():  # type: ignore[no-untyped-def]
        async with SnmpPoller() as p:
            first = await p.poll_many([v2c(agent)], what=("if",))
            await asyncio.sleep(3.0)  # a busy machine delays a poll's counter reads by up to ~0.1 s: 3 s keeps that under 4 %
            second = await p.poll_many([v2c(agent)], what=("if",), previous=first)
            return first[0], second[0]

    first, second = asyncio.run(twice())
    assert second.rebooted_since_last is False
    r = rates(first, second)
    assert r.rebooted is False and r.interval_s and 2.9 < r.interval_s < 6
    assert len(r.interfaces) == 64
    for i in r.interfaces:
        n = i.index
        # counters are read a few ms after sysUpTime; allow 10 % + one second's increment of integer rounding
        assert i.in_bps == pytest.approx(SPEC.in_rate(n) * 8, rel=0.1), n
        assert i.out_bps == pytest.approx(SPEC.out_rate(n) * 8, rel=0.1), n
        assert i.in_discards_ps == 0 and i.out_errors_ps == 0
    err = r.interface(SPEC.error_port)
    assert err is not None and err.in_errors_ps == pytest.approx(SPEC.error_rate, abs=1.5)


def test_32_bit_only_agent_falls_back_to_ifInOctets(agent: int) -> None:
    (r,) = poll_many_sync([v2c(agent, "old32")])
    assert r.ok, r.error
    assert [i.octets_bits for i in r.interfaces] == [32] * 4
    assert all(i.in_octets is not None and i.in_octets < 2**32 for i in r.interfaces)
    assert r.lldp == [] and r.sensors == []
    assert any("LLDP-MIB" in w for w in r.warnings) and any("ENTITY-SENSOR" in w for w in r.warnings)


def test_dead_and_misconfigured_agents_do_not_abort_the_poll(agent: int) -> None:
    dead_port = A.free_udp_port()
    targets = [
        v2c(dead_port, "leaf01", name="dead", timeout=0.3, retries=0),
        v2c(agent),
        v2c(agent, "no-such-community", name="wrong-community", timeout=0.3, retries=0),
        SnmpTarget(name="v3-no-user", host="127.0.0.1", port=agent, version="3"),
        v2c(agent, name="bad-part"),
    ]
    rs = poll_many_sync(targets, concurrency=2)
    rs[-1:] = poll_many_sync(targets[-1:], what=("if", "nonsense"))
    assert [r.target for r in rs] == ["dead", "leaf01", "wrong-community", "v3-no-user", "bad-part"]
    assert rs[0].error_kind == "timeout" and "no answer" in (rs[0].error or "")
    check_switch(rs[1])
    assert rs[2].error_kind == "timeout"  # v2c agents ignore a wrong community
    assert rs[3].error_kind == "config" and rs[3].error == "SNMPv3 needs a user"
    assert rs[4].error_kind == "config"


@pytest.mark.parametrize("v3_path", ["ber", "pysnmp"])
def test_many_targets_share_one_engine(agent: int, v3_path: str) -> None:
    """v2c and v3 targets polled together; v3 on our codec (snmpsim's agent is pysnmp's USM) or through pysnmp.

    On the pysnmp path every target shares one SnmpEngine; on ours none is made.
    """

    async def run():  # type: ignore[no-untyped-def]
        async with SnmpPoller(v3=v3_path) as p:
            rs = await p.poll_many([v2c(agent, name=f"sw{i}") for i in range(20)] + [v3(agent)], what=("if",), concurrency=8)
            return rs, p.engines

    rs, engines = asyncio.run(run())
    problems = [(r.error, r.warnings) for r in rs if not r.ok or r.warnings]
    assert all(r.ok and len(r.interfaces) == 64 and not r.warnings for r in rs), problems
    assert engines == (1 if v3_path == "pysnmp" else 0)


def test_counters_poll_reads_only_what_counters_need(agent: int) -> None:
    async def run():  # type: ignore[no-untyped-def]
        async with SnmpPoller() as p:
            rs = await p.poll_many([v2c(agent)], what=("counters",))
            return rs[0], p.requests

    r, requests = asyncio.run(run())
    assert r.ok, r.error
    assert r.what == ["counters"] and r.warnings == [] and r.lldp == [] and r.sensors == []
    assert (r.sys_name, [i.index for i in r.interfaces]) == ("leaf01", list(range(1, 65)))
    for i in r.interfaces:
        n = i.index
        got = (i.name, i.descr, i.alias, i.admin_up, i.speed_mbps, i.last_change_ticks)
        assert got == (SPEC.port_name(n), None, None, None, None, None)
        assert i.oper_status is (OperStatus.UP if SPEC.oper_up(n) else OperStatus.DOWN)
        assert (i.in_discards, i.out_discards, i.out_errors) == (SPEC.in_discards(n), SPEC.out_discards(n), SPEC.out_errors(n))
        assert i.octets_bits == 64 and i.in_octets is not None and i.in_octets >= SPEC.in_initial(n)
        assert i.out_octets is not None and i.out_octets >= SPEC.out_initial(n)
    # GET (sysUpTime, sysName, ifNumber) + 8 GETBULKs of 8 columns x 8 rows + 1 of 8 x 1 (the row past the table)
    assert requests == 10


def test_counters_poll_of_an_old_agent_falls_back_to_ifDescr_and_32_bit(agent: int) -> None:
    (r,) = poll_many_sync([v2c(agent, "old32")], what=("counters",))
    assert r.ok, r.error
    assert [(i.name, i.descr, i.octets_bits) for i in r.interfaces] == [(None, f"Ethernet{n}", 32) for n in range(1, 5)]
    assert all(i.label == f"Ethernet{i.index}" and i.in_octets is not None and i.in_octets < 2**32 for i in r.interfaces)


@pytest.mark.parametrize("what", [("counters",), ("if",), ("if", "lldp", "sensors"), ("lldp", "counters")])
def test_ber_and_pysnmp_paths_give_the_same_results(agent: int, what: tuple[str, ...]) -> None:
    async def run(via: str):  # type: ignore[no-untyped-def]
        async with SnmpPoller(v2c=via) as p:
            return await p.poll_many([v2c(agent, "static01"), v2c(agent, "static32")], what=what)

    ours, theirs = asyncio.run(run("ber")), asyncio.run(run("pysnmp"))
    skip = {"polled_at", "duration_s"}
    for a, b in zip(ours, theirs, strict=True):
        assert a.ok and b.ok, (a.error, b.error)
        da, db = a.model_dump(exclude=skip), b.model_dump(exclude=skip)
        for field in da:
            assert da[field] == db[field], (a.target, field)
    assert len(ours[0].interfaces) == 64
