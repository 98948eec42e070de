"""The journaled maintenance around a disruptive action on one server: cordon, drain, (act), uncordon.

For a server that is a live node of a declared cluster (:func:`live_nodes`):

- :func:`enter` writes the journal's row first (``draining``), then cordons
  the node with the ``fleetctl.io/maintenance=job-<id>:NoSchedule`` taint
  (``kubectl describe node`` tells an operator which job holds it), drains it
  (:mod:`fleetctl.k8s.drain`: kubectl's rules, budgets honoured, bounded) and
  writes ``drained``;
- the caller acts (power cycle, burn-in, firmware, RMA);
- :func:`leave` with ``ok``: removes the taint, uncordons the node unless it
  was cordoned before fleetctl came, writes ``released``. Without ``ok``: the
  node stays cordoned with the taint naming the job, the row ``held`` with the
  reason, listed by ``fleetctl k8s status`` (:func:`held`) until an operator
  runs ``fleetctl k8s uncordon``.

A server has at most one row that is not ``released``. Entered again (the same
job re-run, or a new job once the old one's process is gone: its job row is no
longer running) the row is taken over and the maintenance resumes: the cordon
is idempotent, the pods left are evicted, the pods already terminating are
waited for; whether the node was cordoned before fleetctl came is kept from the
first entry. A row held by a job that still runs refuses the new one (exit 2).

Everything checked before anything is touched (:func:`check`): the cluster
answers, each declared node is there, no pod refuses the drain (kubectl's
filters, evaluated dry), no live job holds the node. Blocking (sync); the
workflows' async units call it in a thread. Every store write is its own short
transaction; no credential is ever written (the cluster by name).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update

from fleetctl.errors import FleetError
from fleetctl.holders import Holder, actor
from fleetctl.interfaces.k8s import DEFAULT_DEADLINE, ClusterClient, ClusterRef, K8sError, Node, NodePatch, Pod, Taint
from fleetctl.k8s.drain import DrainTimeout, MaintenanceRefused, drain, plan_pods
from fleetctl.k8s.nodes import NodeRef, node_refs
from fleetctl.k8s.status import FEW, Opener, find_node, statuses
from fleetctl.k8s.writes import update_node, with_taint, without_taint
from fleetctl.store import immediate
from fleetctl.store import tables as T
from fleetctl.times import utcnow

__all__ = [
    "TAINT_KEY",
    "DrainOptions",
    "DrainTimeout",
    "Entered",
    "MaintenanceRefused",
    "MaintenanceRow",
    "check",
    "cordon",
    "enter",
    "held",
    "leave",
    "live_nodes",
    "uncordon",
]

#: The taint fleetctl puts on a node it holds; its value names the job (``job-<id>``).
TAINT_KEY = "fleetctl.io/maintenance"
TAINT_EFFECT = "NoSchedule"

# The journal's states. draining -> drained -> released; draining/drained -> held (left cordoned on purpose);
# cordoned: `fleetctl k8s cordon` (no drain). Every state but released is listed by `k8s status`.
DRAINING, DRAINED, CORDONED, RELEASED, HELD = "draining", "drained", "cordoned", "released", "held"
REASON_MAX = 1000


@dataclass(frozen=True)
class DrainOptions:
    """How a node is drained: plain values (they travel in a Temporal history)."""

    timeout_s: float = 600.0  # per node
    delete_emptydir_data: bool = False
    force: bool = False  # pods no controller manages
    grace_s: int | None = None
    retry_s: float = 5.0  # pause after a 429
    poll_s: float = 1.0  # between two reads of the node's pods while waiting for the evicted ones to go


@dataclass(frozen=True)
class Entered:
    """What :func:`enter` did, plain values."""

    server: str
    cluster: str
    node: str
    job: int
    was_cordoned: bool  # cordoned before we came: leave() then does not uncordon it
    evicted: int
    waited_s: float


@dataclass(frozen=True)
class MaintenanceRow:
    """One row of the journal, as read back."""

    id: int
    server: str
    cluster: str
    node: str
    job: int
    why: str
    state: str
    was_cordoned: bool
    evicted: int
    waited_s: float
    reason: str | None
    started_at: dt.datetime | None
    updated_at: dt.datetime | None

    def row(self) -> dict[str, Any]:
        """The machine-readable form (``-o json``)."""
        return {"server": self.server, "cluster": self.cluster, "node": self.node, "job": self.job, "why": self.why,
                "state": self.state, "was_cordoned": self.was_cordoned, "evicted": self.evicted, "reason": self.reason,
                "since": self.started_at.isoformat() if self.started_at else None}  # fmt: skip


def taint_of(job: int) -> Taint:
    """The taint naming the job that holds a node."""
    return Taint(key=TAINT_KEY, value=f"job-{job}", effect=TAINT_EFFECT)


# --- the cluster side ------------------------------------------------------------


def _opener(timeout_s: float) -> Opener:
    """The default opener: the driver the reference names, its deadline long enough for a whole drain."""

    def open_(ref: ClusterRef) -> ClusterClient:
        from fleetctl.plugins import load_driver

        cls = load_driver("k8s", ref.driver)
        if not (isinstance(cls, type) and issubclass(cls, ClusterClient)):
            raise FleetError(f"k8s driver {ref.driver!r} is not a ClusterClient", exit_code=2)
        client: ClusterClient = cls.open(ref, deadline=max(0.0, timeout_s) + DEFAULT_DEADLINE)
        return client

    return open_


def live_nodes(c: Any, servers: Sequence[str], *, opener: Opener | None = None) -> dict[str, NodeRef]:
    """Which of these servers are nodes of a declared cluster (a node found), each with its node's name; the others need no drain.

    Raises:
        K8sError: (exit 2) a cluster that cannot be opened (a kubeconfig without the context) or does not answer.
        NotFound: (exit 2) a declared node its cluster lacks.
    """
    refs = [r for r in node_refs(c, list(servers)) if r.cluster is not None]
    if not refs:
        return {}
    return {s.ref.server: dataclasses.replace(s.ref, node=s.node.name) for s in statuses(refs, pods=False, opener=opener)
            if s.node is not None}  # fmt: skip


def check(c: Any, servers: Sequence[str], *, options: DrainOptions = DrainOptions(), job: int | None = None,
          opener: Opener | None = None, pods: bool = True) -> dict[str, NodeRef]:  # fmt: skip
    """Everything a maintenance needs, checked before any node is touched; the live nodes (as :func:`live_nodes`).

    Per live node: no other job that still runs holding it, and (``pods``: a drain comes) its pods by kubectl's filters
    (a dry evaluation: pods with local data without ``delete_emptydir_data``, pods no controller manages without ``force``).

    Raises:
        MaintenanceRefused: (exit 2) every refusal of every node, in one line.
        K8sError, NotFound: as :func:`live_nodes`.
    """
    live = live_nodes(c, servers, opener=opener)
    refusals: list[str] = []
    by_cluster: dict[ClusterRef, list[NodeRef]] = {}
    for ref in live.values():
        assert ref.cluster is not None
        by_cluster.setdefault(ref.cluster, []).append(ref)
    engine = c.engine
    for ref in live.values():
        holder = _holder(engine, ref.server, job)
        if holder is not None:
            refusals.append(holder)
    if pods and not refusals:
        for cluster, refs in by_cluster.items():
            with (opener or _opener(DEFAULT_DEADLINE))(cluster) as client:
                # A few nodes: each one's pods by a field selector; many: one listing of every pod (as k8s status reads).
                every = _pods_by_node(client.pods()) if len(refs) > FEW else None
                for ref in refs:
                    assert ref.node is not None
                    on = every.get(ref.node, []) if every is not None else client.pods(ref.node)
                    plan = plan_pods(on, delete_emptydir_data=options.delete_emptydir_data, force=options.force)
                    if plan.refused:
                        refusals.append(f"{ref.server}: {plan.refusal(ref.node)}")
    if refusals:
        more = f"; and {len(refusals) - 3} more" if len(refusals) > 3 else ""
        raise MaintenanceRefused("; ".join(refusals[:3]) + more + " (nothing was cordoned)")
    return live


def _pods_by_node(pods: Sequence[Pod]) -> dict[str, list[Pod]]:
    out: dict[str, list[Pod]] = {}
    for p in pods:
        if p.node:
            out.setdefault(p.node, []).append(p)
    return out


def _node_of(c: Any, server: str, opener: Opener) -> tuple[NodeRef, ClusterClient, Node] | None:
    refs = [r for r in node_refs(c, [server]) if r.cluster is not None]
    if not refs:
        return None
    ref = refs[0]
    assert ref.cluster is not None
    client = opener(ref.cluster)
    try:
        node, _ = find_node(client, ref, None)
    except BaseException:
        client.close()
        raise
    if node is None:
        client.close()
        return None
    return ref, client, node


def _cordon_change(job: int) -> Callable[[Node], NodePatch | None]:
    """Cordoned, with this job's taint in place of any other value of fleetctl's key (idempotent: None when so already)."""
    taint = taint_of(job)

    def change(node: Node) -> NodePatch | None:
        if node.unschedulable and taint in node.taints and sum(t.key == TAINT_KEY for t in node.taints) == 1:
            return None
        return NodePatch(unschedulable=True, taints=with_taint(without_taint(node.taints, TAINT_KEY), taint))

    return change


def _release_change(uncordon: bool) -> Callable[[Node], NodePatch | None]:
    """fleetctl's taint removed, and the node uncordoned when asked; every other taint written back as read."""

    def change(node: Node) -> NodePatch | None:
        ours = any(t.key == TAINT_KEY for t in node.taints)
        if not ours and not (uncordon and node.unschedulable):
            return None
        return NodePatch(unschedulable=False if uncordon else None, taints=without_taint(node.taints, TAINT_KEY) if ours else None)

    return change


