"""Several operators, several processes (issue #13): eight `fleetctl` processes at once on overlapping servers.

Three `provision`, three `sweep` and two `firmware update` runs are started
together against one lab fleet, on SQLite and on PostgreSQL. Each server is
worked by one process at a time (the lock), every other one is told who holds
it, sweeps take no lock (they neither wait nor make anybody wait), the
journal is complete, and no process shows "database is locked", a traceback
or an internal error. What happened is read from the processes' own output,
the journal (job, job_step, sweep_run) and the lab's counters.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests_helpers_bmc import counters, lab_doc, lab_up, selected_engine, serve  # (path set in conftest)

MN = [f"mn-tyo1-r12-{i:02d}" for i in range(1, 5)]
GPU = ["gpu-tyo1-r12-17", "gpu-tyo1-r12-18"]
FAST = ["--poll", "0.3", "--stagger", "0.3", "--ansible-window", "2"]
FLEETCTL = Path(sys.executable).parent / "fleetctl"
FW_BASE = "http://127.0.0.1:9/fw"  # SimpleUpdate images are never fetched by the lab

# Who works what: every provision overlaps another provision, both firmware runs overlap each other and a
# provision, every sweep overlaps all of them.
PROVISIONS = [[MN[0], MN[1]], [MN[1], GPU[0]], [MN[0], GPU[1]]]
FIRMWARE = [[GPU[0], GPU[1]], [GPU[1], MN[3]]]
SWEEPS = [[MN[0], MN[1], GPU[0]], [*MN, *GPU], [MN[2], MN[3], GPU[1]]]

# "locked by USER:HOST:PID since WHEN for WHAT"
HOLDER = re.compile(r"locked by [^\s:]+:[^\s:]+:\d+ since \d{4}-\d\d-\d\dT\S+ for (provision|firmware update)\b")
NEVER = ("database is locked", "Traceback", "internal error", "could not serialize", "deadlock detected")

pytestmark = pytest.mark.slow
needs_ansible = [
    pytest.mark.skipif(shutil.which("ssh") is None, reason="the ssh client (openssh-client) is needed: "
                       "Ansible reaches the lab hosts over SSH"),
    pytest.mark.skipif(not (Path(sys.executable).parent / "ansible-playbook").exists(), reason="ansible-playbook (ansible-core) is not "
                       "installed beside this Python"),
]  # fmt: skip


@pytest.fixture
def lab(example_loaded, cli, tmp_path, monkeypatch, lab_db_args):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    monkeypatch.setenv("FLEETCTL_K8S_TOKEN", "abcdef.0123456789abcdef")
    r = lab_up(cli, monkeypatch, *lab_db_args, "--power-transition", "0.3", "--firmware-time", "0.3", "--install-time", "2",
               "--os-boot-time", "0.5", *serve([*MN, *GPU]))  # fmt: skip
    assert r.code == 0, r.err
    yield lab_doc(tmp_path / "lab")
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([str(FLEETCTL), *args, "--output", "json"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip


def _journal() -> tuple[list[Any], list[Any], list[Any]]:
    """(jobs, steps with their server's name, sweep runs) of the lab's fleet."""
    from sqlalchemy import select

    from fleetctl.store import tables as T

    eng = selected_engine()
    try:
        with eng.connect() as c:
            jobs = c.execute(select(T.job.c.id, T.job.c.kind, T.job.c.state, T.job.c.error, T.job.c.args)).all()
            steps = c.execute(
                select(T.job_step.c.job_id, T.server.c.name, T.job_step.c.name.label("step"), T.job_step.c.state,
                       T.job_step.c.started_at, T.job_step.c.finished_at)
                .join(T.server, T.server.c.id == T.job_step.c.server_id).order_by(T.job_step.c.id)
            ).all()  # fmt: skip
            sweeps = c.execute(select(T.sweep_run.c.id, T.sweep_run.c.state)).all()
    finally:
        eng.dispose()
    return jobs, steps, sweeps


@pytest.mark.heavy  # minutes long: `make test-heavy` runs the heavy ones alone
@needs_ansible[0]
@needs_ansible[1]
@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_eight_processes_on_overlapping_servers_work_each_server_once(lab, cli, db_url):  # type: ignore[no-untyped-def]
    env = dict(os.environ)
    runs: list[tuple[str, list[str], list[str]]] = []
    runs += [("provision", names, ["provision", *names, *FAST]) for names in PROVISIONS]
    runs += [("firmware", names, ["firmware", "update", *names, "--allow-downgrade", "--image-base", FW_BASE, "--poll", "0.3"])
             for names in FIRMWARE]  # fmt: skip
    runs += [("sweep", names, ["sweep", "run", *names]) for names in SWEEPS]
    t0 = time.monotonic()
    procs = [_spawn(args, env) for _, _, args in runs]
    ended: dict[int, float] = {}
    outs: dict[int, tuple[str, str]] = {}
    # Read every pipe as the processes run (a full pipe would block a writer), and note when each ended.

    def drain(i: int, p: subprocess.Popen[str]) -> None:
        try:
            outs[i] = p.communicate(timeout=900)  # a loaded 2-core machine has taken 375 s for one provision
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            outs[i] = (out, err + "\n(test: killed after 900 s)")
        ended[i] = time.monotonic() - t0

    threads = [threading.Thread(target=drain, args=(i, p)) for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - t0
    each = ", ".join(f"{kind} {' '.join(n.split('-')[-1] for n in names)}: {ended[i]:.1f} s" for i, (kind, names, _) in enumerate(runs))
    print(f"\n{db_url.split(':')[0]}: 8 processes in {took:.1f} s; each ended at {each}")

    worked: dict[str, list[str]] = {}  # server -> the kinds of run that worked it
    holders: list[str] = []
    for i, (kind, names, _) in enumerate(runs):
        out, err = outs[i]
        code = procs[i].returncode
        for word in NEVER:
            assert word not in out and word not in err, (kind, names, word, err[-2000:])
        assert "--force" not in out + err, (kind, names, err)
        assert out.strip(), (kind, names, code, err[-2000:])
        doc = json.loads(out)
        if kind == "sweep":
            # A sweep's exit code is its worst new finding (0, 1, 4, 5): what the BMCs said, never a lock.
            assert code in (0, 1, 4, 5), (names, code, err)
            assert doc["servers"] == len(names), doc
            continue
        if kind == "provision":
            rows = {r["server"]: r for r in doc["servers"]}
            for n in names:
                r = rows[n]
                if r["result"] == "locked":
                    assert HOLDER.match(r["error"]), r
                    holders.append(r["error"])
                else:
                    assert r["result"] == "ready", r
                    worked.setdefault(n, []).append("provision")
        else:
            for r in doc:
                if r["result"] == "not attempted":
                    assert HOLDER.match(r["message"]), r
                    holders.append(r["message"])
                else:
                    assert r["result"] in ("updated", "at baseline"), r
                    worked.setdefault(r["server"], []).append("firmware" if r["result"] == "updated" else "firmware check")
        assert code in (0, 1), (kind, names, code, err[-2000:])
        assert code == 0 or any(HOLDER.search(x) for x in holders), (kind, names, code, out, err)
    # The sweeps were not held up by the locks: each ended before the last provision did.
    last_provision = max(ended[i] for i, (kind, _, _) in enumerate(runs) if kind == "provision")
    assert all(ended[i] < last_provision for i, (kind, _, _) in enumerate(runs) if kind == "sweep"), ended
    # Every server some provision wanted was worked by exactly one provision (others were told who held it).
    for n in {n for names in PROVISIONS for n in names}:
        assert worked.get(n, []).count("provision") <= 1, (n, worked)
    assert holders, "no process met another's lock: the runs did not overlap"
    print("refused:", *sorted(set(holders)), sep="\n  ")

    # The journal: nothing left running; one process's steps for a server never overlap another process's
    # (a firmware run journals in two jobs: the campaign's flashes and each wave's one row per server).
    from fleetctl.workflows.journal import job_owner

    jobs, steps, sweeps = _journal()
    owner = {j.id: str(job_owner(j.args)) for j in jobs}
    assert all(j.state not in ("running", "interrupted") for j in jobs), jobs
    assert all(s.state != "running" for s in steps), [s for s in steps if s.state == "running"]
    assert len(sweeps) == len(SWEEPS) and all(s.state != "running" for s in sweeps), sweeps
    spans: dict[str, dict[str, list[Any]]] = {}
    for s in steps:
        spans.setdefault(s.name, {}).setdefault(owner[s.job_id], []).append(s)
    for server, by_owner in spans.items():
        windows = sorted((min(s.started_at for s in ss), max(s.finished_at or s.started_at for s in ss), who)
                         for who, ss in by_owner.items())  # fmt: skip
        for (_, end, a), (start, _, b) in itertools.pairwise(windows):
            assert end <= start, f"{server}: {a} and {b} worked it at the same time ({windows}; {by_owner})"
    # Every server a run worked has its steps in that run's job.
    kinds = {j.id: j.kind for j in jobs}
    for n, by in worked.items():
        done = {s.step for s in steps if s.name == n and s.state == "succeeded"}
        if "provision" in by:
            assert {"provision.begin", "provision.firmware", "provision.boot", "provision.ansible", "provision.accel"} <= done, (n, done)
            assert any(kinds[s.job_id] == "provision" for ss in spans[n].values() for s in ss), (n, spans[n])
        if "firmware" in by:
            assert any(s.startswith("firmware.flash.") for s in done), (n, done)
    # Every provisioned server is ready; each was powered on and installed once, whoever worked it.
    for n, by in worked.items():
        if "provision" in by:
            show = json.loads(cli("server", "show", n, "--output", "json").out)
            assert show["state"] == "ready" and show["locked_by"] is None, show
            c = counters(lab, n)
            assert c["power_on"] + c["power_cycle"] == 1, (n, c)
    # No lock is left behind.
    for n in [*MN, *GPU]:
        assert json.loads(cli("server", "show", n, "--output", "json").out)["locked_by"] is None, n
    # Each GPU vbios was flashed once at most (by a firmware run or by a provision, never both).
    for n in GPU:
        c = counters(lab, n)
        assert c["firmware_failures"] == 0 and set(c["firmware_by_component"].values()) <= {1}, (n, c["firmware_by_component"])


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_sweeps_of_the_same_servers_at_once_each_store_their_findings(example_loaded):  # type: ignore[no-untyped-def]
    # Four sweeps write the same servers' findings and cursors at the same instant (a barrier before each
    # flush), three times over. On PostgreSQL the replace of a target's open findings (read, delete, insert)
    # raced and one sweep failed on a duplicate key of finding_state; now every sweep finishes.
    import asyncio

    from sqlalchemy import func, select

    from fleetctl.store import get_engine
    from fleetctl.store import tables as T
    from fleetctl.sweep.engine import TargetVerdict, run
    from fleetctl.sweep.model import Finding, Status

    sweeps, rounds = 4, 3
    barrier = threading.Barrier(sweeps)
    errors: list[str] = []

    def one(i: int) -> None:
        async def collect(rec: Any) -> None:
            for n in MN[:2]:
                found = Finding("server", n, "psu", Status.WARNING, "PSU 1 lost its input", "psu1", {})
                rec.add(TargetVerdict("server", n, Status.WARNING, [found]), {"sweep": i})
            await asyncio.to_thread(barrier.wait, 30)

        for _ in range(rounds):
            try:
                run([], [], selector=" ".join(MN[:2]), collect=collect)
            except Exception as e:  # noqa: BLE001 - every sweep's failure is collected and shown
                errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(sweeps)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    with get_engine().connect() as c:
        states = c.execute(select(T.sweep_run.c.state, func.count()).group_by(T.sweep_run.c.state)).all()
        open_now = c.execute(select(T.finding_state.c.target, T.finding_state.c.check, T.finding_state.c.subject)).all()
    assert dict(states) == {"finished": sweeps * rounds}, states
    assert sorted(open_now) == [(n, "psu", "psu1") for n in MN[:2]], open_now
