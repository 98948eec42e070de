"""Ansible run folders are pruned to the newest FLEETCTL_KEEP_RUNS."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleetctl.errors import InputError
from fleetctl.workflows.ansible_run import prune_runs


def _runs(tmp_path: Path, n: int) -> Path:
    runs = tmp_path / "runs"
    for i in range(n):
        d = runs / f"provision-{i}-0"
        (d / "artifacts").mkdir(parents=True)
        (d / "artifacts" / "stdout").write_text("x")
        os.utime(d, (1_000_000 + i, 1_000_000 + i))  # i is the age order: higher is newer
    (runs / "stray-file").write_text("not a run")
    return runs


def test_keeps_the_newest(tmp_path: Path) -> None:
    runs = _runs(tmp_path, 7)
    gone = prune_runs(runs, keep=3)
    assert sorted(d.name for d in gone) == [f"provision-{i}-0" for i in range(4)]
    assert sorted(p.name for p in runs.iterdir()) == ["provision-4-0", "provision-5-0", "provision-6-0", "stray-file"]


def test_keep_from_the_environment_and_a_missing_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _runs(tmp_path, 4)
    monkeypatch.setenv("FLEETCTL_KEEP_RUNS", "1")
    assert [d.name for d in prune_runs(runs)] == ["provision-2-0", "provision-1-0", "provision-0-0"]
    monkeypatch.delenv("FLEETCTL_KEEP_RUNS")
    assert prune_runs(runs) == []  # default 50
    assert prune_runs(tmp_path / "nowhere") == []


@pytest.mark.parametrize("bad", ["ten", "-1", ""])
def test_a_bad_keep_is_refused_and_nothing_is_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    runs = _runs(tmp_path, 2)
    monkeypatch.setenv("FLEETCTL_KEEP_RUNS", bad)
    with pytest.raises(InputError, match="FLEETCTL_KEEP_RUNS"):
        prune_runs(runs)
    assert len(list(runs.iterdir())) == 3