# --- the journal ---------------------------------------------------------------


def _row(r: Any) -> MaintenanceRow:
    return MaintenanceRow(r.id, r.server, r.cluster, r.node, r.job_id, r.why, r.state, bool(r.was_cordoned), r.evicted or 0,
                          float(r.waited_s or 0.0), r.reason, r.started_at, r.updated_at)  # fmt: skip


def _open_row(conn: Any, server: str) -> MaintenanceRow | None:
    m = T.k8s_maintenance.c
    r = conn.execute(select(T.k8s_maintenance).where(m.server == server, m.state != RELEASED).order_by(m.id.desc()).limit(1)).first()
    return _row(r) if r is not None else None


def _job_runs(conn: Any, job: int) -> bool:
    """Does this job still run? Its row says running and its process is not known gone (another host's: assumed running)."""
    r = conn.execute(select(T.job.c.state, T.job.c.args).where(T.job.c.id == job)).first()
    if r is None or r.state != "running":
        return False
    owner = r.args.get("owner") if isinstance(r.args, dict) else None
    if not isinstance(owner, str):
        return True
    return Holder.parse(owner).alive() is not False


def _holder(engine: Any, server: str, job: int | None) -> str | None:
    """Why another job that still runs holds the server's node (None: no one, this job, or a job that is gone)."""
    with engine.connect() as conn:
        row = _open_row(conn, server)
        if row is None or row.job == job or not _job_runs(conn, row.job):
            return None
    return f"{server}: node {row.node} is held by job {row.job} ({row.why}, {row.state}), which still runs"


