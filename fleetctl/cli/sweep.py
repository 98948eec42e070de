"""`fleetctl sweep`: the health sweep over BMCs and switches, its history and diffs.

``fleetctl sweep [TARGET...]`` runs a sweep (``run`` is the default
subcommand); ``sweep list``, ``sweep show [RUN]``, ``sweep diff [RUN] [RUN]``
and ``sweep checks`` read what was stored.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from fleetctl.cli.common import OutputOpt, finite, non_empty, whole
from fleetctl.cli.common import run_ref as a_run
from fleetctl.cli.k8s import PolicyOpt
from fleetctl.cli.output import Format

# Exit codes of a sweep, from its worst new finding that is not acknowledged
# (2 and 3 keep their meaning: bad usage, a bug). Documented in docs/sweep.md.
EXIT_BY_STATUS = {"ok": 0, "warning": 1, "unknown": 4, "critical": 5}
# 6 (fleetctl.errors.EXIT_STORE): the database could not be written (read-only, full, locked past the timeout):
# nothing, or not all, was stored. Never a finding's code: a unit that takes 1, 4 and 5 as a good run fails on it.

# A cutoff this many days back is still a date (a million days is before year 1: OverflowError at the end of the run).
MAX_RETENTION_DAYS = 36500
# --processes at most (fleetctl.sweep.workflow.MAX_PROCESSES: not imported here, so that --help stays light).
MAX_PROCESSES = 256


class _RunByDefault(TyperGroup):
    """`fleetctl sweep rack-12` means `fleetctl sweep run rack-12`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=_RunByDefault, no_args_is_help=False)

_STYLE = {"critical": "bold red", "unknown": "magenta", "warning": "yellow", "ok": "green"}


def resolve_both(conn: Any, targets: list[str]) -> tuple[list[Any], list[Any]]:
    """Servers and switches the TARGETs name: a rack or a site names both, `all` everything.

    A server selector (state=, tag=, model=) names servers, role= and platform=
    switches; a name is a server's or a switch's.
    """
    from fleetctl.errors import InputError, NotFound
    from fleetctl.targets import SELECTORS, resolve, resolve_switches

    servers: dict[str, Any] = {}
    switches: dict[str, Any] = {}
    for t in targets:
        key, sep, _ = t.partition("=")
        got_srv: list[Any] = []
        got_sw: list[Any] = []
        errors: list[InputError] = []
        if not sep or key in SELECTORS:
            try:
                got_srv = resolve(conn, [t])
            except NotFound as e:
                errors.append(e)
        if not sep or key in ("role", "rack", "site", "platform"):
            try:
                got_sw = resolve_switches(conn, [t])
            except NotFound as e:
                errors.append(e)
        if sep and key not in SELECTORS and key not in ("role", "platform"):
            raise InputError(f"unknown selector {key!r} in {t!r} (use {', '.join(SELECTORS)}, role=, platform=)", field="TARGET")
        if not got_srv and not got_sw:
            raise NotFound(f"no server, switch, rack or site named {t!r}" if not sep else str(errors[0]))
        servers.update((s.name, s) for s in got_srv)
        switches.update((s.name, s) for s in got_sw)
    return list(servers.values()), list(switches.values())


def _when(v: Any) -> str:
    """A stored timestamp in the operator's time zone."""
    from fleetctl.times import aware_utc

    t = aware_utc(v)
    return t.astimezone().strftime("%Y-%m-%d %H:%M") if t else ""


