"""`fleetctl jobs`: the journal of what fleetctl did, run by run, server by server.

Reading the jobs first marks ``interrupted`` the ``running`` jobs whose
process on this host is gone (killed); a running job of another host stays
``running`` and is shown with its host.

``jobs cancel`` stops a running job the way Ctrl-C would: the embedded
engine's process gets SIGTERM (which every command treats as Ctrl-C: the
journal closed ``interrupted``, the locks released), a Temporal run's parent
workflow is cancelled (its children with it; its ``close`` activity does the
same closing).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Annotated, Any

import typer

from fleetctl.cli.common import IdArg, OutputOpt, non_empty, seconds, whole
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(
    limit: Annotated[int, typer.Option(help="How many, newest first.", parser=whole(1))] = 20,
    kind: Annotated[str | None, typer.Option(help="Only this kind (inspect, power.on, provision ...).", callback=non_empty)] = None,
    output: OutputOpt = Format.table,
) -> None:
    """Recent jobs with their outcome (a killed job: interrupted; a running one: with its host)."""
    from sqlalchemy import Integer, func, select

    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.store import get_engine
    from fleetctl.store import tables as T
    from fleetctl.workflows.journal import job_owner, mark_interrupted

    mark_interrupted(get_engine())
    j, s = T.job, T.job_step
    failed = func.sum(func.cast(s.c.state == "failed", Integer())).label("failed")
    steps = select(s.c.job_id, func.count().label("n"), failed).group_by(s.c.job_id).subquery()
    q = (
        select(j.c.id, j.c.kind, j.c.target, j.c.state, j.c.actor, j.c.args, j.c.created_at, j.c.finished_at, j.c.error,
               func.coalesce(steps.c.n, 0).label("servers"), func.coalesce(steps.c.failed, 0).label("failed"))  # fmt: skip
        .outerjoin(steps, steps.c.job_id == j.c.id)
        .order_by(j.c.id.desc())
        .limit(limit)
    )
    if kind:
        q = q.where(j.c.kind == kind)
    with conn() as c:
        rows = [
            {**{k: v for k, v in r._mapping.items() if k != "args"}, "host": _host(job_owner(r.args)),
             "created_at": r.created_at.isoformat(timespec="seconds") if r.created_at else None,
             "finished_at": r.finished_at.isoformat(timespec="seconds") if r.finished_at else None}  # fmt: skip
            for r in c.execute(q)
        ]
    emit(rows, output, columns=["id", "kind", "target", "state", "host", "servers", "failed", "actor", "created_at", "error"])


def _host(holder: object) -> str | None:
    return getattr(holder, "host", None)


@app.command("show")
def show(job_id: IdArg, output: OutputOpt = Format.table) -> None:
    """One job and its steps, server by server."""
    from sqlalchemy import select

    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit, emit_one
    from fleetctl.errors import NotFound
    from fleetctl.store import get_engine
    from fleetctl.store import tables as T
    from fleetctl.workflows.journal import job_owner, mark_interrupted

    mark_interrupted(get_engine())
    with conn() as c:
        job = c.execute(select(T.job).where(T.job.c.id == job_id)).first()
        if job is None:
            raise NotFound(f"no job {job_id}")
        steps = [
            {"server": r.server, "step": r.name, "state": r.state, "attempt": r.attempt,
             "started_at": r.started_at.isoformat(timespec="seconds") if r.started_at else None,
             "finished_at": r.finished_at.isoformat(timespec="seconds") if r.finished_at else None,
             "error": r.error, "output": r.output}  # fmt: skip
            for r in c.execute(
                select(T.job_step, T.server.c.name.label("server"))
                .outerjoin(T.server, T.server.c.id == T.job_step.c.server_id)
                .where(T.job_step.c.job_id == job_id)
                .order_by(T.job_step.c.id)
            )
        ]
        # The Kubernetes maintenance rows this job holds (or held), and those still open on its servers (docs/kubernetes.md).
        m = T.k8s_maintenance.c
        mine = {r["server"] for r in steps if r["server"]}
        maintenance = [
            {"server": r.server, "node": r.node, "job": r.job_id, "state": r.state, "why": r.why, "reason": r.reason,
             "since": r.started_at.isoformat(timespec="seconds") if r.started_at else None}  # fmt: skip
            for r in c.execute(select(T.k8s_maintenance).where((m.job_id == job_id) | (m.server.in_(mine) & (m.state != "released")))
                               .order_by(m.id))  # fmt: skip
        ]
    doc = {k: (v.isoformat(timespec="seconds") if hasattr(v, "isoformat") else v) for k, v in dict(job._mapping).items()}
    doc["host"] = _host(job_owner(job.args))
    if _engine(job.args) == "temporal":
        doc.update(_temporal_status(job.args))
    if output != Format.table:
        emit_one({**doc, "steps": steps, "maintenance": maintenance}, output)
        return
    emit_one(doc, output)
    emit(steps, output, title="Steps", columns=["server", "step", "state", "attempt", "started_at", "finished_at", "error"])
    if maintenance:
        emit(maintenance, output, title="Kubernetes maintenance", columns=["server", "node", "job", "state", "why", "reason", "since"])


def _engine(args: Any) -> str:
    return str(args.get("engine") or "embedded") if isinstance(args, dict) else "embedded"


def _temporal_status(args: dict[str, Any]) -> dict[str, Any]:
    """A Temporal job's workflow and its live status, or why it could not be read (said plainly, never an error)."""
    from fleetctl.config import temporal_address, temporal_namespace
    from fleetctl.errors import FleetError

    wid = args.get("workflow")
    out: dict[str, Any] = {"workflow": wid}
    address = temporal_address()
    if not wid:
        return out | {"workflow_status": "unknown: the job recorded no workflow id"}
    if address is None:
        return out | {"workflow_status": "not asked: FLEETCTL_TEMPORAL is not set (the journal above is the store's)"}
    from fleetctl.scaleout.client import workflow_status

    try:
        st = workflow_status(str(wid), address, temporal_namespace())
    except FleetError as e:
        return out | {"workflow_status": f"unknown: {e}"}
    out["workflow_status"] = st["status"]
    live = st.get("live")
    if isinstance(live, dict):
        # The generic parent's status (fleetctl.scaleout.run_wf): a row per unit (a server, or a sweep's shard), its
        # stage (waiting, running, done, skipped) and, for one that never completed, why.
        rows = [{"server": u.get("key"), "stage": "lost" if u.get("lost") and u.get("stage") == "done" else u.get("stage"),
                 "error": u.get("lost")} for u in live.get("units") or [] if isinstance(u, dict)]  # fmt: skip
        counts: dict[str, int] = {}
        for r in rows:
            counts[str(r["stage"])] = counts.get(str(r["stage"]), 0) + 1
        started = any(r["stage"] != "waiting" for r in rows)
        out["live"] = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) if started else "no server started yet"
        out["live_servers"] = rows
    elif st.get("live_error"):
        out["live"] = st["live_error"]
    return out


