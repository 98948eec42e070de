"""`fleetctl jobs`: the journal of what fleetctl did, run by run, server by server.

Reading the jobs first marks ``interrupted`` the ``running`` jobs whose
process on this host is gone (killed); a running job of another host stays
``running`` and is shown with its host.
"""

from __future__ import annotations

from typing import Annotated

import typer

from fleetctl.cli.common import OutputOpt
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(
    limit: Annotated[int, typer.Option(help="How many, newest first.", min=1)] = 20,
    kind: Annotated[str | None, typer.Option(help="Only this kind (inspect, power.on, provision ...).")] = None,
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
def show(job_id: int, output: OutputOpt = Format.table) -> None:
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
    doc = {k: (v.isoformat(timespec="seconds") if hasattr(v, "isoformat") else v) for k, v in dict(job._mapping).items()}
    doc["host"] = _host(job_owner(job.args))
    if output != Format.table:
        emit_one({**doc, "steps": steps}, output)
        return
    emit_one(doc, output)
    emit(steps, output, title="Steps", columns=["server", "step", "state", "attempt", "started_at", "finished_at", "error"])
