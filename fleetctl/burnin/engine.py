"""`fleetctl burnin`: which servers, everything checked first, then every server at once (bounded).

The order of things, so that nothing is touched before everything needed is
known to be there:

1. :func:`plan`: the servers (named, or every due one), each carrying boards
   of the kind asked for, in a state whose OS answers; in-service servers only
   when named with ``--force``; the criteria and level; each server's SSH
   endpoint and boards. Anything missing is one :class:`InputError` (exit 2).
2. the run, as the burn-in workflow's description has it
   (:mod:`fleetctl.burnin.workflow`, on either engine): lock the servers,
   :func:`open_run` (new or resumed), then per server, at most
   ``concurrency`` at once, :func:`burn_server`: the stages on the host
   (``host.burn``) beside the BMC's sensors (:class:`BmcWatch`), the verdict
   per board (``verdict.evaluate``), and, in one transaction per server, the
   results, the boards' states, the RMA entries of failing boards and the
   server's move to maintenance; :func:`close_run`.

A run killed half-way keeps the servers it finished; the next run of the same
kind, level and duration resumes it (servers already done are not run again
unless ``restart``) and first stops what the dead one left running on the
hosts (``host.stop_leftover_script``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import insert, select, update

from fleetctl.burnin.criteria import BOARD_KINDS, CriteriaFile
from fleetctl.burnin.host import HostJob, HostOutcome, InvBoard
from fleetctl.burnin.verdict import BoardObservation, Reason, evaluate, worst
from fleetctl.errors import InputError

#: States in which a server's OS answers and its boards can be taken.
BURNABLE = ("ready", "maintenance", "in-service")
#: A fail moves its server here (from these states).
TO_MAINTENANCE_FROM = ("ready", "in-service")
EXIT_BY_VERDICT = {"pass": 0, "degraded": 1, "error": 4, "fail": 5}

Progress = Callable[[str, str, dict[str, Any]], None]  # (server, stage, details)


@dataclass
class ServerPlan:
    name: str
    id: int
    state: str
    model: str
    board_kind: str
    boards: list[InvBoard]
    job: HostJob
    ref: Any  # targets.ServerRef (for the BMC)
    baseline: dict[str, str]


@dataclass
class Plan:
    kind: str
    level: str
    seconds: float
    servers: list[ServerPlan]
    criteria: CriteriaFile
    selector: str
    due: bool  # chosen as due (no TARGET)
    skipped: dict[str, str] = field(default_factory=dict)  # not due, with why (only without TARGET)


@dataclass
class BoardResult:
    server: str
    serial: str | None
    device: str
    slot: int | None
    verdict: str
    reasons: list[dict[str, Any]]
    metrics: dict[str, Any]
    telemetry: list[dict[str, Any]] = field(default_factory=list)
    resumed: bool = False  # stored by an earlier (killed) pass of this run

    def row(self) -> dict[str, Any]:
        return {"server": self.server, "serial": self.serial, "device": self.device, "slot": self.slot, "verdict": self.verdict,
                "reasons": self.reasons, "metrics": self.metrics, "resumed": self.resumed}  # fmt: skip


@dataclass
class RunResult:
    run_id: int
    resumed: bool
    boards: list[BoardResult]
    workload_s: float
    elapsed_s: float
    rma: list[str]  # serials sent to RMA in this pass
    to_maintenance: list[str]
    notes: dict[str, list[str]]

    @property
    def counts(self) -> dict[str, int]:
        return counts([b.verdict for b in self.boards])

    @property
    def worst(self) -> str:
        return worst([b.verdict for b in self.boards])


def counts(verdicts: list[str]) -> dict[str, int]:
    """Results by verdict, as the run's row keeps them."""
    out = {"pass": 0, "degraded": 0, "fail": 0, "error": 0}
    for v in verdicts:
        out[v] = out.get(v, 0) + 1
    return out


