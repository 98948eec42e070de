"""`fleetctl provision TARGET`: cabled and powered -> ready, server by server, in parallel.

The work is ``fleetctl.workflows.provision``; this module is the command:
targets, confirmation, the live view, the summary and the exit code.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt
from fleetctl.cli.drain import DeleteEmptydirOpt, DrainTimeoutOpt, ForceDrainOpt, MaxUnavailableOpt
from fleetctl.cli.output import Format

STATUS_STYLE = {"ready": "green", "planned": "cyan", "skipped": "grey62", "failed": "bold red", "refused": "red", "locked": "magenta"}


def command(
    targets: Annotated[list[str], typer.Argument(help="Servers, racks (rack-12, tyo1/rack-12), sites, selectors (state=, tag=) or all.")],
    dry_run: DryRunOpt = False,
    reprovision: Annotated[
        bool, typer.Option("--reprovision", help="Also provision servers that are ready, in service or in maintenance.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Confirm --reprovision of servers in service without asking.")] = False,
    restart: Annotated[
        bool, typer.Option("--restart", help="Start a new pass from the first step instead of resuming the journal.")
    ] = False,
    accept_drift: Annotated[bool, typer.Option("--accept-drift", help="Take the BMC's view where it differs from the inventory.")] = False,
    stagger: Annotated[float, typer.Option(help="Seconds between two power-ons in a rack.")] = 2.0,
    concurrency: Annotated[int, typer.Option(help="Servers worked on at once (in process; on Temporal each worker's --activities).")] = 64,
    ansible_window: Annotated[float, typer.Option(help="Seconds a batch waits for more servers before Ansible starts.")] = 10.0,
    poll: Annotated[float, typer.Option(help="Seconds between two polls of a BMC or an installing host.")] = 2.0,
    switch_sessions: Annotated[int, typer.Option(help="SSH sessions to one switch at once (port changes side by side).")] = 8,
    max_unavailable: MaxUnavailableOpt = "1",
    drain_timeout: DrainTimeoutOpt = 600.0,
    delete_emptydir_data: DeleteEmptydirOpt = False,
    force_drain: ForceDrainOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Provision servers: firmware to the baseline, BIOS profile, provisioning VLAN, one-time
    PXE/virtual-media boot, wait for the OS, production VLANs, Ansible playbooks, accelerator check.

    Resumable: a re-run continues from the journal. Exit 1 when any server is not ready.
    A server reprovisioned in service that is a live Kubernetes node is cordoned and drained
    first (waves under --max-unavailable per rack) and uncordoned once ready again.
    """

    from fleetctl.cli.bmcrun import resolve
    from fleetctl.errors import InputError
    from fleetctl.preflight import PreflightError
    from fleetctl.workflows.provision import Options, provision, worst_exit

    for opt, value, ok, rule in (
        ("--stagger", stagger, stagger >= 0, ">= 0"),
        ("--ansible-window", ansible_window, ansible_window >= 0, ">= 0"),
        ("--concurrency", concurrency, concurrency >= 1, ">= 1"),
        ("--switch-sessions", switch_sessions, switch_sessions >= 1, ">= 1"),
        ("--poll", poll, poll > 0, "> 0"),
    ):
        if not ok or value in (float("inf"), float("-inf")):  # nan fails every comparison
            raise InputError(f"{value} is not a finite number {rule}", field=opt)
    servers = resolve(targets, output)
    in_service = [s.name for s in servers if s.state == "in-service"]
    if reprovision and in_service and not dry_run and not yes:
        if not sys.stdin.isatty():
            raise InputError(
                f"{len(in_service)} server(s) in service ({', '.join(in_service[:3])}...): give --yes to confirm --reprovision"
            )
        typer.confirm(
            f"Reprovision {len(in_service)} server(s) in service ({', '.join(in_service[:5])})? Their workloads stop", abort=True
        )
    drain = None
    if reprovision and in_service and not dry_run:
        from fleetctl.cli.common import conn
        from fleetctl.cli.drain import drain_plan

        with conn() as c:  # the clusters answer and each rack may lose the nodes asked for, before anything is touched
            drain = drain_plan(c, in_service, max_unavailable=max_unavailable, timeout_s=drain_timeout,
                               delete_emptydir_data=delete_emptydir_data, force=force_drain)  # fmt: skip
    opts = Options(dry_run=dry_run, reprovision=reprovision, restart=restart, accept_drift=accept_drift, concurrency=concurrency,
                   stagger_s=stagger, ansible_window_s=ansible_window, poll_s=poll, switch_sessions=switch_sessions,
                   drain=drain)  # fmt: skip

    # SIGTERM (`fleetctl jobs cancel`) is Ctrl-C here as everywhere (cli.app.main): the journal and the locks are closed.
    label = " ".join(targets)
    names = [s.name for s in servers]
    try:
        if _temporal() and not dry_run:  # the scale-out engine (docs/scale-out.md); a dry run stays in process
            results, stats = _through_temporal(names, opts, label, output)
        elif sys.stderr.isatty() and output == Format.table:
            results, stats = _with_live_view(names, opts, label)
        else:
            results, stats = provision(names, options=opts, label=label)
    except PreflightError as e:
        if dry_run:  # the dry run lists every problem; the error line (exit 2) follows
            _report_problems(e, output)
        raise
    _report(results, stats, output, dry_run=dry_run)
    code = worst_exit(results)
    if code:
        raise typer.Exit(code)


