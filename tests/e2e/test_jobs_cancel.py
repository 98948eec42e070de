"""`fleetctl jobs cancel JOB`: a running provisioning stopped as Ctrl-C would stop it, on both engines.

Embedded engine: `fleetctl provision` runs in a subprocess against the lab; `jobs cancel` sends it SIGTERM (after
checking the pid is that job's fleetctl process), and the job ends ``interrupted``, its locks released, the process
gone. Refusals: a finished job, a job of another host, an unknown job, a pid reused by another program.

Temporal: a provision run through a real dev server and `fleetctl worker` processes is cancelled mid-way; the parent
and the servers' child workflows end cancelled, its ``close`` activity marks the job interrupted, no lock is left.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import scaleout_helpers as h  # (path set in conftest)
from sqlalchemy import text
from tests_helpers_bmc import lab_doc, lab_up, selected_engine, serve  # (path set in conftest)

RACK12 = [f"mn-tyo1-r12-{i:02d}" for i in range(1, 17)] + ["gpu-tyo1-r12-17", "gpu-tyo1-r12-18", "gpu-tyo1-r12-19"]
TOKEN = "abcdef.0123456789abcdef"
FAST = ["--poll", "0.3", "--stagger", "0.3", "--ansible-window", "2"]
FLEETCTL = Path(sys.executable).parent / "fleetctl"
NEEDS_LAB = [
    pytest.mark.skipif(shutil.which("ssh") is None, reason="the ssh client (openssh-client) is needed: Ansible reaches the lab hosts"),
    pytest.mark.skipif(not (Path(sys.executable).parent / "ansible-playbook").exists(), reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: /proc tells whether a pid is the job's process"),
]


def _marks(*marks: Any) -> Any:
    def apply(fn: Any) -> Any:
        for m in reversed(marks):
            fn = m(fn)
        return fn

    return apply


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    monkeypatch.setenv("FLEETCTL_K8S_TOKEN", TOKEN)
    # A slow firmware flash: the run is surely under way when it is cancelled.
    r = lab_up(cli, monkeypatch, *lab_db_args, "--power-transition", "0.3", "--firmware-time", "3", "--install-time", "2",
               "--os-boot-time", "0.5", *serve(RACK12))  # fmt: skip
    assert r.code == 0, r.err
    yield lab_doc(tmp_path / "lab")
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


def _q(sql: str, **params: Any) -> list[Any]:
    eng = selected_engine()
    try:
        with eng.connect() as c:
            return [tuple(r) for r in c.execute(text(sql), params)]
    finally:
        eng.dispose()


@contextmanager
def _reaped(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc`` (a fleetctl the test started in a session of its own), its group killed if the test leaves it running."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait(cond: Any, timeout: float, what: str, proc: subprocess.Popen[str] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the command ended before {what}: {proc.communicate()}")
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.1)


def _running_step(job: int) -> Any:
    rows = _q("SELECT name FROM job_step WHERE job_id = :j AND state = 'running' AND name <> 'provision.begin'", j=job)
    return rows[0][0] if rows else None


def _provision_job() -> int | None:
    rows = _q("SELECT max(id) FROM job WHERE kind = 'provision'")
    return rows[0][0] if rows and rows[0][0] is not None else None


@_marks(*NEEDS_LAB, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True))
def test_cancel_stops_an_embedded_provision_like_ctrl_c(lab, cli, tmp_path):  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    names = ["gpu-tyo1-r12-17", "mn-tyo1-r12-01"]
    # PYTHONFAULTHANDLER: should it not end, SIGABRT makes it print where each thread was.
    proc = subprocess.Popen([str(FLEETCTL), "provision", *names, *FAST, "--output", "json"],
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"}, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    with _reaped(proc):
        job = _wait(_provision_job, 60, "the job opened", proc)
        step = _wait(lambda: _running_step(job), 60, "a step running", proc)
        r = cli("jobs", "cancel", str(job), "--wait", "30", "--output", "json")
        if r.code != 0:
            if proc.poll() is None:
                proc.send_signal(signal.SIGABRT)
            raise AssertionError((r.err, r.out, step, proc.communicate(timeout=15)[1][-6000:]))
        doc = json.loads(r.out)
        assert doc["state"] == "interrupted" and doc["engine"] == "embedded", doc
        assert doc["pid"] == proc.pid and "SIGTERM" in doc["action"], doc
        assert doc["fleet"], doc  # which fleet it acted on
        assert "fleet:" in r.err  # said before acting (on stderr for JSON)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err  # Ctrl-C's exit (typer's): its `finally` blocks ran
    [(state, error)] = _q("SELECT state, error FROM job WHERE id = :j", j=job)
    failed = _q("SELECT name, last_error FROM server WHERE state = 'failed'")
    assert (state, error) == ("interrupted", "interrupted"), (state, error, step, failed)  # closed by the command itself
    assert _q("SELECT name FROM server WHERE reservation IS NOT NULL") == []
    # A finished job is refused, with its state; exit 2.
    r = cli("jobs", "cancel", str(job))
    assert r.code == 2 and f"job {job}" in r.err and "already interrupted" in r.err, r.err
    assert time.monotonic() - t0 < 60


def _ansible_procs(data: Path) -> list[str]:
    """ansible-playbook processes still running on this test's run folders (zombies aside)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if "ansible-playbook" in cmd and str(data) in cmd and stat[stat.rfind(")") + 2] != "Z":
            found.append(f"{d.name}: {cmd[:120]}")
    return found


