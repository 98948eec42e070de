"""Node labels from what only fleetctl knows (docs/kubernetes.md, "Labels").

Per server: its site (also as the well-known ``topology.kubernetes.io/zone``),
rack, the leaves its NICs are cabled to and the spines those leaves' uplinks
reach (the cabling plan), the block (the spine group: the topology level above
the rack, for Kueue's topology-aware scheduling), its accelerator kind and
count, firmware compliance (as the last finished sweep that read it judged it
against the model's baseline) and its last burn-in's date and verdict.

Every value is made a valid label value deterministically (:func:`label_value`);
``k8s sync`` adds, changes and removes only the keys fleetctl owns
(:meth:`fleetctl.k8s.policy.Policy.owns`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select

from fleetctl.k8s.nodes import NodeRef
from fleetctl.k8s.policy import ZONE, Policy

#: The API's label value: at most 63 characters of [A-Za-z0-9_.-], beginning and ending with an alphanumeric (or empty).
MAX_VALUE = 63
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_OTHER = re.compile(r"[^A-Za-z0-9_.-]+")
_DIGEST = 8

#: Burn-in verdicts, worst first: a server's verdict is its worst board's.
BURNIN_ORDER = ("fail", "error", "degraded", "pass")


def valid_value(v: str) -> bool:
    return bool(_VALUE.match(v))


def label_value(raw: str) -> str:
    """``raw`` as a label value the API accepts, the same for the same input every time.

    A valid value is kept as it is. Otherwise every run of other characters becomes one ``-``, the ends are trimmed to
    an alphanumeric, and an 8-hex-digit digest of the raw text is appended (``-1a2b3c4d``), cutting the text so the
    whole stays within 63: two names that differ only in what was replaced (``r 1`` and ``r/1``) stay two values, so
    two racks never become one topology domain.
    """
    if valid_value(raw) and len(raw) <= MAX_VALUE:
        return raw
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    body = _OTHER.sub("-", raw).strip("-_.")[: MAX_VALUE - _DIGEST - 1].rstrip("-_.")
    return f"{body}-{digest}" if body else digest


def _joined(names: Iterable[str]) -> str:
    return "_".join(sorted(set(names)))


def compute(conn: Any, refs: list[NodeRef], policy: Policy) -> dict[str, dict[str, str]]:
    """{server: {key: value}} for each server of ``refs`` (all values valid label values)."""
    names = [r.server for r in refs]
    cabled = _cabling(conn, names)
    firmware = _firmware(conn, names)
    burnin = _burnin(conn, names)
    p = policy.labels.prefix
    out: dict[str, dict[str, str]] = {}
    for r in refs:
        raw: dict[str, str] = {f"{p}site": r.site, f"{p}rack": r.rack}
        if policy.labels.zone:
            raw[ZONE] = r.site
        leaves, spines = cabled.get(r.server, (set(), set()))
        if leaves:
            raw[f"{p}leaf"] = _joined(leaves)
        if spines:
            raw[f"{p}spine"] = _joined(spines)
        if leaves or spines:
            # The block: the servers whose leaves reach the same spines (a leaf reaching none is a block of its own).
            raw[f"{p}block"] = _joined(spines) if spines else _joined(leaves)
        if r.boards:
            raw[f"{p}accelerator"] = _joined(r.boards)
            raw[f"{p}accelerator-count"] = str(sum(r.boards.values()))
        if r.server in firmware:
            raw[f"{p}firmware"] = firmware[r.server]
        if r.server in burnin:
            raw[f"{p}burnin"], raw[f"{p}burnin-date"] = burnin[r.server]
        out[r.server] = {k: label_value(v) for k, v in sorted(raw.items())}
    return out


def _chunks(items: list[Any], n: int = 500) -> Iterable[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _cabling(conn: Any, servers: list[str]) -> dict[str, tuple[set[str], set[str]]]:
    """{server: (leaves its NICs are cabled to, spines those leaves' uplinks reach)}: the cabling plan, not LLDP."""
    from fleetctl.store import tables as T

    nic, link, port, sw, srv = T.nic.c, T.link.c, T.switch_port.c, T.switch.c, T.server.c
    leaves: dict[str, set[str]] = {}
    leaf_ids: dict[int, str] = {}
    for chunk in _chunks(servers):
        q = (select(srv.name, sw.id, sw.name.label("switch"))
             .join(T.nic, nic.server_id == srv.id).join(T.link, link.nic_id == nic.id)
             .join(T.switch_port, port.id == link.port_id).join(T.switch, sw.id == port.switch_id)
             .where(srv.name.in_(chunk), sw.role == "leaf"))  # fmt: skip
        for r in conn.execute(q):
            leaves.setdefault(r.name, set()).add(r.switch)
            leaf_ids[r.id] = r.switch
    # A switch-to-switch cable is one row written from either end: a leaf's uplink is a link with a leaf port at one end
    # and a spine port at the other.
    spines_of: dict[str, set[str]] = {}
    if leaf_ids:
        a, b = T.switch_port.alias("a"), T.switch_port.alias("b")
        sa, sb = T.switch.alias("sa"), T.switch.alias("sb")
        q = (select(sa.c.name.label("x"), sa.c.role.label("xr"), sb.c.name.label("y"), sb.c.role.label("yr"))
             .select_from(T.link).join(a, a.c.id == link.port_id).join(b, b.c.id == link.peer_port_id)
             .join(sa, sa.c.id == a.c.switch_id).join(sb, sb.c.id == b.c.switch_id))  # fmt: skip
        wanted = set(leaf_ids.values())
        for r in conn.execute(q):
            for leaf, lr, other, orole in ((r.x, r.xr, r.y, r.yr), (r.y, r.yr, r.x, r.xr)):
                if lr == "leaf" and orole == "spine" and leaf in wanted:
                    spines_of.setdefault(leaf, set()).add(other)
    return {s: (ls, set().union(*(spines_of.get(leaf, set()) for leaf in ls))) for s, ls in leaves.items()}


def _firmware(conn: Any, servers: list[str]) -> dict[str, str]:
    """{server: compliant | noncompliant | unknown} for the servers whose model has a firmware baseline.

    As the last finished sweep that swept the server judged it: a ``firmware.baseline`` finding there is noncompliant;
    none, with the firmware read (the target's metrics), compliant; the firmware not read, or never swept, unknown.
    """
    from fleetctl.store import tables as T

    srv, fb, sr = T.server.c, T.firmware_baseline.c, T.sweep_run.c
    with_baseline: list[str] = []
    for chunk in _chunks(servers):
        q = select(srv.name).where(srv.name.in_(chunk), srv.model_id.in_(select(fb.model_id).distinct()))
        with_baseline += [r.name for r in conn.execute(q)]
    if not with_baseline:
        return {}
    st, f = T.sweep_target.c, T.finding.c
    # The last finished run that swept each (an interrupted run judged nothing it reported); the sweep's own
    # history module is above this package (it reads the nodes), so the query is here.
    last: dict[str, int] = {}
    for chunk in _chunks(with_baseline):
        q = (select(st.name, func.max(st.run_id)).join(T.sweep_run, sr.id == st.run_id)
             .where(st.kind == "server", st.name.in_(chunk), sr.state == "finished").group_by(st.name))  # fmt: skip
        last.update({name: int(rid) for name, rid in conn.execute(q)})
    out = {s: "unknown" for s in with_baseline}
    by_run: dict[int, list[str]] = {}
    for s, rid in last.items():
        by_run.setdefault(rid, []).append(s)
    for rid, names in by_run.items():
        for chunk in _chunks(names):
            q = select(st.name, st.metrics).where(st.run_id == rid, st.kind == "server", st.name.in_(chunk))
            read = {r.name for r in conn.execute(q) if isinstance((r.metrics or {}).get("firmware"), dict)}
            q = select(f.target).where(f.run_id == rid, f.kind == "server", f.check == "firmware.baseline", f.target.in_(chunk))
            off = {r.target for r in conn.execute(q)}
            for s in chunk:
                out[s] = "noncompliant" if s in off else "compliant" if s in read else "unknown"
    return out


def _burnin(conn: Any, servers: list[str]) -> dict[str, tuple[str, str]]:
    """{server: (verdict, date)} of the latest finished burn-in run that burned it in: its worst board, the run's end date."""
    from fleetctl.store import tables as T
    from fleetctl.times import aware_utc

    br, rr = T.burnin_result.c, T.burnin_run.c
    latest: dict[str, tuple[int, Any, set[str]]] = {}
    for chunk in _chunks(servers):
        q = (select(br.server, br.run_id, br.verdict, rr.finished_at).join(T.burnin_run, rr.id == br.run_id)
             .where(br.server.in_(chunk), rr.state == "finished"))  # fmt: skip
        for r in conn.execute(q):
            cur = latest.get(r.server)
            if cur is None or r.run_id > cur[0]:
                latest[r.server] = (r.run_id, r.finished_at, {r.verdict})
            elif r.run_id == cur[0]:
                cur[2].add(r.verdict)
    out = {}
    for s, (_, finished, verdicts) in latest.items():
        verdict = next((v for v in BURNIN_ORDER if v in verdicts), sorted(verdicts)[0])
        when = aware_utc(finished)
        out[s] = (verdict, when.date().isoformat() if when else "unknown")
    return out


@dataclass(frozen=True)
class LabelDiff:
    """What ``k8s sync`` changes on one node: added and changed keys (to their new value), removed keys."""

    added: dict[str, str]
    changed: dict[str, tuple[str, str]]  # key -> (now, wanted)
    removed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def patch(self) -> dict[str, str | None]:
        """The merge patch's labels: a value to set, None to remove."""
        return {**self.added, **{k: v for k, (_, v) in self.changed.items()}, **dict.fromkeys(self.removed)}

    def row(self) -> dict[str, Any]:
        return {"added": dict(self.added), "changed": {k: {"from": a, "to": b} for k, (a, b) in self.changed.items()},
                "removed": list(self.removed)}  # fmt: skip


def diff(current: Mapping[str, str], wanted: Mapping[str, str], prefix: str, owns: Callable[[str], bool]) -> LabelDiff:
    """From the node's labels to the wanted ones, touching only keys fleetctl owns.

    A wanted key is set; a key under ``prefix`` that is not wanted (fleetctl no longer computes it) is removed; any other
    key is never touched, even one fleetctl owns outside its prefix (the zone): it is only ever set.
    """
    added = {k: v for k, v in sorted(wanted.items()) if owns(k) and k not in current}
    changed = {k: (current[k], v) for k, v in sorted(wanted.items()) if owns(k) and k in current and current[k] != v}
    removed = tuple(sorted(k for k in current if k.startswith(prefix) and k not in wanted))
    return LabelDiff(added, changed, removed)


def sync(refs: list[NodeRef], wanted: Mapping[str, Mapping[str, str]], policy: Policy, *, dry_run: bool = False,
         opener: Any = None) -> list[dict[str, Any]]:  # fmt: skip
    """Bring each server's node to its wanted labels (fleetctl's keys only); a row per server: the difference, written or not.

    Every node is found before the first write (every cluster opened at once): an unknown declared node or a cluster
    that does not answer stops the command with nothing labelled. Each write is a read-modify-write against the node as
    it is then (:func:`fleetctl.k8s.writes.update_node`); a node already as wanted is not written to.

    Raises:
        NotFound: (exit 2) a declared node its cluster lacks.
        K8sError: a cluster cannot be opened or does not answer (exit 2), or refuses a write.
    """
    from contextlib import ExitStack

    from fleetctl.interfaces.k8s import NodePatch
    from fleetctl.k8s.status import FEW, find_node, open_cluster
    from fleetctl.k8s.writes import update_node

    by_cluster: dict[Any, list[NodeRef]] = {}
    for r in refs:
        if r.cluster is not None:
            by_cluster.setdefault(r.cluster, []).append(r)
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        plan: list[tuple[Any, NodeRef, Any, LabelDiff | None]] = []
        for cluster, members in by_cluster.items():
            client = stack.enter_context((opener or open_cluster)(cluster))
            listed = {n.name: n for n in client.nodes()} if len(members) > FEW else None
            for r in members:
                node, _ = find_node(client, r, listed)
                d = diff(node.labels, wanted[r.server], policy.labels.prefix, policy.owns) if node is not None else None
                plan.append((client, r, node, d))
        for client, r, node, d in plan:
            if node is None or d is None:
                rows.append({"server": r.server, "node": None, "added": {}, "changed": {}, "removed": [], "written": False})
                continue
            written = False
            if d and not dry_run:

                def change(n: Any, want: Mapping[str, str] = wanted[r.server]) -> NodePatch | None:
                    fresh = diff(n.labels, want, policy.labels.prefix, policy.owns)  # against the node as it is now
                    return NodePatch(labels=fresh.patch()) if fresh else None

                update_node(client, node.name, change)
                written = True
            rows.append({"server": r.server, "node": node.name, **d.row(), "written": written})
    return rows