@dataclass
class ServerDone:
    """One server's pass: what :func:`burn_server` stored and what the run reports of it.

    Plain values only: on Temporal it is an activity's result (``as_dict``), so the
    parent workflow can close the run and the command can report it.
    """

    server: str
    server_id: int
    boards: list[BoardResult]
    rma: list[str]
    moved: bool
    notes: list[str]
    workload_s: float
    elapsed_s: float
    error: str | None
    earlier: bool = False  # stored already by an earlier attempt of this run (Temporal's retry): not burned in again

    @property
    def verdict(self) -> str:
        return worst([b.verdict for b in self.boards])

    def step(self) -> Any:
        """The journal's row of this server (``Journal.record``)."""
        from fleetctl.workflows.journal import StepResult

        v = self.verdict
        return StepResult(self.server_id, v in ("pass", "degraded"), self.elapsed_s, output=f"{v}: {len(self.boards)} results",
                          error=self.error)  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        """Its summary as an activity's result: the boards' verdicts by device, not their reasons and metrics (the
        store holds those; a run's results would outgrow what a workflow's payload may hold), and its journal row."""
        return {"server": self.server, "server_id": self.server_id, "boards": {b.device: b.verdict for b in self.boards},
                "rma": self.rma, "moved": self.moved, "notes": self.notes, "workload_s": self.workload_s, "elapsed_s": self.elapsed_s,
                "error": self.error, "earlier": self.earlier, "verdict": self.verdict, "step": asdict(self.step())}  # fmt: skip


def sort_results(results: list[BoardResult], names: list[str]) -> None:
    """The report's order: servers as planned, then slot and device."""
    order = {n: i for i, n in enumerate(names)}
    results.sort(key=lambda b: (order.get(b.server, 1 << 30), b.slot if b.slot is not None else -1, b.device))


# --- planning ---------------------------------------------------------------------------


def _due(conn: Any, names: list[str], kind: str) -> dict[str, str | None]:
    """For each server: None when due, else why not.

    Due: never burned in (for this kind), or no burn-in since it last moved
    into its present state (newly provisioned into ready, or taken into
    maintenance since).
    """
    from sqlalchemy import func

    from fleetctl.store import tables as T

    last_run: dict[str, Any] = {}
    q = (select(T.burnin_result.c.server, func.max(T.burnin_result.c.finished_at).label("at"))
         .join(T.burnin_run, T.burnin_run.c.id == T.burnin_result.c.run_id)
         .where(T.burnin_run.c.kind == kind, T.burnin_result.c.verdict != "error", T.burnin_result.c.server.in_(names))
         .group_by(T.burnin_result.c.server))  # fmt: skip
    for r in conn.execute(q):
        last_run[r.server] = r.at
    last_move: dict[str, Any] = {}
    q2 = (select(T.event.c.object_name, func.max(T.event.c.at).label("at"))
          # a move burn-in made itself (a fail sends the server to maintenance) does not make it due again
          .where(T.event.c.action == "server.state", T.event.c.object_name.in_(names), T.event.c.reason.not_like("burn-in run %"))
          .group_by(T.event.c.object_name))  # fmt: skip
    for r in conn.execute(q2):
        last_move[r.object_name] = r.at
    from fleetctl.times import aware_utc

    out: dict[str, str | None] = {}
    for n in names:
        ran = aware_utc(last_run.get(n))
        moved = aware_utc(last_move.get(n))
        if ran is None or (moved is not None and moved > ran):
            out[n] = None
        else:
            out[n] = f"burned in at {ran.isoformat(timespec='seconds')}, unchanged since"
    return out


