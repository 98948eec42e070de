"""`fleetctl board`: accelerator boards (MN-Core, GPU)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt, ReasonOpt, free_text, non_empty, whole
from fleetctl.cli.maintain import DrainTimeoutOpt, EmptyDirOpt, ForceDrainOpt, GraceOpt, MaxUnavailableOpt, NoDrainOpt
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)


@app.command("list")
def list_(
    server: Annotated[str | None, typer.Option(help="Only boards in this server.", callback=non_empty)] = None,
    rack: Annotated[str | None, typer.Option(help="Only boards in this rack.", callback=non_empty)] = None,
    kind: Annotated[str | None, typer.Option(help="mncore2, mncore or gpu.", callback=non_empty)] = None,
    state: Annotated[str | None, typer.Option(help="ok, suspect, failed, rma, unknown.", callback=non_empty)] = None,
    output: OutputOpt = Format.table,
) -> None:
    """List accelerator boards."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.inventory.queries import list_boards

    with conn() as c:
        rows = list_boards(c, server=server, rack=rack, kind=kind, state=state)
    emit(rows, output, columns=["serial", "kind", "model", "server", "slot", "pci", "state", "rack"])


@app.command("show")
def show(serial: str, output: OutputOpt = Format.table) -> None:
    """Show one board."""
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit_one
    from fleetctl.inventory.queries import list_boards

    with conn() as c:
        row = _one_board(list_boards(c), serial)
    emit_one(row, output)


