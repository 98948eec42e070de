"""The CLI's side of the Kubernetes maintenance: the drain options, the check before anything, enter and leave per server.

A command that disrupts servers (``power off|cycle|restart``, ``board set
--state rma``, ``fleetctl k8s drain``) works the servers that are live nodes
of a declared cluster through :mod:`fleetctl.k8s.maintenance`: everything is
checked first (:func:`check_all`: the clusters answer, each declared node is
there, no pod refuses the drain, no job that still runs holds a node), then
each node is cordoned and drained (:meth:`Maintained.enter_all`), the command
acts on the servers drained, and each node is left (:meth:`Maintained.leave`):
uncordoned when its action went well, held cordoned with the reason when not.
The maintenance is a job of its own (``k8s.maintenance``): its id is the
taint's value (``fleetctl.io/maintenance=job-<id>``) and ``jobs show`` lists
its rows. docs/kubernetes.md has the rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from fleetctl.cli.common import seconds, whole

DrainTimeoutOpt = Annotated[
    float, typer.Option("--drain-timeout", help="Seconds each node may take to drain (budgets waited on), else it stays cordoned (exit 1).",
                        callback=seconds(1, 86400))  # fmt: skip
]
EmptyDirOpt = Annotated[
    bool, typer.Option("--delete-emptydir-data", help="Also evict pods with local data (emptyDir); their data is lost, as with kubectl.")
]
ForceDrainOpt = Annotated[bool, typer.Option("--force-drain", help="Also evict pods no controller manages (kubectl drain --force).")]
GraceOpt = Annotated[
    int | None, typer.Option("--grace-period", help="Seconds each evicted pod gets to stop (default: its own).", parser=whole(0, 86400))
]
def _max_unavailable(value: str | None) -> str | None:
    """A typer callback: ``N`` or ``P%`` (fleetctl.k8s.waves' rule), refused where it enters, whatever the servers."""
    if value is not None:
        from fleetctl.errors import InputError
        from fleetctl.k8s.waves import parse_max_unavailable

        try:
            parse_max_unavailable(value)
        except InputError as e:
            raise typer.BadParameter(str(e).removeprefix("--max-unavailable: ")) from None
    return value


MaxUnavailableOpt = Annotated[
    str, typer.Option("--max-unavailable", help="Nodes of a rack drained at once: a count, or a percentage of the rack's nodes "
                      "(counting those out already).", callback=_max_unavailable)  # fmt: skip
]
NoDrainOpt = Annotated[
    bool, typer.Option("--no-drain", help="Do not talk to the Kubernetes cluster at all (an emergency, a cluster down): servers in "
                       "service then need --allow-in-service.")  # fmt: skip
]


RetryOpt = Annotated[
    float, typer.Option("--eviction-retry", help="Seconds before an eviction a disruption budget refused is asked again (kubectl's 5).",
                        callback=seconds(0.01, 300))  # fmt: skip
]


def drain_options(timeout_s: float, delete_emptydir_data: bool, force: bool, grace_s: int | None, retry_s: float = 5.0) -> Any:
    """The options as :class:`fleetctl.k8s.maintenance.DrainOptions`."""
    from fleetctl.k8s.maintenance import DrainOptions

    return DrainOptions(timeout_s=timeout_s, delete_emptydir_data=delete_emptydir_data, force=force, grace_s=grace_s, retry_s=retry_s)


def check_all(servers: Sequence[Any], options: Any, *, max_unavailable: str = "1") -> dict[str, int]:
    """The servers in service that are live nodes, each with its wave ({server: wave, 0 first}); nothing touched.

    Only servers in service run users' pods by the lifecycle's rules (as the workflows' drain, docs/kubernetes.md): the
    cluster of a server in any other state is not asked, so a cluster declared but not reachable yet (a new site's)
    does not stop work on servers that are not in service yet. The waves keep each rack within ``max_unavailable`` (a
    count or a percentage of its nodes), counting its nodes out already (:func:`fleetctl.workflows.maintained.plan_drain`).

    Raises (exit 2, one line): a cluster that cannot be opened or does not answer, a declared node it lacks (the line
    says how to act without draining), a pod that refuses the drain, a node a job that still runs holds, a rack that
    may lose no more node now.
    """
    from fleetctl.cli.common import conn
    from fleetctl.errors import FleetError, InputError, NotFound
    from fleetctl.interfaces.k8s import K8sError
    from fleetctl.workflows.maintained import plan_drain

    serving = [s.name for s in servers if s.state == "in-service"]
    if not serving:
        return {}
    try:
        with conn() as c:
            plan = plan_drain(c, serving, max_unavailable=max_unavailable, timeout_s=options.timeout_s,
                              delete_emptydir_data=options.delete_emptydir_data, force=options.force, grace_s=options.grace_s)  # fmt: skip
    except FleetError as e:
        if not isinstance(e, K8sError | NotFound):
            raise  # a refusal (pods, a job holding a node, a rack at its bound) says what to do itself
        more = f" and {len(serving) - 3} more" if len(serving) > 3 else ""
        raise InputError(f"{', '.join(serving[:3])}{more} in service, and the Kubernetes check before their drain failed: {e}; "
                         "give --no-drain --allow-in-service to act on them without draining") from e  # fmt: skip
    return dict(plan.wave_of) if plan is not None else {}


def _say(line: str) -> None:
    from fleetctl.cli.output import console

    console(stderr=True).print(line, markup=False, highlight=False)


@dataclass
class Maintained:
    """The nodes one command holds: the job, what each enter did, and each failure."""

    job: int
    kind: str
    entered: dict[str, Any] = field(default_factory=dict)  # server -> Entered
    failed: dict[str, str] = field(default_factory=dict)  # server -> why its drain failed (the node stays cordoned, held)
    not_left: dict[str, str] = field(default_factory=dict)  # server -> why its node could not be uncordoned after the action
    ended: bool = False

    @classmethod
    def begin(cls, live: dict[str, Any], *, kind: str, target: str, options: Any, action: str) -> Maintained:
        """The maintenance's job (``k8s.maintenance``: the taint names it), recording the action and the options."""
        import dataclasses

        from fleetctl.inventory.service import actor
        from fleetctl.store import get_engine
        from fleetctl.workflows.journal import Journal

        journal = Journal.open(get_engine(), kind=kind, target=target,
                               args={"action": action, "servers": sorted(live), **dataclasses.asdict(options)}, actor=actor())  # fmt: skip
        return cls(journal.job_id, kind)

    def enter_all(self, live: dict[str, Any], *, why: str, options: Any, quiet: bool = False) -> None:
        """Cordon and drain each live node in turn; a node that fails is recorded (held, cordoned), the others go on."""
        from fleetctl.cli.common import conn
        from fleetctl.errors import FleetError
        from fleetctl.k8s.maintenance import enter

        for server in sorted(live):
            try:
                with conn() as c:
                    done = enter(c, server, job=self.job, why=why, options=options, say=None if quiet else _say)
            except FleetError as e:
                self.failed[server] = str(e)
                continue
            if done is not None:
                self.entered[server] = done

    def leave(self, server: str, *, ok: bool, reason: str = "") -> str:
        """Leave one node (uncordoned when ``ok``, else held with ``reason``); what became of it, for the summary."""
        from fleetctl.cli.common import conn
        from fleetctl.errors import FleetError
        from fleetctl.k8s.maintenance import leave

        entered = self.entered.get(server)
        if entered is None:
            return ""
        try:
            with conn() as c:
                leave(c, server, job=self.job, ok=ok, reason=reason)
        except FleetError as e:
            self.not_left[server] = str(e)
            return f"still cordoned: {e}"
        if not ok:
            return f"cordoned, held by job {self.job}"
        return "left cordoned (it was before)" if entered.was_cordoned else "uncordoned"

    def report_not_drained(self, output: Any) -> None:
        """The servers not acted on because their drain failed: a table, or one line each on stderr beside a document."""
        if not self.failed:
            return
        from fleetctl.cli.output import Format, emit

        rows = [{"server": n, "node": "cordoned, held", "error": why} for n, why in sorted(self.failed.items())]
        if output == Format.table:
            emit(rows, output, title="Not drained: not acted on")
            return
        for r in rows:  # stdout holds one document (the action's rows); these go beside it
            typer.echo(f"{r['server']}: not drained, not acted on: {r['error']}", err=True)

    def finish(self) -> None:
        """The maintenance's job ends: failed when a node could not be drained or left as it should."""
        if self.ended:
            return
        from fleetctl.store import get_engine
        from fleetctl.workflows.journal import JobState, Journal

        self.ended = True
        bad = len(self.failed) + len(self.not_left)
        state = JobState.FAILED if bad else JobState.SUCCEEDED
        error = f"{len(self.failed)} node(s) not drained, {len(self.not_left)} not uncordoned: see k8s status" if bad else None
        Journal(get_engine(), self.job, "", kind=self.kind).finish(state, error)

    def interrupted(self) -> None:
        """Ctrl-C or SIGTERM: the nodes entered stay cordoned, held with "interrupted" (a re-run resumes); the job ends so."""
        from fleetctl.store import get_engine
        from fleetctl.workflows.journal import JobState, Journal

        self.ended = True
        for server in list(self.entered):
            self.leave(server, ok=False, reason="interrupted")
        Journal(get_engine(), self.job, "", kind=self.kind).finish(JobState.INTERRUPTED, "interrupted")


def k8s_command(targets: list[str], *, verb: str, options: Any, dry_run: bool, output: Any, reason: str | None) -> None:
    """`fleetctl k8s cordon|drain|uncordon TARGET`: a job each, journaled as every maintenance (docs/kubernetes.md).

    Every server named must be a live node, and everything is checked before the first node is touched (exit 2, one
    line): the clusters answer, the nodes are there, no job that still runs holds one, and for a drain no pod refuses.
    Exit 1: a node not drained within the timeout (left cordoned, held), or a cluster that failed mid-way.
    """
    from fleetctl.cli.bmcrun import resolve
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import Format, emit
    from fleetctl.errors import FleetError, NotFound
    from fleetctl.inventory.service import actor
    from fleetctl.k8s import maintenance as m
    from fleetctl.store import get_engine
    from fleetctl.workflows.journal import JobState, Journal

    servers = resolve(targets, output)
    names = [s.name for s in servers]
    with conn() as c:
        live = m.check(c, names, options=options, pods=verb == "drain")
    missing = [n for n in names if n not in live]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise NotFound(f"{', '.join(missing[:3])}{more}: no node of a declared cluster (nothing was {verb}ed)")
    if dry_run:
        for n in names:
            typer.echo(f"would {verb} node {live[n].node} of {n}")
        typer.echo(f"dry run: {len(names)} node(s), nothing changed")
        return
    why = f"k8s.{verb}" + (f": {reason}" if reason else "")
    args: dict[str, Any] = {"servers": names, "reason": reason}
    if verb == "drain":
        args["options"] = _plain(options)
    journal = Journal.open(get_engine(), kind=f"k8s.{verb}", target=" ".join(targets), args=args, actor=actor())
    rows: list[dict[str, Any]] = []
    failed = 0
    try:
        for n in names:
            row: dict[str, Any] = {"server": n, "node": live[n].node, "ok": True, "job": journal.job_id}
            try:
                with conn() as c:
                    if verb == "cordon":
                        m.cordon(c, n, job=journal.job_id, why=why)
                        row["action"] = f"cordoned ({m.TAINT_KEY}=job-{journal.job_id})"
                    elif verb == "drain":
                        done = m.enter(c, n, job=journal.job_id, why=why, options=options,
                                       say=_say if output == Format.table else None)  # fmt: skip
                        assert done is not None
                        row["action"] = f"drained: {done.evicted} pod(s) evicted"
                        row["waited_s"] = round(done.waited_s, 2)
                    else:
                        row["action"] = m.uncordon(c, n, job=journal.job_id)
            except FleetError as e:
                failed += 1
                row.update(ok=False, error=str(e))
            rows.append(row)
    except BaseException:
        journal.finish(JobState.INTERRUPTED, "interrupted")  # the rows left draining say where; a re-run resumes
        raise
    journal.finish(JobState.FAILED if failed else JobState.SUCCEEDED, f"{failed} of {len(names)} failed" if failed else None)
    emit(rows, output, columns=["server", "node", "ok", "action", "waited_s", "error"] if output == Format.table else None,
         styles={"ok": lambda v: "green" if v else "bold red"})  # fmt: skip
    if failed:
        raise typer.Exit(1)


def _plain(options: Any) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(options)