def plan(conn: Any, *, kind: str, targets: list[str], level: str, duration: float | None, criteria: CriteriaFile,
         force: bool = False, grace: float | None = None, interval: float | None = None) -> Plan:  # fmt: skip
    """Everything the run needs, checked before anything is touched.

    Raises:
        InputError: an unknown kind or level, no server to burn in, a named
            server without such boards or whose OS is not up, a server in
            service without ``force``, a server without SSH access or boards
            in the inventory.
    """
    from fleetctl.store import tables as T
    from fleetctl.targets import resolve, resolve_hosts

    board_kinds = BOARD_KINDS.get(kind, (kind,))  # the run's name, or the board kind itself (any a driver serves)
    if not any(k in criteria.levels for k in board_kinds):
        raise InputError(f"burn-in of {kind!r} boards: no burn-in for this kind (burn-in serves {', '.join(criteria.levels) or 'none'})",
                         field="--kind")  # fmt: skip
    lv = criteria.level(kind, level)
    seconds = float(duration) if duration is not None else lv.seconds
    if not seconds > 0 or seconds == float("inf"):
        raise InputError(f"--duration must be a number of seconds > 0, not {duration}", field="--duration")
    named = bool(targets)
    refs = resolve(conn, targets or ["all"])
    rows = {r.name: r for r in conn.execute(
        select(T.server.c.name, T.server.c.state, T.hardware_model.c.name.label("model"), T.hardware_model.c.board_kind)
        .join(T.hardware_model, T.hardware_model.c.id == T.server.c.model_id)
        .where(T.server.c.name.in_([r.name for r in refs])))}  # fmt: skip
    carrying = [r for r in refs if rows[r.name].board_kind in board_kinds]
    what = "/".join(board_kinds)
    if not carrying:
        raise InputError(f"no server {'among ' + ' '.join(targets) + ' ' if named else 'in this fleet '}carries {what} boards",
                         field="TARGET")  # fmt: skip
    skipped: dict[str, str] = {}
    if named:
        bad = [f"{r.name} ({rows[r.name].state})" for r in carrying if rows[r.name].state not in BURNABLE]
        if bad:
            raise InputError(f"{', '.join(bad[:5])}{' and more' if len(bad) > 5 else ''}: the OS is not up in that state; "
                             "burn-in runs on provisioned servers (ready, maintenance)", field="TARGET")  # fmt: skip
        busy = [r.name for r in carrying if rows[r.name].state == "in-service"]
        if busy and not force:
            raise InputError(f"{', '.join(busy[:5])}{' and more' if len(busy) > 5 else ''} in service: burn-in takes their boards "
                             "away from users; give --force to burn them in anyway", field="TARGET")  # fmt: skip
        chosen = carrying
    else:
        eligible = [r for r in carrying if rows[r.name].state in ("ready", "maintenance")]
        for r in carrying:
            if r not in eligible:
                skipped[r.name] = f"state {rows[r.name].state}"
        why = _due(conn, [r.name for r in eligible], kind)
        chosen = [r for r in eligible if why[r.name] is None]
        skipped.update({n: w for n, w in why.items() if w is not None})
    boards: dict[str, list[InvBoard]] = {}
    for b in conn.execute(select(T.accelerator_board, T.server.c.name.label("server"))
                          .join(T.server, T.server.c.id == T.accelerator_board.c.server_id)
                          .where(T.server.c.name.in_([r.name for r in chosen]), T.accelerator_board.c.kind.in_(board_kinds))):  # fmt: skip
        boards.setdefault(b.server, []).append(InvBoard(b.serial, b.kind, b.slot, b.pci_address, b.model))
    no_boards = [r.name for r in chosen if not boards.get(r.name)]
    if no_boards:
        raise InputError(f"{', '.join(no_boards[:5])}: no {what} board in the inventory (inspect it first: `fleetctl server inspect`)",
                         field="TARGET")  # fmt: skip
    hosts = resolve_hosts(conn, [r.name for r in chosen]) if chosen else {}
    baselines = _baselines(conn, [r.name for r in chosen])
    out: list[ServerPlan] = []
    for r in chosen:
        h = hosts[r.name]
        if h.target.key_file and not os.path.exists(h.target.key_file):
            raise InputError(f"{r.name}: the site's SSH key {h.target.key_file} does not exist", field="ssh_key")
        lvl = criteria.level(kind, level)
        job = HostJob(server=r.name, target=h.target, hostvars=dict(h.hostvars), kind=kind, boards=boards[r.name], model=h.model,
                      seconds=seconds, dcgm_level=lvl.dcgm_level,
                      grace=grace if grace is not None else max(30.0, seconds * 0.25),
                      interval=interval if interval is not None else max(1.0, min(30.0, seconds / 20)), force=force,
                      board_kind=h.board_kind or "")  # fmt: skip
        out.append(ServerPlan(r.name, r.id, rows[r.name].state, h.model or "", h.board_kind or "", boards[r.name], job, r,
                              baselines.get(r.name, {})))  # fmt: skip
    from fleetctl.preflight import for_burnin

    for_burnin([sp.ref for sp in out]).refuse()  # preflight (#13): the BMC credentials, every problem in one refusal (exit 2)
    return Plan(kind, level, seconds, out, criteria, " ".join(targets) or "due", not named, skipped)


