"""The lab daemon: run the BMC lab in its own process, in the background.

Foreground entry point::

    python -m fleetctl_lab.daemon --spec FILE.json --state-dir DIR

The spec file is either a JSON list of ``LabServerSpec`` objects, or an
object ``{"servers": [...], "generate": {"n": 100, ...}, "config": {...}}``
(``generate`` takes ``generate_specs`` keyword arguments; ``config`` takes
``LabConfig`` fields). When every BMC listens, the daemon writes
``DIR/lab.json`` atomically::

    {"pid": 1234, "control_url": "http://127.0.0.1:40000", "tls": true,
     "count": 2, "started_at": 1700000000.0, "start_seconds": 0.4,
     "servers": {"name": {"url": "https://127.10.0.1:8443",
                          "fingerprint": "sha256:...", "flavour": "hpe",
                          "system_id": "1"}}}

With switches in the spec (``"switches": [LabSwitchSpec ...]``, optional
``"switch_config": {SwitchLabConfig fields}``) the daemon also runs the switch
lab (``fleetctl_lab.switch``) and lab.json gains::

     "switch_control_url": "http://127.0.0.1:40001",
     "switches": {"leaf-1": {"ssh": "127.110.0.1:22", "snmp": "127.110.0.1:161",
                             "community": "public@leaf-1", "platform": "sonic",
                             "device_type": "edgecore_sonic", "username": "admin"}}

With ``"hosts": true`` in ``config`` (``fleetctl lab up`` sets it) the daemon
also serves the host behind each BMC over SSH (``fleetctl_lab.hosts``), and
lab.json gains::

     "hosts": {"name": {"address": "127.70.0.1", "port": 2222, "user": "alice",
                        "key_file": "DIR/ssh/id_ed25519",
                        "known_hosts": "DIR/ssh/known_hosts",
                        "dir": "DIR/hosts/name", "boards": {"mncore2": 4, "gpu": 0},
                        "vars": {"fleetctl_root": "DIR/hosts/name/root", ...}}}

It never holds a password. SIGTERM or SIGINT stop it cleanly; lab.json is
removed on the way out. Logs go to stderr (``lab_up`` sends them to
``DIR/lab.log``).

Library functions for the CLI: ``lab_up(specs, state_dir, ...)`` spawns the
daemon detached and waits until lab.json appears; ``lab_status(state_dir)``
and ``lab_down(state_dir)``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from fleetctl.errors import FleetError, InputError
from fleetctl_lab.spawn import spawn_and_wait, stop_detached

LAB_JSON = "lab.json"
SPEC_JSON = "spec.json"
LOG_FILE = "lab.log"

log = logging.getLogger("fleetctl_lab.daemon")


# --- the daemon ------------------------------------------------------------------


def load_spec_file(path: Path, state_dir: Path) -> tuple[list[Any], Any]:
    """Read a spec file: (specs, LabConfig). Raises InputError."""
    from pydantic import ValidationError

    from fleetctl_lab.bmc.spec import LabConfig, LabServerSpec, generate_specs

    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read lab spec: {e}", location=str(path)) from e
    if isinstance(raw, list):
        raw = {"servers": raw}
    if not isinstance(raw, dict):
        raise InputError("a lab spec is a list of servers or an object", location=str(path))
    try:
        specs = [LabServerSpec.model_validate(s) for s in raw.get("servers", [])]
        if raw.get("generate"):
            specs += generate_specs(**raw["generate"])
        config = LabConfig.model_validate({**raw.get("config", {}), "state_dir": str(state_dir)})
    except (ValidationError, TypeError) as e:
        raise InputError(f"invalid lab spec: {e}", location=str(path)) from e
    if not specs and not raw.get("switches"):
        raise InputError("the lab spec names no servers", location=str(path))
    return specs, config


def load_switch_spec(path: Path, state_dir: Path) -> tuple[list[Any], Any]:
    """The switch part of a spec file: (LabSwitchSpec list, SwitchLabConfig). Raises InputError."""
    from pydantic import ValidationError

    from fleetctl_lab.switch.spec import LabSwitchSpec, SwitchLabConfig

    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read lab spec: {e}", location=str(path)) from e
    if not isinstance(raw, dict) or not raw.get("switches"):
        return [], None
    try:
        switches = [LabSwitchSpec.model_validate(s) for s in raw["switches"]]
        sw_config = SwitchLabConfig.model_validate({**raw.get("switch_config", {}), "state_dir": str(state_dir)})
    except (ValidationError, TypeError) as e:
        raise InputError(f"invalid lab spec: {e}", location=str(path)) from e
    return switches, sw_config


async def _serve(specs: list[Any], config: Any, state_dir: Path, switches: list[Any] | None = None,
                 switch_config: Any = None) -> None:  # fmt: skip
    from fleetctl_lab.bmc.server import BMCLab

    lab = BMCLab(specs, config)
    swlab = None
    if switches:
        from fleetctl_lab.switch.server import SwitchLab

        swlab = SwitchLab(switches, switch_config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await lab.start()
    out = state_dir / LAB_JSON
    try:
        if swlab is not None:
            await swlab.start()
        _write_json(out, {"pid": os.getpid(), **lab.status(), **(swlab.status() if swlab else {})})
        log.info("lab ready: %d BMCs, %d switches, control %s", len(specs), len(switches or []), lab.control_url)
        await stop.wait()
        log.info("lab stopping")
    finally:
        out.unlink(missing_ok=True)
        if swlab is not None:
            await swlab.stop()
        await lab.stop()


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically, mode 0600 from its first byte.

    lab.json holds each lab switch's SNMP community (the lab's inventory writes
    them into its credential files from it), which is a password of SNMP v2c:
    owner-only, as the credential files are (issue #25).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(doc, indent=1))
    os.replace(tmp, path)


def _raise_nofile() -> None:
    # Every BMC is a listening socket plus its connections: use the hard limit.
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fleetctl_lab.daemon", description="Run the fleetctl BMC lab in the foreground.")
    p.add_argument("--spec", required=True, type=Path, help="lab spec JSON (servers and config)")
    p.add_argument("--state-dir", required=True, type=Path, help="where lab.json and the certificate cache live")
    p.add_argument("--log-level", default="INFO")
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    _raise_nofile()
    args.state_dir.mkdir(parents=True, exist_ok=True)
    try:
        specs, config = load_spec_file(args.spec, args.state_dir)
        switches, switch_config = load_switch_spec(args.spec, args.state_dir)
        asyncio.run(_serve(specs, config, args.state_dir, switches, switch_config))
    except FleetError as e:
        log.error("%s", e)
        return e.exit_code
    return 0


# --- the library side: up / status / down ---------------------------------------------


def _pid_is_lab(pid: int) -> bool:
    """True if ``pid`` is alive and is a lab daemon (guards against pid reuse)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc: trust the pid
    return b"fleetctl_lab.daemon" in cmd