def _audit(conn: Any, server: str, action: str, detail: str, reason: str | None) -> None:
    conn.execute(T.event.insert().values(at=utcnow(), actor=actor(), action=action, object_kind="server", object_name=server,
                                         detail=detail, reason=reason))  # fmt: skip


def _take(engine: Any, ref: NodeRef, node: Node, *, job: int, why: str, state: str) -> MaintenanceRow:
    """The server's open row, written (new) or taken over by this job, in one transaction that reads first."""
    from fleetctl.models import K8sMaintenance  # the model's table knows its primary key (the light one does not)

    assert ref.cluster is not None
    m = T.k8s_maintenance.c
    now = utcnow()
    with immediate(engine) as conn:
        row = _open_row(conn, ref.server)
        if row is not None and row.job != job and _job_runs(conn, row.job):
            raise MaintenanceRefused(f"{ref.server}: node {row.node} is held by job {row.job} ({row.why}, {row.state}), which still runs")
        if row is None:
            # Whether it was cordoned before we came is read from the node now, once: a resumed row keeps it.
            was = node.unschedulable and not any(t.key == TAINT_KEY for t in node.taints)
            new_id = conn.execute(
                insert(K8sMaintenance.__table__).values(server=ref.server, cluster=ref.cluster.name, node=node.name, job_id=job, why=why,
                                                 state=state, was_cordoned=was, evicted=0, waited_s=0.0, started_at=now,
                                                 updated_at=now)  # fmt: skip
            ).inserted_primary_key[0]  # type: ignore[index]
            _audit(conn, ref.server, "k8s.maintenance.enter", f"node {node.name} of cluster {ref.cluster.name}: cordon for job {job}", why)
        else:
            new_id = row.id
            took = f", taken over from job {row.job} ({row.state})" if row.job != job else f", resumed ({row.state})"
            conn.execute(update(T.k8s_maintenance).where(m.id == row.id).values(job_id=job, why=why, state=state, reason=None,
                                                                                updated_at=now))  # fmt: skip
            _audit(conn, ref.server, "k8s.maintenance.enter", f"node {row.node}: cordon for job {job}{took}", why)
        out = conn.execute(select(T.k8s_maintenance).where(m.id == new_id)).first()
    return _row(out)


