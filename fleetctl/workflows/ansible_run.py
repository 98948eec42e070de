"""Step 9 of provisioning: the playbooks, through ansible-runner, one run per batch.

One ``ansible-playbook`` run covers every server of a batch (forks), so a
rack is configured in a few runs rather than one per server. Every event of
the run is handed to ``on_event`` as it happens (the workflow streams them
into each server's journal and the live view); at the end each host gets a
verdict from the run's stats, so a host that fails fails alone.

No secret is handed to ansible-runner as a value, and none can reach it by
accident: it runs in a child process whose environment is an allow-list
(ansible-runner writes its whole environment into its artifacts), and the
Kubernetes join token reaches the playbook as a ``lookup('file', ...)`` of
a file readable by us only, in RAM where possible, removed after the run.
Neither the inventory, the command line, the extra vars nor the artifacts
hold it in clear text.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetctl.errors import FleetError

# Which play of site.yml a host runs, by its accelerator group: for the plan.
PLAYS_BY_GROUP = {"accel_mncore2": "mncore.yml", "accel_gpu": "gpu.yml"}


def playbooks_dir() -> Path:
    """The playbooks folder: ``$FLEETCTL_PLAYBOOKS`` or the one beside the package."""
    env = os.environ.get("FLEETCTL_PLAYBOOKS")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "playbooks"
    if not (path / "site.yml").exists():
        raise FleetError(f"no site.yml in {path}: set FLEETCTL_PLAYBOOKS to the playbooks folder")
    return path


def plays_for(groups: list[str], *, k8s: bool) -> list[str]:
    """The playbooks of site.yml a host with these groups runs (for --dry-run)."""
    plays = ["base.yml"] + [p for g, p in PLAYS_BY_GROUP.items() if g in groups]
    return plays + (["k8s-join.yml"] if k8s else [])


def final_play(playbook: Path | None = None) -> str | None:
    """The name of the last play ``site.yml`` runs (following import_playbook)."""
    import yaml

    path = playbook or playbooks_dir() / "site.yml"
    plays = yaml.safe_load(path.read_text()) or []
    for play in reversed(plays):
        imported = play.get("ansible.builtin.import_playbook") or play.get("import_playbook")
        if imported:
            return final_play(path.parent / imported)
        if play.get("hosts"):
            return play.get("name")
    return None


@dataclass
class HostOutcome:
    ok: bool
    error: str | None = None
    # No failure, but the run stopped before the host's last play: Ansible ends
    # a playbook when every host of one play has failed, so the hosts of the
    # other plays never got theirs. Such a host is run again, alone.
    incomplete: bool = False
    changed: int = 0
    tasks_ok: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


EventFn = Callable[[str, dict[str, Any]], None]


# The environment ansible-runner may see. It copies its whole environment into
# its artifacts (artifacts/<id>/command), so secrets an operator keeps in
# variables (env: credential references, a database URL with a password) must
# never reach it: the run gets only these.
ENV_ALLOW = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SSH_AUTH_SOCK", "TERM")


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW or (k.startswith("ANSIBLE_") and "PASS" not in k)}
    # The venv's ansible-playbook first (ansible-runner starts the one on PATH).
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")
    env.update({
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_SSH_PIPELINING": "1",
        # One SSH connection per host, reused by every task of the run.
        "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=120s -o ConnectTimeout=20",
        "ANSIBLE_TIMEOUT": "30",
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
    })  # fmt: skip
    return env


ENV_KEEP_RUNS = "FLEETCTL_KEEP_RUNS"
KEEP_RUNS = 50


def prune_runs(runs: Path, keep: int | None = None) -> list[Path]:
    """Delete all but the ``keep`` newest run folders under ``runs``; returns the deleted ones.

    Each Ansible batch leaves a folder of ansible-runner artifacts (its
    inventory, every event, stdout). The journal in the store keeps each host's
    events, so the folders are only for reading a recent run in full. Without
    pruning they would grow with every provisioning run. ``keep`` defaults to
    ``FLEETCTL_KEEP_RUNS`` or 50.
    """
    if keep is None:
        raw = os.environ.get(ENV_KEEP_RUNS, str(KEEP_RUNS))
        try:
            keep = int(raw)
        except ValueError:
            keep = -1
        if keep < 0:
            from fleetctl.errors import InputError

            raise InputError(f"must be a whole number of run folders to keep, not {raw!r}", field=ENV_KEEP_RUNS)
    if not runs.is_dir():
        return []
    dirs = []
    for d in runs.iterdir():
        try:
            if d.is_dir():
                dirs.append((d.stat().st_mtime, d))
        except OSError:  # removed by another process meanwhile
            continue
    dirs.sort(reverse=True)
    gone = [d for _, d in dirs[keep:]]
    for d in gone:
        shutil.rmtree(d, ignore_errors=True)
    return gone


def run_batch(
    hosts: dict[str, dict[str, Any]],
    groups: dict[str, list[str]],
    *,
    private_dir: Path,
    extravars: dict[str, Any],
    token: Any = None,
    forks: int = 50,
    on_event: EventFn | None = None,
) -> dict[str, HostOutcome]:
    """Run ``site.yml`` over ``hosts`` ({name: hostvars}); a verdict per host.

    ``groups``: {group: [host, ...]} (role_server, accel_mncore2 ...).
    ``token``: the Kubernetes join token (a Secret): the playbook reads it from
    a file readable by us only, in RAM where possible, removed after the run.

    ansible-runner works in a child process of ours with a scrubbed
    environment; its events come back as JSON lines on the child's stdout.
    """
    import subprocess
    import tempfile

    if shutil.which("ssh") is None:
        raise FleetError("the ssh client (openssh-client) is not installed; Ansible needs it to reach the servers")
    private_dir.mkdir(parents=True, exist_ok=True)
    outcomes: dict[str, HostOutcome] = {h: HostOutcome(ok=False) for h in hosts}
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(prefix="fleetctl-", dir=str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None) as tmp:
        vars_ = dict(extravars)
        if token is not None:
            path = Path(tmp) / "join-token"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(token.reveal() if hasattr(token, "reveal") else str(token))
            vars_["fleetctl_k8s_join_token"] = "{{ lookup('file', '%s') }}" % path  # noqa: UP031 - Jinja braces
        spec = {"hosts": hosts, "groups": groups, "private_dir": str(private_dir), "extravars": vars_,
                "forks": max(1, min(forks, len(hosts))), "playbook": str(playbooks_dir() / "site.yml")}  # fmt: skip
        proc = subprocess.Popen([sys.executable, "-m", "fleetctl.workflows.ansible_run"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), text=True)  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(spec))
        proc.stdin.close()
        final: dict[str, Any] | None = None
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "final" in msg:
                final = msg["final"]
            elif msg.get("host") in outcomes:
                ev = msg["event"]
                if ev["status"] != "started":
                    outcomes[msg["host"]].events.append(ev)
                if on_event is not None:
                    on_event(msg["host"], ev)
        err = proc.stderr.read() if proc.stderr else ""
        rc = proc.wait()
    if final is None:
        detail = err.strip().splitlines()[-1] if err.strip() else "no message"
        raise FleetError(f"the Ansible run ended without a result (exit {rc}): {detail}")
    stats, last_failure = final["stats"] or {}, final["failures"]
    last = final_play()
    for host, out in outcomes.items():
        failures = (stats.get("failures") or {}).get(host, 0)
        dark = (stats.get("dark") or {}).get(host, 0)
        out.changed = (stats.get("changed") or {}).get(host, 0)
        out.tasks_ok = (stats.get("ok") or {}).get(host, 0)
        if failures or dark:
            out.error = ("unreachable: " if dark and not failures else "failed at ") + last_failure.get(host, "(no message)")
        elif host not in (stats.get("processed") or {}):
            out.error = f"ansible-playbook did not run on this host (status {final['status']}, rc {final['rc']})"
        elif last and last not in final["plays"].get(host, []):
            out.incomplete = True
            out.error = f"the run stopped before the play {last!r} (every host of an earlier play failed)"
        else:
            out.ok = True
    return outcomes


def _child() -> None:
    """The child: run ansible-runner from the spec on stdin, events out as JSON lines."""
    import ansible_runner  # heavy: only here

    spec = json.loads(sys.stdin.read())
    hosts, groups = spec["hosts"], spec["groups"]
    inventory = {
        "all": {
            "hosts": {h: hosts[h] for h in sorted(hosts)},
            "children": {g: {"hosts": {h: {} for h in sorted(members) if h in hosts}} for g, members in sorted(groups.items())},
        }
    }
    failures: dict[str, str] = {}
    plays: dict[str, list[str]] = {}  # the plays each host got events in
    out = sys.stdout

    def handler(event: dict[str, Any]) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        host = data.get("host")
        if not isinstance(host, str) or host not in hosts or not kind.startswith("runner_on_"):
            return True
        status = kind.removeprefix("runner_on_")
        if status == "start":
            status = "started"
        res = data.get("res") or {}
        ev: dict[str, Any] = {"task": data.get("task"), "status": status, "changed": bool(res.get("changed"))}
        plays.setdefault(host, [])
        if data.get("play") and data["play"] not in plays[host]:
            plays[host].append(data["play"])
        if status in ("failed", "unreachable"):
            if data.get("ignore_errors"):
                return True
            ev["msg"] = str(res.get("msg") or res.get("stderr") or "")[:500] or status
            task = str(data.get("task") or "")
            # A failure message often starts with the task's name (an assert's fail_msg): say it once.
            failures[host] = ev["msg"] if ev["msg"].startswith(task) else f"{task}: {ev['msg']}"
        out.write(json.dumps({"host": host, "event": ev}) + "\n")
        out.flush()
        return True

    runner = ansible_runner.run(
        private_data_dir=spec["private_dir"], playbook=spec["playbook"], inventory=inventory, extravars=spec["extravars"],
        envvars={}, forks=spec["forks"], quiet=True, event_handler=handler, suppress_env_files=True,
    )  # fmt: skip
    out.write(json.dumps({"final": {"stats": runner.stats, "failures": failures, "plays": plays, "status": runner.status,
                                  "rc": runner.rc}}) + "\n")
    out.flush()


if __name__ == "__main__":
    _child()