def _baselines(conn: Any, names: list[str]) -> dict[str, dict[str, str]]:
    """The firmware baseline of each named server's hardware model: ``{server: {component: version}}``."""
    from fleetctl.store import tables as T

    if not names:
        return {}
    q = (select(T.server.c.name, T.firmware_baseline.c.component, T.firmware_baseline.c.version)
         .join(T.firmware_baseline, T.firmware_baseline.c.model_id == T.server.c.model_id)
         .where(T.server.c.name.in_(names)))  # fmt: skip
    out: dict[str, dict[str, str]] = {}
    for r in conn.execute(q):
        out.setdefault(r.name, {})[r.component] = r.version
    return out


# --- the run ----------------------------------------------------------------------------


def _run_holder(host: str, pid: int) -> Any:
    """Who runs a burn-in run: its process (host, pid), or its workflow on Temporal (host ``temporal:WORKFLOW``)."""
    from fleetctl.lifecycle.locks import Holder

    if host.startswith("temporal:"):
        return Holder.of_workflow("burnin", host.removeprefix("temporal:"))
    return Holder("burnin", host, pid)


def _open_run(engine: Any, *, kind: str, level: str, seconds: float, selector: str, names: list[str], restart: bool,
              actor: str) -> tuple[int, bool, set[str]]:  # fmt: skip
    """(run id, resumed, servers already done in it)."""
    from fleetctl.models.base import utcnow
    from fleetctl.store import immediate
    from fleetctl.store import tables as T

    # A run whose process is gone is interrupted (on this host; another host's stays running until seen from there),
    # and so is a run on Temporal whose workflow is closed (host "temporal:WORKFLOW"). Asked outside the write
    # transaction: a workflow's status is a question to Temporal.
    with engine.connect() as conn:
        running = conn.execute(select(T.burnin_run.c.id, T.burnin_run.c.host, T.burnin_run.c.pid)
                               .where(T.burnin_run.c.state == "running")).all()  # fmt: skip
    gone = [r.id for r in running if _run_holder(r.host, r.pid).alive() is False]
    with immediate(engine) as conn:
        if gone:
            conn.execute(update(T.burnin_run).where(T.burnin_run.c.id.in_(gone), T.burnin_run.c.state == "running")
                         .values(state="interrupted"))  # fmt: skip
        last = conn.execute(select(T.burnin_run).where(T.burnin_run.c.kind == kind, T.burnin_run.c.state == "interrupted")
                            .order_by(T.burnin_run.c.id.desc()).limit(1)).first()  # fmt: skip
        if last is not None and not restart and last.level == level and abs(last.duration_s - seconds) < 1e-6:
            done = {r.server for r in conn.execute(select(T.burnin_result.c.server).where(
                T.burnin_result.c.run_id == last.id, T.burnin_result.c.verdict != "error"))}  # fmt: skip
            servers = list(dict.fromkeys([*last.servers, *names]))
            conn.execute(update(T.burnin_run).where(T.burnin_run.c.id == last.id)
                         .values(state="running", host=socket.gethostname(), pid=os.getpid(), servers=servers))  # fmt: skip
            # Error rows of the dead pass are retried: they are not verdicts.
            conn.execute(T.burnin_result.delete().where(T.burnin_result.c.run_id == last.id, T.burnin_result.c.verdict == "error",
                                                         T.burnin_result.c.server.in_(names)))  # fmt: skip
            return int(last.id), True, done & set(names)
        if last is not None and restart:
            conn.execute(update(T.burnin_run).where(T.burnin_run.c.id == last.id).values(state="abandoned"))
        from fleetctl.models import BurninRun

        run_id = conn.execute(insert(BurninRun.__table__).values(
            started_at=utcnow(), state="running", kind=kind, level=level, duration_s=seconds, selector=selector, actor=actor,
            host=socket.gethostname(), pid=os.getpid(), servers=names, counts={})).inserted_primary_key[0]  # type: ignore[index]  # fmt: skip
    return int(run_id), False, set()


def stored_results(engine: Any, run_id: int, servers: set[str]) -> list[BoardResult]:
    """The results a run stored of these servers (marked ``resumed``: the caller says which are of this pass)."""
    return _stored(engine, run_id, servers)


