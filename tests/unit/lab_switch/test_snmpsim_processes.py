"""The switch lab's SNMP from several snmpsim processes (issue 24, item 5: a lab that is not the bottleneck).

snmpsim answers from one thread: 500 lab switches polled at once kept one process on a core for 77 s while the other
core idled, so a sweep's wall was snmpsim's. The lab now runs one snmpsim process per 100 switches, up to the cores
(``SwitchLabConfig.snmp_processes``), each serving the endpoints of a share of the switches from the same data.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from swlab_helpers import IF_OPER, SYS_NAME, need_deps, small_specs, snmp_get, wait_for


def _snmpsims(state_dir: str) -> dict[int, str]:
    """{pid: its --cache-dir} of the snmpsim processes serving the lab in ``state_dir``."""
    out: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            args = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        cache = [a.decode().split("=", 1)[1] for a in args if a.startswith(b"--cache-dir=")]
        if cache and cache[0].startswith(state_dir):
            out[int(d.name)] = cache[0]
    return out


def test_how_many_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    from fleetctl_lab.switch import snmp

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    assert snmp.snmpsim_processes(500) == 2  # the cores
    assert snmp.snmpsim_processes(150) == 2 and snmp.snmpsim_processes(100) == 1  # one per 100 switches
    assert snmp.snmpsim_processes(11) == 1  # the demo's: one
    assert snmp.snmpsim_processes(2, 8) == 2  # as asked, never more than one per switch
    assert snmp.snmpsim_processes(500, 3) == 3


@pytest.mark.parametrize(("processes", "base"), [(2, "127.155.0.1"), (1, "127.156.0.1")])
def test_each_switch_is_answered_by_its_process_and_every_process_stops_with_the_lab(tmp_path: Path, processes: int,
                                                                                      base: str) -> None:  # fmt: skip
    need_deps()
    from fleetctl_lab.switch import SwitchLabConfig, run_switch_lab_in_thread

    state = str(tmp_path / "swlab")
    cfg = SwitchLabConfig(state_dir=state, base_address=base, snmp_processes=processes)
    specs = small_specs()
    with run_switch_lab_in_thread(specs, cfg) as lab:
        procs = _snmpsims(state)
        assert sorted(Path(c).name for c in procs.values()) == [f"p{k}" for k in range(processes)], procs  # an index cache each
        for spec in specs:  # each switch answers, with its own data
            assert snmp_get(lab, spec.name, SYS_NAME)[SYS_NAME] == spec.name
        # a change the lab renders is seen through the process that serves the switch (the second, with two)
        last = specs[-1]
        assert last.platform == "sonic" and last.ports[0].name == "Ethernet0" and last.ports[0].neighbor is not None
        assert snmp_get(lab, last.name, f"{IF_OPER}.1")[f"{IF_OPER}.1"] == 1  # cabled: up
        lab.switch_fault(last.name, "Ethernet0", "down")  # its cable pulled
        assert wait_for(lambda: snmp_get(lab, last.name, f"{IF_OPER}.1")[f"{IF_OPER}.1"] == 2, timeout=20)
    assert wait_for(lambda: not _snmpsims(state), timeout=10), _snmpsims(state)  # none left running