@app.command("add")
def add(
    serial: str,
    server: Annotated[str, typer.Option(help="The server that holds it.")],
    slot: Annotated[int, typer.Option(help="Slot number in the server.", parser=whole(0, 63))],
    kind: Annotated[str | None, typer.Option(help="mncore2, mncore or gpu (default: the model's).")] = None,
    pci: Annotated[str | None, typer.Option(help="PCI address, like 0000:1b:00.0.")] = None,
    model: Annotated[str | None, typer.Option(help="Board model name.")] = None,
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Add a board to a server."""
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory import edits
    from fleetctl.inventory.schema import BoardSpec
    from fleetctl.inventory.service import edit_site

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        _, spec = edits.find_server(doc, server)
        spec.boards.append(BoardSpec.model_validate({"serial": serial, "slot": slot, "kind": kind, "pci": pci, "model": model}))

    show_plan(edit_site(edits.site_of_server(server), mutate, action="board.add", dry_run=dry_run, reason=reason), dry_run=dry_run)


def _one_board(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The board an operator names: its serial, or SERIAL/POSITION where boards share a serial (GB200/GB300)."""
    from fleetctl.errors import InputError, NotFound
    from fleetctl.inventory.queries import is_board

    found = [b for b in rows if is_board(name, b["serial"], b.get("position"))]
    if not found:
        raise NotFound(f"no board with serial {name!r}")
    if len(found) > 1:
        names = ", ".join(f"{b['serial']}/{b['position']}" for b in found)
        raise InputError(f"{len(found)} boards share serial {name!r}: name one ({names})", field="SERIAL")
    return found[0]


def _board_site(serial: str) -> tuple[str, str]:
    from fleetctl.cli.common import conn
    from fleetctl.errors import NotFound
    from fleetctl.inventory import edits
    from fleetctl.inventory.queries import list_boards

    with conn() as c:
        row = _one_board(list_boards(c), serial)
    if row["server"] is None:
        raise NotFound(f"no board with serial {serial!r}")
    return edits.site_of_server(row["server"]), row["server"]


@app.command("set")
def set_(
    serial: str,
    server: Annotated[str | None, typer.Option(help="Move it to this server (same site).")] = None,
    slot: Annotated[int | None, typer.Option(help="Slot number.", parser=whole(0, 63))] = None,
    pci: Annotated[str | None, typer.Option(help="PCI address.")] = None,
    model: Annotated[str | None, typer.Option(help="Board model name.")] = None,
    state: Annotated[str | None, typer.Option(help="ok, suspect, failed, rma (along the board transition table).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Allow a state change the board transition table refuses (audited).")] = False,
    drain_timeout: DrainTimeoutOpt = 600.0,
    delete_emptydir_data: EmptyDirOpt = False,
    force_drain: ForceDrainOpt = False,
    grace_period: GraceOpt = None,
    max_unavailable: MaxUnavailableOpt = "1",
    no_drain: NoDrainOpt = False,
    dry_run: DryRunOpt = False,
    reason: ReasonOpt = None,
) -> None:
    """Change a board: move it, or mark it suspect, failed or sent for RMA (`docs/model.md`: board states).

    Sent for RMA (``--state rma``) in a server in service that is a live Kubernetes node, the node is cordoned and
    drained first (the board is about to be pulled) and stays cordoned, held, until `fleetctl k8s uncordon`
    (docs/kubernetes.md).
    """
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory import edits
    from fleetctl.inventory.queries import is_board
    from fleetctl.inventory.service import edit_site, set_board_state

    site_name, holder = _board_site(serial)
    if any(v is not None for v in (server, slot, pci, model)):

        def mutate(doc) -> None:  # type: ignore[no-untyped-def]
            _, spec = edits.find_server(doc, holder)
            board = next(b for b in spec.boards if is_board(serial, b.serial, b.position))
            if server is not None and server != holder:
                _, target = edits.find_server(doc, server)
                spec.boards.remove(board)
                target.boards.append(board)
            for field, value in (("slot", slot), ("pci", pci), ("model", model)):
                if value is not None:
                    setattr(board, field, value)

        show_plan(edit_site(site_name, mutate, action="board.set", dry_run=dry_run, reason=reason), dry_run=dry_run)
    if state == "rma" and not no_drain:
        from fleetctl.cli.maintain import drain_options

        _rma_drained(serial, holder, options=drain_options(drain_timeout, delete_emptydir_data, force_drain, grace_period),
                     max_unavailable=max_unavailable, reason=reason, dry_run=dry_run, force=force)  # fmt: skip
        return
    if state is not None:
        old = set_board_state(serial, state, reason=reason, dry_run=dry_run, force=force)
        done = f"state {old} -> {state}" if old != state else f"already {state}, nothing done"
        typer.echo(f"board {serial}: {done}{' (dry run)' if dry_run else ''}")


def _rma_drained(serial: str, holder: str, *, options: Any, max_unavailable: str, reason: str | None, dry_run: bool,
                 force: bool) -> None:  # fmt: skip
    """A board to rma; its server's node, when it is a live one, cordoned and drained first and left held after.

    Checked before anything is touched: the move along the board table (a dry run of it), the cluster, the node, the
    pods' verdicts. The node stays cordoned whether the move went well (the board is to be pulled) or not.
    """
    from fleetctl.cli.common import conn
    from fleetctl.cli.maintain import Maintained, check_all
    from fleetctl.inventory.service import set_board_state
    from fleetctl.targets import resolve

    with conn() as c:
        servers = resolve(c, [holder])
    live = check_all(servers, options, max_unavailable=max_unavailable)  # its rack's bound counts the nodes out already
    if dry_run or live:
        # The move along the board table, checked (a dry run of it) before the node is touched: a refusal leaves it be.
        old = set_board_state(serial, "rma", reason=reason, dry_run=True, force=force)
        if old == "rma":
            live = {}  # already sent for RMA: nothing to drain for
    if dry_run:
        if holder in live:
            typer.echo(f"would cordon and drain the node of {holder} first")
        typer.echo(f"board {serial}: {f'state {old} -> rma' if old != 'rma' else 'already rma, nothing done'} (dry run)")
        return
    held: Maintained | None = None
    if live:
        held = Maintained.begin(live, kind="k8s.maintenance", target=holder, options=options, action="board.rma")
        try:
            held.enter_all(live, why=f"board.rma {serial}", options=options)
        except BaseException:
            held.interrupted()
            raise
        if held.failed:
            held.report_not_drained(Format.table)
            held.finish()
            raise typer.Exit(1)
    try:
        old = set_board_state(serial, "rma", reason=reason, force=force)
    except BaseException as e:
        if held is not None:
            held.leave(holder, ok=False, reason=f"board.rma {serial} failed: {e}")
            held.finish()
        raise
    done = f"state {old} -> rma" if old != "rma" else "already rma, nothing done"
    typer.echo(f"board {serial}: {done}")
    if held is not None:
        node = held.leave(holder, ok=False, reason=f"board {serial} sent for RMA: `fleetctl k8s uncordon {holder}` once it is "
                          "replaced or removed")  # fmt: skip
        held.finish()
        if holder in held.entered:
            typer.echo(f"{holder}: node {held.entered[holder].node} {node} (job {held.job})")


@app.command("remove")
def remove(serial: str, dry_run: DryRunOpt = False, reason: ReasonOpt = None) -> None:
    """Remove a board from the inventory."""
    from fleetctl.cli.common import show_plan
    from fleetctl.inventory import edits
    from fleetctl.inventory.queries import is_board
    from fleetctl.inventory.service import edit_site

    site_name, holder = _board_site(serial)

    def mutate(doc) -> None:  # type: ignore[no-untyped-def]
        _, spec = edits.find_server(doc, holder)
        spec.boards = [b for b in spec.boards if not is_board(serial, b.serial, b.position)]

    show_plan(edit_site(site_name, mutate, action="board.remove", dry_run=dry_run, reason=reason), dry_run=dry_run)


@app.command("check")
def check(
    targets: Annotated[list[str], typer.Argument(help="Servers, racks, sites, selectors (state=, tag=, model=) or all.")],
    output: OutputOpt = Format.table,
) -> None:
    """Quick accelerator check: expected boards present, full PCIe link, firmware at the baseline (exit 1 if not)."""
    from sqlalchemy import select

    from fleetctl.cli.bmcrun import resolve, run_with_progress, tally
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.store import tables as T
    from fleetctl.workflows.accel import check as judge

    servers = resolve(targets, output)
    expect: dict[str, tuple[str | None, int]] = {}
    baseline: dict[str, dict[str, str]] = {}
    with conn() as c:
        for r in c.execute(
            select(T.server.c.name, T.hardware_model.c.board_kind, T.hardware_model.c.board_count, T.hardware_model.c.id)
            .join(T.hardware_model, T.hardware_model.c.id == T.server.c.model_id)
        ):
            expect[r.name] = (r.board_kind, r.board_count)
        for r in c.execute(
            select(T.server.c.name, T.firmware_baseline.c.component, T.firmware_baseline.c.version)
            .join(T.firmware_baseline, T.firmware_baseline.c.model_id == T.server.c.model_id)
        ):
            baseline.setdefault(r.name, {})[r.component] = r.version

    async def op(bmc):  # type: ignore[no-untyped-def]
        name = bmc.target.name
        kind, count = expect.get(name, (None, 0))
        return judge(await bmc.inventory.facts(), await bmc.firmware.inventory(), kind=kind, count=count,
                     baseline=baseline.get(name, {}), server=name)  # fmt: skip

    outcomes = run_with_progress(servers, op, kind="board.check", targets=targets, output=output)
    rows = [
        {"server": o.server, "ok": o.ok and not o.value.problems, "expected": o.value.expected if o.ok else None,
         "found": o.value.found if o.ok else None, "problems": o.value.problems if o.ok else [], "error": o.error}  # fmt: skip
        for o in outcomes
    ]
    if output == Format.table:
        emit([{**r, "problems": "; ".join(r["problems"]) or ("none" if r["error"] is None else "")} for r in rows], output,
             columns=["server", "ok", "expected", "found", "problems", "error"],
             styles={"ok": lambda v: "green" if v else "bold red"})  # fmt: skip
        tally(outcomes, output, problems=sum(1 for r in rows if r["problems"]), what="with accelerator problems")
    else:
        emit(rows, output)
    if any(not r["ok"] for r in rows):
        raise typer.Exit(1)


rma_app = typer.Typer(no_args_is_help=True)
app.add_typer(rma_app, name="rma", help="Boards to ship back to the vendor: what failed, where, and the evidence.")


@rma_app.command("list")
def rma_list(
    all_: Annotated[bool, typer.Option("--all", help="Also the entries closed (shipped or cleared).")] = False,
    output: OutputOpt = Format.table,
) -> None:
    """Boards marked rma, oldest first: serial, where it sits, why, from which run."""
    from fleetctl.burnin.history import rma_list as rows_of
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit

    with conn() as c:
        rows = rows_of(c, include_closed=all_)
    if output == Format.table:
        rows = [{k: v for k, v in r.items() if k != "evidence"} for r in rows]
    emit(rows, output, columns=None if output != Format.table else
         ["serial", "kind", "model", "server", "slot", "reason", "source", "opened", "closed"])  # fmt: skip


@rma_app.command("close")
def rma_close(
    serial: str,
    reason: Annotated[str, typer.Option("--reason", help="Why: shipped (with the vendor's case number), or cleared.", callback=free_text)],
) -> None:
    """Close a board's open RMA entry (shipped, or found not faulty); the board's state is left to `board set`."""
    from sqlalchemy import select, update

    from fleetctl.cli.common import conn
    from fleetctl.errors import InputError, NotFound
    from fleetctl.inventory.service import actor
    from fleetctl.models.base import utcnow
    from fleetctl.store import immediate
    from fleetctl.store import tables as T

    if not reason.strip():
        raise InputError("--reason must say why (shipped: case number; or cleared)", field="--reason")
    with conn() as c:
        row = c.execute(select(T.board_rma.c.id).where(T.board_rma.c.serial == serial, T.board_rma.c.closed_at.is_(None))).first()
    if row is None:
        raise NotFound(f"board {serial} has no open RMA entry")
    from fleetctl.store import get_engine

    with immediate(get_engine()) as c:
        c.execute(update(T.board_rma).where(T.board_rma.c.id == row.id).values(closed_at=utcnow(), closed_reason=reason))
        c.execute(T.event.insert().values(at=utcnow(), actor=actor(), action="board.rma.close", object_kind="board", object_name=serial,
                                          detail="RMA entry closed", reason=reason))  # fmt: skip
    typer.echo(f"{serial}: RMA entry closed")