def _finding_rows(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for f in findings:
        mark = "acked" if f.get("ack_id") else ("NEW" if f.get("new") else "")
        rows.append({"id": f.get("id"), "status": f["status"], "target": f["target"], "check": f["check"], "subject": f["subject"],
                     "message": f["message"], "since": _when(f["first_seen"]), "change": mark})  # fmt: skip
    return rows


def _print_findings(findings: list[dict[str, Any]], output: Format, *, limit: int = 0, title: str | None = None) -> None:
    from fleetctl.cli.output import console, emit

    rank = {"critical": 0, "unknown": 1, "warning": 2}
    findings = sorted(findings, key=lambda f: (rank.get(f["status"], 3), not f.get("new"), f["target"], f["check"], f["subject"]))
    shown = findings[:limit] if limit else findings
    cols = ["status", "target", "check", "subject", "message", "since", "change"]
    if shown and shown[0].get("id") is not None:
        cols = ["id", *cols]
    emit(_finding_rows(shown), output, columns=cols, title=title,
         styles={"status": lambda v: _STYLE.get(v),
                 "change": lambda v: "bold" if v == "NEW" else "dim" if v == "acked" else None})  # fmt: skip
    if limit and len(findings) > limit:
        console(stderr=True).print(f"... and {len(findings) - limit} more: fleetctl sweep show")


@app.command("run")
def run(
    targets: Annotated[list[str] | None, typer.Argument(help="Servers, switches, racks, sites, selectors, or all (the default).")] = None,
    level: Annotated[
        str, typer.Option("--level", help="bmc: BMCs and switches; host: also the accelerators as each running OS sees them (SSH); "
                                   "k8s: also each server's node as its cluster sees it (docs/kubernetes.md).")
    ] = "bmc",
    textfile: Annotated[
        Path | None, typer.Option("--textfile", help="Also write fleetctl.prom here for node_exporter's textfile collector.")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="BMCs read at once (each with at most 2 requests in flight).", parser=whole(1))] = 250,
    processes: Annotated[
        int | None, typer.Option(help="Worker processes that read the BMCs, a shard each, --concurrency shared among them "
                                 "(default: the cores, one per 250 servers at most; 1: this process alone).",
                                 parser=whole(1, MAX_PROCESSES), show_default=False)  # fmt: skip
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds one BMC may take in all; a hung BMC costs this, nothing more.", callback=finite(1))
    ] = 60.0,
    request_timeout: Annotated[
        float, typer.Option(help="Seconds for one request to a BMC or (SNMP) a switch.", callback=finite(0.1))
    ] = 10.0,
    retries: Annotated[int, typer.Option(help="Extra attempts per request, with backoff.", parser=whole(0, 5))] = 1,
    max_skew: Annotated[float, typer.Option(help="A BMC clock off by more seconds is a finding.", callback=finite(0))] = 30.0,
    retention: Annotated[
        int, typer.Option(help="Days of sweep history to keep (0: keep all; at most 36500).", parser=whole(0, MAX_RETENTION_DAYS),
                          envvar="FLEETCTL_SWEEP_RETENTION_DAYS")  # fmt: skip
    ] = 90,
    limit: Annotated[int, typer.Option(help="Findings shown per table (0: all); every one is stored.", parser=whole(0))] = 50,
    publish: Annotated[
        bool | None, typer.Option("--publish/--no-publish", help="Publish the verdicts on the swept servers' Kubernetes nodes "
                                  "(condition, unfit taint; docs/kubernetes.md) after the sweep; a cluster not told is exit 8 "
                                  "over a healthy sweep (default: with --policy or FLEETCTL_SWEEP_PUBLISH=1; the shipped timer "
                                  "and CronJob give --publish).", show_default=False)  # fmt: skip
    ] = None,
    policy_file: PolicyOpt = None,
    output: OutputOpt = Format.table,
) -> None:
    """Sweep servers (Redfish) and switches (SNMP); store every finding; exit from the worst new one.

    Exit code: 0 nothing new (or only acknowledged), 1 a new warning, 4 a new
    unknown (a target that could not be read), 5 a new critical finding;
    6 the database could not be written (read-only, full, locked);
    7 the circuit breaker held back the unfit taints this sweep would have set (docs/kubernetes.md).
    """
    import sys

    from fleetctl.cli import state
    from fleetctl.cli.common import conn, fleet_label
    from fleetctl.errors import InputError
    from fleetctl.preflight import for_sweep
    from fleetctl.sweep.engine import SweepOptions
    from fleetctl.sweep.engine import run as run_sweep
    from fleetctl.sweep.workflow import local_collector

    if level not in ("bmc", "host", "k8s"):
        raise InputError(f"--level {level!r}: use bmc, host or k8s", field="--level")
    if textfile is not None:
        _check_textfile_dir(textfile)
    if publish is None:  # asked for by the policy or the environment (a timer's), else not: a lab without its cluster up
        publish = policy_file is not None or os.environ.get("FLEETCTL_SWEEP_PUBLISH", "").strip().lower() in ("1", "true", "yes")
    if publish:  # a bad policy file stops the sweep before it starts (exit 2), as any bad input
        from fleetctl.k8s.policy import load as load_policy

        policy = load_policy(policy_file)
    selector = targets or ["all"]
    with conn() as c:
        servers, switches = resolve_both(c, selector)
    # Preflight: only the operator's secrets config can stop a sweep; a server's own missing
    # secret stays its finding (fleetctl.preflight, docs/security.md).
    for_sweep(servers, switches).refuse()
    state.fleet = fleet_label()
    typer.echo(f"fleet: {state.fleet} ({len(servers)} servers, {len(switches)} switches)", err=output != Format.table)
    opts = SweepOptions(level=level, concurrency=concurrency, per_target_timeout=timeout, request_timeout=request_timeout,
                        retries=retries, max_skew_s=max_skew, retention_days=retention)  # fmt: skip
    total = len(servers) + len(switches)
    collect = _scaleout(servers, switches, opts)
    if collect is not None:  # the scale-out engine: the workers of each site read its targets (docs/scale-out.md)
        result = run_sweep(servers, switches, selector=" ".join(selector), options=opts, collect=collect)
    elif sys.stderr.isatty() and output == Format.table and total > 1:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from fleetctl.cli.output import console

        bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       TextColumn("{task.fields[last]}"), console=console(stderr=True), transient=True)  # fmt: skip
        with bar:
            task = bar.add_task("sweep", total=total, last="")
            here = local_collector(servers, switches, opts, progress=lambda d, t, n, s: bar.update(task, completed=d, last=f"{n} {s}"),
                                   processes=processes)  # fmt: skip
            result = run_sweep(servers, switches, selector=" ".join(selector), options=opts, collect=here)
    else:  # in process: the sweep's description run here (fleetctl.sweep.workflow), one shard of every target
        result = run_sweep(servers, switches, selector=" ".join(selector), options=opts,
                           collect=local_collector(servers, switches, opts, processes=processes))  # fmt: skip
    late = list(result.warnings)
    if textfile is not None:
        from fleetctl.sweep.prometheus import write_textfile

        try:
            with conn() as c:
                write_textfile(c, textfile, result.run_id)
        except OSError as e:  # full, immutable, gone since the check: the run is stored, its verdict stands
            late.append(f"--textfile {textfile}: fleetctl.prom not written: {e.strerror or e} (sweep {result.run_id} is stored)")
    _report(result, output, limit)
    if late:
        from fleetctl.cli.output import console

        for line in late:  # after the report, one line each, and the exit code stays the verdict's
            console(stderr=True).print(f"error: {line}", markup=False, highlight=False, soft_wrap=True)
    code = EXIT_BY_STATUS[result.worst_new.value]
    if publish:
        code = with_publication(code, _publish(result.run_id, policy, output))
    raise typer.Exit(code)


