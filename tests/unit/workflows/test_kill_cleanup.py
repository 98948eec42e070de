"""What a killed fleetctl leaves behind (issue #13): its Ansible dies with it, and the next run cleans the rest."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleetctl.workflows import ansible_run as ar

linux = pytest.mark.skipif(not sys.platform.startswith("linux") or not Path("/proc").is_dir(), reason="Linux /proc and prctl")


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat[stat.rfind(")") + 2] == "Z":  # a zombie: dead, waiting for its parent to read it
            return True
        time.sleep(0.05)
    return False


def _sleeper(*tag: str) -> subprocess.Popen[bytes]:
    """A process in a group of its own whose command line says ``tag`` (what /proc shows of it)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *tag], start_new_session=True)


@linux
def test_a_dead_runs_ansible_and_token_folder_are_removed_and_a_live_runs_are_left(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    dead, host = _dead_pid(), socket.gethostname()
    ansible = _sleeper("ansible-playbook", "site.yml")
    bystander = _sleeper("not-ours")  # same group test below: a process that is not Ansible survives
    token = tmp_path / f"fleetctl-{dead}-abc"
    token.mkdir()
    (token / "join-token").write_text("secret")
    (run_dir / f"ansible-{dead}-1.json").write_text(json.dumps(
        {"owner": dead, "host": host, "child": 0, "pgids": [ansible.pid, bystander.pid], "token_dir": str(token)}))  # fmt: skip
    live_token = tmp_path / f"fleetctl-{os.getpid()}-def"
    live_token.mkdir()
    live = run_dir / f"ansible-{os.getpid()}-2.json"
    live.write_text(json.dumps({"owner": os.getpid(), "host": host, "child": 0, "pgids": [], "token_dir": str(live_token)}))
    other_host = run_dir / f"ansible-{dead}-3.json"
    other_host.write_text(json.dumps({"owner": dead, "host": "elsewhere", "child": 0, "pgids": [], "token_dir": None}))
    try:
        done = ar.reap_leftovers(run_dir)
        assert _gone(ansible.pid), "the dead run's ansible-playbook still runs"
        assert bystander.poll() is None, "a process that is not Ansible was killed"
        assert not token.exists() and not (run_dir / f"ansible-{dead}-1.json").exists()
        assert live.exists() and live_token.exists() and other_host.exists()
        assert any("stopped 1 Ansible" in d for d in done), done
    finally:
        for p in (ansible, bystander):
            p.kill()
            p.wait()


@linux
def test_an_empty_record_of_a_dead_run_is_removed_and_its_child_stopped(tmp_path: Path) -> None:
    """A kill between creating a record and writing it left it empty (seen in the 20-kill test, after the
    record was written in place): its name still says whose it was. Records are now written whole."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    dead = _dead_pid()
    child = _sleeper("-m", "fleetctl.workflows.ansible_run")
    empty = run_dir / f"ansible-{dead}-{child.pid}.json"
    empty.write_text("")
    live_empty = run_dir / f"ansible-{os.getpid()}-1.json"  # a live run's: never touched
    live_empty.write_text("")
    cut = run_dir / f".ansible-{dead}-{child.pid}.json.tmp"  # a write of the record cut short
    cut.write_text("{")
    try:
        ar.reap_leftovers(run_dir)
        assert not empty.exists() and not cut.exists() and live_empty.exists()
        assert _gone(child.pid), "the dead run's ansible_run child still runs"
    finally:
        child.kill()
        child.wait()
    ar._write_record(run_dir / "ansible-1-2.json", {"owner": 1})
    assert json.loads((run_dir / "ansible-1-2.json").read_text()) == {"owner": 1}
    assert [p.name for p in run_dir.iterdir() if p.name.endswith(".tmp")] == []


@linux
def test_token_folders_of_dead_fleetctl_processes_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ar, "_token_parent", lambda: str(tmp_path))
    dead = _dead_pid()
    gone, kept, other = tmp_path / f"fleetctl-{dead}-x1", tmp_path / f"fleetctl-{os.getpid()}-x2", tmp_path / "fleetctl-abc"
    for d in (gone, kept, other):
        d.mkdir()
    ar.reap_leftovers(tmp_path / "no-records")
    assert not gone.exists() and kept.exists() and other.exists()


@linux
def test_a_child_started_with_die_with_parent_dies_when_its_parent_is_killed(tmp_path: Path) -> None:
    # A middle process starts a grandchild with die_with_parent(), prints its pid, and is SIGKILLed.
    code = (
        "import subprocess, sys, time\n"
        "from fleetctl.workflows.ansible_run import die_with_parent\n"
        "import signal\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], preexec_fn=die_with_parent(signal.SIGKILL))\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    middle = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert middle.stdout is not None
    grandchild = int(middle.stdout.readline())
    middle.send_signal(signal.SIGKILL)
    middle.wait()
    assert _gone(grandchild), "the grandchild outlived its parent"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_running_job_whose_process_is_gone_is_shown_interrupted_and_one_of_another_host_stays_running(  # type: ignore[no-untyped-def]
    example_loaded, cli
):
    from sqlalchemy import update

    from fleetctl.store import get_engine, immediate
    from fleetctl.store import tables as T
    from fleetctl.workflows.journal import OWNER_ARG, Journal

    engine = get_engine()
    killed = Journal.open(engine, kind="provision", target="rack-12", args={"servers": 2}, actor="tester@ci")
    remote = Journal.open(engine, kind="burnin", target="rack-12", args={}, actor="tester@ci")
    alive = Journal.open(engine, kind="provision", target="rack-13", args={}, actor="tester@ci")
    host, dead = socket.gethostname(), _dead_pid()
    with immediate(engine) as c:
        c.execute(update(T.job).where(T.job.c.id == killed.job_id).values(args={"servers": 2, OWNER_ARG: f"tester@ci:{host}:{dead}"}))
        c.execute(update(T.job).where(T.job.c.id == remote.job_id).values(args={OWNER_ARG: "op:other-host:4242"}))
    rows = {j["id"]: j for j in json.loads(cli("jobs", "list", "--output", "json").out)}
    assert rows[killed.job_id]["state"] == "interrupted" and "is gone" in rows[killed.job_id]["error"]
    assert rows[remote.job_id]["state"] == "running" and rows[remote.job_id]["host"] == "other-host"
    assert rows[alive.job_id]["state"] == "running" and rows[alive.job_id]["host"] == host
    shown = json.loads(cli("jobs", "show", str(killed.job_id), "--output", "json").out)
    assert shown["state"] == "interrupted" and shown["finished_at"] and shown["args"]["servers"] == 2


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_resumed_step_keeps_what_the_interrupted_one_noted_until_it_notes_anew(example_loaded):  # type: ignore[no-untyped-def]
    # Killed after the boot noted its power-on, then killed again while the resumed boot asked the BMC
    # whether the boot happened: the third run must still know a power-on was requested (or it would cycle).
    from fleetctl.store import get_engine
    from fleetctl.workflows.journal import Journal

    engine = get_engine()
    sid = _server_id(engine, "mn-tyo1-r12-01")
    first = Journal.open(engine, kind="provision", target="t", args={}, actor="tester@ci", prefix="provision.")
    first.begin_pass(sid, {})
    first.note(first.start_step(sid, "boot"), {"power_action": "on", "boot": "pxe"})
    second = Journal.open(engine, kind="provision", target="t", args={}, actor="tester@ci", prefix="provision.")
    noted = second.passes([sid])[sid].interrupted()["boot"]
    second.start_step(sid, "boot", noted=noted)  # killed before it notes anything
    third = Journal.open(engine, kind="provision", target="t", args={}, actor="tester@ci", prefix="provision.")
    assert third.passes([sid])[sid].interrupted() == {"boot": {"power_action": "on", "boot": "pxe"}}


def _server_id(engine, name):  # type: ignore[no-untyped-def]
    from sqlalchemy import select

    from fleetctl.store import tables as T

    with engine.connect() as c:
        return c.execute(select(T.server.c.id).where(T.server.c.name == name)).scalar_one()
