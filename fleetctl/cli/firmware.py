"""`fleetctl firmware`: what each server runs against its model's baseline, and the campaign that fixes it."""

from __future__ import annotations

import enum
from typing import Annotated, Any

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt, finite
from fleetctl.cli.drain import DeleteEmptydirOpt, DrainTimeoutOpt, ForceDrainOpt, MaxUnavailableOpt
from fleetctl.cli.output import Format
from fleetctl.cli.power import TargetsArg

app = typer.Typer(no_args_is_help=True)


class ApplyTime(enum.StrEnum):
    immediate = "immediate"
    on_reset = "on-reset"


def _baselines() -> dict[str, dict[str, str]]:
    """{server: {baseline component: version}} from each server's hardware model."""
    from fleetctl.cli.common import conn
    from fleetctl.workflows.firmware_campaign import baselines

    with conn() as c:
        return baselines(c)


@app.command("list")
def list_(targets: TargetsArg, output: OutputOpt = Format.table) -> None:
    """Firmware components per server, and where they differ from the baseline (exit 1)."""
    from sqlalchemy import select

    from fleetctl.cli.bmcrun import resolve, run_with_progress, tally
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.inventory.queries import fb_t, srv_t
    from fleetctl.workflows.firmware import baseline_key

    servers = resolve(targets, output)
    with conn() as c:
        baseline: dict[str, dict[str, str]] = {}
        for r in c.execute(select(srv_t.c.name, fb_t.c.component, fb_t.c.version).join(fb_t, fb_t.c.model_id == srv_t.c.model_id)):
            baseline.setdefault(r.name, {})[r.component] = r.version

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.firmware.inventory()

    outcomes = run_with_progress(servers, op, kind="firmware.list", targets=targets, output=output)
    rows, drift = [], False
    for o in outcomes:
        if not o.ok:
            rows.append({"server": o.server, "component": None, "version": None, "baseline": None, "status": "error", "error": o.error})
            continue
        want = baseline.get(o.server, {})
        seen = {}
        for comp in o.value:
            seen[comp.id] = comp.version
            key = baseline_key(want, comp)
            status = "" if key is None else ("ok" if want[key] == comp.version else "drift")
            drift |= status == "drift"
            rows.append({"server": o.server, "component": comp.id, "version": comp.version,
                         "baseline": want.get(key) if key else None, "status": status, "error": None})  # fmt: skip
    emit(rows, output, columns=["server", "component", "version", "baseline", "status", "error"],
         styles={"status": lambda v: {"ok": "green", "drift": "yellow", "error": "bold red"}.get(v)})  # fmt: skip
    tally(outcomes, output)
    if drift or any(not o.ok for o in outcomes):
        raise typer.Exit(1)


@app.command("check")
def check(targets: TargetsArg, output: OutputOpt = Format.table) -> None:
    """Compliance per server and component: current, wanted and the action a campaign would take (exit 1 when not compliant)."""
    from fleetctl.cli.bmcrun import resolve, run_with_progress, tally
    from fleetctl.cli.output import emit
    from fleetctl.workflows.firmware_policy import COMPLIANT, compliance

    servers = resolve(targets, output)
    want = _baselines()

    async def op(bmc):  # type: ignore[no-untyped-def]
        return await bmc.firmware.inventory()

    outcomes = run_with_progress(servers, op, kind="firmware.check", targets=targets, output=output)
    rows: list[dict[str, Any]] = []
    off = 0
    for o in outcomes:
        if not o.ok:
            rows.append({"server": o.server, "component": None, "current": None, "wanted": None, "action": "error", "reason": None,
                         "error": o.error})  # fmt: skip
            continue
        found = compliance(o.value, want.get(o.server, {}))
        off += any(r.action not in COMPLIANT for r in found)
        rows += [{"server": o.server, "component": r.component, "current": r.current, "wanted": r.wanted, "action": r.action,
                  "reason": r.reason, "error": None} for r in found]  # fmt: skip
    styles = {"action": lambda v: {"none": "green", "update": "yellow", "not-in-baseline": "dim"}.get(v, "bold red")}
    emit(rows, output, columns=["server", "component", "current", "wanted", "action", "reason", "error"], styles=styles)
    tally(outcomes, output, problems=off, what="not compliant")
    if off or any(not o.ok for o in outcomes):
        raise typer.Exit(1)