def _temporal() -> str | None:
    from fleetctl.config import temporal_address

    return temporal_address()


def _through_temporal(names: list[str], opts: Any, label: str, output: Format) -> tuple[list[Any], dict[str, Any]]:
    """The run on Temporal (the provisioning description, run by the workers of each site), followed to its end: the same
    rows and figures as in process (the live table on a terminal). Ctrl-C detaches: the run goes on on the workers."""
    from fleetctl.cli.output import console
    from fleetctl.config import database_url, temporal_address, temporal_namespace
    from fleetctl.inventory.service import actor
    from fleetctl.scaleout.client import Detached, check_store, run_described
    from fleetctl.workflows.provision.described import request

    check_store(database_url())
    address = temporal_address()
    assert address is not None
    err = console(stderr=True)
    live: Any = None
    on_units = None
    if sys.stderr.isatty() and output == Format.table:
        from rich.live import Live

        live = Live(_remote_table(label, names, {}), console=err, refresh_per_second=2, transient=False)
        live.start()
        t0: dict[str, float] = {}

        def on_units(units: list[dict[str, Any]]) -> None:
            live.update(_remote_table(label, names, _remote_rows(units, t0)))

    try:
        result, run = run_described("provision", request(names, opts, label, actor()), address, temporal_namespace(), on_units=on_units,
                                    resumes="a later `fleetctl provision` of the same servers resumes it from the journal")  # fmt: skip
    except Detached as d:
        err.print(d.message(), highlight=False)
        raise typer.Exit(130) from None
    finally:
        if live is not None:
            live.stop()
    return list(result.servers), {**result.stats(), "workflow": run.wid}


def _remote_rows(units: list[dict[str, Any]], t0: dict[str, float]) -> dict[str, dict[str, Any]]:
    """The live rows of a run on Temporal: a server done is its unit's output; a running server's step is read from the
    journal (the parent's status query knows only that its unit runs; the store knows the step it is in)."""
    import time

    rows: dict[str, dict[str, Any]] = {}
    running = [u["key"] for u in units if u.get("stage") == "running"]
    steps = _running_steps(running) if running else {}
    now = time.monotonic()
    for u in units:
        key, out = u["key"], u.get("out")
        if out:
            rows[key] = dict(out)
        elif u.get("lost"):
            rows[key] = {"result": "failed", "state": "", "step": "", "elapsed": 0.0, "error": u["lost"]}
        elif u.get("stage") == "running":
            t = t0.setdefault(key, now)
            state, step = steps.get(key, ("", ""))
            rows[key] = {"result": "running", "state": state, "step": step, "elapsed": now - t, "status": "running"}
        else:
            rows[key] = {"result": "running", "state": "", "step": "", "elapsed": 0.0, "status": "waiting"}
    return rows


def _running_steps(names: list[str]) -> dict[str, tuple[str, str]]:
    """{server: (its state, the step its running provisioning job journaled last)}: the job that holds its latest rows is
    the run's (the server is locked by it); an older run's rows belong to a job no longer running."""
    from sqlalchemy import func, select

    from fleetctl.store import get_engine
    from fleetctl.store import tables as T

    last = (select(T.job_step.c.server_id, func.max(T.job_step.c.id).label("id")).join(T.job, T.job.c.id == T.job_step.c.job_id)
            .where(T.job.c.kind == "provision", T.job.c.state == "running").group_by(T.job_step.c.server_id).subquery())  # fmt: skip
    q = (select(T.server.c.name, T.server.c.state, T.job_step.c.name).join(last, last.c.server_id == T.server.c.id)
         .join(T.job_step, T.job_step.c.id == last.c.id).where(T.server.c.name.in_(names)))  # fmt: skip
    with get_engine().connect() as conn:
        return {str(n): (str(st), str(step).removeprefix("provision.")) for n, st, step in conn.execute(q)}


