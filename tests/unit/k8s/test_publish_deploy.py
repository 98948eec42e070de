"""#22 item 4: the deploy files fail (and so alert) when the circuit breaker held the sweep's taints back (exit 7).

The CronJob's shell wrapper is run as written with a stand-in `fleetctl` that
exits 7; the systemd unit's SuccessExitStatus must not take 7; docs/cli.md's
exit-code table names it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from fleetctl.cli.sweep import EXIT_BY_STATUS
from fleetctl.errors import EXIT_BREAKER, EXIT_PUBLISH, EXIT_STORE

REPO = Path(__file__).resolve().parents[3]


def test_the_codes_are_their_own() -> None:
    assert (EXIT_BREAKER, EXIT_PUBLISH) == (7, 8)
    assert not {EXIT_BREAKER, EXIT_PUBLISH} & {*EXIT_BY_STATUS.values(), EXIT_STORE, 0, 1, 2, 3, 130}


def test_the_cronjob_fails_the_job_when_the_breaker_trips(tmp_path: Path) -> None:
    (cj,) = [d for d in yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "sweep-cronjob.yaml").read_text()) if d]
    (c,) = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    fake = tmp_path / "fleetctl"
    fake.write_text(f"#!/bin/sh\nexit {EXIT_BREAKER}\n")
    fake.chmod(0o755)
    p = subprocess.run(["/bin/sh", "-c", str(c["args"][0])], env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, capture_output=True, text=True,
                       timeout=30, check=False)  # fmt: skip
    assert p.returncode == EXIT_BREAKER and "circuit breaker" in p.stderr, (p.returncode, p.stderr)


def test_the_systemd_unit_fails_when_the_breaker_trips() -> None:
    lines = (REPO / "deploy" / "systemd" / "fleetctl-sweep.service").read_text().splitlines()
    (success,) = [x.partition("=")[2].split() for x in lines if x.startswith("SuccessExitStatus=")]
    assert str(EXIT_BREAKER) not in success
    assert any("7: the circuit breaker" in x for x in lines if x.startswith("#"))


def test_docs_name_the_codes() -> None:
    table = (REPO / "docs" / "cli.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert f"\n| {EXIT_BREAKER} | " in table and f"\n| {EXIT_PUBLISH} | " in table
    k8s = (REPO / "docs" / "kubernetes.md").read_text()
    assert "## Verdicts the scheduler sees" in k8s and f"exits **{EXIT_BREAKER}**" in k8s
