"""`fleetctl k8s`: the servers as Kubernetes nodes (docs/kubernetes.md).

The client (lightkube, through the ``fleetctl.k8s`` driver) is imported inside
the commands: ``fleetctl --help`` never pays for it.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from fleetctl.cli.common import OutputOpt
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
    if not any(s.node is not None for s in found):
        names = ", ".join(f"{s.ref.server} (looked for {', '.join(s.ref.candidates()) or 'no valid node name'})" for s in found[:3])
        raise NotFound(f"no node in the cluster for {names}{' ...' if len(found) > 3 else ''}")
    if output != Format.table:
        emit([s.row() for s in found], output)
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
