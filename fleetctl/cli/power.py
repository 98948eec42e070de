"""`fleetctl power`: state, on, off, cycle, restart, over many servers at once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt, seconds
from fleetctl.cli.maintain import DrainTimeoutOpt, EmptyDirOpt, ForceDrainOpt, GraceOpt, MaxUnavailableOpt, NoDrainOpt
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
    max_unavailable: str = "1"

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
    """Off, cycle, restart: drain the live nodes in waves, refuse the other servers in service, honour --dry-run, run, leave.

    A server in service that is a live node of a declared cluster is cordoned and drained first (its pods go through the
    Eviction API, budgets honoured), so being in service does not refuse it: the drain is what makes the action safe. A
    server in service that is no node is refused without --allow-in-service, as before; a server in any other state runs
    no users' pods, and its cluster is not asked. The live nodes go in waves under --max-unavailable per rack: a wave's
    nodes are drained, acted on and left before the next wave's are touched; the servers that are no live node go with
    the first. Everything is checked before the first device or node is touched (docs/kubernetes.md). ``keep_cordoned``:
    the action leaves the server down (off): its node stays cordoned, held with this reason, until `fleetctl k8s uncordon`.
    """
    from fleetctl.cli.bmcrun import execute, refuse_in_service, resolve, run_with_progress, summarise
    from fleetctl.cli.maintain import Maintained, check_all

    servers = resolve(targets, output)
    options = drain.options()
    waves = {} if drain.no_drain else check_all(servers, options, max_unavailable=drain.max_unavailable)
    refuse_in_service([s for s in servers if s.name not in waves], allow_in_service)
    if dry_run:
        for s in servers:
            if s.name in waves:
                typer.echo(f"would cordon and drain the node of {s.name} first (wave {waves[s.name] + 1})")
        return _dry(servers, verb)
    columns = ["server", "ok", "action", "error", "elapsed"]
    if not waves:
        execute(servers, op, kind=kind, targets=targets, args=args, output=output, describe=describe, columns=columns)
        return
    held = Maintained.begin(dict.fromkeys(waves), kind="k8s.maintenance", target=" ".join(targets), options=options, action=kind)
    outcomes: list[Any] = []
    nodes: dict[str, dict[str, Any]] = {}
    try:
        for wave in range(max(waves.values()) + 1):
            held.enter_all({n: w for n, w in waves.items() if w == wave}, why=kind, options=options, quiet=output != Format.table)
            batch = [s for s in servers if waves.get(s.name, 0) == wave and s.name not in held.failed]
            if not batch:
                continue
            # One power job per wave (the BMC runner journals each call); the maintenance job holds the nodes throughout.
            for o in run_with_progress(batch, op, kind=kind, targets=targets, args=args, output=output):
                outcomes.append(o)
                if o.server in held.entered:
                    why = (keep_cordoned or "") if o.ok else f"{kind} failed: {o.error}"
                    nodes[o.server] = {"node": held.leave(o.server, ok=o.ok and keep_cordoned is None, reason=why)}
    except BaseException:
        held.interrupted()  # the nodes entered and not left stay cordoned, held "interrupted"; a re-run resumes them
        raise
    held.finish()
    held.report_not_drained(output)
    try:
        summarise(outcomes, describe=describe, extra=nodes, output=output, columns=["server", "ok", "action", "node", "error", "elapsed"])
    finally:
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
    max_unavailable: MaxUnavailableOpt = "1",
    no_drain: NoDrainOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Shut servers down (gracefully unless --force); a live Kubernetes node is drained first and stays cordoned."""

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.power.off(force=force)

    _disruptive(targets, verb="force off" if force else "shut down", kind="power.off", allow_in_service=allow_in_service,
                dry_run=dry_run, output=output, op=op, args={"force": force},
                drain=DrainArgs(drain_timeout, delete_emptydir_data, force_drain, grace_period, no_drain, max_unavailable),
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
    max_unavailable: MaxUnavailableOpt = "1",
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
                drain=DrainArgs(drain_timeout, delete_emptydir_data, force_drain, grace_period, no_drain, max_unavailable),
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
    max_unavailable: MaxUnavailableOpt = "1",
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
                drain=DrainArgs(drain_timeout, delete_emptydir_data, force_drain, grace_period, no_drain, max_unavailable),
                describe=lambda v: {"action": v})  # fmt: skip
