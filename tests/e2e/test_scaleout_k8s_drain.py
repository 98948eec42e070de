"""The drain around a firmware campaign on the scale-out engine: Temporal, a worker per site, the store on PostgreSQL.

The same waves as in process (tests/e2e/test_k8s_drain_workflows.py): two servers in service that are live nodes of the
lab's Kubernetes stand-in, one node of the rack out at a time, each drained on its site's worker (where the cluster's
kubeconfig is read), flashed, uncordoned; no workflow history holds the cluster's token.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from tests_helpers_bmc import counters, selected_engine  # (path set in conftest)

pytest.importorskip("temporalio", reason="the scale-out engine's SDK (pip install 'fleetctl[temporal]')")
pytest.importorskip("lightkube")

import scaleout_helpers as h  # (path set in conftest)

lab, lab_timings, temporal, workers = h.lab, h.lab_timings, h.temporal, h.workers  # the fixtures

pytestmark = [*h.TEMPORAL_MARKS]

BASE = "http://127.0.0.1:9/fw"
MN1, MN2 = "mn-tyo1-r12-01", "mn-tyo1-r12-02"
MAINT = "fleetctl.io/maintenance"


def _sql(query: str, **params: Any) -> None:
    from sqlalchemy import text

    eng = selected_engine()
    with eng.begin() as c:
        c.execute(text(query), params)
    eng.dispose()


def test_a_campaign_on_temporal_drains_in_waves_and_uncordons(lab, cli, temporal, workers, tmp_path) -> None:  # type: ignore[no-untyped-def]
    k = cli("lab", "k8s", "up", "--pods-per-node", "1", "--gang-size", "4", "--reschedule", "0.2")
    try:
        assert k.code == 0, k.err
        kubeconfig = Path(k.out.strip().splitlines()[-1].split("=", 1)[1])
        token = json.loads(kubeconfig.read_text())["users"][0]["user"]["token"]
        workers.start("tyo1-a", "tyo1")
        workers.wait_ready()
        for n in (MN1, MN2):
            _sql("UPDATE server SET state = 'in-service' WHERE name = :n", n=n)
        mid = "(SELECT id FROM hardware_model WHERE name = 'mn-server-2')"
        _sql(f"UPDATE firmware_baseline SET version = '1.9.0' WHERE model_id = {mid} AND component = 'BIOS'")
        assert cli("lab", "k8s", "fault", "--pdb", "training/gang-000", "--refuse", "1").code == 0
        r = cli("firmware", "update", MN1, MN2, "--allow-in-service", "--delete-emptydir-data", "--max-unavailable", "1",
                "--image-base", BASE, "--component", "BIOS", "--poll", "0.3", "--output", "json")  # fmt: skip
        assert r.code == 0, (r.out, r.err)
        rows = json.loads(r.out)
        assert {(x["server"], x["result"]) for x in rows} == {(MN1, "updated"), (MN2, "updated")}
        assert len({x["wave"] for x in rows}) == 2, rows
        assert all(counters(lab, n)["firmware_by_component"] == {"BIOS": 1} for n in (MN1, MN2))
        st = json.loads(cli("k8s", "status", MN1, MN2, "-o", "json").out)
        assert all(not row["cordoned"] and not any(t["key"] == MAINT for t in row["taints"]) for row in st), st
        counts = json.loads(cli("lab", "k8s", "status", "-o", "json").out)["counters"]
        assert counts["evictions"] >= 2 and counts["evictions_refused"] >= 1, counts
        # No history of the run holds the token (the request names the cluster; the worker reads its kubeconfig), yet the
        # drain plan travelled in them.
        dumped = h.history_text(asyncio.run(h.histories(temporal.address)))
        assert "wave_of" in dumped and token not in dumped
    finally:
        cli("lab", "k8s", "down")
