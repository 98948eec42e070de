"""A firmware campaign: the fleet to its baseline in waves, journaled, resumable.

Per server, each component off the baseline is flashed one at a time
(pulled by the BMC with SimpleUpdate, or pushed to its MultipartHttpPushUri),
with Redfish ``Targets`` naming the one FirmwareInventory member, applied at
once or staged (``OnReset``) and activated by one system reset, and its
version read back. A downgrade is refused unless allowed.

Every flash is a journal step (``firmware.flash.<component>``) written before
the request and noted with the task's URI as soon as the BMC names it; the
reset is a step of its own, noted before the power action. A run that was
killed leaves those steps ``running``: the next run reads the task and the
version first, and flashes again only when it has seen that nothing is
running and the version did not change. A staged component is never staged
twice; a reset that was sent is never sent again.

Every change is an Event (``firmware.update``: before -> after, job, how).
A failed accelerator board component fails its board and takes its server
to maintenance, with the evidence.

Across servers (:mod:`fleetctl.workflows.firmware_described`, on either
engine): a canary wave, then batches, each started inside the maintenance
window only, halting once the failure threshold is reached.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetctl.errors import BMCError, FleetError
from fleetctl.workflows.firmware_policy import (
    DOWNGRADE,
    DOWNGRADE_REFUSED,
    UPDATE,
    board_slot,
    compliance,
)
from fleetctl.workflows.journal import AsyncJournal, StepState

KIND = "firmware.campaign"
PREFIX = "firmware."


@dataclass
class CampaignOptions:
    template: str
    base: str
    only: set[str] | None = None
    allow_downgrade: bool = False
    apply_time: str = "immediate"  # or "on-reset"
    push: bool = False
    task_timeout: float = 3600.0
    power_timeout: float = 900.0
    poll: float = 2.0


@dataclass
class Flash:
    """One component of one server in the campaign."""

    id: str
    key: str  # the baseline's component name
    before: str | None
    wanted: str
    uri: str | None
    image: str
    action: str  # update, downgrade, downgrade-refused
    state: str = "planned"  # planned, updated, staged, failed, refused, not attempted
    after: str | None = None
    message: str | None = None
    method: str | None = None  # SimpleUpdate, push
    resumed: bool = False


@dataclass
class ServerRun:
    server: str
    flashes: list[Flash] = field(default_factory=list)
    failed: bool = False
    error: str | None = None


def is_local(image: str) -> bool:
    return not image.startswith(("http://", "https://"))


def redact(url: str) -> str:
    """An image URL as shown and journaled: a password in it (``http://user:pw@host/...``) is masked."""
    from urllib.parse import urlsplit, urlunsplit

    if is_local(url):
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def render(template: str, *, base: str, id: str, component: str, version: str) -> str:
    return template.format(base=base.rstrip("/"), id=id, component=component, version=version)


def check_template(template: str, base: str) -> None:
    """Refuse an image template that is more than plain placeholders, as a site file's ``firmware_template`` is refused.

    Only ``{base}``, ``{id}``, ``{component}`` and ``{version}``: a format spec can ask ``str.format`` for gigabytes
    (``{id:>99999999}`` sent a 100 MB URL to a BMC), a conversion (``{id!r}``) puts quotes in a URL, and attribute or
    index access (``{base.__class__}``) reads what is not a placeholder.

    Raises:
        InputError: the template does not render, or asks for more than a placeholder.
    """
    from string import Formatter

    from fleetctl.errors import InputError
    from fleetctl.inventory.schema import FIRMWARE_TEMPLATE_FIELDS

    allowed = ", ".join("{" + n + "}" for n in FIRMWARE_TEMPLATE_FIELDS)
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in Formatter().parse(template) if name is not None]
    except ValueError as e:  # a stray brace
        raise InputError(f"the image template {template!r} does not render: {e} (use {allowed})", field="--template") from None
    for name, spec, conv in fields:
        if name not in FIRMWARE_TEMPLATE_FIELDS:
            raise InputError(f"the image template {template!r} does not render: {{{name}}} is not a placeholder (use {allowed})",
                             field="--template")  # fmt: skip
        if spec or conv:
            shown = "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
            raise InputError(f"the image template {template!r}: {shown}: a format spec or conversion is not allowed; "
                             f"write {{{name}}}", field="--template")  # fmt: skip
    render(template, base=base, id="BIOS", component="BIOS", version="1.0.0")


