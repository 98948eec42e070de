"""Run the Kubernetes stand-in in the background: ``fleetctl lab k8s up|down|status``.

Foreground entry point::

    python -m fleetctl_lab.k8s.daemon --state-dir DIR (--spec FILE | --generate N)

``--spec`` takes a lab spec file (``fleetctl_lab.daemon``'s format: the
running lab's ``spec.json``), so the cluster's nodes are the lab's servers;
``--generate N`` makes N servers as ``lab up --generate`` does. When it
serves, the daemon writes ``DIR/k8s.json`` atomically::

    {"pid": 1234, "url": "https://127.0.0.1:40000", "control_url": "http://127.0.0.1:40001",
     "kubeconfig": "DIR/kubeconfig", "nodes": 2, "pods": 6, ...}

It never holds the token: that lives only in the kubeconfig file (0600).
SIGTERM or SIGINT stop it; k8s.json is removed on the way out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from fleetctl.errors import FleetError, InputError
from fleetctl_lab.spawn import spawn_and_wait, stop_detached

K8S_JSON = "k8s.json"
#: The stand-in's state folder in the lab's, and in it where the lab hosts' ``kubeadm join`` leaves a file named as the
#: host (lab/fleetctl_lab/host_standins.py).
K8S_DIR = "k8s"
JOINS_DIR = "joins"
LOG_FILE = "k8s.log"
_MODULE = "fleetctl_lab.k8s.daemon"

log = logging.getLogger(_MODULE)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


async def _serve(lab: Any, state_dir: Path) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await lab.start()
    out = state_dir / K8S_JSON
    try:
        _write_json(out, {"pid": os.getpid(), "started_at": time.time(), **lab.status()})
        await stop.wait()
    finally:
        out.unlink(missing_ok=True)
        await lab.stop()


def main(argv: list[str] | None = None) -> int:
    from fleetctl_lab.k8s.server import K8sLab, K8sLabConfig, seeds_from_specs
    from fleetctl_lab.k8s.store import StoreConfig

    p = argparse.ArgumentParser(prog=f"python -m {_MODULE}", description="Run the lab's Kubernetes API stand-in in the foreground.")
    p.add_argument("--state-dir", required=True, type=Path)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--spec", type=Path, help="a lab spec file: its servers are the nodes")
    src.add_argument("--generate", type=int, help="N generated servers")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--http", action="store_true", help="plain HTTP instead of HTTPS")
    p.add_argument("--pods-per-node", type=int, default=1)
    p.add_argument("--gang-size", type=int, default=4)
    p.add_argument("--reschedule-s", type=float, default=0.5)
    p.add_argument("--termination-s", type=float, default=0.0)
    p.add_argument("--joined-only", action="store_true", help="a server is a node once its host ran kubeadm join (provisioning)")
    p.add_argument("--log-level", default="INFO")
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args.state_dir.mkdir(parents=True, exist_ok=True)
    try:
        if args.spec is not None:
            from fleetctl_lab.daemon import load_spec_file

            specs, _config = load_spec_file(args.spec, args.state_dir)
        else:
            from fleetctl_lab.bmc.spec import generate_specs

            specs = generate_specs(args.generate)
        cfg = K8sLabConfig(port=args.port, tls=not args.http, state_dir=args.state_dir, pods_per_node=args.pods_per_node,
                           gang_size=args.gang_size, joins_dir=args.state_dir / JOINS_DIR if args.joined_only else None,
                           store=StoreConfig(reschedule_s=args.reschedule_s, pod_termination_s=args.termination_s))  # fmt: skip
        asyncio.run(_serve(K8sLab(seeds_from_specs(specs), cfg), args.state_dir))
    except FleetError as e:
        log.error("%s", e)
        return e.exit_code
    return 0


# --- the library side: up / status / down ----------------------------------------


def _pid_is_ours(pid: int) -> bool:
    try:
        return _MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _read(state_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((state_dir / K8S_JSON).read_text())
    except (OSError, ValueError):
        return None


def k8s_status(state_dir: Path) -> dict[str, Any]:
    """``{"running": bool, ...k8s.json}``; the counters come live from the control port when it answers."""
    import urllib.error
    import urllib.request

    doc = _read(state_dir)
    if not doc or not _pid_is_ours(int(doc.get("pid", 0))):
        return {"running": False, "state_dir": str(state_dir)}
    out: dict[str, Any] = {"running": True, "state_dir": str(state_dir), **doc}
    try:
        with urllib.request.urlopen(doc["control_url"] + "/lab/v1/status", timeout=5) as r:
            out.update(json.loads(r.read()))
        out["responding"] = True
    except (urllib.error.URLError, OSError, ValueError):
        out["responding"] = False
    return out


def k8s_up(state_dir: Path, args: list[str], *, timeout: float = 60.0) -> dict[str, Any]:
    """Start the daemon detached with ``args`` (``--spec FILE`` or ``--generate N``, options) and wait for k8s.json."""
    state_dir.mkdir(parents=True, exist_ok=True)
    st = k8s_status(state_dir)
    if st["running"]:
        raise FleetError(f"the lab's Kubernetes stand-in already runs from {state_dir} (pid {st['pid']}); fleetctl lab k8s down first")
    (state_dir / K8S_JSON).unlink(missing_ok=True)
    def ready(pid: int) -> dict[str, Any] | None:
        doc = _read(state_dir)
        return k8s_status(state_dir) if doc and doc.get("pid") == pid else None

    argv = [sys.executable, "-m", _MODULE, "--state-dir", str(state_dir), *args]
    return spawn_and_wait(argv, state_dir / LOG_FILE, ready, what="Kubernetes stand-in", timeout=timeout)


def k8s_down(state_dir: Path, *, timeout: float = 15.0) -> bool:
    """Stop the daemon (SIGTERM, SIGKILL after ``timeout``); False when none ran."""
    doc = _read(state_dir)
    pid = int((doc or {}).get("pid", 0))
    if not pid or not _pid_is_ours(pid):
        (state_dir / K8S_JSON).unlink(missing_ok=True)
        return False
    stop_detached(pid, _pid_is_ours, timeout=timeout)
    (state_dir / K8S_JSON).unlink(missing_ok=True)
    return True


def k8s_fault(state_dir: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """Send a fault to the running stand-in's control port. Raises FleetError / InputError."""
    import urllib.error
    import urllib.request

    st = k8s_status(state_dir)
    if not st["running"]:
        raise FleetError("the lab's Kubernetes stand-in is not running; fleetctl lab k8s up first")
    req = urllib.request.Request(st["control_url"] + "/lab/v1/faults", data=json.dumps(spec).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise InputError(f"the stand-in refused: {e.read().decode(errors='replace')[:300]}") from e


if __name__ == "__main__":
    sys.exit(main())
