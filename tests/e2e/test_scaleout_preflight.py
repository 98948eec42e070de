"""`fleetctl provision` on Temporal checks its credentials on the site workers, before anything is touched.

The credentials are resolved on the workers (each has its own environment, files and owner-only secrets mapping:
docs/security.md), so the preflight runs there: an activity on each involved site's queue, before the parent opens
the job, locks a server or starts a child. A worker whose mapping lacks the ``cmd:NAME`` a server of its site
names makes the whole run refused, with the in-process one-line refusal and exit 2; no device was reached.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import scaleout_helpers as h  # (path set in conftest)
from scaleout_helpers import FAST
from sqlalchemy import text
from tests_helpers_bmc import counters, selected_engine  # (path set in conftest)

lab, lab_timings, temporal, workers = h.lab, h.lab_timings, h.temporal, h.workers  # the fixtures

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("temporalio") is None,
                       reason="the scale-out engine's SDK (pip install 'fleetctl[temporal]')"),  # fmt: skip
    *h.TEMPORAL_MARKS,
    *h.ANSIBLE_MARKS,
]


def _mapping(path: Path, commands: dict[str, list[str]]) -> Path:
    """An owner-only secrets mapping, as docs/security.md asks for."""
    lines = ["[commands]"] + [f"{k} = {v!r}".replace("'", '"') for k, v in commands.items()]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def test_a_site_worker_missing_a_cmd_source_refuses_the_whole_run(lab, cli, temporal, workers, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    names = ["mn-tyo1-r12-01", "mn-osa1-r12-01"]
    # The osa1 server's BMC credential comes from the worker's own `cmd:` source ...
    r = cli("server", "set", "mn-osa1-r12-01", "--credential", "cmd:bmc-osa1")
    assert r.code == 0, r.err
    # ... which the osa1 worker's mapping does not define (it has another one). The tyo1 worker has none at all, and
    # the command's own (FLEETCTL_SECRETS_CONFIG of the tests: absent) is never read for it.
    osa = _mapping(tmp_path / "osa1-secrets.toml", {"bmc-other": ["true"]})
    workers.start("tyo1-a", "tyo1")
    monkeypatch.setenv("FLEETCTL_SECRETS_CONFIG", str(osa))
    workers.start("osa1-a", "osa1")
    monkeypatch.setenv("FLEETCTL_SECRETS_CONFIG", str(tmp_path / "no-secrets-config.toml"))
    workers.wait_ready()
    before = _states(names)
    r = cli("provision", *names, *FAST)
    assert r.code == 2, (r.out, r.err, workers.logs())
    lines = [ln for ln in r.err.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, r.err
    line = lines[0]
    assert line.startswith("error: provision refused: server mn-osa1-r12-01:"), line
    assert "bmc-osa1" in line and str(osa) in line and "nothing was touched" in line, line  # the worker's mapping, named
    # Nothing was touched: no device reached, no job opened, nothing locked.
    for n in names:
        c = counters(lab, n)
        assert c["power_on"] == 0 and c["power_cycle"] == 0 and c["boot_log"] == [] and c["firmware_flashes"] == 0, (n, c)
    eng = selected_engine()
    with eng.connect() as c:
        assert c.execute(text("SELECT count(*) FROM job WHERE kind = 'provision'")).scalar() == 0
        assert c.execute(text("SELECT count(*) FROM server WHERE reservation IS NOT NULL")).scalar() == 0
    eng.dispose()
    assert _states(names) == before


def _states(names: list[str]) -> dict[str, str]:
    eng = selected_engine()
    with eng.connect() as c:
        rows = c.execute(text("SELECT name, state FROM server WHERE name = ANY(:n)"), {"n": names}).all()
    eng.dispose()
    return {r[0]: r[1] for r in rows}