def read_image(image: str) -> bytes:
    """The image's bytes, for a push: a local file (or file:// URL), or fetched over HTTP(S)."""
    if not is_local(image):
        import urllib.request

        with urllib.request.urlopen(image, timeout=300) as r:  # the operator's own image URL
            return bytes(r.read())
    return Path(image.removeprefix("file://")).read_bytes()


def plan(inventory: list[Any], want: dict[str, str], opts: CampaignOptions) -> list[Flash]:
    """The components to flash (or refuse), in inventory order; those at the baseline are left out."""
    out = []
    for row in compliance(inventory, want, allow_downgrade=opts.allow_downgrade):
        if row.action not in (UPDATE, DOWNGRADE, DOWNGRADE_REFUSED) or row.baseline_component is None or row.wanted is None:
            continue
        # By baseline name or BMC id, as the operator wrote it in any case (the command checked each names a component).
        if opts.only and not {row.baseline_component.lower(), row.component.lower()} & {o.lower() for o in opts.only}:
            continue
        image = render(opts.template, base=opts.base, id=row.component, component=row.baseline_component, version=row.wanted)
        f = Flash(row.component, row.baseline_component, row.current, row.wanted, row.uri, image, row.action)
        if row.action == DOWNGRADE_REFUSED:
            f.state, f.message = "refused", row.reason
        out.append(f)
    return out


# --------------------------------------------------------------------- the store


def _event(conn: Any, *, actor: str, action: str, kind: str, name: str, detail: str, reason: str) -> None:
    from sqlalchemy import insert

    from fleetctl.models.base import utcnow
    from fleetctl.store import tables as T

    conn.execute(insert(T.event).values(at=utcnow(), actor=actor, action=action, object_kind=kind, object_name=name,
                                        detail=detail, reason=reason))  # fmt: skip


def record_change(engine: Any, server: str, f: Flash, *, actor: str, job_id: int) -> None:
    """The history of one component flashed: before -> after, the job, how."""
    from fleetctl.store import immediate

    how = f"{f.method or '?'}" + (", resumed after an interruption" if f.resumed else "")
    with immediate(engine) as conn:
        _event(conn, actor=actor, action="firmware.update", kind="server", name=server,
               detail=f"{f.id} {f.before} -> {f.after} (baseline {f.wanted}; job {job_id}; {how})",
               reason="firmware campaign" + (" (downgrade allowed)" if f.action == DOWNGRADE else ""))  # fmt: skip


