"""The sweep in Prometheus: the textfile through a real node_exporter, and `fleetctl exporter`.

One lab for the module (a rack's worth of BMCs and the site's switches): a
clean sweep, then a failed PSU and CRC errors on a leaf port, then a sweep
with ``--textfile``. promtool checks what we wrote and what the exporter
serves; node_exporter's textfile collector serves our file back; the exporter
answers from the store without touching a BMC.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests_helpers_bmc import counters, lab_db_of, lab_doc, serve  # (path set in conftest)

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "inventory" / "site-tyo1.yaml"
SERVERS = [f"mn-tyo1-r12-{i:02d}" for i in range(1, 5)]
SICK = "mn-tyo1-r12-03"  # its PSU fails
LEAF, PORT = "leaf-tyo1-r12-a", "Ethernet5"  # CRC errors on this port
SPINE = "spine-tyo1-01"  # a lab serving part of a site gives it no SNMP: a target the sweep cannot read (unknown)
TARGETS = [*SERVERS, LEAF, SPINE]

pytestmark = pytest.mark.slow

PROMTOOL = shutil.which("promtool")
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")
needs_node_exporter = pytest.mark.skipif(NODE_EXPORTER is None,
                                         reason="node_exporter not installed (Debian package prometheus-node-exporter)")  # fmt: skip


def _cli(*args: str) -> Any:
    """`fleetctl ARGS` in-process, as the `cli` fixture runs it (a module-scoped fixture cannot use that one)."""
    import contextlib
    import io
    import types

    from fleetctl.cli import state
    from fleetctl.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    old_argv, sys.argv = sys.argv, ["fleetctl", *args]
    state.debug = False
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = old_argv
    return types.SimpleNamespace(code=code, out=out.getvalue(), err=err.getvalue())


def _env(swept: dict[str, Any]) -> dict[str, str]:
    return {**os.environ, "FLEETCTL_DB": swept["db"], "FLEETCTL_LAB_DIR": str(swept["lab_dir"]),
            "FLEETCTL_DATA_DIR": str(swept["data_dir"])}  # fmt: skip


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A lab, swept clean, then swept again with a failed PSU and port errors (with --textfile)."""
    from fleetctl.store import reset_engines

    base = tmp_path_factory.mktemp("prom")
    textfile = base / "textfile"
    textfile.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLEETCTL_LAB_DIR", str(base / "lab"))
        mp.setenv("FLEETCTL_DATA_DIR", str(base / "data"))
        mp.setenv("FLEETCTL_DB", str(base / "fleet.db"))
        mp.setenv("FLEETCTL_ACTOR", "tester@ci")
        reset_engines()
        r = _cli("lab", "up", "--site", str(SITE), "--no-hosts", *serve(SERVERS))
        assert r.code == 0, r.err
        db = lab_db_of(r.out)
        mp.setenv("FLEETCTL_DB", db)
        try:
            r = _cli("sweep", *TARGETS, "--output", "json")
            assert r.code == 4, r.out  # the spine: unknown
            assert _cli("lab", "fault", LEAF, "--port", PORT, "--set", "crc=100").code == 0
            assert _cli("lab", "fault", SICK, "--set", "psu_failed=true").code == 0
            time.sleep(2)  # the port's error counter grows between the two polls
            r = _cli("sweep", *TARGETS, "--textfile", str(textfile), "--output", "json")
            assert r.code == 5, r.out + r.err  # a new critical finding
            yield {"db": db, "textfile": textfile, "lab_dir": base / "lab", "data_dir": base / "data", "lab": lab_doc(base / "lab")}
        finally:
            reset_engines()
            _cli("lab", "down")
            reset_engines()