def with_publication(code: int, published: int) -> int:
    """The sweep's exit code after its verdicts' publication: the breaker's (7) over any; a publication that failed (8)
    over a healthy or warning verdict (0, 1), so that a timer's unit alerts when the scheduler was not told; the
    findings' own code (4, 5) and the store's (6) stand over a failed publication (each alerts already)."""
    from fleetctl.errors import EXIT_BREAKER, EXIT_PUBLISH

    if published == EXIT_BREAKER:
        return EXIT_BREAKER
    if published == EXIT_PUBLISH and code in (0, 1):
        return EXIT_PUBLISH
    return code


def _publish(run_id: int, policy: Any, output: Format) -> int:
    """The run's verdicts on its servers' nodes (fleetctl.k8s.publish): EXIT_BREAKER when the breaker tripped,
    EXIT_PUBLISH when a cluster could not be read or written (one line each; the sweep is stored and `fleetctl k8s
    publish` publishes it), else 0. :func:`with_publication` makes the sweep's exit code of it.
    """
    from fleetctl.cli.common import conn
    from fleetctl.cli.k8s import report_publication
    from fleetctl.k8s.publish import publish

    with conn() as c:
        pub = publish(c, run_id, policy)
    return report_publication(pub, policy, output, in_sweep=True)


def _check_textfile_dir(directory: Path) -> None:
    """Refuse (exit 2, before any work) a --textfile folder that is missing or cannot take a new file.

    Checked by creating and removing a file there, as the end of the run will: a permission bit says nothing of a
    read-only mount or an immutable folder, and root passes every access() check.
    """
    import tempfile

    from fleetctl.errors import InputError

    if not directory.is_dir():
        raise InputError(f"{directory}: not a directory", field="--textfile")
    try:
        with tempfile.NamedTemporaryFile(prefix=".fleetctl.prom.", suffix=".check", dir=directory):
            pass
    except OSError as e:
        raise InputError(f"{directory}: cannot write there: {e.strerror or e}", field="--textfile") from e