WaitOpt = Annotated[
    float, typer.Option("--wait", help="Seconds to wait for the job to end interrupted (0: do not wait).", callback=seconds(0, 86400))
]


@app.command("cancel")
def cancel(job_id: IdArg, wait: WaitOpt = 60.0, output: OutputOpt = Format.table) -> None:
    """Stop a running job as Ctrl-C would: its journal ends interrupted, its locks are released.

    In process: SIGTERM to the job's own fleetctl process, on this host only. On Temporal: the run's
    workflow is cancelled (FLEETCTL_TEMPORAL must be set). Exit 2 when the job cannot be cancelled
    from here (finished, of another host, unknown); 1 when it is still running after --wait.
    """
    from sqlalchemy import select

    from fleetctl.cli.common import announce_fleet, conn
    from fleetctl.cli.output import emit_one
    from fleetctl.errors import InputError, NotFound
    from fleetctl.store import get_engine
    from fleetctl.store import tables as T
    from fleetctl.workflows.journal import JobState, job_owner, mark_interrupted

    if wait != wait or wait == float("inf"):
        raise InputError(f"{wait} is not a finite number >= 0", field="--wait")
    engine = get_engine()
    mark_interrupted(engine)
    with conn() as c:
        job = c.execute(select(T.job).where(T.job.c.id == job_id)).first()
    if job is None:
        raise NotFound(f"no job {job_id}")
    announce_fleet(1, "job", output)
    if job.state != JobState.RUNNING.value:
        raise InputError(f"job {job_id} ({job.kind} {job.target}) is already {job.state}: nothing to cancel")
    args = job.args if isinstance(job.args, dict) else {}
    doc: dict[str, Any] = {"job": job_id, "kind": job.kind, "target": job.target, "engine": _engine(args)}
    if doc["engine"] == "temporal":
        doc.update(_cancel_temporal(job_id, args))
        if doc["workflow_status"] != "RUNNING":  # closed without closing its job (terminated): nothing will end it now
            wait = 0.0
    else:
        doc.update(_cancel_process(job_id, job_owner(args), job.created_at))
    t0 = time.monotonic()
    state = _wait_for_end(engine, job_id, wait)
    still = None
    if doc["engine"] == "temporal" and wait > 0 and state != JobState.RUNNING.value:
        # The parent closes the job from its cancellation handler, then ends: wait for that end too, so a
        # command run after this one sees the workflow (and its id, free again) closed.
        doc["workflow_status_after"] = _wait_for_close(str(doc["workflow"]), t0 + wait)
        if doc["workflow_status_after"] == "RUNNING":
            still = f"job {job_id} is {state}, but its workflow {doc['workflow']} is still closing after {wait:g} s"
    doc.update(state=state, waited_s=round(time.monotonic() - t0, 1))
    emit_one(doc, output)
    if state == JobState.RUNNING.value:
        still = f"job {job_id} still running after {wait:g} s: see `fleetctl jobs show {job_id}`"
    if still is not None:
        from fleetctl.cli.output import console

        console(stderr=True).print(still, highlight=False)
        raise typer.Exit(1)