def _remote_table(label: str, names: list[str], rows: dict[str, Any]) -> Any:
    from rich.table import Table

    t = Table(title=f"provision {label} (Temporal)", title_justify="left")
    for col in ("server", "state", "step", "elapsed", "status"):
        t.add_column(col)
    for n in names:
        r = rows.get(n)
        if r is None:
            continue
        result = r.get("result")
        style = STATUS_STYLE.get(result or "", "yellow")
        shown = result if result not in (None, "running") else r.get("status", "")
        t.add_row(n, str(r.get("state", "")), str(r.get("step", "")), f"{r.get('elapsed', 0):.0f}s", f"[{style}]{shown}[/]")
    return t


def _with_live_view(names: list[str], opts: Any, label: str) -> tuple[list[Any], dict[str, Any]]:
    import time

    from rich.live import Live
    from rich.table import Table

    from fleetctl.cli.output import console
    from fleetctl.workflows.provision import Provisioner, run_here

    p = Provisioner(names, options=opts, label=label)
    p.check()  # a refusal before the live view opens: one error line, no empty table
    last = [0.0]

    def table() -> Table:
        t = Table(title=f"provision {label}", title_justify="left")
        for col in ("server", "state", "step", "elapsed", "status"):
            t.add_column(col)
        for n in names:
            pr = p.progress.get(n)
            if pr is None:
                continue
            row = pr.row()
            style = STATUS_STYLE.get(pr.result or "", "yellow")
            t.add_row(n, pr.state, row["step"], f"{row['elapsed']:.0f}s", f"[{style}]{pr.result or pr.status}[/]")
        return t

    with Live(table(), console=console(stderr=True), refresh_per_second=4, transient=False) as view:

        def changed() -> None:
            now = time.monotonic()
            if now - last[0] > 0.2:
                last[0] = now
                view.update(table())

        p.on_change = changed
        if opts.dry_run:
            results: list[Any] = p.dry_run()
            stats = p.stats
        else:  # the description, run in this process (its units' rows are p's: the table above)
            result = run_here(p)
            results, stats = list(result.servers), result.stats()
        view.update(table())
    return results, stats


def _report_problems(e: Any, output: Format) -> None:
    """Every problem the preflight found (``PreflightError.problems``), for the dry run."""
    import json

    from fleetctl.cli.output import emit

    if output == Format.json:
        rows = [{"who": p.who, "problem": p.what} for p in e.problems]
        sys.stdout.write(json.dumps({"dry_run": True, "refused": True, "problems": rows}, indent=2) + "\n")
        return
    rows = [{"who": ", ".join(p.who[:3]) + (f" and {len(p.who) - 3} more" if len(p.who) > 3 else ""), "problem": p.what}
            for p in e.problems]  # fmt: skip
    emit(rows, output, columns=["who", "problem"], title="provision refused before touching anything (preflight)")


def _report(results: list[Any], stats: dict[str, Any], output: Format, *, dry_run: bool) -> None:
    import json

    from fleetctl.cli.output import console, emit

    rows = [r.row() for r in results]
    if output == Format.json:
        sys.stdout.write(json.dumps({"dry_run": dry_run, "servers": rows, **stats}, indent=2, default=str) + "\n")
        return
    if dry_run:
        plan_rows = []
        for r in results:
            for what, value in (r.plan or {}).items():
                text = ", ".join(f"{k}: {v}" for k, v in value.items()) if isinstance(value, dict) else (
                    "; ".join(map(str, value)) if isinstance(value, list) else str(value))  # fmt: skip
                plan_rows.append({"server": r.server, "what": what, "plan": text or "(nothing to do)"})
            if r.result != "planned" or not r.plan:
                plan_rows.append({"server": r.server, "what": r.result, "plan": r.error})
        emit(plan_rows, output, columns=["server", "what", "plan"], title="provision plan (nothing changed)")
        return
    hidden = ("done", "resumed", "plan", "timings")
    flat = [{k: v for k, v in row.items() if k not in hidden} | {"resumed": len(row["resumed"])} for row in rows]
    emit(flat, output, columns=["server", "result", "state", "step", "elapsed", "resumed", "error"],
         styles={"result": lambda v: STATUS_STYLE.get(v)})  # fmt: skip
    if output == Format.table:
        n = {k: sum(1 for r in results if r.result == k) for k in ("ready", "failed", "refused", "locked", "skipped")}
        line = ", ".join(f"{v} {k}" for k, v in n.items() if v) or "nothing done"
        console(stderr=True).print(f"{line}; {stats.get('makespan_s', 0)} s; job {stats.get('job')}", highlight=False)
