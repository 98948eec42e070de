"""Issue #25 item 4: the deploy files fail (and so alert) on the sweep's store failure, exit 6, as on 2 and 3.

The CronJob's shell wrapper is run as written, with a stand-in `fleetctl` on
PATH that exits with each code; the systemd unit's SuccessExitStatus must not
take 6 as success; docs/cli.md's table names 6.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from fleetctl.cli.sweep import EXIT_BY_STATUS
from fleetctl.errors import EXIT_STORE

REPO = Path(__file__).resolve().parents[2]


def _cronjob_script() -> str:
    (cj,) = [d for d in yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "sweep-cronjob.yaml").read_text()) if d]
    (c,) = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["/bin/sh", "-c"]
    return str(c["args"][0])


def test_the_store_s_exit_code_is_no_finding_s() -> None:
    assert EXIT_STORE == 6 and EXIT_STORE not in EXIT_BY_STATUS.values() and EXIT_STORE not in (0, 1, 2, 3, 130)


@pytest.mark.parametrize("code", [0, 1, 2, 3, 4, 5, 6])
def test_the_cronjob_fails_the_job_on_a_store_failure(code: int, tmp_path: Path) -> None:
    fake = tmp_path / "fleetctl"
    fake.write_text(f"#!/bin/sh\nexit {code}\n")
    fake.chmod(0o755)
    p = subprocess.run(["/bin/sh", "-c", _cronjob_script()], env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, capture_output=True,
                       text=True, timeout=30)  # fmt: skip
    if code in EXIT_BY_STATUS.values():  # findings: reported by the metrics, not a failed Job
        assert p.returncode == 0, (code, p.stderr)
    else:
        assert p.returncode == code, (code, p.returncode, p.stderr)
    if code == EXIT_STORE:
        assert "could not be written" in p.stderr


def test_the_systemd_unit_fails_on_a_store_failure() -> None:
    lines = (REPO / "deploy" / "systemd" / "fleetctl-sweep.service").read_text().splitlines()
    (success,) = [x.partition("=")[2].split() for x in lines if x.startswith("SuccessExitStatus=")]
    assert str(EXIT_STORE) not in success and sorted(map(int, success)) == sorted(v for v in EXIT_BY_STATUS.values() if v)


def test_docs_name_the_store_s_exit_code() -> None:
    cli = (REPO / "docs" / "cli.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    assert f"\n| {EXIT_STORE} | the database could not be read or written" in cli
    sweep = (REPO / "docs" / "sweep.md").read_text().split("## Exit code", 1)[1].split("\n## ", 1)[0]
    assert f"\n| {EXIT_STORE} | the database could not be written" in sweep