def _stored(engine: Any, run_id: int, servers: set[str]) -> list[BoardResult]:
    from fleetctl.store import tables as T

    c = T.burnin_result.c
    with engine.connect() as conn:
        # Not the telemetry: the report does not show it (`burnin show --board` and the HTML report read it), and a
        # fleet's samples would be most of what this reads back.
        rows = conn.execute(select(c.server, c.serial, c.device, c.slot, c.verdict, c.reasons, c.metrics)
                            .where(c.run_id == run_id, c.server.in_(servers)).order_by(c.server, c.slot))  # fmt: skip
        return [BoardResult(r.server, r.serial, r.device, r.slot, r.verdict, list(r.reasons or []), dict(r.metrics or {}), resumed=True)
                for r in rows]  # fmt: skip


def recorded_already(engine: Any, run_id: int, server: str, server_id: int) -> ServerDone | None:
    """What this run stored of a server (its results, the RMA entries and the move they made), None when nothing.

    A Temporal activity whose worker was lost after the record is run again:
    it reports what the lost attempt stored instead of burning the server in
    (and recording it) a second time.
    """
    from fleetctl.store import tables as T

    boards = _stored(engine, run_id, {server})
    if not boards:
        return None
    for b in boards:
        b.resumed = False  # this pass's, stored by an attempt that could not report it
    with engine.connect() as conn:
        rma = list(conn.execute(select(T.board_rma.c.serial).where(T.board_rma.c.source == f"burnin:{run_id}",
                                                                   T.board_rma.c.server == server)).scalars())  # fmt: skip
        move = select(T.event.c.id).where(T.event.c.action == "server.state", T.event.c.object_name == server,
                                          T.event.c.reason.like(f"burn-in run {run_id}:%"))  # fmt: skip
        moved = conn.execute(move.limit(1)).first() is not None
    error = next((r["message"] for b in boards if b.verdict == "error" for r in b.reasons), None)
    return ServerDone(server, server_id, boards, rma, moved, ["recorded by an earlier attempt (its worker was lost)"], 0.0, 0.0, error,
                      earlier=True)  # fmt: skip


def record_error(engine: Any, run_id: int, server: str, server_id: int, message: str, *, actor: str) -> ServerDone:
    """A server that could not be burned in, for a reason outside the host (on Temporal: its activity never completed,
    every attempt lost): its ``error`` result stored as the engine stores a host's error (unless an attempt stored one)."""
    from fleetctl.models.base import utcnow
    from fleetctl.store import tables as T

    with engine.connect() as conn:
        model = conn.execute(select(T.hardware_model.c.name).join(T.server, T.server.c.model_id == T.hardware_model.c.id)
                             .where(T.server.c.name == server)).scalar() or ""  # fmt: skip
    br = [_error_result(server, message)]
    if _record(engine, run_id, server, model, br, actor=actor, started=utcnow()) is None:
        earlier = recorded_already(engine, run_id, server, server_id)
        if earlier is not None:
            return earlier
    return ServerDone(server, server_id, br, [], False, [], 0.0, 0.0, message)


def _error_result(server: str, message: str) -> BoardResult:
    """A server's one result when it could not be burned in: no board verdicts, the reason why."""
    return BoardResult(server, None, "", None, "error", [{"criterion": "host", "severity": "error", "message": message, "evidence": {}}],
                       {})  # fmt: skip


def _firmware_drift(components: list[Any], baseline: dict[str, str], boards: list[BoardObservation]) -> None:
    """Board firmware that differs from the model's baseline, onto the board of its slot (``<kind>_slot<N>_...``)."""
    from fleetctl.workflows.firmware import baseline_key

    by_slot = {o.slot: o for o in boards}
    for comp in components:
        m = re.search(r"slot(\d+)", comp.id, re.IGNORECASE)
        key = baseline_key(baseline, comp)
        if m is None or key is None or int(m.group(1)) not in by_slot:
            continue
        if comp.version != baseline[key]:
            by_slot[int(m.group(1))].firmware.append((comp.id, comp.version, baseline[key]))