def _wait_for_close(workflow_id: str, deadline: float) -> str:
    """The workflow's status once it is closed, or RUNNING at ``deadline`` (a monotonic time)."""
    from fleetctl.config import temporal_address, temporal_namespace
    from fleetctl.scaleout.client import workflow_status

    address, namespace = temporal_address(), temporal_namespace()
    assert address is not None  # _cancel_temporal refused without it
    while True:
        status = str(workflow_status(workflow_id, address, namespace, live=False)["status"])
        if status != "RUNNING" or time.monotonic() >= deadline:
            return status
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def _cancel_temporal(job_id: int, args: dict[str, Any]) -> dict[str, Any]:
    from fleetctl.config import temporal_address, temporal_namespace
    from fleetctl.errors import InputError
    from fleetctl.scaleout.client import cancel_workflow

    wid = args.get("workflow")
    if not wid:
        raise InputError(f"job {job_id} runs on Temporal but recorded no workflow id: cancel it with the temporal CLI")
    address = temporal_address()
    if address is None:
        raise InputError(f"job {job_id} runs on Temporal (workflow {wid}): set FLEETCTL_TEMPORAL (and its namespace) to cancel it")
    namespace = temporal_namespace()
    before = cancel_workflow(str(wid), address, namespace)
    if before != "RUNNING":
        did = f"workflow {wid} is already {before.lower()} on Temporal at {address}, without having closed this job: nothing sent"
    else:
        did = f"cancellation of workflow {wid} (and its servers' workflows) requested from Temporal at {address} (namespace {namespace})"
    return {"workflow": wid, "workflow_status": before, "action": did}


def _cancel_process(job_id: int, owner: Any, created_at: Any) -> dict[str, Any]:
    import signal

    from fleetctl.errors import InputError

    if owner is None or owner.host is None or owner.pid is None:
        raise InputError(f"job {job_id} recorded no process it runs in (owner {owner}): it cannot be cancelled")
    here = socket.gethostname()
    if owner.host != here:
        raise InputError(f"job {job_id} runs on host {owner.host} (pid {owner.pid}), not on {here}: "
                         f"cancel it there (`fleetctl jobs cancel {job_id}` on {owner.host})")  # fmt: skip
    why_not = _not_the_owner(owner.pid, created_at)
    if why_not:
        raise InputError(f"job {job_id}: pid {owner.pid} {why_not}; not signalled")
    try:
        os.kill(owner.pid, signal.SIGTERM)
    except ProcessLookupError:
        return {"pid": owner.pid, "action": f"process {owner.pid} ended before it was signalled"}
    except PermissionError as e:
        raise InputError(f"job {job_id}: pid {owner.pid} belongs to another user: cancel it as that user") from e
    return {"pid": owner.pid, "host": here, "action": f"SIGTERM sent to fleetctl process {owner.pid} on {here}"}


def _not_the_owner(pid: int, created_at: Any) -> str | None:
    """Why ``pid`` is not the fleetctl process that opened the job (None: it is).

    A pid is reused once its process is gone: the job's recorded pid may now be
    anyone's process. Its owner is a fleetctl process (its command line says so)
    that started before the job was opened; a process started after cannot be it.
    Linux only (``/proc``); elsewhere nothing is signalled.
    """
    import datetime as dt
    from pathlib import Path

    from fleetctl.procs import stat_fields

    proc = Path(f"/proc/{pid}")
    try:
        argv = (proc / "cmdline").read_bytes().split(b"\0")
        stat = (proc / "stat").read_text()
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
    except FileNotFoundError:
        return "is gone (the job is marked interrupted when read again)"
    except (OSError, StopIteration, ValueError):
        return "cannot be checked (no /proc): not known to be the job's process"
    names = [os.path.basename(a.decode(errors="replace")) for a in argv[:3]]
    if "fleetctl" not in names and not ("-m" in names and any(n.startswith("fleetctl") for n in names)):
        return f"is not a fleetctl process now ({' '.join(names)[:80]}): its pid was reused"
    # /proc/PID/stat: the fields after the command's ")" start at field 3; field 22 is the start time in clock ticks since boot.
    fields = stat_fields(stat)
    if fields[0] == "Z":
        return "has exited (a zombie not reaped yet)"
    started = btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    if created_at is not None:
        opened = (created_at.replace(tzinfo=dt.UTC) if created_at.tzinfo is None else created_at).timestamp()
        if started > opened + 2.0:  # btime is whole seconds: a little slack
            return "is a fleetctl process started after the job was opened: its pid was reused"
    return None


def _wait_for_end(engine: Any, job_id: int, wait: float) -> str:
    """The job's state once it is no longer running, or ``running`` after ``wait`` seconds."""
    from sqlalchemy import select

    from fleetctl.store import tables as T
    from fleetctl.workflows.journal import JobState, mark_interrupted

    deadline = time.monotonic() + wait
    while True:
        mark_interrupted(engine)  # a process that died on the signal without closing its journal
        with engine.connect() as c:
            state = str(c.execute(select(T.job.c.state).where(T.job.c.id == job_id)).scalar_one())
        if state != JobState.RUNNING.value or time.monotonic() >= deadline:
            return state
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