def _set(engine: Any, row_id: int, *, action: str, server: str, note: str, values: dict[str, Any]) -> None:
    """Update the row (``values``) and write the audit log's line (its reason: the row's), in one transaction."""
    values = {"updated_at": utcnow(), **values}
    with immediate(engine) as conn:
        conn.execute(update(T.k8s_maintenance).where(T.k8s_maintenance.c.id == row_id).values(**values))
        _audit(conn, server, action, note, values.get("reason"))


def _hold(engine: Any, row: MaintenanceRow, reason: str, detail: dict[str, Any] | None = None) -> None:
    values: dict[str, Any] = {"state": HELD, "reason": reason[:REASON_MAX]}
    if detail is not None:
        values["detail"] = detail
    _set(engine, row.id, action="k8s.maintenance.held", server=row.server,
         note=f"node {row.node} left cordoned, tainted {TAINT_KEY}=job-{row.job}", values=values)  # fmt: skip


# --- enter, leave, held --------------------------------------------------------------


def enter(c: Any, server: str, *, job: int, why: str, options: DrainOptions = DrainOptions(), opener: Opener | None = None,
          say: Callable[[str], None] | None = None) -> Entered | None:  # fmt: skip
    """Cordon and drain the server's node for ``job``, journaled; None when the server is no node (nothing done).

    Re-entered (the same job, or a new one after the old one's process died) it resumes (see the module's doc).

    Raises:
        MaintenanceRefused: (exit 2) a pod refuses the drain, or a job that still runs holds the node; nothing touched.
        DrainTimeout: (exit 1) not drained in ``options.timeout_s``: the node stays cordoned, tainted, its row ``held``.
        K8sError, NotFound: (exit 2) the cluster cannot be opened or does not answer; a declared node it lacks.
    """
    engine = c.engine
    found = _node_of(c, server, opener or _opener(options.timeout_s))
    if found is None:
        return None
    ref, client, node = found
    with client:
        holder = _holder(engine, server, job)
        if holder is not None:
            raise MaintenanceRefused(holder)
        # kubectl's filters, dry, before the node is touched: a refusal leaves everything as it was.
        plan = plan_pods(client.pods(node.name), delete_emptydir_data=options.delete_emptydir_data, force=options.force)
        if plan.refused:
            raise MaintenanceRefused(f"{server}: {plan.refusal(node.name)} (nothing was cordoned)", refused=[
                (f"{p.namespace}/{p.name}", w) for p, w in plan.refused])  # fmt: skip
        row = _take(engine, ref, node, job=job, why=why, state=DRAINING)
        try:
            update_node(client, node.name, _cordon_change(job))
            if say is not None:
                say(f"{server}: node {node.name} cordoned ({TAINT_KEY}=job-{job}); draining")
            result = drain(client, node.name, timeout_s=options.timeout_s, delete_emptydir_data=options.delete_emptydir_data,
                           force=options.force, grace_s=options.grace_s, retry_s=options.retry_s, poll_s=options.poll_s,
                           say=say)  # fmt: skip
        except DrainTimeout as e:
            _hold(engine, row, str(e), e.result.summary())
            raise
        except FleetError as e:  # a refusal raced in after the check, the cluster gone mid-drain: held, with why
            _hold(engine, row, str(e))
            raise
        _set(engine, row.id, action="k8s.maintenance.drained", server=server,
             note=f"node {node.name}: {len(result.evicted)} pod(s) evicted in {result.waited_s:.1f} s",
             values={"state": DRAINED, "evicted": row.evicted + len(result.evicted), "waited_s": row.waited_s + result.waited_s,
                     "detail": result.summary()})  # fmt: skip
    return Entered(server, row.cluster, row.node, job, row.was_cordoned, len(result.evicted), result.waited_s)