@_marks(*NEEDS_LAB, pytest.mark.slow, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True))
def test_cancel_during_ansible_stops_the_playbook_too(lab, cli, tmp_path):  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    proc = subprocess.Popen([str(FLEETCTL), "provision", "mn-tyo1-r12-03", *FAST, "--output", "json"],
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"}, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    with _reaped(proc):
        job = _wait(_provision_job, 60, "the job opened", proc)
        _wait(lambda: _running_step(job) == "provision.ansible" and _ansible_procs(tmp_path), 120, "ansible-playbook running", proc)
        r = cli("jobs", "cancel", str(job), "--wait", "20", "--output", "json")
        if r.code != 0:
            if proc.poll() is None:
                proc.send_signal(signal.SIGABRT)
            raise AssertionError((r.err, r.out, proc.communicate(timeout=15)[1][-6000:]))
        assert json.loads(r.out)["state"] == "interrupted"
        proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert _q("SELECT state, error FROM job WHERE id = :j", j=job) == [("interrupted", "interrupted")]
    assert _q("SELECT name FROM server WHERE reservation IS NOT NULL") == []
    deadline = time.monotonic() + 10
    while _ansible_procs(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ansible_procs(tmp_path) == []
    assert time.monotonic() - t0 < 90


@pytest.fixture
def burnin_lab(example_loaded, cli, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """An MN-Core server installed by the lab, ready to be burned in (as tests/e2e/test_burnin.py has it)."""
    pytest.importorskip("asyncssh")
    from tests_helpers_bmc import install_hosts

    state = tmp_path / "lab"
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(state))
    r = lab_up(cli, monkeypatch, "--power-transition", "0.2", "--install-time", "1", "--os-boot-time", "0.2",
               "--server", "mn-tyo1-r12-01")  # fmt: skip
    assert r.code == 0, r.err
    doc = lab_doc(state)
    try:
        install_hosts(cli, doc, ["mn-tyo1-r12-01"])
        yield doc
    finally:
        cli("lab", "down")


@_marks(pytest.mark.slow, *NEEDS_LAB[2:], pytest.mark.parametrize("db_url", ["sqlite"], indirect=True))
def test_cancel_stops_an_embedded_burnin_and_closes_its_job_and_run(burnin_lab, cli):  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    proc = subprocess.Popen([str(FLEETCTL), "burnin", "--mncore", "mn-tyo1-r12-01", "--duration", "60", "--grace", "3", "-o", "json"],
                            env=dict(os.environ), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    with _reaped(proc):
        job = _wait(lambda: (_q("SELECT max(id) FROM job WHERE kind = 'burnin'") or [(None,)])[0][0], 60, "the job opened", proc)
        time.sleep(1.0)  # into its workload on the host
        r = cli("jobs", "cancel", str(job), "--wait", "30", "--output", "json")
        assert r.code == 0, (r.err, r.out)
        doc = json.loads(r.out)
        assert doc["state"] == "interrupted" and doc["pid"] == proc.pid, doc
        proc.communicate(timeout=30)
    assert proc.returncode == 130
    # Closed by the command itself (not found later with its process gone), the run left to resume.
    assert _q("SELECT state, error FROM job WHERE id = :j", j=job) == [("interrupted", "interrupted")]
    assert [r[0] for r in _q("SELECT state FROM burnin_run")] == ["interrupted"]
    assert _q("SELECT name FROM server WHERE reservation IS NOT NULL") == []
    assert time.monotonic() - t0 < 60


@pytest.fixture
def fw_lab(example_loaded, cli, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Lab BMCs whose flashes take a while (a GPU server has 8 components to flash)."""
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    r = lab_up(cli, monkeypatch, "--power-transition", "0.2", "--firmware-time", "2", *serve(["gpu-tyo1-r12-19"]))
    assert r.code == 0, r.err
    yield lab_doc(tmp_path / "lab")
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


@_marks(pytest.mark.slow, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True))
def test_cancel_stops_an_embedded_firmware_update(fw_lab, cli):  # type: ignore[no-untyped-def]
    from fleetctl.workflows.firmware_campaign import KIND

    t0 = time.monotonic()
    proc = subprocess.Popen([str(FLEETCTL), "firmware", "update", "gpu-tyo1-r12-19", "--image-base", "http://127.0.0.1:9/fw",
                             "--allow-downgrade", "--poll", "0.2", "-o", "json"], env=dict(os.environ), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    with _reaped(proc):
        job = _wait(lambda: (_q("SELECT max(id) FROM job WHERE kind = :k", k=KIND) or [(None,)])[0][0], 60, "the job opened", proc)
        _wait(lambda: _q("SELECT 1 FROM job_step WHERE job_id = :j AND state = 'running'", j=job), 60, "a flash running", proc)
        r = cli("jobs", "cancel", str(job), "--wait", "30", "--output", "json")
        assert r.code == 0, (r.err, r.out)
        assert json.loads(r.out)["state"] == "interrupted"
        proc.communicate(timeout=30)
    assert proc.returncode == 130
    [(state, error)] = _q("SELECT state, error FROM job WHERE id = :j", j=job)
    assert state == "interrupted" and not error.startswith("interrupted: its process"), error  # closed by the command
    assert _q("SELECT id, kind, error FROM job WHERE state = 'running'") == []  # its wave's job too
    assert _q("SELECT name FROM server WHERE reservation IS NOT NULL") == []
    assert time.monotonic() - t0 < 60


@_marks(pytest.mark.slow, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True))
def test_sigterm_interrupts_a_sweep_like_ctrl_c(fw_lab, cli):  # type: ignore[no-untyped-def]
    """A sweep is no job (its runs are its own journal), but SIGTERM stops it as Ctrl-C does: its run `interrupted`."""
    assert cli("lab", "fault", "gpu-tyo1-r12-19", "--set", "hang=true").code == 0  # the sweep waits on it
    proc = subprocess.Popen([str(FLEETCTL), "sweep", "gpu-tyo1-r12-19", "-o", "json"], env=dict(os.environ), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    with _reaped(proc):
        _wait(lambda: _q("SELECT id FROM sweep_run WHERE state = 'running'"), 60, "the sweep run opened", proc)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert [r[0] for r in _q("SELECT state FROM sweep_run")] == ["interrupted"]


def _fake_job(owner: str) -> int:
    """A running provision job whose process is ``owner`` (USER:HOST:PID)."""
    from fleetctl.store import get_engine
    from fleetctl.workflows.journal import Journal

    j = Journal.open(get_engine(), kind="provision", target="rack-12", args={}, actor="tester@ci", prefix="provision.")
    eng = selected_engine()
    with eng.begin() as c:
        c.execute(text("UPDATE job SET args = :a WHERE id = :j"), {"a": json.dumps({"owner": owner}), "j": j.job_id})
    eng.dispose()
    return j.job_id


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_cancel_refuses_what_it_cannot_stop_from_here(example_loaded, cli):  # type: ignore[no-untyped-def]
    import socket

    # Unknown job.
    r = cli("jobs", "cancel", "4242")
    assert r.code == 2 and "no job 4242" in r.err, r.err
    # A job of another host: say which, and that it must be cancelled there.
    other = _fake_job("op@ci:build-7:4321")
    r = cli("jobs", "cancel", str(other))
    assert r.code == 2, r.err
    line = r.err.strip().splitlines()[-1]
    assert "host build-7" in line and "cancel it there" in line, line
    assert _q("SELECT state FROM job WHERE id = :j", j=other) == [("running",)]
    # This host, but the pid is now another program's (pid reuse): never signalled.
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        reused = _fake_job(f"op@ci:{socket.gethostname()}:{sleeper.pid}")
        r = cli("jobs", "cancel", str(reused), "--output", "json")
        assert r.code == 2 and "not a fleetctl process" in r.err and "not signalled" in r.err, r.err
        assert sleeper.poll() is None  # still alive: nothing was sent
    finally:
        sleeper.kill()
        sleeper.wait()
    # Its process gone now: the job reads interrupted, and cancelling it says so.
    r = cli("jobs", "cancel", str(reused))
    assert r.code == 2 and "already interrupted" in r.err, r.err


# --- Temporal ---------------------------------------------------------------------------------------------------

NO_SDK = pytest.mark.skipif(importlib.util.find_spec("temporalio") is None,
                            reason="the scale-out engine's SDK (pip install 'fleetctl[temporal]')")  # fmt: skip
TEMPORAL_MARKS = [NO_SDK, *h.TEMPORAL_MARKS, *h.ANSIBLE_MARKS]
temporal, workers = h.temporal, h.workers  # the fixtures


@pytest.fixture
def site_lab(db_url, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    """The scale-out tests' two-site lab, its firmware slow enough to cancel the run in the middle of it."""
    r = cli("inventory", "import", str(h.two_sites(tmp_path / "sites.yaml")))
    assert r.code == 0, r.err
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    monkeypatch.setenv("FLEETCTL_K8S_TOKEN", TOKEN)
    r = lab_up(cli, monkeypatch, *lab_db_args, "--power-transition", "0.3", "--firmware-time", "1.5", "--install-time", "3",
               "--os-boot-time", "0.5", *serve(h.TYO + h.OSA))  # fmt: skip
    assert r.code == 0, r.err
    yield lab_doc(tmp_path / "lab")
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


async def _dump(address: str) -> str:
    """Every workflow's events, shortened: what a failure shows."""
    from temporalio.client import Client

    client = await Client.connect(address)
    out = []
    async for wf in client.list_workflows():
        out.append(f"== {wf.id} {wf.status}")
        hist = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        for ev in hist.to_json_dict()["events"]:
            attrs = {k: v for k, v in ev.items() if k.endswith("Attributes")}
            out.append(f"  {ev['eventType']} {json.dumps(attrs)[:300]}")
    return "\n".join(out)


async def _statuses(address: str) -> dict[str, str]:
    from temporalio.client import Client

    client = await Client.connect(address)
    return {wf.id: wf.status.name if wf.status else "?" async for wf in client.list_workflows()}


async def _units_ended(address: str, workflow_id: str) -> dict[str, str]:
    """{unit key: how its last activity attempt ended (the event's type)} in a run's parent workflow."""
    import base64

    from temporalio.client import Client

    client = await Client.connect(address)
    events = (await client.get_workflow_handle(workflow_id).fetch_history()).to_json_dict()["events"]
    keys: dict[str, str] = {}
    ended: dict[str, str] = {}
    for ev in events:
        attrs = ev.get("activityTaskScheduledEventAttributes")
        if attrs and attrs["activityType"]["name"] == "fleetctl.run.unit":
            keys[ev["eventId"]] = json.loads(base64.b64decode(attrs["input"]["payloads"][0]["data"]))["unit"]["key"]
        for kind in ("Completed", "Failed", "TimedOut", "Canceled"):
            attrs = ev.get(f"activityTask{kind}EventAttributes")
            if attrs and attrs["scheduledEventId"] in keys:
                ended[keys[attrs["scheduledEventId"]]] = f"ActivityTask{kind}"
    return ended


@_marks(*TEMPORAL_MARKS)
def test_cancel_stops_a_temporal_provision_run(site_lab, cli, temporal, workers, tmp_path):  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    workers.start("tyo1-a", "tyo1")
    workers.start("osa1-a", "osa1")
    workers.wait_ready()
    names = ["gpu-tyo1-r12-17", "gpu-osa1-r12-17"]
    proc = subprocess.Popen([str(h.BIN / "fleetctl"), "provision", *names, *FAST, "--output", "json"], env=dict(os.environ),
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    with _reaped(proc):
        job = _wait(_provision_job, 60, "the job opened", proc)
        _wait(lambda: _running_step(job), 60, "a step running", proc)
        [(args,)] = _q("SELECT args FROM job WHERE id = :j", j=job)
        args = args if isinstance(args, dict) else json.loads(args)
        assert args["engine"] == "temporal", args
        # The servers are locked by the run's parent workflow, which Temporal says runs: never taken for gone.
        # (Asked through the engine's registered check, as a command's process has it from the CLI's wiring.)
        import fleetctl.scaleout.liveness  # noqa: F401
        from fleetctl.lifecycle.locks import Holder

        held = {r for (r,) in _q("SELECT reservation FROM server WHERE reservation IS NOT NULL")}
        assert len(held) == 1 and next(iter(held)).endswith(f":temporal:{args['workflow']}"), held
        assert Holder.parse(next(iter(held))).alive() is True
        # `jobs show` gives the workflow and its live status.
        r = cli("jobs", "show", str(job), "--output", "json")
        assert r.code == 0, r.err
        shown = json.loads(r.out)
        assert shown["workflow"] == args["workflow"] and shown["workflow_status"] == "RUNNING", shown
        # The parent's status query: a row per server, the one with a step running said running (the units of the generic
        # workflow; reading the old per-server rows, this said "no server started yet" with no row).
        assert {r["server"] for r in shown["live_servers"]} == set(names), shown
        assert "running" in shown["live"] and any(r["stage"] == "running" for r in shown["live_servers"]), shown
        r = cli("jobs", "cancel", str(job), "--wait", "40", "--output", "json")
        assert r.code == 0, (r.err, r.out, workers.logs(), asyncio.run(_dump(temporal.address)))
        doc = json.loads(r.out)
        assert doc["engine"] == "temporal" and doc["workflow"] == args["workflow"] and doc["state"] == "interrupted", doc
        assert doc["workflow_status_after"] == "CANCELED", doc  # it waited for the parent to close, not only the job
        # The command that followed the run ends as well, as an interrupted one in process (exit 130).
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and f"the provision workflow {args['workflow']} was cancelled: its run is interrupted" in err, err
    [(state, error)] = _q("SELECT state, error FROM job WHERE id = :j", j=job)
    assert (state, error) == ("interrupted", "interrupted"), (state, error)
    assert _q("SELECT name FROM server WHERE reservation IS NOT NULL") == []
    # No step is left acting: each server's steps are finished or left `running` for the next run to resume, and
    # nothing is written to the journal after the job closed.
    time.sleep(3)
    [(last,)] = _q("SELECT max(coalesce(finished_at, started_at)) FROM job_step WHERE job_id = :j", j=job)
    [(closed,)] = _q("SELECT finished_at FROM job WHERE id = :j", j=job)
    assert last <= closed, (last, closed)
    st = asyncio.run(_statuses(temporal.address))
    assert st[args["workflow"]] == "CANCELED", st
    # Each server's unit (an activity of the run's parent, on its site's queue) ended cancelled: stopped where it was.
    assert asyncio.run(_units_ended(temporal.address, args["workflow"])) == dict.fromkeys(names, "ActivityTaskCanceled")
    # A finished (interrupted) Temporal job is refused like any other.
    r = cli("jobs", "cancel", str(job))
    assert r.code == 2 and "already interrupted" in r.err, r.err
    # And `jobs show` says the workflow's final status.
    shown = json.loads(cli("jobs", "show", str(job), "--output", "json").out)
    assert shown["workflow_status"] == "CANCELED", shown
    # A job still `running` whose workflow is closed (terminated, say) is not waited for: nothing would end it.
    from fleetctl.store import get_engine
    from fleetctl.workflows.journal import Journal

    orphan = Journal.open(get_engine(), kind="provision", target="x", args={"engine": "temporal", "workflow": args["workflow"]},
                          actor="tester@ci", prefix="provision.").job_id  # fmt: skip
    t1 = time.monotonic()
    r = cli("jobs", "cancel", str(orphan), "--output", "json")
    assert r.code == 1 and time.monotonic() - t1 < 15, (r.out, r.err)
    assert "already canceled" in json.loads(r.out)["action"] and json.loads(r.out)["state"] == "running", r.out
    # What a terminated run leaves (its own close never ran): a job `running` and a lock, both its workflow's,
    # and that workflow is closed: `jobs list` marks the job interrupted, and the lock is recovered without --force.
    from fleetctl.lifecycle.locks import try_lock
    from fleetctl.scaleout import client as temporal_client
    from fleetctl.scaleout.activities import _own

    temporal_client._RUNNING.clear()  # (this process asked while the workflow ran, a few seconds ago)
    owner = f"tester@ci:temporal:{args['workflow']}"
    left = Journal.open(get_engine(), kind="provision", target="y", args={"engine": "temporal", "workflow": args["workflow"]},
                        actor="tester@ci", prefix="provision.").job_id  # fmt: skip
    _own(get_engine(), left, owner)
    assert try_lock(get_engine(), [names[0]], purpose="provision", owner=owner)[0] == [names[0]]
    listed = {j["id"]: j for j in json.loads(cli("jobs", "list", "--output", "json").out)}
    assert listed[left]["state"] == "interrupted", listed[left]
    assert listed[left]["error"] == f"interrupted: its workflow {args['workflow']} is closed", listed[left]
    r = cli("server", "unlock", names[0])
    assert r.code == 0 and f"lock of {owner} broken" in r.out, (r.out, r.err)
    assert time.monotonic() - t0 < 120


@_marks(*TEMPORAL_MARKS)
def test_cancel_on_temporal_during_ansible_stops_the_playbook_on_the_worker(site_lab, cli, temporal, workers, tmp_path):  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    workers.start("tyo1-a", "tyo1")
    workers.wait_ready()
    proc = subprocess.Popen([str(h.BIN / "fleetctl"), "provision", "mn-tyo1-r12-01", *FAST, "--output", "json"],
                            env=dict(os.environ), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    with _reaped(proc):
        job = _wait(_provision_job, 60, "the job opened", proc)
        _wait(lambda: _running_step(job) == "provision.ansible" and _ansible_procs(tmp_path), 120, "ansible-playbook running", proc)
        r = cli("jobs", "cancel", str(job), "--wait", "40", "--output", "json")
        assert r.code == 0, (r.err, r.out, workers.logs())
        assert json.loads(r.out)["state"] == "interrupted"
        proc.communicate(timeout=30)
    assert _q("SELECT state, error FROM job WHERE id = :j", j=job) == [("interrupted", "interrupted")]
    assert _q("SELECT name FROM server WHERE reservation IS NOT NULL") == []
    # The step's row is left running (the resume point), and the playbook is stopped on the worker, which goes on.
    assert _q("SELECT js.state FROM job_step js WHERE js.job_id = :j AND js.name = 'provision.ansible'", j=job) == [("running",)]
    deadline = time.monotonic() + 3  # stopped, not finished: a playbook run of the lab takes longer than this
    while _ansible_procs(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ansible_procs(tmp_path) == [], workers.logs()
    assert workers.procs["tyo1-a"].poll() is None
    assert time.monotonic() - t0 < 120


@NO_SDK
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_jobs_show_says_plainly_when_temporal_cannot_be_reached(example_loaded, cli, monkeypatch):  # type: ignore[no-untyped-def]
    from fleetctl.store import get_engine
    from fleetctl.workflows.journal import Journal

    j = Journal.open(get_engine(), kind="provision", target="x", args={"engine": "temporal", "workflow": "fleetctl-provision-x"},
                     actor="tester@ci", prefix="provision.")  # fmt: skip
    port = h._free_port()
    monkeypatch.setenv("FLEETCTL_TEMPORAL", f"127.0.0.1:{port}")
    r = cli("jobs", "show", str(j.job_id), "--output", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["workflow"] == "fleetctl-provision-x"
    assert doc["workflow_status"].startswith(f"unknown: cannot reach Temporal at 127.0.0.1:{port}"), doc
    r = cli("jobs", "cancel", str(j.job_id))
    assert r.code != 0 and f"cannot reach Temporal at 127.0.0.1:{port}" in r.err, r.err
    monkeypatch.delenv("FLEETCTL_TEMPORAL")
    r = cli("jobs", "cancel", str(j.job_id))
    assert r.code == 2 and "set FLEETCTL_TEMPORAL" in r.err, r.err
