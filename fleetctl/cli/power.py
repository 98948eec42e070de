"""`fleetctl power`: state, on, off, cycle, restart, over many servers at once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt, seconds
from fleetctl.cli.maintain import DrainTimeoutOpt, EmptyDirOpt, ForceDrainOpt, GraceOpt, NoDrainOpt
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)
TargetsArg = Annotated[list[str], typer.Argument(help="Servers, racks, sites, selectors (state=, tag=, model=) or all.")]
AllowOpt = Annotated[
    bool, typer.Option("--allow-in-service", help="Also act on servers in service that are no Kubernetes node (a live node is drained "
                       "first, without it).")  # fmt: skip
]


@dataclass(frozen=True)
class DrainArgs:
    """The drain options of one disruptive command (docs/kubernetes.md)."""

    timeout_s: float = 600.0
    delete_emptydir_data: bool = False
    force: bool = False
    grace_s: int | None = None
    no_drain: bool = False

    def options(self) -> Any:
        from fleetctl.cli.maintain import drain_options

        return drain_options(self.timeout_s, self.delete_emptydir_data, self.force, self.grace_s)


def _dry(servers: list[Any], action: str) -> None:
    for s in servers:
        typer.echo(f"would {action} {s.name} (rack {s.rack}, state {s.state})")
    typer.echo(f"dry run: {len(servers)} server(s), nothing changed")


@app.command("status")
def status(targets: TargetsArg, output: OutputOpt = Format.table) -> None:
    """Read the power state of each server."""
    from fleetctl.cli.bmcrun import execute, resolve

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.power.state()

    execute(resolve(targets, output), op, kind="power.status", targets=targets, output=output,
            describe=lambda v: {"power": str(v)}, columns=["server", "ok", "power", "error", "elapsed"])  # fmt: skip


@app.command("on")
def on(
    targets: TargetsArg,
    stagger: Annotated[
        float, typer.Option(help="Seconds between two power-ons in one rack (spreads inrush).", callback=seconds(0, 3600))
    ] = 1.0,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Power servers on, staggered per rack and within each rack's power budget.

    A server that is already on is left alone (never cycled). Servers that are
    on, or that cannot be read, count at their model's peak draw; a server
    that would take its rack over budget is not started (exit 1).
    """
    import dataclasses
    import time

    from fleetctl.cli.bmcrun import execute, resolve, run_with_progress
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.interfaces.bmc import PowerState
    from fleetctl.targets import resolve as resolve_targets
    from fleetctl.workflows.power import plan_power_on, power_figures

    servers = resolve(targets, output)
    with conn() as c:
        by_server, budgets, members = power_figures(c, [s.name for s in servers])
        rack_members = resolve_targets(c, sorted({n for ms in members.values() for n, _ in ms}))

    async def state(bmc):  # type: ignore[no-untyped-def]
        return await bmc.power.state()

    read_at = time.time()

    states = {o.server: (o.value if o.ok else None) for o in run_with_progress(rack_members, state, kind="power.status",
                                                                             targets=targets, output=output)}  # fmt: skip
    drawing = {s.name for s in rack_members if states.get(s.name) != PowerState.OFF}
    already_on = {rack: [(n, p) for n, p in ms if n in drawing] for rack, ms in members.items()}
    to_start = [(s.name, *by_server[s.name]) for s in servers if s.name not in drawing]
    plan = plan_power_on(to_start, already_on=already_on, budgets=budgets, stagger_s=stagger)
    refused = [p for p in plan.slots if p.start_s is None]
    if dry_run:
        rows = [{"server": p.server, "rack": p.rack, "start_s": p.start_s, "peak_w": p.peak_w,
                 "action": "would power on" if p.start_s is not None else "refused", "reason": p.reason} for p in plan.slots]  # fmt: skip
        rows += [{"server": s.name, "rack": by_server[s.name][0], "start_s": None, "peak_w": by_server[s.name][1],
                  "action": "already on" if states.get(s.name) == PowerState.ON else f"state {states.get(s.name)}", "reason": None}
                 for s in servers if s.name in drawing]  # fmt: skip
        emit(rows, output, columns=["server", "rack", "start_s", "peak_w", "action", "reason"])
        if refused:
            raise typer.Exit(1)
        return
    # The plan above is this command's view. Each start is admitted in the store when its server is ready,
    # so another operator's run or a provisioning worker in the same racks counts it too, and this command
    # counts theirs: one that took the room since the plan leaves a server here not started.
    from fleetctl.lifecycle.locks import owner_id
    from fleetctl.lifecycle.rack_power import OverBudget, RackPower
    from fleetctl.store import get_engine

    ledger = RackPower(get_engine(), budgets=budgets, members=members, drawing=drawing, read_at=read_at, stagger_s=stagger,
                       holder=owner_id())  # fmt: skip
    slots = {p.server: p for p in plan.slots if p.start_s is not None}
    go = [s for s in servers if s.name in slots or s.name in drawing]

    async def op(bmc):  # type: ignore[no-untyped-def]
        p = slots.get(bmc.target.name)
        if p is not None:
            try:
                await ledger.take_turn(p.rack, p.server, p.peak_w, already_drawing=False)
            except OverBudget as e:  # a failed row (nothing was sent), and listed under "Not started" with the figures
                refused.append(dataclasses.replace(p, start_s=None, reason=str(e)))
                raise
        return await bmc.power.on()

    try:
        execute(go, op, kind="power.on", targets=targets, args={"stagger": stagger}, output=output,
                describe=lambda sent: {"action": "powered on" if sent else "already on"},
                columns=["server", "ok", "action", "error", "elapsed"])  # fmt: skip
    finally:
        if refused:
            emit([{"server": p.server, "rack": p.rack, "reason": p.reason} for p in refused], output, title="Not started")
    if refused:
        raise typer.Exit(1)