@app.command("update")
def update(
    targets: TargetsArg,
    image_base: Annotated[str, typer.Option("--image-base", help="Where the images are: an http(s) URL the BMCs fetch "
                                            "from, or a local folder (the images are then pushed to the BMCs).")],  # fmt: skip
    template: Annotated[
        str, typer.Option(help="Image URL: {base}, {id} (the BMC's component), {component} (the baseline's), {version}.")
    ] = "{base}/{id}-{version}.bin",
    component: Annotated[list[str] | None, typer.Option("--component", help="Only this component, baseline name or BMC id "
                                                        "(repeatable); sent as Redfish Targets.")] = None,  # fmt: skip
    canary: Annotated[int, typer.Option(help="Servers in the first wave.")] = 1,
    batch: Annotated[int, typer.Option(help="Servers in each wave after the canary.")] = 10,
    max_failures: Annotated[str, typer.Option("--max-failures", help="Failed servers that halt the waves after: a count (3) "
                                              "or a percentage of the servers (5%). 1: the first failure halts.")] = "1",  # fmt: skip
    allow_downgrade: Annotated[bool, typer.Option("--allow-downgrade", help="Flash a baseline older than what runs "
                                                  "(or one that cannot be ordered); refused otherwise.")] = False,  # fmt: skip
    apply_time: Annotated[ApplyTime, typer.Option("--apply-time", help="immediate, or on-reset: staged, then activated "
                                                  "by one system reset per server and read back.")] = ApplyTime.immediate,  # fmt: skip
    window: Annotated[str | None, typer.Option(help="Maintenance window START-END in UTC (22:00-04:00): a wave starts "
                                               "only inside it.")] = None,  # fmt: skip
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Outside the window, stop (exit 1) instead of waiting; "
                                          "run again inside it.")] = False,  # fmt: skip
    push: Annotated[bool, typer.Option("--push", help="Upload the images (MultipartHttpPushUri) even where the BMC "
                                       "could pull them.")] = False,  # fmt: skip
    task_timeout: Annotated[
        float, typer.Option("--task-timeout", help="Seconds an update task may run.", callback=finite(0, above=True))
    ] = 3600.0,
    poll: Annotated[float, typer.Option(help="Seconds between reads while waiting for updates running in a BMC, the power "
                                        "and the versions after a reset (a task is polled as its BMC says).",
                                        callback=finite(0, above=True))] = 2.0,  # fmt: skip
    allow_in_service: Annotated[bool, typer.Option("--allow-in-service", help="Also update servers in service (a live "
                                                   "Kubernetes node is drained first, uncordoned after).")] = False,  # fmt: skip
    max_unavailable: MaxUnavailableOpt = "1",
    drain_timeout: DrainTimeoutOpt = 600.0,
    delete_emptydir_data: DeleteEmptydirOpt = False,
    force_drain: ForceDrainOpt = False,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Bring firmware to the baseline as a campaign: waves (a canary, then batches), a failure threshold, windows; resumable.

    A server in service that is a live Kubernetes node (with --allow-in-service) is cordoned and drained first, each
    wave split so that no more of a rack than --max-unavailable is out at once, and uncordoned after its update; a failed
    one stays cordoned (`fleetctl k8s status` says why)."""
    from pathlib import Path

    from fleetctl.cli.bmcrun import refuse_in_service, resolve
    from fleetctl.cli.output import console, emit
    from fleetctl.errors import InputError
    from fleetctl.workflows.firmware_campaign import CampaignOptions, check_template, is_local
    from fleetctl.workflows.firmware_policy import Threshold, Window

    # Every input is checked here, before any BMC is touched or anything written.
    local = is_local(image_base)
    if local and not Path(image_base.removeprefix("file://")).is_dir():
        raise InputError(f"{image_base!r} is neither an http(s) URL nor a local folder", field="--image-base")
    if canary < 1 or batch < 1:
        raise InputError("--canary and --batch take positive numbers", field="--batch")
    if task_timeout <= 0 or poll <= 0:
        raise InputError("--task-timeout and --poll take positive numbers", field="--poll")
    if no_wait and window is None:
        raise InputError("--no-wait only means something with --window", field="--no-wait")
    threshold = Threshold.parse(max_failures)
    if window:
        Window.parse(window)
    check_template(template, image_base)
    temporal = bool(_temporal()) and not dry_run  # the scale-out engine (docs/scale-out.md); a dry run stays in process
    if temporal:
        from fleetctl.config import database_url
        from fleetctl.scaleout.client import check_store
        from fleetctl.workflows.firmware_described import check_image_base

        check_store(database_url())
        check_image_base(image_base)
    servers = resolve(targets, output)
    refuse_in_service(servers, allow_in_service)
    want = _baselines()
    if component:
        _check_components(component, servers, want)
    from fleetctl.preflight import for_firmware

    for_firmware(servers).refuse()  # every BMC URL and credential resolves (their values are never shown)
    from fleetctl.cli.common import conn
    from fleetctl.cli.drain import drain_plan

    with conn() as c:  # the clusters answer and each rack may lose the nodes asked for, before anything is touched
        drain = drain_plan(c, [s.name for s in servers], max_unavailable=max_unavailable, timeout_s=drain_timeout,
                           delete_emptydir_data=delete_emptydir_data, force=force_drain)  # fmt: skip
    opts = CampaignOptions(template=template, base=image_base.removeprefix("file://") if local else image_base,
                           only=set(component) if component else None, allow_downgrade=allow_downgrade,
                           apply_time=apply_time.value, push=push, task_timeout=task_timeout, poll=poll)  # fmt: skip
    ids = {s.name: s.id for s in servers}
    args = {"image_base": image_base, "template": template, "components": sorted(component or []), "max_failures": str(threshold),
            "allow_downgrade": allow_downgrade, "apply_time": apply_time.value, "window": window, "push": push}  # fmt: skip
    waves = [w for w in [servers[:canary]] + [servers[i : i + batch] for i in range(canary, len(servers), batch)] if w]
    if drain is not None:  # no wave drains more of a rack than --max-unavailable: the dry run shows the waves as they run
        from fleetctl.workflows.firmware_described import split_waves

        by_name = {s.name: s for s in servers}
        waves = [[by_name[n] for n in w] for w in split_waves([[s.name for s in w] for w in waves], drain)]
    if local:
        _check_local_images(servers, opts, want, ids, targets, output)

    def say(line: str) -> None:
        console(stderr=True).print(line, highlight=False)

    if dry_run:
        report = _dry_run(waves, opts, want, ids, targets, args, threshold, output)
    else:
        from fleetctl.inventory.service import actor
        from fleetctl.workflows.firmware_described import request

        req = request([[s.name for s in w] for w in waves], opts, label=" ".join(targets), args=args, threshold=threshold,
                      window=window, wait=not no_wait, actor=actor(), drain=drain)  # fmt: skip
        report = _through_temporal(req, say) if temporal else _in_process(req, len(servers), output, say)
    rows = [_in_order(r) for r in report.rows]
    emit(rows, output, columns=COLUMNS,
         styles={"result": lambda v: {"updated": "green", "at baseline": "green", "would update": "yellow",
                                      "would downgrade": "yellow"}.get(v, "bold red")})  # fmt: skip
    if output == Format.table and report.halted and any(r["result"] == "not attempted" for r in rows):
        say(f"halted: {report.failed} server(s) failed (threshold {threshold}); the waves after were not attempted")
    ok = {"updated", "at baseline", "would update", "would downgrade"}
    if any(r["result"] not in ok for r in rows) and not (dry_run and report.failed == 0):
        raise typer.Exit(1)


# The report's columns, in this order on both engines (a row that travelled through Temporal's JSON has its keys sorted).
COLUMNS = ["wave", "server", "component", "from", "to", "after", "result", "message"]


def _in_order(row: dict[str, Any]) -> dict[str, Any]:
    return {**{k: row[k] for k in COLUMNS if k in row}, **row}


def _check_components(component: list[str], servers: list[Any], want: dict[str, dict[str, str]]) -> None:
    """Each --component names a component of a server's baseline: by its name, or by a BMC id that answers to one
    (``mncore2_slot0_mncore2-board``); any case. Anything else would flash nothing and say "at baseline".

    Raises:
        InputError: one that names none, with the components the servers' baselines have.
    """
    from fleetctl.errors import InputError
    from fleetctl.interfaces.bmc import FirmwareComponent
    from fleetctl.workflows.firmware import baseline_key

    have: dict[str, str] = {}
    for s in servers:
        have.update(want.get(s.name, {}))
    for c in component:
        if baseline_key(have, FirmwareComponent(id=c, name=c, version=None)) is None:
            known = ", ".join(sorted(have, key=str.lower)) or "none (their models have no firmware baseline)"
            raise InputError(f"{c!r} is not in the firmware baseline of these servers' models; it has: {known}",
                             field="--component")  # fmt: skip


def _dry_run(waves: list[list[Any]], opts: Any, want: dict[str, dict[str, str]], ids: dict[str, int], targets: list[str],
             args: dict[str, Any], threshold: Any, output: Format) -> Any:  # fmt: skip
    """What the campaign would do, wave by wave, read from the BMCs (nothing locked, flashed or journaled but the reads'
    own jobs); the window is not waited for, and BMCs that cannot be read count against the threshold as in a campaign."""
    from fleetctl.cli.bmcrun import run_with_progress
    from fleetctl.workflows.firmware_campaign import HALT_REASON, Campaign, WaveReport, server_rows

    planner = Campaign(None, None, opts, want, ids, actor="")
    rows: list[dict[str, Any]] = []
    failed, halted = 0, False
    total = sum(len(w) for w in waves)
    for n, wave in enumerate(waves):
        if halted:
            why = HALT_REASON.format(failed=failed, threshold=threshold)
            rows += [{"wave": n, "server": s.name, "component": None, "from": None, "to": None, "after": None,
                      "result": "not attempted", "message": why} for s in wave]  # fmt: skip
            continue
        for o in run_with_progress(wave, planner.dry_run, kind="firmware.plan", targets=targets, args={**args, "wave": n},
                                   output=output):  # fmt: skip
            rows += server_rows(planner, n, o.server, o.error, dry_run=True)
            failed += 0 if o.ok else 1
        halted = threshold.reached(failed, total)
    return WaveReport(rows, failed, halted, False)


def _check_local_images(servers: list[Any], opts: Any, want: dict[str, dict[str, str]], ids: dict[str, int], targets: list[str],
                        output: Format) -> None:  # fmt: skip
    """Images pushed from local files must all exist: read the inventories (read-only) and look before the first flash."""
    from pathlib import Path

    from fleetctl.cli.bmcrun import run_with_progress
    from fleetctl.errors import InputError
    from fleetctl.workflows.firmware_campaign import Campaign

    planner = Campaign(None, None, opts, want, ids, actor="")
    run_with_progress(servers, planner.dry_run, kind="firmware.plan", targets=targets, output=output)
    missing = sorted({f.image for r in planner.results.values() for f in r.flashes if f.state == "planned" and not Path(f.image).is_file()})
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise InputError(f"image {missing[0]} not found{more}; nothing was flashed", field="--image-base")


def _temporal() -> str | None:
    from fleetctl.config import temporal_address

    return temporal_address()


def _through_temporal(req: Any, say: Any) -> Any:
    """The campaign on Temporal, followed to its end (the same report as in process); Ctrl-C or SIGTERM detaches."""
    from fleetctl.cli.output import console
    from fleetctl.config import temporal_address, temporal_namespace
    from fleetctl.scaleout.client import Detached, run_described

    address = temporal_address()
    assert address is not None
    try:  # (SIGTERM is Ctrl-C, cli.app.main)
        report, _ = run_described("firmware", req, address, temporal_namespace(), kind="firmware", say=say,
                                  resumes="the same `fleetctl firmware update` resumes it (nothing done is flashed again)")  # fmt: skip
    except Detached as d:
        console(stderr=True).print(d.message(), highlight=False)
        raise typer.Exit(130) from None
    return report


def _in_process(req: Any, total: int, output: Format, say: Any) -> Any:
    """The campaign in this process (the same description as on Temporal), a progress bar on a terminal.

    Ctrl-C (or SIGTERM) closes it as interrupted: the job interrupted, the locks released; a rerun resumes it.
    """
    import sys

    from fleetctl.holders import Holder
    from fleetctl.workflows.describe import Context, run_local
    from fleetctl.workflows.firmware_described import FIRMWARE

    ctx = Context("process", str(Holder.me()), say=say)
    if not (sys.stderr.isatty() and output == Format.table and total > 1):
        return run_local(FIRMWARE, req, ctx=ctx)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fleetctl.cli.output import console

    bar = Progress(TextColumn("firmware.update"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[last]}"), console=console(stderr=True), transient=True)  # fmt: skip
    with bar:
        task = bar.add_task("firmware.update", total=total, last="")

        def progress(key: str, stage: str, out: Any) -> None:
            if stage == "done":
                bar.update(task, advance=1, last=f"{key} {'ok' if out is not None and out.ok else 'FAILED'}")

        return run_local(FIRMWARE, req, ctx=ctx, progress=progress)