def record_failure(engine: Any, server: str, f: Flash, evidence: dict[str, Any], *, actor: str, job_id: int) -> str:
    """A failed component in the history; a board's fails its board and takes the server to maintenance.

    Returns what was done to the server and the board, for the report.
    """
    from sqlalchemy import select

    from fleetctl.errors import InvalidTransition
    from fleetctl.lifecycle.boards import move_board
    from fleetctl.lifecycle.machine import allowed, move
    from fleetctl.lifecycle.states import BoardState
    from fleetctl.lifecycle.states import ServerState as S
    from fleetctl.store import immediate
    from fleetctl.store import tables as T

    detail = json.dumps({"component": f.id, **evidence, "job": job_id}, default=str, sort_keys=True)
    slot = board_slot(f.id)
    with immediate(engine) as conn:
        _event(conn, actor=actor, action="firmware.failed", kind="server", name=server, detail=detail, reason="firmware campaign")
        if slot is None:
            return ""
        srv = conn.execute(select(T.server.c.id, T.server.c.state).where(T.server.c.name == server)).one()
        b = T.accelerator_board.c
        board = conn.execute(select(b.id, b.serial, b.state).where(b.server_id == srv.id, b.slot == slot)).first()
        notes = []
        if board is not None and board.state != BoardState.FAILED:
            try:  # through the board table: its event says board.state, from -> failed and the evidence
                move_board(conn, board.id, BoardState.FAILED, actor=actor, reason=f"firmware update of {f.id} failed on {server}",
                           expected=board.state, detail=detail)  # fmt: skip
                notes.append(f"board {board.serial} failed")
            except InvalidTransition as e:  # a board already on its way to the vendor (rma) stays so; the history says why
                _event(conn, actor=actor, action="firmware.failed", kind="board", name=board.serial,
                       detail=f"state stays {board.state}: {e}", reason=f"firmware update of {f.id} failed on {server}")  # fmt: skip
                notes.append(f"board {board.serial} stays {board.state}")
        elif board is None:
            notes.append(f"no board in slot {slot} in the inventory")
        why = f"firmware update of board slot {slot} ({f.id}) failed (job {job_id})"
        if srv.state == S.MAINTENANCE:
            notes.append("server already in maintenance")
        elif allowed(srv.state, S.MAINTENANCE):
            move(conn, server, S.MAINTENANCE, actor=actor, reason=why, expected=srv.state)
            notes.append(f"server {srv.state} -> maintenance")
        else:
            # The table has no way from here (a server being provisioned, say): say so in the history.
            stays = f"server stays {srv.state}: {srv.state} -> maintenance is not a lifecycle transition"
            _event(conn, actor=actor, action="firmware.failed", kind="server", name=server, detail=stays, reason=why)
            notes.append(stays)
        return "; ".join(notes)


# ------------------------------------------------------------------ one server


