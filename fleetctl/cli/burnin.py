"""`fleetctl burnin`: burn in accelerator boards; list and show what was stored; the HTML report.

``fleetctl burnin --kind mncore2 [TARGET...]`` runs a burn-in (``run`` is the
default subcommand; ``--mncore`` and ``--gpu`` are the older spellings of
``--kind mncore2`` and ``--kind gpu``); ``burnin list``, ``burnin show [RUN]`` and ``burnin
report`` read what was stored. docs/burnin.md has the stages, the criteria
and the exit codes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from fleetctl.cli.common import OutputOpt, a_path, non_empty, output_file, seconds, whole
from fleetctl.cli.drain import DeleteEmptydirOpt, DrainTimeoutOpt, ForceDrainOpt, MaxUnavailableOpt
from fleetctl.cli.output import Format


class _RunByDefault(TyperGroup):
    """`fleetctl burnin --kind mncore2 rack-12` means `fleetctl burnin run --kind mncore2 rack-12`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=_RunByDefault, no_args_is_help=False)
WEEK_S = 7 * 86400  # the longest --duration or --grace: an extended level is hours; 1e12 s was taken as 31,700 years

STYLE = {"pass": "green", "degraded": "yellow", "fail": "bold red", "error": "magenta", "running": "cyan", "waiting": "dim"}


