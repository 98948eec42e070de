"""`fleetctl burnin` on the scale-out engine: a real Temporal dev server, `fleetctl worker` processes, the lab's
PXE-installed MN-Core hosts over real SSH, and the store on PostgreSQL.

The same burn-in runs in process and through Temporal and must end the same: the verdicts, the RMA entries,
the move to maintenance, the stored results and the job. A worker killed with SIGKILL while its server's
workload runs gives the server to another worker, which stops what was left on the host and records the
server once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from tests_helpers_bmc import install_hosts, lab_up, selected_engine  # (path set in conftest)

pytest.importorskip("temporalio", reason="the scale-out engine's SDK (pip install 'fleetctl[temporal]')")
pytest.importorskip("asyncssh")

import scaleout_helpers as h  # (path set in conftest)
from scaleout_helpers import BIN, Workers

temporal, workers = h.temporal, h.workers  # the fixtures

MN1, MN2 = "mn-tyo1-r12-01", "mn-tyo1-r12-02"
FAST = ("--duration", "2", "--grace", "3")

pytestmark = [
    *h.TEMPORAL_MARKS,
]


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    """Two MN-Core servers of the example site, installed over PXE by the lab and marked ready (as test_burnin.py)."""
    state = tmp_path / "lab"
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(state))
    r = lab_up(cli, monkeypatch, *lab_db_args, "--power-transition", "0.2", "--install-time", "1", "--os-boot-time", "0.2",
               "--server", MN1, "--server", MN2)  # fmt: skip
    assert r.code == 0, r.err
    doc = json.loads((state / "lab.json").read_text())
    try:
        install_hosts(cli, doc, [MN1, MN2])
        yield doc
    finally:
        cli("lab", "down")


def _faults(lab: dict[str, Any], name: str, faults: list[str]) -> None:
    from fleetctl_lab.host_standins import set_board_fault

    for slot, f in enumerate(faults):
        set_board_fault(Path(lab["hosts"][name]["dir"]) / "boards.json", str(slot), f)


def _json(r: Any) -> Any:
    assert r.out.strip(), r.err
    return json.loads(r.out)


def _reasons(board: dict[str, Any]) -> tuple[str, ...]:
    return tuple(sorted({x["criterion"] for x in board["reasons"] if x["severity"] in ("fail", "degraded")}))


def _query(sql: str) -> list[tuple[Any, ...]]:
    eng = selected_engine()
    try:
        with eng.connect() as c:
            return [tuple(r) for r in c.execute(text(sql))]
    finally:
        eng.dispose()


async def _histories(address: str) -> dict[str, dict[str, Any]]:
    """Every workflow's history as JSON, by workflow id."""
    from temporalio.client import Client

    client = await Client.connect(address)
    out = {}
    async for wf in client.list_workflows():
        history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        out[f"{wf.id}/{wf.run_id}"] = history.to_json_dict()
    return out


SAME: dict[str, dict[str, Any]] = {}  # engine -> what its run reported and stored


