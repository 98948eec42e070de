"""`fleetctl k8s`: the servers as Kubernetes nodes (docs/kubernetes.md).

The client (lightkube, through the ``fleetctl.k8s`` driver) is imported inside
the commands: ``fleetctl --help`` never pays for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fleetctl.cli.common import DryRunOpt, OutputOpt, ReasonOpt, a_path
from fleetctl.cli.maintain import DrainTimeoutOpt, EmptyDirOpt, ForceDrainOpt, GraceOpt, RetryOpt
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True)

TargetsArg = Annotated[
    list[str] | None, typer.Argument(help="Servers, racks, sites, selectors (state=, tag=, model=) or all (default: all).")
]


def _ready_style(value: Any) -> str | None:
    return {"True": "green", "False": "red", "Unknown": "yellow"}.get(str(value))


def _accel_style(value: Any) -> str | None:
    return "red" if "fewer" in str(value) else None


@app.command("status")
def status(targets: TargetsArg = None, output: OutputOpt = Format.table) -> None:
    """Per server: its node's Ready condition, cordon, taints, pods (by priority, with their budgets) and accelerators.

    The accelerators column sets what the device plugins advertise (allocatable) against the boards the
    inventory holds; a node advertising fewer is marked. Exit 2: an unknown node, a kubeconfig without
    the context, a cluster that does not answer (nothing is changed either way).
    """
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.errors import NotFound
    from fleetctl.k8s.nodes import node_refs
    from fleetctl.k8s.status import statuses
    from fleetctl.targets import resolve

    with conn() as c:
        servers = resolve(c, targets or ["all"])
        refs = node_refs(c, [s.name for s in servers])
    found = statuses(refs)
    with conn() as c:
        from fleetctl.k8s.maintenance import held

        holding = {h.server: h for h in held(c)}  # the nodes fleetctl holds cordoned, and why
    if not any(s.node is not None for s in found):
        names = ", ".join(f"{s.ref.server} (looked for {', '.join(s.ref.candidates()) or 'no valid node name'})" for s in found[:3])
        raise NotFound(f"no node in the cluster for {names}{' ...' if len(found) > 3 else ''}")
    if output != Format.table:
        emit([{**s.row(), "maintenance": holding[s.ref.server].row() if s.ref.server in holding else None} for s in found], output)
        return
    rows, pod_rows = [], []
    for s in found:
        n = s.node
        rows.append({
            "server": s.ref.server,
            "cluster": s.ref.cluster.name if s.ref.cluster else "",
            "node": n.name if n else "(no node)",
            "ready": n.ready if n else "",
            "cordoned": ("yes" if n.unschedulable else "no") if n else "",
            "taints": ", ".join(f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in n.taints) if n else "",
            "accelerators": ", ".join(
                f"{a.kind} {'?' if a.advertised is None else a.advertised}/{a.inventory}" + (" fewer" if a.short else "")
                for a in s.accelerators
            ),
            "pods": len(s.pods),
        })  # fmt: skip
        for p in s.pods:
            pod_rows.append({
                "node": n.name if n else "", "pod": f"{p.namespace}/{p.name}", "priority": p.priority,
                "class": p.priority_class or "", "owner": p.owner_kind or "", "budgets": ", ".join(p.budgets),
            })  # fmt: skip
    emit(rows, output, columns=["server", "cluster", "node", "ready", "cordoned", "taints", "accelerators", "pods"],
         title="Nodes", styles={"ready": _ready_style, "accelerators": _accel_style})  # fmt: skip
    if pod_rows:
        emit(pod_rows, output, columns=["node", "pod", "priority", "class", "owner", "budgets"], title="Pods by priority")
    mine = [{**h.row(), "since": h.started_at.strftime("%Y-%m-%d %H:%M") if h.started_at else ""}
            for s in found if (h := holding.get(s.ref.server)) is not None]  # fmt: skip
    if mine:
        emit(mine, output, columns=["server", "node", "job", "state", "why", "reason", "since"], title="Held by fleetctl")


# --- verdicts and labels (#22 items 4 and 5) ------------------------------------------

PolicyOpt = Annotated[
    Path | None,
    typer.Option("--policy", help="The Kubernetes policy file (unfit findings, condition, circuit breaker, label keys; "
                 "docs/kubernetes.md). Default: the built-in policy.", envvar="FLEETCTL_K8S_POLICY", parser=a_path),
]  # fmt: skip


def report_publication(pub: Any, policy: Any, output: Format, *, in_sweep: bool) -> int:
    """Print a publication (its summary, the breaker's line, a line per failed cluster); the exit code it calls for.

    A cluster that failed is ``EXIT_PUBLISH`` (in a sweep, ``in_sweep``, its line says how to publish the stored run
    again; the sweep weighs it against its own code: fleetctl.cli.sweep.with_publication); the breaker ``EXIT_BREAKER``.
    """
    from fleetctl.cli.output import console
    from fleetctl.errors import EXIT_BREAKER, EXIT_PUBLISH

    if not pub.verdicts:
        return 0
    err = console(stderr=True)
    # In a sweep with -o json, stdout holds the sweep's one JSON object: the publication's lines go to stderr.
    out = console(stderr=output != Format.table)
    out.print(pub.summary(), markup=False, highlight=False, soft_wrap=True)
    for t in pub.tripped:
        err.print(f"error: {t.line(policy)}", markup=False, highlight=False, soft_wrap=True)
    for line in pub.failed:
        tail = f" (sweep {pub.run_id} is stored; `fleetctl k8s publish` publishes it)" if in_sweep else ""
        err.print(f"error: k8s: verdicts not published: {line}{tail}", markup=False, highlight=False, soft_wrap=True)
    if pub.tripped:
        return EXIT_BREAKER
    if pub.failed:
        return EXIT_PUBLISH
    return 0


@app.command("publish")
def publish(
    targets: Annotated[
        list[str] | None, typer.Argument(help="Only these servers, racks, sites or selectors of the run (default: all).")
    ] = None,
    policy_file: PolicyOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what each node would carry, write nothing.")] = False,
    output: OutputOpt = Format.table,
) -> None:
    """Publish the last finished sweep's verdicts on its swept servers' nodes: the condition, the unfit taint.

    What `fleetctl sweep run` does after every sweep (unless --no-publish), alone: after an ack, or when a cluster
    did not answer. Exit 7: the circuit breaker held the new taints back; 8: a cluster could not be read or written;
    2: a bad policy file or target (nothing written).
    """
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.errors import NotFound
    from fleetctl.k8s import policy as k8s_policy
    from fleetctl.k8s.publish import publish as do_publish
    from fleetctl.sweep.history import get_run
    from fleetctl.targets import resolve

    policy = k8s_policy.load(policy_file)
    with conn() as c:
        run = get_run(c, "latest")
        only = [s.name for s in resolve(c, targets)] if targets else None
        pub = do_publish(c, run["id"], policy, servers=only, dry_run=dry_run)
    if not pub.verdicts:
        raise NotFound(f"sweep {run['id']} swept no server of a Kubernetes cluster" + (" among the targets" if targets else ""))
    if output != Format.table:
        emit([v.row() for v in pub.verdicts], output)
    else:
        emit([{"server": v.ref.server, "node": v.node or "(no node)", "condition": v.condition.status if v.condition else "",
               "reason": v.condition.reason if v.condition else "", "taint": v.taint.value if v.taint else "",
               "action": v.action + (" (dry run)" if dry_run and v.action in ("tainted", "untainted") else ""),
               "error": v.error or ""} for v in pub.verdicts], output,
             columns=["server", "node", "condition", "reason", "taint", "action", "error"], title=f"Sweep {run['id']}'s verdicts",
             styles={"condition": _ready_style})  # fmt: skip
    code = report_publication(pub, policy, Format.json if output != Format.table else output, in_sweep=False)
    if code:
        raise typer.Exit(code)


@app.command("sync")
def sync(
    targets: TargetsArg = None,
    policy_file: PolicyOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show each node's difference, change nothing.")] = False,
    output: OutputOpt = Format.table,
) -> None:
    """Set the labels only fleetctl knows on each server's node: site and zone, rack, leaf, spine, block, accelerators,
    firmware compliance, burn-in; show the difference (added, changed, removed keys) per node.

    Only the keys fleetctl owns are touched: one under fleetctl.io/ it no longer computes is removed, any other key
    never. A node already labelled as wanted is not written to. Exit 2: a bad target, policy file, an unknown
    node, a cluster that does not answer.
    """
    from fleetctl.cli.common import conn
    from fleetctl.cli.output import emit
    from fleetctl.k8s import policy as k8s_policy
    from fleetctl.k8s.labels import compute
    from fleetctl.k8s.labels import sync as sync_labels
    from fleetctl.k8s.nodes import node_refs
    from fleetctl.targets import resolve

    policy = k8s_policy.load(policy_file)
    with conn() as c:
        servers = resolve(c, targets or ["all"])
        refs = [r for r in node_refs(c, [s.name for s in servers]) if r.cluster is not None]
        if not refs:
            from fleetctl.errors import InputError

            names = ", ".join(s.name for s in servers[:5]) + (" ..." if len(servers) > 5 else "")
            raise InputError(f"{names}: not in a Kubernetes cluster (declare it under the site's clusters:, docs/kubernetes.md)")
        want = compute(c, refs, policy)
    rows = sync_labels(refs, want, policy, dry_run=dry_run)
    if output != Format.table:
        emit(rows, output)
        return
    table = []
    for row in rows:
        parts = [f"+{k}={v}" for k, v in row["added"].items()] + [f"~{k}: {v['from']} -> {v['to']}" for k, v in row["changed"].items()]
        parts += [f"-{k}" for k in row["removed"]]
        table.append({"server": row["server"], "node": row["node"] or "(no node)", "difference": "\n".join(parts) or "(none)",
                      "applied": ("no (dry run)" if dry_run else "yes") if parts else ""})  # fmt: skip
    emit(table, output, columns=["server", "node", "difference", "applied"], title="Labels" + (" (dry run)" if dry_run else ""))


# --- maintenance: cordon, drain, uncordon (docs/kubernetes.md, "Maintenance") --------------------------------------


@app.command("cordon")
def cordon(targets: Annotated[list[str], typer.Argument(help="Servers, racks, selectors: each must be a live node.")],
           reason: ReasonOpt = None, dry_run: DryRunOpt = False, output: OutputOpt = Format.table) -> None:  # fmt: skip
    """Cordon each server's node with the fleetctl.io/maintenance taint naming the job (journaled; no drain)."""
    from fleetctl.cli.maintain import drain_options, k8s_command

    k8s_command(targets, verb="cordon", options=drain_options(600.0, False, False, None), dry_run=dry_run, output=output, reason=reason)


@app.command("drain")
def drain(
    targets: Annotated[list[str], typer.Argument(help="Servers, racks, selectors: each must be a live node.")],
    drain_timeout: DrainTimeoutOpt = 600.0,
    delete_emptydir_data: EmptyDirOpt = False,
    force_drain: ForceDrainOpt = False,
    grace_period: GraceOpt = None,
    eviction_retry: RetryOpt = 5.0,
    reason: ReasonOpt = None,
    dry_run: DryRunOpt = False,
    output: OutputOpt = Format.table,
) -> None:
    """Cordon and drain each server's node as kubectl drain does (budgets honoured, DaemonSet pods left); it stays cordoned.

    Journaled: killed mid-drain and run again, it resumes. Exit 2 (nothing cordoned): pods with local data without
    --delete-emptydir-data, pods no controller manages without --force-drain, an unknown node, a cluster that does not
    answer. Exit 1: a node not drained within --drain-timeout (left cordoned with the taint naming the job).
    """
    from fleetctl.cli.maintain import drain_options, k8s_command

    options = drain_options(drain_timeout, delete_emptydir_data, force_drain, grace_period, eviction_retry)
    k8s_command(targets, verb="drain", options=options, dry_run=dry_run, output=output, reason=reason)


@app.command("uncordon")
def uncordon(targets: Annotated[list[str], typer.Argument(help="Servers, racks, selectors: each must be a live node.")],
             reason: ReasonOpt = None, dry_run: DryRunOpt = False, output: OutputOpt = Format.table) -> None:  # fmt: skip
    """Release each server's node: fleetctl's taint removed, uncordoned unless it was cordoned before fleetctl came."""
    from fleetctl.cli.maintain import drain_options, k8s_command

    k8s_command(targets, verb="uncordon", options=drain_options(600.0, False, False, None), dry_run=dry_run, output=output,
                reason=reason)  # fmt: skip
