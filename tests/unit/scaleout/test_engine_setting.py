"""The scale-out engine's setting: unset, work runs in process; with it, SQLite is refused with a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def test_unset_means_in_process(monkeypatch):  # type: ignore[no-untyped-def]
    from fleetctl.config import temporal_address, temporal_namespace

    monkeypatch.delenv("FLEETCTL_TEMPORAL", raising=False)
    monkeypatch.delenv("FLEETCTL_TEMPORAL_NAMESPACE", raising=False)
    assert temporal_address() is None and temporal_namespace() == "default"
    monkeypatch.setenv("FLEETCTL_TEMPORAL", " 10.0.0.5:7233 ")
    monkeypatch.setenv("FLEETCTL_TEMPORAL_NAMESPACE", "fleet-prod")
    assert temporal_address() == "10.0.0.5:7233" and temporal_namespace() == "fleet-prod"


def test_site_queues_are_apart():  # type: ignore[no-untyped-def]
    from fleetctl.scaleout.queues import CONTROL_QUEUE, site_queue
    from fleetctl.workflows.provision import STEP_NAMES
    from fleetctl.workflows.provision.described import STEP_BOUND_S, UNIT_TIMEOUT_S

    assert site_queue("tyo1") != site_queue("osa1") and CONTROL_QUEUE not in (site_queue("tyo1"), site_queue("osa1"))
    assert set(STEP_BOUND_S) == set(STEP_NAMES)  # every step has its time limit, and a server's unit all of them
    assert sum(STEP_BOUND_S.values()) == UNIT_TIMEOUT_S


def test_provision_with_temporal_refuses_sqlite(cli, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_TEMPORAL", "127.0.0.1:1")
    assert cli("inventory", "import", str(REPO / "inventory")).code == 0
    r = cli("provision", "mn-tyo1-r12-01")
    assert r.code == 2, r.out + r.err
    assert "needs the store on PostgreSQL" in r.err and "unset FLEETCTL_TEMPORAL" in r.err


def test_worker_refuses_sqlite(cli, monkeypatch):  # type: ignore[no-untyped-def]
    pytest.importorskip("temporalio")
    r = cli("worker", "--site", "tyo1", "--temporal", "127.0.0.1:1")
    assert r.code == 2 and "needs the store on PostgreSQL" in r.err, r.out + r.err


def test_store_id_hides_the_password():  # type: ignore[no-untyped-def]
    pytest.importorskip("temporalio")
    from fleetctl.scaleout.activities import store_id

    sid = store_id("postgresql+psycopg://fleet:s3cret@db.example:5432/fleet")
    assert "s3cret" not in sid and "db.example" in sid and sid.endswith("/fleet")


def test_sweep_with_temporal_refuses_sqlite(cli, monkeypatch):  # type: ignore[no-untyped-def]
    pytest.importorskip("temporalio")
    monkeypatch.setenv("FLEETCTL_TEMPORAL", "127.0.0.1:1")
    assert cli("inventory", "import", str(REPO / "inventory")).code == 0
    r = cli("sweep", "mn-tyo1-r12-01")
    assert r.code == 2 and "needs the store on PostgreSQL" in r.err, r.out + r.err