def _read_lab_json(state_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((Path(state_dir) / LAB_JSON).read_text())
    except (OSError, ValueError):
        return None


def lab_status(state_dir: str | Path, *, probe: bool = True) -> dict[str, Any]:
    """Status of the lab in ``state_dir``.

    Returns ``{"running": bool, "pid", "control_url", "count", "servers",
    "responding": bool}``; ``running`` is False when no daemon is alive.
    """
    doc = _read_lab_json(Path(state_dir))
    if not doc or not _pid_is_lab(int(doc.get("pid", 0))):
        return {"running": False, "state_dir": str(state_dir), "count": 0, "servers": {}}
    out = {"running": True, "state_dir": str(state_dir), **doc}
    if probe:
        try:
            with urllib.request.urlopen(doc["control_url"] + "/lab/v1", timeout=5) as r:
                out["responding"] = r.status == 200
        except (urllib.error.URLError, OSError):
            out["responding"] = False
    return out


def lab_up(
    specs: list[Any],
    state_dir: str | Path,
    *,
    config: dict[str, Any] | Any | None = None,
    timeout: float = 120.0,
    switches: list[Any] | None = None,
    switch_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Start the lab daemon detached and wait until it is ready.

    Args:
        specs: ``LabServerSpec`` objects (or dicts of their fields).
        state_dir: lab.json, spec.json (mode 0600: it holds lab passwords),
            lab.log and the certificate cache go here.
        config: ``LabConfig`` or a dict of its fields (``state_dir`` is forced).
        timeout: seconds to wait for lab.json.
        switches: ``LabSwitchSpec`` objects (or dicts) for the switch lab, if any.
        switch_config: ``SwitchLabConfig`` fields for the switch lab.

    Returns: ``lab_status(state_dir)``.
    Raises: FleetError if a lab already runs there or the daemon fails.
    """
    from fleetctl_lab.bmc.spec import LabConfig, LabServerSpec

    sd = Path(state_dir)
    sd.mkdir(parents=True, exist_ok=True)
    st = lab_status(sd, probe=False)
    if st["running"]:
        raise FleetError(f"a lab is already running from {sd} (pid {st['pid']}); run lab down first")
    (sd / LAB_JSON).unlink(missing_ok=True)
    if isinstance(config, LabConfig):
        cfg = config.model_dump(mode="json", exclude={"state_dir"})
    else:
        cfg = dict(config or {})
        cfg.pop("state_dir", None)
    servers = [(s if isinstance(s, LabServerSpec) else LabServerSpec.model_validate(s)).model_dump(mode="json") for s in specs]
    spec_path = sd / SPEC_JSON
    fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    spec_doc: dict[str, Any] = {"servers": servers, "config": cfg}
    if switches:
        from fleetctl_lab.switch.spec import LabSwitchSpec

        spec_doc["switches"] = [
            (s if isinstance(s, LabSwitchSpec) else LabSwitchSpec.model_validate(s)).model_dump(mode="json") for s in switches
        ]
        spec_doc["switch_config"] = {k: v for k, v in dict(switch_config or {}).items() if k != "state_dir"}
    with os.fdopen(fd, "w") as fh:
        json.dump(spec_doc, fh)
    def ready(pid: int) -> dict[str, Any] | None:
        doc = _read_lab_json(sd)
        return lab_status(sd) if doc and doc.get("pid") == pid else None

    argv = [sys.executable, "-m", "fleetctl_lab.daemon", "--spec", str(spec_path), "--state-dir", str(sd)]
    return spawn_and_wait(argv, sd / LOG_FILE, ready, what="lab daemon", timeout=timeout)


def lab_down(state_dir: str | Path, *, timeout: float = 15.0) -> dict[str, Any]:
    """Stop the lab daemon of ``state_dir`` (SIGTERM, then SIGKILL after ``timeout``).

    Returns ``{"stopped": bool, "pid": int | None}``; stopping a lab that is
    not running is not an error.
    """
    sd = Path(state_dir)
    doc = _read_lab_json(sd)
    if not doc:
        return {"stopped": False, "pid": None}
    pid = int(doc.get("pid", 0))
    if not pid or not _pid_is_lab(pid):
        (sd / LAB_JSON).unlink(missing_ok=True)  # stale
        return {"stopped": False, "pid": pid or None}
    if stop_detached(pid, _pid_is_lab, timeout=timeout):
        (sd / LAB_JSON).unlink(missing_ok=True)  # killed: it could not remove its own
    return {"stopped": True, "pid": pid}


if __name__ == "__main__":
    sys.exit(main())