def _record(engine: Any, run_id: int, server: str, model: str, results: list[BoardResult], *, actor: str,
            started: Any) -> tuple[list[str], bool] | None:  # fmt: skip
    """One server's results, board states, RMA entries and move to maintenance, in one transaction.

    Returns (serials sent to RMA, whether the server moved to maintenance); None
    when this run holds results of the server already (an earlier attempt of a
    Temporal activity stored them before its worker was lost): a server is never
    recorded twice. A resumed run deletes its error rows before it runs again,
    so in process this never happens.
    """
    from fleetctl.errors import InvalidTransition
    from fleetctl.lifecycle.boards import move_board
    from fleetctl.lifecycle.machine import move
    from fleetctl.lifecycle.states import BoardState
    from fleetctl.models.base import utcnow
    from fleetctl.store import immediate
    from fleetctl.store import tables as T

    now = utcnow()
    rma: list[str] = []
    moved = False
    with immediate(engine) as conn:
        if conn.execute(select(T.burnin_result.c.id).where(T.burnin_result.c.run_id == run_id, T.burnin_result.c.server == server)
                        .limit(1)).first() is not None:  # fmt: skip
            return None
        for b in results:
            conn.execute(insert(T.burnin_result).values(
                run_id=run_id, server=server, serial=b.serial, device=b.device, slot=b.slot, model=model, verdict=b.verdict,
                reasons=b.reasons, metrics=b.metrics, telemetry=b.telemetry, started_at=started, finished_at=now))  # fmt: skip
            if b.serial is None:
                continue
            state = {"pass": BoardState.OK, "degraded": BoardState.SUSPECT, "fail": BoardState.RMA}[b.verdict]
            board = conn.execute(select(T.accelerator_board.c.id, T.accelerator_board.c.kind, T.accelerator_board.c.model,
                                        T.accelerator_board.c.state).where(T.accelerator_board.c.serial == b.serial)).first()  # fmt: skip
            if board is None:
                continue
            detail = f"burn-in run {run_id}: {b.verdict}" + (f": {b.reasons[0]['message']}" if b.reasons else "")
            try:  # through the board table (an event board.state per change), from the state read above
                move_board(conn, board.id, state, actor=actor, reason=f"burnin:{run_id}", expected=board.state, detail=detail[:1000])
            except InvalidTransition as e:  # rma with its entry open, or moved meanwhile: the result is kept, the state stays
                detail += f"; state stays {board.state}: {e}"
            conn.execute(insert(T.event).values(at=now, actor=actor, action="board.burnin", object_kind="board", object_name=b.serial,
                                                detail=detail[:1000], reason=f"burnin:{run_id}"))  # fmt: skip
            if b.verdict == "fail":
                opened = conn.execute(select(T.board_rma.c.id)
                                      .where(T.board_rma.c.serial == b.serial, T.board_rma.c.closed_at.is_(None))).first()  # fmt: skip
                if opened is None:
                    conn.execute(insert(T.board_rma).values(
                        board_id=board.id, serial=b.serial, kind=board.kind, model=board.model, server=server, slot=b.slot,
                        source=f"burnin:{run_id}", reason="; ".join(r["message"] for r in b.reasons if r["severity"] == "fail")[:1000],
                        evidence={"reasons": b.reasons, "metrics": b.metrics}, actor=actor, opened_at=now))  # fmt: skip
                    rma.append(b.serial)
        if rma:
            row = conn.execute(select(T.server.c.state).where(T.server.c.name == server)).first()
            if row is not None and row.state in TO_MAINTENANCE_FROM:
                try:
                    move(conn, server, "maintenance", actor=actor, reason=f"burn-in run {run_id}: {len(rma)} board(s) failed, sent to RMA",
                         expected=row.state)  # fmt: skip
                    moved = True
                except InvalidTransition:
                    pass  # someone moved it meanwhile: their move stands; the RMA entries say what failed
    return rma, moved