def _disruptive(targets: list[str], *, verb: str, kind: str, allow_in_service: bool, dry_run: bool, output: Format,
                op: Callable[[Any], Awaitable[Any]], describe: Callable[[Any], dict[str, Any]], drain: DrainArgs,
                args: dict[str, Any] | None = None, keep_cordoned: str | None = None) -> None:  # fmt: skip
    """Off, cycle, restart: drain the live nodes, refuse the other servers in service, honour --dry-run, run, leave, summarise.

    A server in service that is a live node of a declared cluster is cordoned and drained first (its pods go through the
    Eviction API, budgets honoured), so being in service does not refuse it: the drain is what makes the action safe. A
    server in service that is no node is refused without --allow-in-service, as before; a server in any other state runs
    no users' pods, and its cluster is not asked. Everything is checked before the first
    device or node is touched (docs/kubernetes.md). ``keep_cordoned``: the action leaves the server down (off): its node
    stays cordoned, held with this reason, until `fleetctl k8s uncordon`.
    """
    from fleetctl.cli.bmcrun import execute, refuse_in_service, resolve
    from fleetctl.cli.maintain import Maintained, check_all

    servers = resolve(targets, output)
    options = drain.options()
    live = {} if drain.no_drain else check_all(servers, options)
    refuse_in_service([s for s in servers if s.name not in live], allow_in_service)
    if dry_run:
        for s in servers:
            if s.name in live:
                typer.echo(f"would cordon and drain node {live[s.name].node} of {s.name} first")
        return _dry(servers, verb)
    held: Maintained | None = None
    go = servers
    if live:
        held = Maintained.begin(live, kind="k8s.maintenance", target=" ".join(targets), options=options, action=kind)
        try:
            held.enter_all(live, why=kind, options=options, quiet=output != Format.table)
        except BaseException:
            held.interrupted()
            raise
        go = [s for s in servers if s.name not in held.failed]

    def after(outcomes: list[Any]) -> dict[str, dict[str, Any]]:
        if held is None:
            return {}
        out = {}
        for o in outcomes:
            if o.server in held.entered:
                ok = o.ok and keep_cordoned is None
                why = (keep_cordoned or "") if o.ok else f"{kind} failed: {o.error}"
                out[o.server] = {"node": held.leave(o.server, ok=ok, reason=why)}
        held.finish()
        return out

    try:
        if go:
            columns = ["server", "ok", "action", *(["node"] if held else []), "error", "elapsed"]
            execute(go, op, kind=kind, targets=targets, args=args, output=output, describe=describe, after=after, columns=columns)
    except BaseException as e:
        if held is not None and not held.ended and not isinstance(e, typer.Exit):
            held.interrupted()
        raise
    finally:
        if held is not None:
            held.report_not_drained(output)
    if held is not None:
        held.finish()
        if held.failed or held.not_left:
            raise typer.Exit(1)


