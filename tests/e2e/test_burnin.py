"""`fleetctl burnin` against PXE-installed lab hosts, over real SSH, with the lab's BMCs beside.

Two MN-Core servers and a GPU server of the example site are installed by
fleetctl's own `boot set` and `power on`, marked ready, and burned in with
faults set on their boards (boards.json, read by the lab's gpfn3-smi,
mncore-burnin, nvidia-smi, dcgmi, gpu-burn and dmesg stand-ins; the sysfs
links). Every verdict is reached; failing boards go to RMA and their servers
to maintenance; a run killed with SIGKILL is resumed without running its
finished servers again, and the workload it left on a host is stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetctl_lab.host_standins import set_board_fault
from tests_helpers_bmc import install_hosts, lab_up, selected_engine  # (path set in conftest)

MN1, MN2, GPU = "mn-tyo1-r12-01", "mn-tyo1-r12-02", "gpu-tyo1-r12-19"
FLEETCTL = Path(sys.executable).parent / "fleetctl"
FAST = ("--duration", "2", "--grace", "3")

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    pytest.importorskip("asyncssh")
    state = tmp_path / "lab"
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(state))
    r = lab_up(cli, monkeypatch, "--power-transition", "0.2", "--install-time", "1", "--os-boot-time", "0.2",
               "--server", MN1, "--server", MN2, "--server", GPU)  # fmt: skip
    assert r.code == 0, r.err
    doc = json.loads((state / "lab.json").read_text())
    try:
        install_hosts(cli, doc, [MN1, MN2, GPU])
        yield doc
    finally:
        cli("lab", "down")



def _dir(lab: dict[str, Any], name: str) -> Path:
    return Path(lab["hosts"][name]["dir"])


def _faults(lab: dict[str, Any], name: str, faults: list[str]) -> None:
    for slot, f in enumerate(faults):
        set_board_fault(_dir(lab, name) / "boards.json", str(slot), f)


def _serials(name: str) -> list[str]:
    from sqlalchemy import text

    with selected_engine().connect() as c:
        return list(c.execute(text("SELECT b.serial FROM accelerator_board b JOIN server s ON s.id = b.server_id "
                                   "WHERE s.name = :n ORDER BY b.slot"), {"n": name}).scalars())  # fmt: skip


def _json(r: Any) -> Any:
    assert r.out.strip(), r.err
    return json.loads(r.out)


def _reasons(board: dict[str, Any]) -> set[str]:
    return {x["criterion"] for x in board["reasons"] if x["severity"] in ("fail", "degraded")}


def test_mncore_reaches_every_verdict_and_sends_failing_boards_to_rma(lab, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _faults(lab, MN1, ["healthy", "hot", "slow", "checksum"])
    _faults(lab, MN2, ["vanish", "hang", "degraded_link", "memory_errors"])
    r = cli("burnin", "--mncore", MN1, MN2, *FAST, "-o", "json")
    assert r.code == 5, r.out + r.err  # a board failed
    doc = _json(r)
    got = {(b["server"], b["slot"]): (b["verdict"], _reasons(b)) for b in doc["boards"]}
    assert got == {
        (MN1, 0): ("pass", set()),
        (MN1, 1): ("degraded", {"throughput", "temperature"}),  # runs hot at 70 %: degraded, fix the cooling
        (MN1, 2): ("fail", {"throughput"}),  # half speed
        (MN1, 3): ("fail", {"checksum"}),
        (MN2, 0): ("fail", {"device_lost"}),  # fell off the bus when the workload started
        (MN2, 1): ("fail", {"hung"}),  # never ended: killed after duration + grace
        (MN2, 2): ("fail", {"link_degraded"}),  # read from sysfs before and after
        (MN2, 3): ("fail", {"checksum"}),  # memory errors: wrong results
    }, doc["boards"]
    assert doc["servers"] == {MN1: "fail", MN2: "fail"}
    healthy = next(b for b in doc["boards"] if (b["server"], b["slot"]) == (MN1, 0))
    assert healthy["metrics"]["throughput"] == pytest.approx(393.2) and healthy["metrics"]["samples"] >= 2

    # RMA: exactly the failing boards, with the evidence; their servers in maintenance; board states.
    r = cli("board", "rma", "list", "-o", "json")
    rma = {x["serial"]: x for x in _json(r)}
    s1, s2 = _serials(MN1), _serials(MN2)
    assert set(rma) == {s1[2], s1[3], *s2}, rma
    assert "hung" in json.dumps(rma[s2[1]]["evidence"]) and rma[s2[1]]["source"] == f"burnin:{doc['run']}"
    assert set(doc["to_maintenance"]) == {MN1, MN2}
    servers = {s["name"]: s["state"] for s in _json(cli("server", "list", "-o", "json"))}
    assert servers[MN1] == servers[MN2] == "maintenance"
    boards = {b["serial"]: b["state"] for b in _json(cli("board", "list", "--server", MN1, "-o", "json"))}
    assert boards == {s1[0]: "ok", s1[1]: "suspect", s1[2]: "rma", s1[3]: "rma"}

    # Stored: show gives the same verdicts, with telemetry from the host tool and the BMC's sensors.
    shown = _json(cli("burnin", "show", "-o", "json"))
    assert {(b["server"], b["slot"]): b["verdict"] for b in shown} == {k: v[0] for k, v in got.items()}
    tele = next(b for b in shown if b["serial"] == s1[1])["telemetry"]
    assert {t["source"] for t in tele} == {"host", "bmc"} and max(t["temp_c"] for t in tele if t["source"] == "host") == 97
    runs = _json(cli("burnin", "list", "-o", "json"))
    assert (runs[0]["run"], runs[0]["state"], runs[0]["pass"], runs[0]["degraded"], runs[0]["fail"]) == (doc["run"], "finished", 1, 1, 6)
    # The hung workload was killed: nothing of it is left on the host.
    assert not (_dir(lab, MN2) / "root/var/tmp/fleetctl-burnin/pgid").exists()

    # The report: one page with every board, its verdict and plots.
    page = tmp_path / "burnin.html"
    r = cli("burnin", "report", "--html", str(page))
    assert r.code == 0, r.err
    html = page.read_text(encoding="utf-8")
    assert all(s in html for s in (*s1, *s2)) and "<svg" in html and "hung" in html

    # Nothing is due now: both were burned in since they last changed state.
    r = cli("burnin", "--mncore", *FAST)
    assert r.code == 0 and "nothing is due" in r.err, r.out + r.err


def test_gpu_reads_dcgmi_gpu_burn_nvidia_smi_and_dmesg(lab, cli) -> None:  # type: ignore[no-untyped-def]
    _faults(lab, GPU, ["healthy", "slow", "hot", "memory_errors", "degraded_link", "checksum", "xid", "healthy"])
    r = cli("burnin", "--gpu", GPU, "--level", "quick", *FAST, "-o", "json")
    assert r.code == 5, r.out + r.err
    got = {b["slot"]: (b["verdict"], _reasons(b)) for b in _json(r)["boards"]}
    assert got == {
        0: ("pass", set()),
        1: ("fail", {"throughput"}),
        2: ("degraded", {"throughput", "temperature"}),
        3: ("fail", {"memory_retired", "diag_fail", "retired_pending"}),  # 65 retired, pending; dcgmi r1 Page Retirement fails
        4: ("fail", {"link_degraded"}),
        5: ("fail", {"checksum"}),  # gpu-burn: errors, FAULTY (it exits 0 all the same)
        6: ("fail", {"device_lost", "checksum", "xid"}),  # Xid 79 in dmesg, DIED
        7: ("pass", set()),
    }, r.out
    # The GPU server's vbios differs from the baseline: noted, the verdict unchanged.
    assert any(x["criterion"] == "firmware" and x["severity"] == "note" for x in _json(r)["boards"][0]["reasons"])


def test_refusals_happen_before_anything_is_touched(lab, cli) -> None:  # type: ignore[no-untyped-def]
    calls = _dir(lab, MN1) / "calls.log"
    before = calls.read_text() if calls.exists() else ""
    assert cli("server", "set-state", MN1, "in-service", "--reason", "test").code == 0
    r = cli("burnin", "--mncore", MN1, MN2, *FAST)
    assert r.code == 2 and "in service" in r.err and "--force" in r.err, r.err
    r = cli("burnin", "--mncore", "mn-tyo1-r12-03", *FAST)  # registered: no OS to run on
    assert r.code == 2 and "registered" in r.err, r.err
    r = cli("burnin", "--gpu", MN1, *FAST)
    assert r.code == 2 and "carries gpu boards" in r.err, r.err  # the board kind, as the inventory names it
    r = cli("burnin", "--mncore", "--gpu", MN1)
    assert r.code == 2
    assert _json(cli("burnin", "list", "-o", "json")) == []
    assert (calls.read_text() if calls.exists() else "") == before  # no reset, no clear

    # A board another (live) program holds: not reset; the server cannot be burned in (exit 4) ...
    sem = _dir(lab, MN2) / "root/opt/mncore_shared_semaphore"
    sem.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(["sleep", "120"])
    try:
        (sem / "mnc2p27s0").write_text(f"training-job pid {holder.pid}\n")
        r = cli("burnin", "--mncore", MN2, *FAST, "-o", "json")
        assert r.code == 4, r.out + r.err
        err = _json(r)["boards"]
        assert [b["verdict"] for b in err] == ["error"] and "in use by another program" in err[0]["reasons"][0]["message"]
        log = _dir(lab, MN2) / "calls.log"
        assert "gpfn3-smi reset" not in (log.read_text() if log.exists() else "")
        # ... unless taken with --force.
        r = cli("burnin", "--mncore", MN2, *FAST, "--force", "-o", "json")
        assert r.code == 0, r.out + r.err
        assert any("taken with --force" in x["message"] for x in _json(r)["boards"][0]["reasons"])
    finally:
        holder.kill()


def _results(run: int | None = None) -> dict[str, int]:
    from sqlalchemy import text

    with selected_engine().connect() as c:
        rows = c.execute(text("SELECT server, COUNT(*) FROM burnin_result GROUP BY server")).all()
    return {r[0]: r[1] for r in rows}


def test_killed_and_rerun_it_resumes_and_stops_what_it_left_running(lab, cli) -> None:  # type: ignore[no-untyped-def]
    _faults(lab, MN2, ["healthy", "hang", "healthy", "healthy"])  # MN2's workload will still run when the kill comes
    env = dict(os.environ)
    args = ["burnin", "--mncore", MN1, MN2, "--duration", "2", "--concurrency", "1"]
    proc = subprocess.Popen([str(FLEETCTL), *args, "--grace", "300", "-o", "json"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    pgid = _dir(lab, MN2) / "root/var/tmp/fleetctl-burnin/pgid"
    deadline = time.monotonic() + 60
    while not (_results().get(MN1) == 4 and pgid.exists()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, _results()
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left = int(pgid.read_text())
    os.kill(-left, 0)  # the hung workload is still running on the host
    resets_mn1 = (_dir(lab, MN1) / "calls.log").read_text().count("gpfn3-smi reset")
    assert resets_mn1 == 4

    _faults(lab, MN2, ["healthy"] * 4)
    r = cli(*args, "--grace", "3", "-o", "json")
    assert r.code == 0, r.out + r.err
    doc = _json(r)
    assert doc["resumed"] is True
    assert {(b["server"], b["resumed"]) for b in doc["boards"]} == {(MN1, True), (MN2, False)}
    assert len(doc["boards"]) == 8 and {b["verdict"] for b in doc["boards"]} == {"pass"}
    assert (_dir(lab, MN1) / "calls.log").read_text().count("gpfn3-smi reset") == 4  # MN1 was not run again
    assert "was stopped" in json.dumps(doc["notes"].get(MN2, []))
    with pytest.raises(ProcessLookupError):
        os.kill(-left, 0)
    assert _json(cli("burnin", "list", "-o", "json"))[0]["state"] == "finished"
    locks = _json(cli("server", "list", "-o", "json"))
    assert not [s for s in locks if s.get("reservation")]