def _cluster_of(c: Any, row: MaintenanceRow) -> ClusterRef:
    """The row's cluster as its server's site declares it now (the row names it; the reference is read again)."""
    from fleetctl.k8s.nodes import cluster_refs

    r = c.execute(select(T.site.c.k8s_clusters).join(T.rack, T.rack.c.site_id == T.site.c.id)
                  .join(T.server, T.server.c.rack_id == T.rack.c.id).where(T.server.c.name == row.server)).first()  # fmt: skip
    ref = cluster_refs(r.k8s_clusters if r is not None else None).get(row.cluster)
    if ref is None:
        raise K8sError(f"{row.server}: cluster {row.cluster!r} (of its node {row.node}) is no longer declared in its site", exit_code=2)
    return ref


def _release(c: Any, row: MaintenanceRow, opener: Opener, *, action: str = "k8s.maintenance.released") -> None:
    """fleetctl's taint off the node, uncordoned unless it was before fleetctl came; the row released."""
    uncordon = not row.was_cordoned
    with opener(_cluster_of(c, row)) as client:
        try:
            update_node(client, row.node, _release_change(uncordon))
            note = f"node {row.node}: {TAINT_KEY} removed{', uncordoned' if uncordon else ', left cordoned (it was before fleetctl came)'}"
        except K8sError as e:
            if e.status != 404:
                raise
            note = f"node {row.node}: no longer in its cluster; nothing to uncordon"
    _set(c.engine, row.id, action=action, server=row.server, note=note, values={"state": RELEASED, "released_at": utcnow(), "reason": None})