@app.command("off")
def off(
    targets: TargetsArg,
    force: Annotated[bool, typer.Option("--force", help="Cut power (ForceOff) instead of a graceful shutdown.")] = False,
    allow_in_service: AllowOpt = False,
    drain_timeout: DrainTimeoutOpt = 600.0,
    delete_emptydir_data: EmptyDirOpt = False,
    force_drain: ForceDrainOpt = False,
    grace_period: GraceOpt = None,
    no_drain: NoDrainOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Shut servers down (gracefully unless --force); a live Kubernetes node is drained first and stays cordoned."""

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.power.off(force=force)

    _disruptive(targets, verb="force off" if force else "shut down", kind="power.off", allow_in_service=allow_in_service,
                dry_run=dry_run, output=output, op=op, args={"force": force},
                drain=DrainArgs(drain_timeout, delete_emptydir_data, force_drain, grace_period, no_drain),
                keep_cordoned="powered off: uncordon with `fleetctl k8s uncordon` once it is back",
                describe=lambda sent: {"action": "powering off" if sent else "already off"})  # fmt: skip


@app.command("cycle")
def cycle(
    targets: TargetsArg,
    allow_in_service: AllowOpt = False,
    drain_timeout: DrainTimeoutOpt = 600.0,
    delete_emptydir_data: EmptyDirOpt = False,
    force_drain: ForceDrainOpt = False,
    grace_period: GraceOpt = None,
    no_drain: NoDrainOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Power-cycle servers (off, then on); a live Kubernetes node is drained first, uncordoned after."""

    async def op(bmc):  # type: ignore[no-untyped-def]
        await bmc.power.cycle()
        return "cycled"

    _disruptive(targets, verb="power-cycle", kind="power.cycle", allow_in_service=allow_in_service, dry_run=dry_run,
                output=output, op=op,
                drain=DrainArgs(drain_timeout, delete_emptydir_data, force_drain, grace_period, no_drain),
                describe=lambda v: {"action": v})  # fmt: skip


@app.command("restart")
def restart(
    targets: TargetsArg,
    graceful: Annotated[bool, typer.Option("--graceful", help="Ask the OS to restart instead of forcing it.")] = False,
    allow_in_service: AllowOpt = False,
    drain_timeout: DrainTimeoutOpt = 600.0,
    delete_emptydir_data: EmptyDirOpt = False,
    force_drain: ForceDrainOpt = False,
    grace_period: GraceOpt = None,
    no_drain: NoDrainOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Restart servers (forced unless --graceful); a live Kubernetes node is drained first, uncordoned after."""

    async def op(bmc):  # type: ignore[no-untyped-def]
        await bmc.power.restart(force=not graceful)
        return "restarted"

    _disruptive(targets, verb="restart", kind="power.restart", allow_in_service=allow_in_service, dry_run=dry_run,
                output=output, op=op,
                drain=DrainArgs(drain_timeout, delete_emptydir_data, force_drain, grace_period, no_drain),
                describe=lambda v: {"action": v})  # fmt: skip