class Campaign:
    """The per-server operation of a campaign, with what it found (:attr:`results`)."""

    def __init__(self, engine: Any, journal: AsyncJournal | None, opts: CampaignOptions, want: dict[str, dict[str, str]],
                 server_ids: dict[str, int], *, actor: str) -> None:  # fmt: skip
        self.engine = engine
        self._journal = journal  # None: a plan only (dry run), nothing journaled
        self.opts = opts
        self.want = want
        self.ids = server_ids
        self.actor = actor
        self.results: dict[str, ServerRun] = {}

    @property
    def journal(self) -> AsyncJournal:
        assert self._journal is not None, "a campaign without a journal only plans"
        return self._journal

    async def dry_run(self, bmc: Any) -> ServerRun:
        run = ServerRun(bmc.target.name, plan(await bmc.firmware.inventory(), self.want.get(bmc.target.name, {}), self.opts))
        self.results[run.server] = run
        return run

    async def op(self, bmc: Any) -> ServerRun:
        """Bring one server to its baseline. Raises BMCError (after journaling) when a component failed."""
        name = bmc.target.name
        run = self.results[name] = ServerRun(name)
        sid = self.ids[name]
        want = self.want.get(name, {})
        j = self.journal
        p = (await j.passes([sid]))[sid]
        interrupted = {n: r for n, r in p.steps.items() if r.state == StepState.RUNNING}
        inv = await bmc.firmware.inventory()
        run.flashes = plan(inv, want, self.opts)
        todo = {f.id: f for f in run.flashes if f.state == "planned"}
        flash_steps = {n.removeprefix("flash."): r for n, r in interrupted.items() if n.startswith("flash.")}
        if not todo and not interrupted:
            return run
        if not interrupted:
            await j.begin_pass(sid, {"job": j.job_id, "components": sorted(todo)})
        # An update another process (or a killed run) started may still be running in the BMC: wait for
        # it and read the versions again, rather than start a second one.
        if await self._wait_quiet(bmc):
            inv = await bmc.firmware.inventory()
            run.flashes = plan(inv, want, self.opts)
            todo = {f.id: f for f in run.flashes if f.state == "planned"}
        versions = {c.id: c.version for c in inv}
        staged: list[tuple[Flash, int]] = []
        # Steps a killed run left running: settled from what the BMC says, before anything is flashed.
        for cid, rec in flash_steps.items():
            noted = rec.output or {}
            f = todo.get(cid)
            if f is None:
                if versions.get(cid) is not None and versions.get(cid) == noted.get("to"):
                    # At the version it was being flashed to: the update in flight went through.
                    f = Flash(cid, noted.get("key") or cid, noted.get("before"), noted["to"], None, noted.get("image") or "", UPDATE,
                              method=noted.get("method"))  # fmt: skip
                    await self._resumed_done(run, f, rec.id, versions.get(cid), noted)
                else:
                    await j.end_step(rec.id, StepState.FAILED, error=f"interrupted; now {versions.get(cid)}, not planned any more")
                continue
            f.method = noted.get("method")
            outcome, evidence = await self._settle(bmc, f, noted)
            if outcome == "done":
                run.flashes.remove(f)
                await self._resumed_done(run, f, rec.id, evidence.get("after"), noted)
            elif outcome == "staged":
                f.state, f.resumed = "staged", True
                staged.append((f, rec.id))
            elif outcome == "failed":
                await self._failed(run, f, rec.id, evidence)
                break
            else:  # nothing running, version unchanged: the request never took effect; flash it now
                await j.end_step(rec.id, StepState.FAILED, error="interrupted; nothing running and the version unchanged: flashed again")
        if not run.failed:
            method, apply_time, why_not = await self._method(bmc)
            for f in run.flashes:
                if f.state != "planned":
                    continue
                if why_not:
                    await self._failed(run, f, None, {"error": why_not, "before": f.before})
                    break
                f.method = method
                ok = await self._flash(bmc, run, f, apply_time, staged)
                if not ok:
                    break
        if staged:
            await self._activate(bmc, run, staged, interrupted.get("reset"))
        elif "reset" in interrupted:
            await j.end_step(interrupted["reset"].id, StepState.SUCCEEDED, output={"note": "nothing left to activate"})
        left = [f for f in run.flashes if f.state == "planned"]
        for f in left:
            f.state = "not attempted"
        if run.failed:
            failed = next(f for f in run.flashes if f.state == "failed")
            if left:
                failed.message = f"{failed.message}; {len(left)} more component(s) not attempted"
            raise BMCError(f"{name}: {failed.id} {failed.before} -> {failed.wanted} failed: {failed.message}")
        return run

    async def _wait_quiet(self, bmc: Any) -> bool:
        """Wait for updates running in the BMC to end; True when there were some."""
        waited = False
        deadline = asyncio.get_running_loop().time() + self.opts.task_timeout
        while await bmc.firmware.running_updates():
            waited = True
            if asyncio.get_running_loop().time() > deadline:
                raise BMCError(f"{bmc.target.name}: an update is still running in the BMC after {self.opts.task_timeout:g} s")
            await asyncio.sleep(self.opts.poll)
        return waited

    async def _resumed_done(self, run: ServerRun, f: Flash, step: int, after: str | None, noted: dict[str, Any]) -> None:
        f.after, f.state, f.resumed = after, "updated", True
        f.message = "the update in flight when the last run stopped went through; not flashed again"
        run.flashes.append(f)
        await self.journal.end_step(step, StepState.SUCCEEDED, output={**noted, "phase": "done", "after": after, "resumed": True})
        await asyncio.to_thread(record_change, self.engine, run.server, f, actor=self.actor, job_id=self.journal.job_id)

    async def _settle(self, bmc: Any, f: Flash, noted: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """What became of a flash a killed run left in flight: ``done``, ``staged``, ``failed`` or ``none``.

        The task first (when its URI was journaled), followed to its end;
        else every update running in the BMC waited for; then the version.
        ``none``: nothing runs and the version did not move, so the request
        never took effect and a new flash is not a blind retry.
        """
        task = noted.get("task")
        evidence: dict[str, Any] = {"before": noted.get("before"), "task": task, "resumed": True}
        task_state = None
        if task:
            try:
                res = await bmc.firmware.follow_task(task, timeout=self.opts.task_timeout)
                task_state, evidence["messages"] = res.state, res.messages
            except BMCError as e:
                if getattr(e, "status", None) in (404, 410):  # the BMC no longer keeps that task
                    await self._wait_quiet(bmc)
                else:
                    task_state, evidence["error"] = "Exception", str(e)
        else:
            await self._wait_quiet(bmc)
        after = evidence["after"] = await self._version(bmc, f.id)
        if after == f.wanted:
            return "done", evidence
        if noted.get("phase") == "staged" or (task_state == "Completed" and noted.get("apply_time") == "OnReset"):
            return "staged", evidence
        if task_state == "Exception":
            return "failed", evidence
        if task_state is not None:
            evidence["error"] = f"the update in flight ended {task_state} but the version reads {after}"
            return "failed", evidence
        return "none", evidence

    async def _method(self, bmc: Any) -> tuple[str, str | None, str | None]:
        """(method, apply time to send, why no flash can be done here)."""
        info = await bmc.firmware.update_service_info()
        local = any(is_local(f.image) for f in self.results[bmc.target.name].flashes)
        push = self.opts.push or local or not info.simple_update
        if push and not info.multipart_push_uri:
            if local:
                return "push", None, "the images are local files and this BMC offers no MultipartHttpPushUri to push them to"
            return "push", None, "this BMC offers neither SimpleUpdate nor a MultipartHttpPushUri" if not info.simple_update \
                else "--push given and this BMC offers no MultipartHttpPushUri"  # fmt: skip
        method = "push" if push else "SimpleUpdate"
        if self.opts.apply_time != "on-reset":
            return method, None, None
        offered = info.push_apply_times if push else info.simple_update_apply_times
        if "OnReset" not in offered:
            return method, None, f"--apply-time on-reset: this BMC's {method} offers {', '.join(offered) or 'no apply time'}, not OnReset"
        return method, "OnReset", None

    async def _flash(self, bmc: Any, run: ServerRun, f: Flash, apply_time: str | None, staged: list[tuple[Flash, int]]) -> bool:
        j = self.journal
        sid = self.ids[run.server]
        step = await j.start_step(sid, f"flash.{f.id}")
        noted: dict[str, Any] = {"phase": "starting", "key": f.key, "before": f.before, "to": f.wanted, "image": redact(f.image),
                                 "method": f.method, "apply_time": apply_time or "Immediate"}  # fmt: skip
        await j.note(step, noted)
        targets = [f.uri] if f.uri else None
        try:
            if f.method == "push":
                data = await asyncio.to_thread(read_image, f.image)
                filename = f.image.rstrip("/").rsplit("/", 1)[-1]
                task = await bmc.firmware.start_push(data, filename, targets=targets, apply_time=apply_time)
            else:
                task = await bmc.firmware.start_simple_update(f.image, targets=targets, apply_time=apply_time)
            noted = {**noted, "phase": "task", "task": task}
            await j.note(step, noted)
            result = await bmc.firmware.follow_task(task, timeout=self.opts.task_timeout)
        except (FleetError, OSError) as e:
            after = await self._version(bmc, f.id)
            await self._failed(run, f, step, {"error": str(e), "before": f.before, "after": after, "task": noted.get("task")})
            return False
        if apply_time == "OnReset":
            f.state = "staged"
            await j.note(step, {**noted, "phase": "staged", "messages": result.messages})
            staged.append((f, step))
            return True
        f.after = await self._version(bmc, f.id)
        if f.after != f.wanted:
            await self._failed(run, f, step, {"error": f"the task ended {result.state} but the version reads {f.after}",
                                              "before": f.before, "after": f.after, "messages": result.messages, "task": task})  # fmt: skip
            return False
        f.state = "updated"
        await j.end_step(step, StepState.SUCCEEDED, output={**noted, "phase": "done", "after": f.after, "messages": result.messages})
        await asyncio.to_thread(record_change, self.engine, run.server, f, actor=self.actor, job_id=j.job_id)
        return True

    async def _version(self, bmc: Any, cid: str) -> str | None:
        try:
            return next((c.version for c in await bmc.firmware.inventory() if c.id == cid), None)
        except FleetError:
            return None

    async def _failed(self, run: ServerRun, f: Flash, step: int | None, evidence: dict[str, Any]) -> None:
        run.failed = True
        f.state = "failed"
        f.after = evidence.get("after", f.after)
        f.message = str(evidence.get("error") or "failed")
        if step is not None:
            await self.journal.end_step(step, StepState.FAILED, output=evidence, error=f.message[:1000])
        done = await asyncio.to_thread(record_failure, self.engine, run.server, f, evidence, actor=self.actor, job_id=self.journal.job_id)
        if done:
            f.message = f"{f.message} ({done})"

    async def _settled_power(self, bmc: Any) -> Any:
        from fleetctl.interfaces.bmc import PowerState

        deadline = asyncio.get_running_loop().time() + self.opts.power_timeout
        while (state := await bmc.power.state()) in (PowerState.POWERING_ON, PowerState.POWERING_OFF):
            if asyncio.get_running_loop().time() > deadline:
                raise BMCError(f"{bmc.target.name}: power still {state.value} after {self.opts.power_timeout:g} s")
            await asyncio.sleep(self.opts.poll)
        if state == PowerState.UNKNOWN:
            raise BMCError(f"{bmc.target.name}: the BMC does not say whether the server is on; not resetting it")
        return state

    async def _activate(self, bmc: Any, run: ServerRun, staged: list[tuple[Flash, int]], rec: Any) -> None:
        """One system reset activates every staged component; then their versions are read back.

        The power state is read first (a server that is on is restarted, one
        that is off is powered on, and off again afterwards); the action is
        journaled before it is sent and marked sent after. A resumed run
        whose reset was sent does not send it again: it waits and reads.
        """
        from fleetctl.interfaces.bmc import PowerState

        j = self.journal
        sid = self.ids[run.server]
        noted: dict[str, Any] = dict(rec.output or {}) if rec is not None else {}
        step = rec.id if rec is not None else await j.start_step(sid, "reset")
        ids = [f.id for f, _ in staged]

        async def versions() -> dict[str, str | None]:
            return {c.id: c.version for c in await bmc.firmware.inventory()}

        inv: dict[str, str | None] = {}
        try:
            if not noted.get("sent"):
                # Noted but not marked sent: the power action may or may not have reached the BMC. The
                # versions and the power state say; only when neither moved is it sent.
                inv = await versions() if noted else {}
                if not (noted and all(inv.get(f.id) == f.wanted for f, _ in staged)):
                    state = await self._settled_power(bmc)
                    action = "restart" if state == PowerState.ON else "on"
                    noted = {"phase": "resetting", "power_before": noted.get("power_before") or state.value, "action": action,
                             "staged": ids}  # fmt: skip
                    await j.note(step, noted)
                    if action == "restart":
                        await bmc.power.restart(force=False)
                    else:
                        await bmc.power.on()
                    noted = {**noted, "sent": True}
                    await j.note(step, noted)
            await bmc.power.wait_for(PowerState.ON, timeout=self.opts.power_timeout, interval=self.opts.poll)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.opts.power_timeout
            while True:
                # A BMC may take a while after the boot to report the new versions.
                inv = await versions()
                if all(inv.get(f.id) == f.wanted for f, _ in staged) or loop.time() > deadline:
                    break
                await asyncio.sleep(self.opts.poll)
        except FleetError as e:
            await j.end_step(step, StepState.FAILED, output=noted, error=str(e)[:1000])
            for f, s in staged:
                await self._failed(run, f, s, {"error": f"staged; the activating reset failed: {e}", "before": f.before})
            return
        for f, s in staged:
            f.after = inv.get(f.id)
            if f.after == f.wanted:
                f.state = "updated"
                f.method = f"{f.method}, staged OnReset"
                f.message = (f.message + "; " if f.message else "") + "staged, activated by a system reset"
                await j.end_step(s, StepState.SUCCEEDED, output={"phase": "done", "after": f.after, "activated_by": "reset"})
                await asyncio.to_thread(record_change, self.engine, run.server, f, actor=self.actor, job_id=j.job_id)
            else:
                await self._failed(run, f, s, {"error": f"staged, but after the reset the version reads {f.after}",
                                               "before": f.before, "after": f.after})  # fmt: skip
        if noted.get("power_before") == PowerState.OFF.value:
            try:
                await bmc.power.off(force=False)  # as it was before the campaign
                noted["restored"] = "off"
            except FleetError as e:
                noted["restored"] = f"not powered off again: {e}"
        await j.end_step(step, StepState.SUCCEEDED, output=noted)


# ------------------------------------------------------------------------ waves


@dataclass
class WaveReport:
    rows: list[dict[str, Any]]
    failed: int
    halted: bool
    stopped_for_window: bool


def rows_for(wave: int, run: ServerRun | None, server: str, error: str | None, *, dry_run: bool) -> list[dict[str, Any]]:
    """The report's rows of one server: one per component (the ones not attempted after a failure are left out)."""
    if run is None:
        return [{"wave": wave, "server": server, "component": None, "from": None, "to": None, "result": "failed", "message": error}]
    shown = [f for f in run.flashes if f.state != "not attempted"]
    if error and not any(f.state == "failed" for f in shown):
        # The server failed outside a component (the BMC, the power, a timeout): what was done, then why.
        done = [f for f in shown if f.state in ("updated", "refused")]
        return [*rows_for(wave, ServerRun(server, done), server, None, dry_run=dry_run),
                {"wave": wave, "server": server, "component": None, "from": None, "to": None, "after": None, "result": "failed",
                 "message": error}] if done else [{"wave": wave, "server": server, "component": None, "from": None, "to": None,
                                                    "after": None, "result": "failed", "message": error}]  # fmt: skip
    if not shown:
        if error:
            return [{"wave": wave, "server": server, "component": None, "from": None, "to": None, "result": "failed", "message": error}]
        return [{"wave": wave, "server": server, "component": None, "from": None, "to": None, "result": "at baseline", "message": None}]
    out = []
    for f in shown:
        if dry_run:
            would = {"planned": "would update" if f.action == UPDATE else "would downgrade", "refused": "would refuse"}
            result = would.get(f.state, f.state)
            message = redact(f.image) if f.state == "planned" else f.message
        else:
            result, message = f.state, f.message
        out.append({"wave": wave, "server": server, "component": f.id, "from": f.before, "to": f.wanted,
                    "after": f.after, "result": result, "message": message})  # fmt: skip
    return out


def server_rows(campaign: Campaign, wave: int, server: str, error: str | None, *, dry_run: bool = False) -> list[dict[str, Any]]:
    """The rows of one server after :meth:`Campaign.op` (or its failure, ``error``) ran on it: both engines report through this."""
    return rows_for(wave, campaign.results.get(server), server, error, dry_run=dry_run)


def baselines(conn: Any, names: list[str] | None = None) -> dict[str, dict[str, str]]:
    """{server: {baseline component: version}} from each server's hardware model (``names``: only those servers)."""
    from sqlalchemy import select

    from fleetctl.inventory.queries import fb_t, srv_t

    q = select(srv_t.c.name, fb_t.c.component, fb_t.c.version).join(fb_t, fb_t.c.model_id == srv_t.c.model_id)
    if names is not None:
        q = q.where(srv_t.c.name.in_(names))
    want: dict[str, dict[str, str]] = {}
    for r in conn.execute(q):
        want.setdefault(r.name, {})[r.component] = r.version
    return want


# ------------------------------------------------------- the campaign's job and locks
# The campaign's description (firmware_described) opens and closes them, on either engine.

LOCK_PURPOSE = "firmware update"


def lock_servers(engine: Any, names: list[str], *, owner: str, who: str) -> tuple[list[str], dict[str, Any]]:
    """Lock the campaign's servers; a lock a killed fleetctl of this host left is recovered (an event each).

    Returns (locked, {name: why not}) as :func:`fleetctl.lifecycle.locks.try_lock`.
    """
    from fleetctl.lifecycle.locks import break_lock, try_lock
    from fleetctl.store import immediate

    got, busy = try_lock(engine, names, purpose=LOCK_PURPOSE, owner=owner)
    stale = [n for n, why in busy.items() if why.stale]
    for n in stale:
        old = break_lock(engine, n)
        with immediate(engine) as conn:
            _event(conn, actor=who, action="server.unlock", kind="server", name=n,
                   detail=f"stale lock of {old} (process gone) recovered", reason="firmware campaign resumes")  # fmt: skip
    if stale:
        got2, busy2 = try_lock(engine, stale, purpose=LOCK_PURPOSE, owner=owner)
        got += got2
        busy = {**{n: w for n, w in busy.items() if n not in stale}, **busy2}
    return got, busy


def busy_rows(busy: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's rows of the servers another run holds: not attempted, with the holder."""
    return [{"wave": None, "server": n, "component": None, "from": None, "to": None, "after": None, "result": "not attempted",
             "message": str(why)} for n, why in busy.items()]  # fmt: skip


def close_campaign(engine: Any, journal: Any, locked: list[str], *, owner: str, report: WaveReport, busy: dict[str, Any]) -> WaveReport:
    """Release the locks and finish the campaign's job (failed when anything is left); the report with the busy servers' rows."""
    from fleetctl.lifecycle.locks import release
    from fleetctl.workflows.journal import JobState

    release(engine, locked, owner=owner)
    bad = report.failed or report.halted or report.stopped_for_window or busy
    why = f"{report.failed} server(s) failed" if report.failed else ("outside the window" if report.stopped_for_window else None)
    journal.finish(JobState.FAILED if bad else JobState.SUCCEEDED, why)
    return WaveReport(report.rows + busy_rows(busy), report.failed, report.halted, report.stopped_for_window)


# Why a wave is not attempted (the campaign's gate, on either engine; the dry run).
HALT_REASON = "halted: {failed} server(s) failed, threshold {threshold}"
WINDOW_REASON = "outside the maintenance window {window}; run again inside it (done components are not flashed again)"


def done_in_job(engine: Any, job_id: int, server_id: int) -> list[Flash]:
    """The components a job already brought to the baseline on a server (its flash steps that succeeded).

    A lost attempt's work, for the report of the attempt that resumes it in the same job: that one's
    plan no longer lists them (they are at the baseline), yet the campaign flashed them.
    """
    from sqlalchemy import select

    from fleetctl.store import tables as T
    from fleetctl.workflows.journal import _load

    s = T.job_step.c
    q = (select(s.name, s.output).where(s.job_id == job_id, s.server_id == server_id, s.state == StepState.SUCCEEDED.value,
                                        s.name.like(f"{PREFIX}flash.%")).order_by(s.id))  # fmt: skip
    out = []
    with engine.connect() as conn:
        for r in conn.execute(q):
            noted = _load(r.output) or {}
            cid = r.name.removeprefix(f"{PREFIX}flash.")
            f = Flash(cid, noted.get("key") or cid, noted.get("before"), noted.get("to") or noted.get("after") or "", None,
                      noted.get("image") or "", UPDATE, state="updated", after=noted.get("after"), method=noted.get("method"))  # fmt: skip
            if noted.get("activated_by") == "reset":
                f.message = "staged, activated by a system reset"
            elif noted.get("resumed"):
                f.message = "the update in flight when the last run stopped went through; not flashed again"
            out.append(f)
    return out