def leave(c: Any, server: str, *, job: int, ok: bool, reason: str = "", opener: Opener | None = None) -> None:
    """End ``job``'s maintenance of the server's node. Idempotent; nothing when the job holds no node of it.

    ``ok``: fleetctl's taint removed, the node uncordoned unless it was cordoned before fleetctl came, the row
    ``released``. Not ``ok``: the node stays cordoned with the taint naming the job, the row ``held`` with ``reason``.

    Raises:
        K8sError: (exit 2) with ``ok``, the cluster cannot be opened or does not answer: the row stays as it was.
    """
    engine = c.engine
    with engine.connect() as conn:
        row = _open_row(conn, server)
    if row is None or row.job != job:
        return  # not a node, released already, or taken over by another job since
    if not ok:
        why = reason or "the action failed"
        if row.state != HELD or row.reason != why[:REASON_MAX]:
            _hold(engine, row, why)
        return
    _release(c, row, opener or _opener(DEFAULT_DEADLINE))


def held(c: Any) -> list[MaintenanceRow]:
    """Every row not released (nodes fleetctl holds cordoned, and why), oldest first: for ``k8s status`` and operators."""
    m = T.k8s_maintenance.c
    with c.engine.connect() as conn:
        return [_row(r) for r in conn.execute(select(T.k8s_maintenance).where(m.state != RELEASED).order_by(m.started_at, m.id))]


# --- the operator's commands: fleetctl k8s cordon|drain|uncordon -----------------------


@contextlib.contextmanager
def _free_node(c: Any, server: str, job: int, opener: Opener) -> Iterator[tuple[NodeRef, ClusterClient, Node] | None]:
    """The server's node with its client open, once no running job but ``job`` holds it (an operator's cordon or
    uncordon never takes a node from a live job); None: the server is no node.

    Raises:
        MaintenanceRefused: (exit 2) a job that still runs holds the node.
    """
    found = _node_of(c, server, opener)
    if found is None:
        yield None
        return
    with found[1]:
        holder = _holder(c.engine, server, job)
        if holder is not None:
            raise MaintenanceRefused(holder)
        yield found


def cordon(c: Any, server: str, *, job: int, why: str, opener: Opener | None = None) -> MaintenanceRow | None:
    """Cordon the server's node with the taint naming ``job``, journaled (``cordoned``: no drain); None: no node.

    Raises:
        MaintenanceRefused: (exit 2) a job that still runs holds the node.
        K8sError, NotFound: as :func:`enter`.
    """
    with _free_node(c, server, job, opener or _opener(DEFAULT_DEADLINE)) as found:
        if found is None:
            return None
        ref, client, node = found
        row = _take(c.engine, ref, node, job=job, why=why, state=CORDONED)
        try:
            update_node(client, node.name, _cordon_change(job))
        except FleetError as e:
            _hold(c.engine, row, str(e))
            raise
    return row


def uncordon(c: Any, server: str, *, job: int, opener: Opener | None = None) -> str | None:
    """The operator's release: the node's open row taken over by ``job`` and released (as :func:`leave` with ``ok``);
    a node fleetctl holds no row of is uncordoned as ``kubectl uncordon`` would. What was done; None: no node.

    Raises:
        MaintenanceRefused: (exit 2) a job that still runs holds the node (it will release it itself).
        K8sError, NotFound: as :func:`enter`.
    """
    opener = opener or _opener(DEFAULT_DEADLINE)
    with _free_node(c, server, job, opener) as found:
        if found is None:
            return None
        ref, client, node = found
        with c.engine.connect() as conn:
            row = _open_row(conn, server)
        if row is None:
            update_node(client, node.name, _release_change(True))
            with immediate(c.engine) as conn:
                _audit(conn, server, "k8s.uncordon", f"node {node.name}: uncordoned (fleetctl held no maintenance of it)", None)
            return f"node {node.name} uncordoned"
    row = _take(c.engine, ref, node, job=job, why="k8s.uncordon", state=row.state)
    _release(c, row, opener)
    kept = " (left cordoned: it was before fleetctl came)" if row.was_cordoned else " uncordoned"
    return f"node {node.name}: {TAINT_KEY} removed,{kept}"
