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

Nothing outlives a killed fleetctl (issue #13): the child dies with its parent
(``PR_SET_PDEATHSIG``: SIGTERM, on which it kills ``ansible-playbook``'s
process group, which pexpect made a session of its own, and removes the token
folder), ``ansible-playbook`` itself dies with the child, and each run leaves
a record under ``<data dir>/run/`` so that the next run stops and cleans what a
dead one left (:func:`reap_leftovers`) before it starts its own Ansible.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetctl.config import data_dir
from fleetctl.errors import FleetError
from fleetctl.procs import pid_alive, stat_fields

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


# --- children die with their parent ---------------------------------------------

PR_SET_PDEATHSIG = 1
_prctl: Any = None


def _load_prctl() -> Any:
    """libc's prctl, loaded before a fork (a preexec_fn must not import or load anything)."""
    global _prctl
    if _prctl is None and sys.platform.startswith("linux"):
        import ctypes

        try:
            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _prctl = False
    return _prctl


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets ``sig`` when the thread that started it ends (Linux; elsewhere nothing).

    The "parent" of PR_SET_PDEATHSIG is the starting *thread*: start the child
    from a thread that waits for it (as :func:`run_batch` does).
    """
    prctl = _load_prctl()

    def preexec() -> None:
        if prctl:
            prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)

    return preexec


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _procs() -> list[tuple[int, int, int]]:
    """(pid, ppid, pgid) of every process we can see (Linux /proc; elsewhere none)."""
    out = []
    for d in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat_fields(stat)
        out.append((int(d.name), int(fields[1]), int(fields[2])))
    return out


def _children(pid: int) -> list[tuple[int, int]]:
    """(pid, pgid) of ``pid``'s children."""
    return [(p, g) for p, pp, g in _procs() if pp == pid]


TOKEN_PREFIX = "fleetctl-"  # token folders are fleetctl-<pid of the fleetctl that wrote them>-<random>


def runtime_dir() -> Path:
    return data_dir() / "run"


def _token_parent() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _write_record(record: Path, doc: dict[str, Any]) -> None:
    """Write a run's record whole or not at all (a kill between truncating and writing would leave it empty)."""
    tmp = record.with_name(f".{record.name}.tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, record)


def reap_leftovers(run_dir: Path | None = None) -> list[str]:
    """Stop what a dead fleetctl of this host left running and remove its token files; what was done, a line each.

    A run records itself in ``<data dir>/run/ansible-<fleetctl pid>-<child pid>.json``
    (its child, ``ansible-playbook``'s process group, its token folder).
    For each record whose fleetctl is gone: the processes still in that group
    whose command line is Ansible's (checked in /proc: a pid reused by someone
    else is left alone) are killed, the token folder removed, the record
    deleted. Then any ``fleetctl-<pid>-*`` token folder (in /dev/shm or the
    temporary folder) whose fleetctl is gone is removed. Records of live
    processes and of other hosts are left alone.
    """
    import tempfile

    run_dir = run_dir or runtime_dir()
    done: list[str] = []
    records = sorted(run_dir.glob("ansible-*.json")) if run_dir.is_dir() else []
    procs = _procs() if records else []
    for rec in records:
        try:
            doc = json.loads(rec.read_text())
        except (OSError, ValueError):
            # Unreadable: written by an older fleetctl killed mid-write (an empty file). Its name says who owned it.
            owner, _, child_s = rec.stem.removeprefix("ansible-").partition("-")
            if not (owner.isdigit() and child_s.isdigit()) or pid_alive(int(owner)):
                continue
            doc = {"host": socket.gethostname(), "owner": int(owner), "child": int(child_s)}
        if doc.get("host") != socket.gethostname() or pid_alive(int(doc.get("owner", 0))):
            continue
        groups = {int(g) for g in doc.get("pgids", [])}
        child = int(doc.get("child", 0))
        victims = [p for p, _, g in procs if g in groups and "ansible" in _cmdline(p)]
        if child and "fleetctl.workflows.ansible_run" in _cmdline(child):
            victims.append(child)
        for pid in victims:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if victims:
            done.append(f"stopped {len(victims)} Ansible process(es) left by fleetctl pid {doc.get('owner')}")
        tok = doc.get("token_dir")
        if tok and Path(tok).exists():
            shutil.rmtree(tok, ignore_errors=True)
            done.append(f"removed {tok}")
        rec.unlink(missing_ok=True)
    for tmp in run_dir.glob(".ansible-*.json.tmp") if run_dir.is_dir() else []:  # a record's write cut short by a kill
        owner = tmp.name.removeprefix(".ansible-").split("-", 1)[0]
        if owner.isdigit() and not pid_alive(int(owner)):
            tmp.unlink(missing_ok=True)
    for parent in sorted({_token_parent() or tempfile.gettempdir(), tempfile.gettempdir()}):
        for d in Path(parent).glob(f"{TOKEN_PREFIX}*-*"):
            owner = d.name.removeprefix(TOKEN_PREFIX).split("-", 1)[0]
            try:
                mine = d.is_dir() and d.stat().st_uid == os.getuid()
            except OSError:
                continue
            if mine and owner.isdigit() and not pid_alive(int(owner)):
                shutil.rmtree(d, ignore_errors=True)
                done.append(f"removed {d}")
    return done


def run_batch(
    hosts: dict[str, dict[str, Any]],
    groups: dict[str, list[str]],
    *,
    private_dir: Path,
    extravars: dict[str, Any],
    token: Any = None,
    forks: int = 50,
    on_event: EventFn | None = None,
    stop: threading.Event | None = None,
) -> dict[str, HostOutcome]:
    """Run ``site.yml`` over ``hosts`` ({name: hostvars}); a verdict per host.

    ``groups``: {group: [host, ...]} (role_server, accel_mncore2 ...).
    ``token``: the Kubernetes join token (a Secret): the playbook reads it from
    a file readable by us only, in RAM where possible, removed after the run.

    ansible-runner works in a child process of ours with a scrubbed
    environment; its events come back as JSON lines on the child's stdout.
    ``stop`` set while it runs: the child gets SIGTERM (it kills
    ansible-playbook and removes the token folder), and the run ends without
    a result (FleetError).
    """
    import subprocess
    import tempfile

    if shutil.which("ssh") is None:
        raise FleetError("the ssh client (openssh-client) is not installed; Ansible needs it to reach the servers")
    private_dir.mkdir(parents=True, exist_ok=True)
    outcomes: dict[str, HostOutcome] = {h: HostOutcome(ok=False) for h in hosts}
    reap_leftovers()  # a dead run's Ansible on the same hosts, its token files
    rec_dir = runtime_dir()
    rec_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{TOKEN_PREFIX}{os.getpid()}-", dir=_token_parent()) as tmp:
        vars_ = dict(extravars)
        if token is not None:
            path = Path(tmp) / "join-token"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(token.reveal() if hasattr(token, "reveal") else str(token))
            vars_["fleetctl_k8s_join_token"] = "{{ lookup('file', '%s') }}" % path  # noqa: UP031 - Jinja braces
        spec = {"hosts": hosts, "groups": groups, "private_dir": str(private_dir), "extravars": vars_,
                "forks": max(1, min(forks, len(hosts))), "playbook": str(playbooks_dir() / "site.yml"),
                "parent": os.getpid(), "token_dir": tmp}  # fmt: skip
        # The child dies with us (SIGTERM: it then kills ansible-playbook and removes the token folder).
        proc = subprocess.Popen([sys.executable, "-m", "fleetctl.workflows.ansible_run", str(os.getpid())], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), text=True,
                                preexec_fn=die_with_parent(signal.SIGTERM))  # fmt: skip
        record = rec_dir / f"ansible-{os.getpid()}-{proc.pid}.json"
        doc: dict[str, Any] = {"owner": os.getpid(), "host": socket.gethostname(), "child": proc.pid, "pgids": [],
                               "token_dir": tmp, "private_dir": str(private_dir)}  # fmt: skip
        _write_record(record, doc)
        if stop is not None:
            child = proc

            def watch() -> None:  # the reader below blocks on the child's stdout: stopping it is this thread's job
                while child.poll() is None:
                    if stop.wait(0.2):
                        child.terminate()
                        return

            threading.Thread(target=watch, name="fleetctl-ansible-stop", daemon=True).start()
        try:
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
                elif "pgids" in msg:  # ansible-playbook started: its process group, for a run that finds us dead
                    doc["pgids"] = msg["pgids"]
                    _write_record(record, doc)
                elif msg.get("host") in outcomes:
                    ev = msg["event"]
                    if ev["status"] != "started":
                        outcomes[msg["host"]].events.append(ev)
                    if on_event is not None:
                        on_event(msg["host"], ev)
            err = proc.stderr.read() if proc.stderr else ""
            rc = proc.wait()
        finally:
            if proc.poll() is None:  # an exception in here (or KeyboardInterrupt): Ansible does not outlive the run
                proc.terminate()
                proc.wait()
            record.unlink(missing_ok=True)
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

    spec: dict[str, Any] = {}
    cancelled = _guard(spec)  # first: a parent that dies while we start must still find us cleaning up
    spec.update(json.loads(sys.stdin.read()))
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
    announced = False

    def handler(event: dict[str, Any]) -> bool:
        nonlocal announced
        if not announced:  # the first event: ansible-playbook runs; say which process group is its
            announced = True
            out.write(json.dumps({"pgids": sorted({g for _, g in _children(os.getpid()) if g != os.getpgid(0)})}) + "\n")
            out.flush()
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
        cancel_callback=cancelled,
    )  # fmt: skip
    out.write(json.dumps({"final": {"stats": runner.stats, "failures": failures, "plays": plays, "status": runner.status,
                                  "rc": runner.rc}}) + "\n")
    out.flush()


