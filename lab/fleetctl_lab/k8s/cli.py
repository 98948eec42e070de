"""`fleetctl lab k8s`: the lab's Kubernetes API stand-in, in the background."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fleetctl.cli.common import OutputOpt
from fleetctl.cli.output import Format

app = typer.Typer(no_args_is_help=True, help="The lab's Kubernetes API stand-in: the lab's servers as a cluster's nodes (docs/lab.md).")


def _state_dir() -> Path:
    from fleetctl_lab.inventory import lab_dir
    from fleetctl_lab.k8s.daemon import K8S_DIR

    return lab_dir() / K8S_DIR


@app.command("up")
def up(
    generate: Annotated[int | None, typer.Option("--generate", help="N generated servers instead of the running lab's.")] = None,
    pods_per_node: Annotated[int, typer.Option(help="Training pods on each node.")] = 1,
    gang_size: Annotated[int, typer.Option(help="Nodes per training gang (one Job and PodDisruptionBudget each).")] = 4,
    port: Annotated[int, typer.Option(help="The API server's port (0: any free port).")] = 0,
    http: Annotated[bool, typer.Option("--http", help="Plain HTTP instead of HTTPS.")] = False,
    reschedule: Annotated[float, typer.Option(help="Seconds an evicted pod's replacement takes to be ready elsewhere.")] = 0.5,
    joined_only: Annotated[
        bool, typer.Option("--joined-only", help="A server is a node once its lab host ran `kubeadm join` (provisioning does).")
    ] = False,
    output: OutputOpt = Format.table,
) -> None:
    """Serve a Kubernetes API whose nodes are the running lab's servers (or --generate N).

    The last line printed is `export KUBECONFIG=...`: kubectl and fleetctl
    reach the stand-in through it. The token is only in that file (0600).
    """
    import shlex

    from fleetctl.cli.output import emit_one
    from fleetctl.errors import InputError
    from fleetctl_lab.daemon import SPEC_JSON
    from fleetctl_lab.inventory import lab_dir
    from fleetctl_lab.k8s.daemon import k8s_up

    for name, value in (("--pods-per-node", pods_per_node), ("--gang-size", gang_size)):
        if value < 0 or (name == "--gang-size" and value == 0):
            raise InputError(f"{name} must be a positive number, not {value}", field=name)
    if not reschedule >= 0 or reschedule == float("inf"):
        raise InputError(f"--reschedule must be a number of seconds >= 0, not {reschedule}", field="--reschedule")
    if generate is not None:
        source = ["--generate", str(generate)]
    else:
        spec = lab_dir() / SPEC_JSON
        if not spec.exists():
            raise InputError(f"no lab spec at {spec}: fleetctl lab up first, or give --generate N", field="--generate")
        source = ["--spec", str(spec)]
    args = [*source, "--pods-per-node", str(pods_per_node), "--gang-size", str(gang_size), "--port", str(port),
            "--reschedule-s", str(reschedule), *(["--http"] if http else []), *(["--joined-only"] if joined_only else [])]  # fmt: skip
    st = k8s_up(_state_dir(), args)
    summary = {k: st.get(k) for k in ("url", "nodes", "pods", "kubeconfig", "control_url", "pid")}
    emit_one(summary, output)
    if output == Format.table:
        typer.echo("point kubectl at it (`fleetctl lab k8s down` stops it):")
        typer.echo(f"export KUBECONFIG={shlex.quote(str(st['kubeconfig']))}")


@app.command("down")
def down() -> None:
    """Stop the stand-in."""
    from fleetctl_lab.k8s.daemon import k8s_down

    typer.echo("the Kubernetes stand-in stopped" if k8s_down(_state_dir()) else "no Kubernetes stand-in was running")


@app.command("status")
def status(output: OutputOpt = Format.table) -> None:
    """Is the stand-in running: its URL, kubeconfig, node and pod counts, eviction counters."""
    from fleetctl.cli.output import emit_one
    from fleetctl_lab.k8s.daemon import k8s_status

    st = k8s_status(_state_dir())
    keys = ("running", "responding", "url", "kubeconfig", "nodes", "pods", "requests", "counters", "pid")
    emit_one({k: st.get(k) for k in keys}, output)
    if not st["running"]:
        raise typer.Exit(1)


@app.command("fault")
def fault(
    pdb: Annotated[str | None, typer.Option("--pdb", help="NAMESPACE/NAME of a PodDisruptionBudget to make refuse evictions.")] = None,
    refuse: Annotated[int | None, typer.Option("--refuse", help="With --pdb: until this many evictions were refused.")] = None,
    seconds: Annotated[float | None, typer.Option("--seconds", help="With --pdb: for this many seconds.")] = None,
    node: Annotated[str | None, typer.Option("--node", help="A node to make NotReady (or Ready with --ready).")] = None,
    ready: Annotated[bool, typer.Option("--ready", help="With --node: Ready again.")] = False,
    unhealthy: Annotated[
        int | None, typer.Option("--unhealthy", help="With --node: its device plugin reports this many devices unhealthy (0: none).")
    ] = None,
    clear: Annotated[bool, typer.Option("--clear", help="With --pdb: the budget counts pods again.")] = False,
) -> None:
    """Inject a fault: a budget that makes a drain wait, a node that stops reporting, or devices gone unhealthy."""
    import json

    from fleetctl.errors import InputError
    from fleetctl_lab.k8s.daemon import k8s_fault

    if (pdb is None) == (node is None):
        raise InputError("give --pdb NS/NAME or --node NAME", field="--pdb")
    if pdb is not None:
        if not clear and refuse is None and seconds is None:
            raise InputError("with --pdb: --refuse N, --seconds T or --clear", field="--pdb")
        spec: dict[str, object] = {"pdb": pdb, "clear": clear, "refuse": refuse, "seconds": seconds}
    elif unhealthy is not None:
        if unhealthy < 0:
            raise InputError(f"--unhealthy takes a count >= 0, not {unhealthy}", field="--unhealthy")
        spec = {"node": node, "unhealthy": unhealthy}
    else:
        spec = {"node": node, "ready": ready}
    typer.echo(json.dumps(k8s_fault(_state_dir(), spec)))