async def _bmc_watch(servers: list[ServerPlan], done: dict[str, asyncio.Event], interval: float,
                     firmware: dict[str, list[Any]], samples: dict[str, list[dict[str, Any]]], t0: float) -> None:  # fmt: skip
    """The BMCs' firmware inventory once, then their temperature sensors every interval until each server is done.

    Best effort: the boards' verdicts never wait on a BMC; one that does not
    answer leaves no BMC samples for its server (the host's samples remain).
    """
    from fleetctl.plugins import sweep_async
    from fleetctl.targets import bmc_targets

    targets, _unreachable = bmc_targets([s.ref for s in servers])
    if not targets:
        return

    async def op(bmc: Any) -> None:
        name = bmc.target.name
        try:
            firmware[name] = list(await bmc.firmware.inventory())
        except Exception:  # noqa: BLE001 - a BMC that cannot say leaves the firmware pre-check unknown
            firmware[name] = []
        while not done[name].is_set():
            try:
                rep = await bmc.health.report()
                now = round(time.monotonic() - t0, 2)
                for t in rep.temperatures:
                    if t.reading is not None:
                        samples.setdefault(name, []).append({"t": now, "source": "bmc", "sensor": t.name, "temp_c": t.reading})
            except Exception:  # noqa: BLE001 - a missed sample is a gap in the plot, not a verdict
                pass
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done[name].wait(), interval)

    await sweep_async("bmc", targets, op, concurrency=max(1, len(targets)))


class BmcWatch:
    """The BMCs of servers burned in together, watched beside their hosts (``async with``): their firmware inventory
    once, their temperature sensors until each server is done. One watch for a batch: every server of a run in
    process, the one server of an activity on Temporal."""

    def __init__(self, servers: list[ServerPlan]) -> None:
        self.servers = servers
        self.done = {s.name: asyncio.Event() for s in servers}
        self.firmware: dict[str, list[Any]] = {}
        self.samples: dict[str, list[dict[str, Any]]] = {}
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> BmcWatch:
        interval = min((s.job.interval for s in self.servers), default=5.0)
        self.task = asyncio.create_task(_bmc_watch(self.servers, self.done, interval, self.firmware, self.samples, time.monotonic()))
        return self

    async def __aexit__(self, *exc: object) -> None:
        for ev in self.done.values():
            ev.set()
        if self.task is None:
            return
        try:
            await asyncio.wait_for(self.task, 30)
        except (TimeoutError, Exception):  # noqa: BLE001 - the watch is best effort; its end never fails the run
            self.task.cancel()


async def burn_server(criteria: CriteriaFile, sp: ServerPlan, *, engine: Any, run_id: int, actor: str,
                      watch: BmcWatch | None = None) -> ServerDone:  # fmt: skip
    """One server: the stages on its host, its boards' verdicts, and their record (results, states, RMA, maintenance).

    The one definition of a server's burn-in: the burn-in workflow's unit
    (:mod:`fleetctl.burnin.workflow`) calls it, in process or on a worker of
    the server's site. What this run stored of the server already (a lost
    attempt's record) stands: a server is never recorded twice.
    """
    from fleetctl.burnin import host
    from fleetctl.models.base import utcnow

    started = utcnow()
    t = time.monotonic()
    try:
        outcome = await host.burn(sp.job)  # its first stage stops what a killed run (or a lost attempt) left on the host
    except Exception as e:  # noqa: BLE001 - one host's surprise is that server's error, never the run's end
        outcome = host.HostOutcome(error=f"{type(e).__name__}: {e}")
    finally:
        if watch is not None and sp.name in watch.done:
            watch.done[sp.name].set()
    firmware = watch.firmware.get(sp.name) if watch is not None else None
    samples = watch.samples.get(sp.name, []) if watch is not None else []
    br = _judge(criteria, sp, outcome, firmware, samples)
    recorded = await asyncio.to_thread(_record, engine, run_id, sp.name, sp.model, br, actor=actor, started=started)
    earlier = recorded_already(engine, run_id, sp.name, sp.id) if recorded is None else None
    if earlier is not None:  # stored meanwhile by another attempt: what is stored stands, not this pass
        return earlier
    assert recorded is not None
    return ServerDone(sp.name, sp.id, br, recorded[0], recorded[1], outcome.notes, outcome.workload_s, time.monotonic() - t,
                      outcome.error)  # fmt: skip