@pytest.fixture
def on_lab(swept: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The lab's database selected for in-process commands in this test."""
    from fleetctl.store import reset_engines

    for k, v in _env(swept).items():
        if k.startswith("FLEETCTL_"):
            monkeypatch.setenv(k, v)
    reset_engines()
    return swept


def parse(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """{(name, labels): value} of an exposition (labels without escapes: ours have none here)."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        assert m, line
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    hits = [v for (n, ls), v in samples.items() if n == name and want <= ls]
    assert len(hits) == 1, f"{name}{labels}: {len(hits)} samples"
    return hits[0]


def promtool_check(text: str) -> None:
    assert PROMTOOL is not None
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, f"promtool: {p.stdout}{p.stderr}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, timeout: float = 10) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_http(url: str, proc: subprocess.Popen[str], seconds: float = 15) -> str:
    deadline = time.monotonic() + seconds
    while True:
        try:
            status, body = get(url, timeout=2)
            if status == 200:
                return body
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{url} never answered (exit {proc.poll()}): {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen[str]) -> int:
    """SIGTERM by pid, then wait; a process that does not stop is killed and the test fails."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("did not stop on SIGTERM") from None


# ------------------------------------------------------------------ the textfile


def test_textfile_written_whole_and_alone(swept: dict[str, Any]) -> None:
    files = sorted(p.name for p in swept["textfile"].iterdir())
    assert files == ["fleetctl.prom"]  # no temporary file left behind
    text = (swept["textfile"] / "fleetctl.prom").read_text()
    assert text.endswith("\n")
    assert oct((swept["textfile"] / "fleetctl.prom").stat().st_mode & 0o777) == "0o644"  # node_exporter may be another user
    samples = parse(text)
    assert value(samples, "fleetctl_server_health", server=SICK) == 3
    assert value(samples, "fleetctl_server_psus_ok", server=SICK) == 1
    assert value(samples, "fleetctl_switch_health", switch=LEAF) == 3
    assert value(samples, "fleetctl_switch_port_errors_per_second", switch=LEAF, port=PORT, direction="in") > 0
    assert value(samples, "fleetctl_findings_new", status="critical") >= 1


@needs_promtool
def test_textfile_passes_promtool(swept: dict[str, Any]) -> None:
    promtool_check((swept["textfile"] / "fleetctl.prom").read_text())


@needs_node_exporter
def test_node_exporter_serves_the_textfile(swept: dict[str, Any]) -> None:
    assert NODE_EXPORTER is not None
    port = free_port()
    proc = subprocess.Popen([NODE_EXPORTER, "--collector.disable-defaults", "--collector.textfile",
                             f"--collector.textfile.directory={swept['textfile']}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        body = wait_http(f"http://127.0.0.1:{port}/metrics", proc)
    finally:
        stop(proc)  # node_exporter dies of SIGTERM (-15): its default
    samples = parse(body)
    # node_exporter read our file without complaint ...
    assert value(samples, "node_textfile_scrape_error") == 0
    # ... and serves our series with our values.
    assert value(samples, "fleetctl_server_health", server=SICK, rack="rack-12", site="tyo1") == 3
    for name in SERVERS:
        if name != SICK:
            assert value(samples, "fleetctl_server_health", server=name) in (1, 2)  # ok, or a firmware warning
    assert value(samples, "fleetctl_switch_health", switch=LEAF) == 3
    assert value(samples, "fleetctl_switch_health", switch=SPINE) == 0  # unknown
    assert value(samples, "fleetctl_switch_port_errors_per_second", switch=LEAF, port=PORT, direction="in") > 0
    assert value(samples, "fleetctl_sweep_targets", kind="server", status="critical") == 1
    assert value(samples, "fleetctl_sweep_targets", kind="switch", status="unknown") == 1
    assert value(samples, "fleetctl_findings", status="critical", check="psu") == 1
    assert value(samples, "fleetctl_sweep_duration_seconds") > 0
    assert abs(value(samples, "fleetctl_sweep_timestamp_seconds") - time.time()) < 600
    # HELP and TYPE came through as ours
    assert "# TYPE fleetctl_server_health gauge" in body


# ------------------------------------------------------------------ the exporter


def _counted_requests(swept: dict[str, Any]) -> dict[str, int]:
    return {name: counters(swept["lab"], name)["requests"] for name in SERVERS}


def _runs(swept: dict[str, Any]) -> int:
    from sqlalchemy import create_engine, func, select

    from fleetctl.store import tables as T

    engine = create_engine(f"sqlite:///{swept['db']}")
    try:
        with engine.connect() as c:
            return int(c.execute(select(func.count()).select_from(T.sweep_run)).scalar_one())
    finally:
        engine.dispose()


@needs_promtool
def test_exporter_serves_the_latest_sweep_without_sweeping(on_lab: dict[str, Any]) -> None:
    swept = on_lab
    # --partial: this lab's sweeps name their targets (the lab serves part of the site)
    proc = subprocess.Popen([sys.executable, "-m", "fleetctl", "exporter", "--listen", "127.0.0.1:0", "--partial"], env=_env(swept),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        m = re.fullmatch(r"serving /metrics on http://127\.0\.0\.1:(\d+) \(fleet: (.+)\)\n", first)
        assert m, first
        assert m.group(2) == swept["db"]
        url = f"http://127.0.0.1:{m.group(1)}"

        runs, requests = _runs(swept), _counted_requests(swept)
        body = wait_http(f"{url}/metrics", proc)
        for _ in range(3):
            status, body = get(f"{url}/metrics")
            assert status == 200
        assert _runs(swept) == runs and _counted_requests(swept) == requests  # a scrape never sweeps
        promtool_check(body)
        before = parse(body)
        assert value(before, "fleetctl_server_health", server=SICK) == 3
        assert value(before, "fleetctl_exporter_last_scrape_error") == 0
        assert get(f"{url}/nope")[0] == 404

        # The PSU is back: the next sweep says so, and the next scrape serves it.
        assert _cli("lab", "fault", SICK, "--clear").code == 0
        assert _cli("lab", "fault", LEAF, "--port", PORT, "--clear").code == 0
        r = _cli("sweep", SICK, "--output", "json")
        assert r.code == 0, r.out + r.err
        status, body = get(f"{url}/metrics")
        assert status == 200
        promtool_check(body)
        after = parse(body)
        assert value(after, "fleetctl_sweep_run_id") == value(before, "fleetctl_sweep_run_id") + 1
        assert value(after, "fleetctl_server_health", server=SICK) == 1
        assert value(after, "fleetctl_server_psus_ok", server=SICK) == 2
    finally:
        code = stop(proc)
    assert code == 0  # SIGTERM is a clean stop


def test_exporter_serves_only_a_sweep_of_the_whole_fleet_by_default(on_lab: dict[str, Any]) -> None:
    """An operator's `fleetctl sweep rack-12` must not make the rest of the fleet vanish from Prometheus."""
    from fleetctl.cli.exporter import scrape

    status, body = scrape()
    assert status == 200
    samples = parse(body)
    assert value(samples, "fleetctl_exporter_last_scrape_error") == 0
    assert not any(n.startswith("fleetctl_sweep") for n, _ in samples)  # this lab only had partial sweeps
    assert value(parse(scrape(partial=True)[1]), "fleetctl_sweep_run_id") >= 2


def test_exporter_reports_an_unreadable_store(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_text("not a database\n")
    env = {**os.environ, "FLEETCTL_DB": str(bad), "FLEETCTL_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen([sys.executable, "-m", "fleetctl", "exporter", "--listen", "127.0.0.1:0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        m = re.search(r"http://127\.0\.0\.1:(\d+)", proc.stdout.readline())
        assert m
        status, body = get(f"http://127.0.0.1:{m.group(1)}/metrics")
    finally:
        stop(proc)
    assert status == 200
    samples = parse(body)
    assert value(samples, "fleetctl_exporter_last_scrape_error") == 1
    assert not any(n.startswith("fleetctl_server") for n, _ in samples)
    assert proc.stderr is not None and "cannot read the store" in proc.stderr.read()


@pytest.mark.parametrize("listen", ["nope", "127.0.0.1:99999", "127.0.0.1:", "::1:9877"])
def test_exporter_refuses_a_bad_listen_address(cli: Any, listen: str) -> None:
    r = cli("exporter", "--listen", listen)
    assert r.code == 2
    assert "--listen" in r.err