def _guard(spec: dict[str, Any]) -> Callable[[], bool]:
    """In the child: what a signal does, and ansible-playbook dying with us; returns ansible-runner's cancel callback.

    SIGTERM (our parent died: PR_SET_PDEATHSIG, or someone stops us) and SIGINT
    (Ctrl-C) kill ansible-playbook's process group at once. With the parent
    gone, nobody will read the result: the token folder is removed and the
    child ends. Otherwise ansible-runner sees the run cancelled and reports.
    """
    import pexpect  # type: ignore[import-untyped]

    stop = False
    # fleetctl's pid: on our command line (run_batch), so that a parent already gone is seen as gone
    parent = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else os.getppid()

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True
        me = os.getpgid(0)
        for pid, pgid in _children(os.getpid()):
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL) if pgid != me else os.kill(pid, signal.SIGKILL)
        if os.getppid() != parent:
            if spec.get("token_dir"):
                shutil.rmtree(spec["token_dir"], ignore_errors=True)
            os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if os.getppid() != parent:  # the parent died before we could say so
        on_signal(signal.SIGTERM, None)

    # ansible-playbook (pexpect makes it a session of its own) dies with us too, even from a SIGKILL.
    kill_with_us = die_with_parent(signal.SIGKILL)

    class Spawn(pexpect.spawn):
        def __init__(self, *args: Any, **kw: Any) -> None:
            kw.setdefault("preexec_fn", kill_with_us)
            super().__init__(*args, **kw)

    pexpect.spawn = Spawn  # ansible-runner calls pexpect.spawn(...) by the module's attribute
    return lambda: stop


if __name__ == "__main__":
    _child()