def open_run(engine: Any, *, kind: str, level: str, seconds: float, selector: str, names: list[str], restart: bool, actor: str,
             owner: str | None = None, workflow: str | None = None) -> tuple[int, bool, set[str], Any]:  # fmt: skip
    """The run (new or resumed) and its job: (run id, resumed, servers already done in it, journal).

    ``owner``: who the job belongs to (the lock holder; default this process). ``workflow``: the Temporal workflow
    that runs it, which then holds the run too (another process of this host must not take it for a dead one's).
    """
    from fleetctl.store import immediate
    from fleetctl.store import tables as T
    from fleetctl.workflows.journal import OWNER_ARG, Journal

    run_id, resumed, done_before = _open_run(engine, kind=kind, level=level, seconds=seconds, selector=selector, names=names,
                                             restart=restart, actor=actor)  # fmt: skip
    args: dict[str, Any] = {"run": run_id, "kind": kind, "level": level, "seconds": seconds}
    if workflow:
        args |= {"engine": "temporal", "workflow": workflow}
    journal = Journal.open(engine, kind="burnin", target=selector, actor=actor, args=args)
    if owner or workflow:
        with immediate(engine) as conn:
            if owner:  # the job is the lock holder's (a workflow's job is never marked interrupted for the worker that opened it)
                conn.execute(update(T.job).where(T.job.c.id == journal.job_id).values(args={**args, OWNER_ARG: owner}))
            if workflow:
                conn.execute(update(T.burnin_run).where(T.burnin_run.c.id == run_id)
                             .values(host=f"temporal:{workflow}", pid=journal.job_id))  # fmt: skip
    return run_id, resumed, done_before, journal


def close_run(engine: Any, run_id: int, journal: Any, steps: list[Any], verdicts: list[str], *, interrupted: bool = False) -> None:
    """The run's counts and end, and the job: a row per server burned in this pass (``ServerDone.step()``)."""
    from fleetctl.models.base import utcnow
    from fleetctl.store import immediate
    from fleetctl.store import tables as T
    from fleetctl.workflows.journal import JobState

    with immediate(engine) as conn:
        conn.execute(update(T.burnin_run).where(T.burnin_run.c.id == run_id).values(
            state="interrupted" if interrupted else "finished", finished_at=utcnow(), counts=counts(verdicts)))  # fmt: skip
    bad = sum(1 for s in steps if not s.ok)
    state = JobState.INTERRUPTED if interrupted else (JobState.FAILED if bad else JobState.SUCCEEDED)
    error = f"{bad} of {len(steps)} servers failed or could not be burned in" if bad else ("interrupted" if interrupted else None)
    journal.record(steps, pins={}, state=state, error=error)


def _judge(criteria: CriteriaFile, sp: ServerPlan, outcome: HostOutcome, firmware: list[Any] | None,
           bmc_samples: list[dict[str, Any]]) -> list[BoardResult]:  # fmt: skip
    """The boards' verdicts (or the server's error) from what the host and the BMC said."""
    if outcome.error:
        return [_error_result(sp.name, outcome.error)]
    if firmware:
        _firmware_drift(firmware, sp.baseline, outcome.observations)
    out = []
    for obs in outcome.observations:
        crit = criteria.for_board(obs.kind, sp.model)
        v = evaluate(obs, crit)
        v.reasons.extend(Reason("host", "note", n) for n in outcome.notes)  # server-level facts, kept with each board
        telemetry = obs.telemetry + [x for x in bmc_samples if _sensor_slot(str(x.get("sensor", ""))) == obs.slot]
        out.append(BoardResult(sp.name, obs.serial, obs.device, obs.slot, v.verdict, v.reasons_as_dicts(), v.metrics, telemetry))
    return out


_SENSOR = re.compile(r"(?:mn-?core|gpu|accel\w*)\s*_?(\d+)", re.IGNORECASE)


def _sensor_slot(name: str) -> int | None:
    """The board slot a BMC sensor is about (``MNCore2 Temp``, ``GPU 3 Temp``), None for the rest (inlet, CPU)."""
    m = _SENSOR.search(name)
    return int(m.group(1)) if m else None


def exit_code(verdict: str) -> int:
    return EXIT_BY_VERDICT.get(verdict, 4)


__all__ = [
    "BmcWatch",
    "Plan",
    "RunResult",
    "ServerDone",
    "burn_server",
    "close_run",
    "counts",
    "exit_code",
    "open_run",
    "plan",
    "record_error",
    "recorded_already",
    "sort_results",
    "stored_results",
]