@pytest.mark.parametrize("engine", ["process", "temporal"])
def test_the_same_burnin_on_both_engines(engine, lab, cli, temporal, workers, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    h.use_engine(engine, workers, monkeypatch, "tyo1")
    _faults(lab, MN1, ["healthy", "healthy", "healthy", "checksum"])  # one failing board: RMA, MN1 to maintenance
    _faults(lab, MN2, ["healthy"] * 4)
    t = time.monotonic()
    r = cli("burnin", "--mncore", MN1, MN2, *FAST, "-o", "json")
    assert r.code == 5, r.out + r.err + (workers.logs() if engine == "temporal" else "")
    doc = _json(r)
    took = time.monotonic() - t
    rma = _json(cli("board", "rma", "list", "-o", "json"))
    servers = {s["name"]: s["state"] for s in _json(cli("server", "list", "-o", "json")) if s["name"] in (MN1, MN2)}
    runs = _json(cli("burnin", "list", "-o", "json"))
    jobs = [j for j in _json(cli("jobs", "list", "-o", "json")) if j.get("kind") == "burnin"]
    seen = {
        "report": {k: doc[k] for k in ("run", "resumed", "kind", "level", "duration_s", "servers", "counts", "worst", "rma",
                                       "to_maintenance")},  # fmt: skip
        "boards": [(b["server"], b["slot"], b["serial"], b["verdict"], _reasons(b), b["resumed"]) for b in doc["boards"]],
        "rma": sorted((x["serial"], x["server"], x["slot"], x["source"]) for x in rma),
        "states": servers,
        "stored": _query("SELECT r.server, r.slot, r.serial, r.verdict, b.state FROM burnin_result r "
                         "JOIN accelerator_board b ON b.serial = r.serial ORDER BY r.server, r.slot"),  # fmt: skip
        "events": _query("SELECT object_name, detail FROM event WHERE action IN ('board.burnin', 'server.state') "
                         "AND (reason LIKE 'burnin:%' OR reason LIKE 'burn-in run %') ORDER BY object_name, detail"),  # fmt: skip
        "run": [(x["run"], x["state"], x["pass"], x["degraded"], x["fail"], x["error"]) for x in runs],
        "jobs": [(j.get("state"), j.get("target")) for j in jobs],
        "job_steps": _query("SELECT s.name, js.name, js.state, js.output, js.error FROM job_step js JOIN server s ON s.id = js.server_id "
                            "JOIN job j ON j.id = js.job_id WHERE j.kind = 'burnin' ORDER BY s.name, js.id"),  # fmt: skip
        "locks": _query(f"SELECT name FROM server WHERE reservation IS NOT NULL AND name IN ('{MN1}', '{MN2}')"),
    }  # fmt: skip
    assert seen["report"]["servers"] == {MN1: "fail", MN2: "pass"} and seen["report"]["to_maintenance"] == [MN1], seen
    assert [b[3] for b in seen["boards"]] == ["pass"] * 3 + ["fail"] + ["pass"] * 4, seen["boards"]
    assert seen["boards"][3][4] == ("checksum",) and len(seen["rma"]) == 1 and servers == {MN1: "maintenance", MN2: "ready"}
    assert seen["run"] == [(doc["run"], "finished", 7, 0, 1, 0)] and seen["locks"] == [], seen
    assert [(r[0], r[2], r[3]) for r in seen["job_steps"]] == [(MN1, "failed", "fail: 4 results"), (MN2, "succeeded", "pass: 4 results")]
    if engine == "temporal":
        histories = asyncio.run(_histories(temporal.address))
        ids = {k.partition("/")[0] for k in histories}
        assert {f"burnin:{MN1}", f"burnin:{MN2}"} <= ids and any(i.startswith("fleetctl-burnin-") for i in ids), ids
        # No secret in any history: the lab's BMC password, the SSH private key (nor where it lies).
        password = (Path(os.environ["FLEETCTL_LAB_DIR"]) / "credential").read_text().split()[1]
        dumped = json.dumps(histories)
        assert password not in dumped and "PRIVATE KEY" not in dumped and "id_ed25519" not in dumped
    print(f"{engine}: burn-in of 2 servers in {took:.1f} s")
    SAME[engine] = seen
    if len(SAME) == 2:  # the two engines reported, stored and journaled the same
        assert SAME["process"] == SAME["temporal"]


async def _worker_of(address: str, workflow_id: str) -> int | None:
    """The pid of the worker running the workflow's current activity (None: none running)."""
    from temporalio.client import Client

    client = await Client.connect(address)
    desc = await client.get_workflow_handle(workflow_id).describe()
    for act in desc.raw_description.pending_activities:
        if act.last_worker_identity:
            return int(act.last_worker_identity.partition("@")[0])
    return None


def test_a_worker_killed_mid_workload_another_stops_the_leftover_and_records_once(lab, temporal, workers: Workers,
                                                                                   tmp_path) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    workers.start("a", "tyo1")
    workers.start("b", "tyo1")
    workers.wait_ready()
    _faults(lab, MN1, ["healthy"] * 4)
    _faults(lab, MN2, ["healthy", "hang", "healthy", "healthy"])  # MN2's workload still runs when its worker is killed
    err = open(tmp_path / "burnin.err", "w")  # noqa: SIM115 - the command writes it until it ends
    proc = subprocess.Popen([str(BIN / "fleetctl"), "burnin", "--mncore", MN1, MN2, "--duration", "2", "--grace", "300", "-o", "json"],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=err, text=True)  # fmt: skip
    pgid = Path(lab["hosts"][MN2]["dir"]) / "root/var/tmp/fleetctl-burnin/pgid"
    deadline = time.monotonic() + 90
    while not pgid.exists():
        assert proc.poll() is None, (tmp_path / "burnin.err").read_text() + workers.logs()
        assert time.monotonic() < deadline, workers.logs()
        time.sleep(0.1)
    time.sleep(3)  # past the 2 s workload: the hung board holds the session
    pid = None
    while pid is None and time.monotonic() < deadline:
        pid = asyncio.run(_worker_of(temporal.address, f"burnin:{MN2}"))
    assert pid is not None
    left = int(pgid.read_text())
    os.kill(pid, signal.SIGKILL)  # mid-workload: no chance to record or report anything
    _faults(lab, MN2, ["healthy"] * 4)  # the next attempt's workload ends
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(workers.logs()) from None
    assert proc.returncode == 0, out + (tmp_path / "burnin.err").read_text() + workers.logs()
    doc = json.loads(out)
    assert {b["verdict"] for b in doc["boards"]} == {"pass"} and len(doc["boards"]) == 8, doc["boards"]
    assert "was stopped" in json.dumps(doc["notes"].get(MN2, [])), doc["notes"]  # the retry stopped the lost attempt's workload
    with pytest.raises(ProcessLookupError):
        os.kill(-left, 0)
    # Each server recorded once, and its job row once.
    assert _query("SELECT server, count(*) FROM burnin_result GROUP BY server ORDER BY server") == [(MN1, 4), (MN2, 4)]
    assert _query("SELECT state FROM burnin_run") == [("finished",)]
    assert _query("SELECT s.name, js.state FROM job_step js JOIN server s ON s.id = js.server_id JOIN job j ON j.id = js.job_id "
                  "WHERE j.kind = 'burnin' ORDER BY s.name") == [
        (MN1, "succeeded"), (MN2, "succeeded")]  # fmt: skip
    assert _query(f"SELECT name FROM server WHERE reservation IS NOT NULL AND name IN ('{MN1}', '{MN2}')") == []


def test_sigterm_detaches_and_the_run_finishes_on_the_workers(lab, temporal, workers: Workers, tmp_path) -> None:  # type: ignore[no-untyped-def]
    workers.start("tyo1", "tyo1")
    workers.wait_ready()
    _faults(lab, MN1, ["healthy"] * 4)
    _faults(lab, MN2, ["healthy", "hang", "healthy", "healthy"])  # still running when the command goes
    proc = subprocess.Popen([str(BIN / "fleetctl"), "burnin", "--mncore", MN1, MN2, "--duration", "2", "--grace", "4", "-o", "json"],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    pgid = Path(lab["hosts"][MN2]["dir"]) / "root/var/tmp/fleetctl-burnin/pgid"
    deadline = time.monotonic() + 90
    while not pgid.exists():
        assert proc.poll() is None and time.monotonic() < deadline, workers.logs()
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "detached" in err and not out.strip(), (proc.returncode, out, err)
    # Not cancelled: the workers finish the run (the hung board is killed after duration + grace) and close it.
    while _query("SELECT state FROM burnin_run") != [("finished",)]:
        assert time.monotonic() < deadline, (_query("SELECT state FROM burnin_run"), workers.logs())
        time.sleep(0.5)
    got = dict(_query("SELECT verdict, count(*) FROM burnin_result GROUP BY verdict"))
    assert got == {"pass": 7, "fail": 1}, got  # the hung board
    assert _query(f"SELECT name FROM server WHERE reservation IS NOT NULL AND name IN ('{MN1}', '{MN2}')") == []


async def _cancel(address: str, workflow_id: str) -> None:
    from temporalio.client import Client

    client = await Client.connect(address)
    await client.get_workflow_handle(workflow_id).cancel()


async def _pending(address: str, workflow_id: str) -> tuple[str, int]:
    """A workflow's status and how many of its activities are still pending."""
    from temporalio.client import Client

    client = await Client.connect(address)
    desc = await client.get_workflow_handle(workflow_id).describe()
    return str(desc.status.name if desc.status else None), len(desc.raw_description.pending_activities)


def test_a_cancelled_run_is_interrupted_and_the_next_one_resumes_it(lab, cli, temporal, workers: Workers, tmp_path) -> None:  # type: ignore[no-untyped-def]
    workers.start("tyo1", "tyo1")
    workers.wait_ready()
    _faults(lab, MN1, ["healthy"] * 4)
    _faults(lab, MN2, ["healthy", "hang", "healthy", "healthy"])
    args = ["burnin", "--mncore", MN1, MN2, "--duration", "2", "--concurrency", "1"]  # MN1, then MN2
    proc = subprocess.Popen([str(BIN / "fleetctl"), *args, "--grace", "300", "-o", "json"], env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    pgid = Path(lab["hosts"][MN2]["dir"]) / "root/var/tmp/fleetctl-burnin/pgid"
    deadline = time.monotonic() + 90
    while not (pgid.exists() and _query("SELECT count(*) FROM burnin_result") == [(4,)]):
        assert proc.poll() is None and time.monotonic() < deadline, workers.logs()
        time.sleep(0.1)
    [(job_args,)] = _query("SELECT args FROM job WHERE kind = 'burnin'")
    job_args = job_args if isinstance(job_args, dict) else json.loads(job_args)
    assert job_args["engine"] == "temporal"
    asyncio.run(_cancel(temporal.address, job_args["workflow"]))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "was cancelled: its run is interrupted" in err, (proc.returncode, out, err)
    # The run is closed only once MN2's activity has stopped (it could still record a verdict otherwise).
    assert asyncio.run(_pending(temporal.address, f"burnin:{MN2}")) == ("CANCELED", 0)
    assert _query("SELECT state FROM burnin_run") == [("interrupted",)]
    assert _query("SELECT state FROM job WHERE kind = 'burnin'") == [("interrupted",)]
    assert _query(f"SELECT name FROM server WHERE reservation IS NOT NULL AND name IN ('{MN1}', '{MN2}')") == []
    left = int(pgid.read_text())
    os.kill(-left, 0)  # the hung workload still runs on the host

    _faults(lab, MN2, ["healthy"] * 4)
    r = cli(*args, "--grace", "3", "-o", "json")
    assert r.code == 0, r.out + r.err + workers.logs()
    doc = _json(r)
    assert doc["resumed"] is True
    assert {(b["server"], b["resumed"]) for b in doc["boards"]} == {(MN1, True), (MN2, False)}
    assert "was stopped" in json.dumps(doc["notes"].get(MN2, []))
    with pytest.raises(ProcessLookupError):
        os.kill(-left, 0)
    assert (Path(lab["hosts"][MN1]["dir"]) / "calls.log").read_text().count("gpfn3-smi reset") == 4  # MN1 not run again
    assert _query("SELECT server, count(*) FROM burnin_result GROUP BY server ORDER BY server") == [(MN1, 4), (MN2, 4)]
    assert _query("SELECT state FROM burnin_run") == [("finished",)]


def test_on_temporal_a_burnin_plans_once(lab, cli, temporal, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The command plans (every refusal, exit 2) and hands the plan on: the workers' open and units do not plan again.

    Counted across the command and a worker of the site started in this process, at the plan's last step (the preflight
    of the servers' BMC credentials, which every ``plan()`` runs): once, not 1 + 1 + one per server.
    """
    import threading

    from fleetctl import preflight
    from fleetctl.scaleout.worker import run_worker

    calls: list[str] = []
    real = preflight.for_burnin

    def counted(*args: Any, **kw: Any) -> Any:
        calls.append(threading.current_thread().name)
        return real(*args, **kw)

    monkeypatch.setattr(preflight, "for_burnin", counted)
    stops: list[Any] = []  # the worker's stop (its SIGTERM handler), called from here; signals are the main thread's
    monkeypatch.setattr(asyncio.SelectorEventLoop, "add_signal_handler", lambda _loop, _sig, cb, *a: stops.append(cb))
    ready = threading.Event()
    loops: list[asyncio.AbstractEventLoop] = []
    failed: list[BaseException] = []

    def work() -> None:
        loop = asyncio.new_event_loop()
        loops.append(loop)
        try:
            loop.run_until_complete(run_worker("tyo1", temporal.address, "default", ready=lambda _said: ready.set()))
        except BaseException as e:  # noqa: BLE001 - said by the test
            failed.append(e)
        finally:
            loop.close()

    worker = threading.Thread(target=work, name="worker-tyo1", daemon=True)
    worker.start()
    assert ready.wait(240), failed
    try:
        _faults(lab, MN1, ["healthy"] * 4)
        _faults(lab, MN2, ["healthy"] * 4)
        r = cli("burnin", "--mncore", MN1, MN2, *FAST, "-o", "json")
        assert r.code == 0, r.out + r.err
        assert len(_json(r)["boards"]) == 8
    finally:
        for stop in stops:
            loops[0].call_soon_threadsafe(stop)
        worker.join(60)
    assert not failed, failed
    assert calls == ["MainThread"], calls  # the command's plan, and no other