def _scaleout(servers: list[Any], switches: list[Any], opts: Any) -> Any:
    """With FLEETCTL_TEMPORAL set, the sweep's collector on Temporal; None: in process."""
    from fleetctl.config import temporal_address, temporal_namespace

    address = temporal_address()
    if not address:
        return None
    from fleetctl.scaleout.sweep import collector

    return collector(servers, switches, opts, address, temporal_namespace())


def _report(result: Any, output: Format, limit: int) -> None:
    from fleetctl.cli.output import console, emit_one

    if output != Format.table:
        emit_one({
            "run": result.run_id, "started_at": result.started_at.isoformat(), "duration_s": round(result.duration_s, 2),
            "servers": result.servers, "switches": result.switches, "targets_by_status": result.counts,
            "worst_new": result.worst_new.value, "new": result.new, "resolved": result.resolved,
            "persisting": result.persisting, "pruned_runs": result.pruned,
        }, output)  # fmt: skip
        return
    out = console()
    c = result.counts
    out.print(f"sweep {result.run_id}: {result.servers} servers, {result.switches} switches in {result.duration_s:.1f} s: "
              + ", ".join(f"[{_STYLE[s]}]{c.get(s, 0)} {s}[/]" for s in ("ok", "warning", "unknown", "critical")))  # fmt: skip
    acked = sum(1 for f in result.findings if f.get("ack_id"))
    by = {s: sum(1 for f in result.new if f["status"] == s) for s in ("critical", "unknown", "warning")}
    detail = ", ".join(f"{n} {s}" for s, n in by.items() if n)
    out.print(f"since the last sweep: {len(result.new)} new" + (f" ({detail})" if detail else "") + ", "
              f"{len(result.resolved)} resolved, {len(result.persisting)} persisting"
              + (f"; {acked} acknowledged" if acked else ""))  # fmt: skip
    if result.findings:
        _print_findings(result.findings, output, limit=limit)
    if result.resolved:
        from fleetctl.cli.output import emit

        emit([{"target": f["target"], "check": f["check"], "subject": f["subject"], "was": f["status"], "message": f["message"],
               "since": _when(f["first_seen"])} for f in result.resolved[:limit or None]], output, title="resolved",
             columns=["target", "check", "subject", "was", "message", "since"])  # fmt: skip