@app.command("run")
def run(
    targets: Annotated[
        list[str] | None, typer.Argument(help="Servers, racks, selectors, or all; default: every server that is due.")
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option("--kind", help="The board kind to burn in, as the inventory names it: mncore2, gpu, or any an accelerator "
                     "driver serves."),  # fmt: skip
    ] = None,
    mncore: Annotated[bool, typer.Option("--mncore", help="The older spelling of --kind mncore2 (MN-Core 2 boards).")] = False,
    gpu: Annotated[bool, typer.Option("--gpu", help="The older spelling of --kind gpu.")] = False,
    level: Annotated[
        str, typer.Option(help="quick, standard or extended (each kind's lengths: its driver's criteria, or --criteria).")
    ] = "standard",
    duration: Annotated[
        float | None,
        typer.Option(help="Seconds of workload, instead of the level's (at most a week).", callback=seconds(0, WEEK_S, above=True)),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Also servers in service (named), and boards another program holds.")
    ] = False,
    restart: Annotated[bool, typer.Option("--restart", help="Start afresh instead of resuming an interrupted run.")] = False,
    concurrency: Annotated[
        int, typer.Option(help="Servers burned in at once (each holds one SSH connection while its workload runs).", parser=whole(1))
    ] = 250,
    grace: Annotated[
        float | None,
        typer.Option(
            help="Seconds past the workload's length before it counts as hung (default: 25%, >= 30 s).", callback=seconds(0, WEEK_S)
        ),
    ] = None,
    criteria_file: Annotated[
        Path | None,
        typer.Option("--criteria", help="Criteria and levels laid over the drivers' defaults (see criteria.yaml).", parser=a_path),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be burned in, touch nothing.")] = False,
    max_unavailable: MaxUnavailableOpt = "1",
    drain_timeout: DrainTimeoutOpt = 600.0,
    delete_emptydir_data: DeleteEmptydirOpt = False,
    force_drain: ForceDrainOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Burn in accelerator boards: pre-checks, reset, workload with telemetry, post-checks, a verdict per board.

    A failing board is marked rma (`fleetctl board rma list`) and its server
    goes to maintenance. A server that is a live Kubernetes node is cordoned and
    drained first (in waves under --max-unavailable per rack) and uncordoned
    after a pass; on failure it stays cordoned (`fleetctl k8s status` says why). Exit code from the worst verdict: 0 pass, 1 degraded,
    4 a server could not be burned in, 5 a board failed.
    """
    import sys

    from fleetctl.burnin import criteria as crit
    from fleetctl.burnin.engine import exit_code, plan
    from fleetctl.burnin.workflow import run as run_burnin
    from fleetctl.cli import state
    from fleetctl.cli.common import conn, fleet_label
    from fleetctl.errors import InputError

    given = [k for k, on in ((kind, kind is not None), ("--mncore", mncore), ("--gpu", gpu)) if on]
    if len(given) != 1:
        raise InputError("give the board kind once: --kind mncore2 or --kind gpu (--mncore and --gpu are older spellings)",
                         field="--kind")  # fmt: skip
    board_kind = crit.burnin_kind(str(given[0]))  # one vocabulary: the inventory's board kinds
    workload = crit.burnin_workload(board_kind)  # what the engine runs (and keeps as the run's kind)
    if level not in crit.LEVELS:
        raise InputError(f"{level!r} is not a level: use {', '.join(crit.LEVELS)}", field="--level")
    criteria = crit.load(criteria_file)
    _check_engine(dry_run)
    with conn() as c:
        p = plan(c, kind=workload, targets=list(targets or []), level=level, duration=duration, criteria=criteria, force=force,
                 grace=grace)  # fmt: skip
        from fleetctl.cli.drain import drain_plan

        drain = drain_plan(c, [s.name for s in p.servers], max_unavailable=max_unavailable, timeout_s=drain_timeout,
                           delete_emptydir_data=delete_emptydir_data, force=force_drain) if p.servers else None  # fmt: skip
    state.fleet = fleet_label()
    boards = sum(len(s.boards) for s in p.servers)
    typer.echo(f"fleet: {state.fleet} ({len(p.servers)} servers, {boards} {board_kind} boards to burn in, "
               f"{p.level} level, {p.seconds:g} s workload)", err=output != Format.table)  # fmt: skip
    if dry_run or not p.servers:
        rows = [{"server": s.name, "state": s.state, "model": s.model, "boards": len(s.boards),
                 "action": f"drain (wave {drain.wave(s.name) + 1}), burn in" if drain and s.name in drain.wave_of else "burn in"}
                for s in p.servers]  # fmt: skip
        rows += [{"server": n, "state": None, "model": None, "boards": None, "action": f"skip: {why}"} for n, why in p.skipped.items()]
        from fleetctl.cli.output import emit

        emit(rows, output, columns=["server", "state", "model", "boards", "action"])
        if not p.servers and not dry_run:
            typer.echo("nothing is due: every server carrying such boards was burned in since it last changed state "
                       "(name servers to burn them in again)", err=True)  # fmt: skip
        return
    from fleetctl.config import temporal_address

    address = temporal_address()  # the scale-out engine (docs/scale-out.md): the same run on the workers of each site

    def go(progress: Any) -> Any:
        if address:
            return _through_temporal(p, address, restart=restart, concurrency=concurrency, progress=progress, drain=drain)
        return run_burnin(p, restart=restart, concurrency=concurrency, progress=progress, drain=drain)

    live = sys.stderr.isatty() and output == Format.table
    result = _with_live_table(p, go) if live else go(None)
    _report(p, result, output)
    raise typer.Exit(exit_code(result.worst))


def _check_engine(dry_run: bool) -> None:
    """With Temporal configured, the store must be PostgreSQL (a dry run only reads: it stays in process)."""
    from fleetctl.config import database_url, temporal_address

    if temporal_address() and not dry_run:
        from fleetctl.scaleout.client import check_store

        check_store(database_url())


def _through_temporal(p: Any, address: str, *, restart: bool, concurrency: int, progress: Any, drain: Any = None) -> Any:
    """The run on Temporal (the burn-in workflow's description, run by the workers of each site), followed to its end: the
    same RunResult as in process. Ctrl-C (or SIGTERM) detaches: the run goes on on the workers."""
    from fleetctl.burnin.verdict import worst
    from fleetctl.burnin.workflow import request, result
    from fleetctl.cli.output import console
    from fleetctl.config import temporal_namespace
    from fleetctl.inventory.service import actor
    from fleetctl.scaleout.client import Detached, run_described

    req = request(p, restart=restart, concurrency=concurrency, actor=actor(), drain=drain)
    seen: dict[str, tuple[str, Any]] = {}

    def on_units(rows: list[dict[str, Any]]) -> None:  # the parent's rows, as the in-process run's progress
        for r in rows:
            out = r.get("out") or {}
            key = (r["stage"], out.get("boards"))
            if progress is None or seen.get(r["key"]) == key:
                continue
            seen[r["key"]] = key
            if r["stage"] == "running":
                progress(r["key"], "running", {})
            elif r["stage"] == "done":
                boards = out.get("boards") or {}
                progress(r["key"], "done", {"verdict": worst(list(boards.values())) if boards else "error", "boards": boards,
                                            "error": out.get("error") or r.get("lost")})  # fmt: skip

    try:  # (SIGTERM is Ctrl-C, cli.app.main)
        summary, _run = run_described("burnin", req, address, temporal_namespace(), on_units=on_units,
                                      resumes="a later `fleetctl burnin` of the same kind, level and duration resumes it")  # fmt: skip
    except Detached as d:
        console(stderr=True).print(d.message("fleetctl burnin show"), highlight=False)
        raise typer.Exit(130) from None
    out = result(summary, [s.name for s in p.servers])
    if progress is not None:  # the last states (the poll may have missed the end), and the servers an earlier pass did
        for name in dict.fromkeys(b.server for b in out.boards):
            if seen.get(name, ("",))[0] != "done":
                got = [x for x in out.boards if x.server == name]
                progress(name, "done", {"verdict": worst([x.verdict for x in got]), "boards": {x.device: x.verdict for x in got},
                                        "resumed": name in summary.earlier})  # fmt: skip
    return out


def _with_live_table(p: Any, go: Any) -> Any:
    """Run ``go(progress)`` under a live table of the servers: stage, boards' verdicts, time."""
    import time

    from rich.live import Live
    from rich.table import Table

    from fleetctl.burnin.criteria import board_kind_of_run
    from fleetctl.cli.output import console

    rows: dict[str, dict[str, Any]] = {s.name: {"stage": "waiting", "boards": "", "t0": None, "t1": None} for s in p.servers}

    def render() -> Table:
        t = Table(title=f"burn-in --kind {board_kind_of_run(p.kind)} ({p.level}, {p.seconds:g} s)", expand=False)
        for col in ("server", "stage", "boards", "elapsed"):
            t.add_column(col)
        now = time.monotonic()
        shown = sorted(rows.items(), key=lambda kv: (kv[1]["stage"] == "waiting", kv[0]))[:40]
        for name, r in shown:
            el = "" if r["t0"] is None else f"{(r['t1'] or now) - r['t0']:.0f} s"
            t.add_row(name, f"[{STYLE.get(r['stage'], '')}]{r['stage']}[/]", r["boards"], el)
        if len(rows) > len(shown):
            left = {k: sum(1 for r in rows.values() if r["stage"] == k) for k in ("waiting", "running")}
            t.caption = f"... and {len(rows) - len(shown)} more ({left['running']} running, {left['waiting']} waiting)"
        return t

    with Live(render(), console=console(stderr=True), refresh_per_second=2, transient=True) as lv:

        def progress(server: str, stage: str, info: dict[str, Any]) -> None:
            r = rows.setdefault(server, {"stage": "waiting", "boards": "", "t0": None, "t1": None})
            if stage == "running":
                r.update(stage="running", t0=time.monotonic())
            elif stage == "done":
                r.update(stage=info.get("verdict", "done"), t1=time.monotonic())
                if r["t0"] is None:
                    r["t0"] = r["t1"]
                b = info.get("boards") or {}
                r["boards"] = " ".join(f"[{STYLE.get(v, '')}]{v[0].upper()}[/]" for v in b.values()) or (info.get("error") or "")[:60]
            lv.update(render())

        return go(progress)


def _report(p: Any, result: Any, output: Format) -> None:
    from fleetctl.cli.output import console, emit, emit_one

    if output != Format.table:
        from fleetctl.burnin.criteria import board_kind_of_run
        from fleetctl.burnin.verdict import worst

        by_server: dict[str, list[str]] = {}
        for b in result.boards:
            by_server.setdefault(b.server, []).append(b.verdict)
        emit_one({"run": result.run_id, "resumed": result.resumed, "kind": board_kind_of_run(p.kind), "level": p.level,
                  "duration_s": p.seconds,
                  "servers": {n: worst(v) for n, v in by_server.items()},  # a server's verdict: the worst of its boards'

                  "workload_s": round(result.workload_s, 2), "elapsed_s": round(result.elapsed_s, 2), "counts": result.counts,
                  "worst": result.worst, "boards": [b.row() for b in result.boards], "rma": result.rma,
                  "to_maintenance": result.to_maintenance, "notes": {k: v for k, v in result.notes.items() if v}}, output)  # fmt: skip
        return
    from fleetctl.burnin.verdict import RANK

    rows = []
    # Worst first, and the boards that passed only counted: the table is for what needs a hand.
    shown = sorted((b for b in result.boards if b.verdict != "pass"), key=lambda b: -RANK.get(b.verdict, 3))
    for b in shown:
        m = b.metrics
        main = [r for r in b.reasons if r["severity"] != "note"] or b.reasons
        rows.append({"server": b.server, "board": b.device, "serial": b.serial, "verdict": b.verdict + (" (earlier)" if b.resumed else ""),
                     "throughput": m.get("throughput"), "max °C": m.get("max_temp_c"),
                     "why": "; ".join(r["message"] for r in main[:2]) + (f" (+{len(main) - 2})" if len(main) > 2 else "")})  # fmt: skip
    if rows:
        emit(rows, output, columns=["server", "board", "serial", "verdict", "throughput", "max °C", "why"],
             styles={"verdict": lambda v: STYLE.get(str(v).split(" ")[0])})  # fmt: skip
    out = console()
    passed = len(result.boards) - len(shown)
    if passed:
        out.print(f"{passed} board(s) passed" + (" (not listed; fleetctl burnin show lists every board)" if rows else ""))
    c = result.counts
    out.print(f"burn-in run {result.run_id}{' (resumed)' if result.resumed else ''}: {len(result.boards)} results in "
              f"{result.elapsed_s:.1f} s (workload {result.workload_s:.1f} s): "
              + ", ".join(f"[{STYLE[k]}]{c.get(k, 0)} {k}[/]" for k in ("pass", "degraded", "fail", "error")))  # fmt: skip
    if result.rma:
        out.print(f"[bold red]{len(result.rma)} board(s) marked rma[/]: {', '.join(result.rma)} (fleetctl board rma list)")
    if result.to_maintenance:
        out.print(f"moved to maintenance: {', '.join(result.to_maintenance)}")


@app.command("list")
def list_(
    limit: Annotated[int, typer.Option(help="Most recent runs shown.", parser=whole(1))] = 20,
    output: OutputOpt = Format.table,
) -> None:
    """Burn-in runs, newest first, with their boards by verdict."""
    from fleetctl.burnin.criteria import board_kind_of_run
    from fleetctl.burnin.history import runs
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit

    with conn() as c:
        rows = runs(c, limit=limit)
    for r in rows:  # a run keeps the engine's workload name (mncore): shown as the board kind it burned in
        r["kind"] = board_kind_of_run(str(r["kind"]))
    emit(rows, output, columns=["run", "started", "state", "kind", "level", "duration_s", "servers", "pass", "degraded", "fail", "error",
                                "actor"])  # fmt: skip


@app.command("show")
def show(
    run_id: Annotated[int | None, typer.Argument(metavar="[RUN]", help="A run id (default: the latest).", parser=whole(1))] = None,
    board: Annotated[
        str | None, typer.Option(help="Only this board (serial), with every reason and its telemetry.", callback=non_empty)
    ] = None,
    output: OutputOpt = Format.table,
) -> None:
    """The verdict of each board of a run, with why."""
    from fleetctl.burnin.history import results
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit

    with conn() as c:
        rid, rows = results(c, run_id, serial=board)
    if output != Format.table:
        emit(rows, output)
        return
    table = [{"server": r["server"], "board": r["device"], "serial": r["serial"], "verdict": r["verdict"],
              "throughput": (r["metrics"] or {}).get("throughput"), "max °C": (r["metrics"] or {}).get("max_temp_c"),
              "why": "; ".join(x["message"] for x in r["reasons"] if x["severity"] != "note")} for r in rows]  # fmt: skip
    emit(table, output, title=f"burn-in run {rid}", columns=["server", "board", "serial", "verdict", "throughput", "max °C", "why"],
         styles={"verdict": lambda v: STYLE.get(v)})  # fmt: skip
    if board and rows:
        emit([{"t": s.get("t"), "source": s.get("source"), "sensor": s.get("sensor"), "temp_c": s.get("temp_c"),
               "power_w": s.get("power_w"), "clock_mhz": s.get("clock_mhz")} for s in rows[0]["telemetry"]], output,
             title="telemetry")  # fmt: skip


@app.command("report")
def report(
    html: Annotated[
        Path | None, typer.Option("--html", help="Write the page here (default: burnin-report.html).", parser=output_file)
    ] = None,
    run_id: Annotated[int | None, typer.Option("--run", help="The run (default: the latest).", parser=whole(1))] = None,
) -> None:
    """One self-contained HTML page: per board its verdict, history and telemetry plots."""
    from fleetctl.burnin.report import render
    from fleetctl.cli.common import conn
    from fleetctl.errors import InputError
    from fleetctl.sweep.report import write_atomic

    target = html or Path("burnin-report.html")
    if not target.parent.is_dir():
        raise InputError(f"{target.parent}: no such folder", field="--html")
    with conn() as c:
        page = render(c, run_id)
    write_atomic(target, page)  # UTF-8, and a reader never sees half a page
    typer.echo(f"wrote {target}")