@app.command("list")
def list_(
    limit: Annotated[int, typer.Option(help="How many runs, newest first.", parser=whole(1))] = 20,
    output: OutputOpt = Format.table,
) -> None:
    """The sweep runs kept, newest first."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.sweep.history import runs

    with conn() as c:
        rows = runs(c, limit)
    emit([{"run": r["id"], "started": _when(r["started_at"]), "state": r["state"], "selector": r["selector"], "servers": r["servers"],
           "switches": r["switches"], "duration_s": round(r["duration_s"], 1) if r["duration_s"] is not None else None,
           **{s: (r["counts"] or {}).get(s, 0) for s in ("ok", "warning", "unknown", "critical")}, "worst_new": r["worst_new"]}
          for r in rows], output)  # fmt: skip


@app.command("show")
def show(
    run_ref: Annotated[str, typer.Argument(metavar="[RUN]", help="A run id, latest, or latest~N.", callback=a_run)] = "latest",
    status: Annotated[list[str] | None, typer.Option("--status", help="Only these statuses (repeat).", callback=non_empty)] = None,
    target: Annotated[str | None, typer.Option("--target", help="Only this server or switch.", callback=non_empty)] = None,
    check: Annotated[str | None, typer.Option("--check", help="Only this check.", callback=non_empty)] = None,
    output: OutputOpt = Format.table,
) -> None:
    """The findings of a run (the latest by default), worst first; acknowledged ones marked."""
    from fleetctl.cli.common import conn
    from fleetctl.errors import InputError
    from fleetctl.sweep.history import findings, get_run

    for s in status or []:
        if s not in ("warning", "unknown", "critical"):
            raise InputError(f"--status {s!r}: use warning, unknown or critical", field="--status")
    with conn() as c:
        r = get_run(c, run_ref)
        rows = findings(c, r["id"], status=status, target=target, check=check)
    if output != Format.table:
        from fleetctl.cli.output import emit

        emit(rows, output)
        return
    from fleetctl.cli.output import console

    console().print(f"sweep {r['id']} of {_when(r['started_at'])} ({r['selector']}): {len(rows)} findings")
    _print_findings(rows, output)


@app.command("diff")
def diff(
    before: Annotated[
        str | None, typer.Argument(metavar="[RUN]", help="The earlier run (default: the one before the later).", callback=a_run)
    ] = None,
    after: Annotated[str | None, typer.Argument(metavar="[RUN]", help="The later run (default: the latest).", callback=a_run)] = None,
    output: OutputOpt = Format.table,
) -> None:
    """New problems, resolved ones, and those persisting (since when) between two runs."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import console, emit, emit_one
    from fleetctl.sweep import history

    with conn() as c:
        if after is None and before is not None:  # one RUN: from it to the latest
            b, a = history.get_run(c, before), history.get_run(c, "latest")
        else:
            a = history.get_run(c, after or "latest")
            b = history.get_run(c, before) if before else _previous(c, a["id"])
        d = history.diff(c, b["id"], a["id"])
    if output != Format.table:
        emit_one({"before": b["id"], "after": a["id"], **d}, output)
        return
    out = console()
    out.print(f"sweep {b['id']} ({_when(b['started_at'])}) -> sweep {a['id']} ({_when(a['started_at'])}): "
              f"{len(d['new'])} new, {len(d['resolved'])} resolved, {len(d['persisting'])} persisting")  # fmt: skip
    for label, rows in (("new", d["new"]), ("resolved", d["resolved"]), ("persisting", d["persisting"])):
        if rows:
            emit([{"status": f["status"], "target": f["target"], "check": f["check"], "subject": f["subject"], "message": f["message"],
                   "since": _when(f["first_seen"])} for f in rows], output, title=label,
                 styles={"status": lambda v: _STYLE.get(v)})  # fmt: skip


def _previous(c: Any, run_id: int) -> dict[str, Any]:
    from sqlalchemy import select

    from fleetctl.errors import NotFound
    from fleetctl.store import tables as T

    row = c.execute(select(T.sweep_run).where(T.sweep_run.c.id < run_id, T.sweep_run.c.state == "finished")
                    .order_by(T.sweep_run.c.id.desc()).limit(1)).first()  # fmt: skip
    if row is None:
        raise NotFound(f"no finished sweep before run {run_id} to compare with")
    return dict(row._mapping)


@app.command("checks")
def checks_(output: OutputOpt = Format.table) -> None:
    """The checks a sweep runs, with what each reads and costs."""
    from fleetctl.cli.output import emit
    from fleetctl.sweep.registry import checks

    emit([c.metadata() for c in checks(level="all")], output,
         columns=["kind", "name", "severity", "level", "reads", "cost", "description"])  # fmt: skip
