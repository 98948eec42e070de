"""The health sweep in Prometheus's text exposition format (version 0.0.4).

One finished run becomes one exposition: node_exporter's textfile collector
reads it from ``fleetctl.prom`` (`fleetctl sweep --textfile DIR`), or
`fleetctl exporter` serves it on ``/metrics``. Names follow the Redfish and
SNMP exporters operators already run: a health gauge per target (1 OK,
2 warning, 3 critical, as redfish_exporter), plain units in the names
(``_seconds``, ``_celsius``, ``_per_second``). docs/metrics.md lists them all.

Cardinality is bounded on purpose: a few series per server (health, the
hottest sensor, clock skew, PSUs and fans), not one per sensor, so a
10,000-server fleet stays a few tens of thousands of series. Per-port series
exist only for ports whose error or discard rate was not zero.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from fleetctl.errors import NotFound
from fleetctl.store import tables as T
from fleetctl.sweep.history import get_run

TEXTFILE_NAME = "fleetctl.prom"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# A target's status as the value of fleetctl_server_health / fleetctl_switch_health.
# 1-3 as redfish_exporter's health gauges; 0 for a target the sweep could not
# read (no health is known: neither OK nor a fault), so `== 0` finds them and
# `>= 2` finds every known problem.
HEALTH_VALUE = {"unknown": 0, "ok": 1, "warning": 2, "critical": 3}
TARGET_STATUSES = ("ok", "warning", "unknown", "critical")
FINDING_STATUSES = ("warning", "unknown", "critical")


def escape_label(value: str) -> str:
    """A label value as the exposition format quotes it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(v: float) -> str:
    """A sample value: integers without a fraction, NaN and the infinities as Prometheus spells them."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


@dataclass
class Family:
    """One metric family: its HELP and TYPE lines, then its samples."""

    name: str
    help: str
    type: str = "gauge"
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float | None, **labels: str | None) -> None:
        """One sample; a missing value (None) is no sample, a missing label value is an empty one."""
        if value is None:
            return
        self.samples.append(({k: "" if v is None else str(v) for k, v in labels.items()}, value))

    def lines(self) -> Iterable[str]:
        yield f"# HELP {self.name} {_escape_help(self.help)}"
        yield f"# TYPE {self.name} {self.type}"
        for labels, value in self.samples:
            if labels:
                inner = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
                yield f"{self.name}{{{inner}}} {format_value(value)}"
            else:
                yield f"{self.name} {format_value(value)}"


def exposition(families: Iterable[Family]) -> str:
    """The text of some families, each with its HELP and TYPE even when it has no sample."""
    return "".join(line + "\n" for fam in families for line in fam.lines())


def _unix(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, str):
        v = dt.datetime.fromisoformat(v)
    if v.tzinfo is None:  # SQLite keeps no zone: the store writes UTC
        v = v.replace(tzinfo=dt.UTC)
    return float(v.timestamp())


def _num(v: Any) -> float | None:
    """A metric from a target's stored metrics, or None when absent or not a number."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return v


def _max_temperature(metrics: dict[str, Any]) -> float | None:
    got = _num(metrics.get("max_temp_c"))
    if got is not None:
        return got
    temps = [t for t in (_num(x) for x in (metrics.get("temperatures") or {}).values()) if t is not None]
    return max(temps) if temps else None


def latest_full_run(conn: Any) -> int:
    """The latest finished run of the whole fleet (`fleetctl sweep` / `sweep all`), not of a part of it.

    Raises:
        NotFound: no finished sweep of the whole fleet yet.
    """
    rid = conn.execute(select(func.max(T.sweep_run.c.id)).where(T.sweep_run.c.state == "finished",
                                                                  T.sweep_run.c.selector == "all")).scalar()  # fmt: skip
    if rid is None:
        raise NotFound("no finished sweep of the whole fleet (fleetctl sweep all) yet")
    return int(rid)


def families(conn: Any, run_id: int | None = None) -> list[Family]:
    """The metric families of one run (the latest finished one when ``run_id`` is None).

    Raises:
        NotFound: there is no such run (or no finished run yet).
    """
    run = get_run(conn, run_id)
    rid = int(run["id"])

    f_run = Family("fleetctl_sweep_run_id", "Id of the sweep run these metrics come from (fleetctl sweep show RUN).")
    f_ts = Family("fleetctl_sweep_timestamp_seconds", "When the sweep run finished, in seconds since the Unix epoch.")
    f_start = Family("fleetctl_sweep_start_timestamp_seconds", "When the sweep run started, in seconds since the Unix epoch.")
    f_dur = Family("fleetctl_sweep_duration_seconds", "How long the sweep run took, in seconds.")
    f_targets = Family("fleetctl_sweep_targets", "Targets swept, by kind (server, switch) and by the worst status of their findings.")
    f_find = Family("fleetctl_findings", "Findings of the sweep run, by status, check and whether an ack silences them.")
    f_new = Family("fleetctl_findings_new",
                   "Findings of the sweep run that are new (not open at the last finished sweep, worse, or their ack ended) and "
                   "not acknowledged, by status: what sets the sweep's exit code.")  # fmt: skip
    f_ack = Family("fleetctl_findings_acknowledged", "Findings of the sweep run silenced by `fleetctl finding ack`, by status.")
    f_srv = Family("fleetctl_server_health",
                   "Health of a server from its BMC: 1 OK, 2 warning, 3 critical, 0 unknown (the BMC could not be read).")  # fmt: skip
    f_temp = Family("fleetctl_server_temperature_max_celsius", "The hottest temperature sensor of a server, in degrees Celsius.")
    f_skew = Family("fleetctl_server_clock_skew_seconds", "The BMC clock minus the sweeping host's clock, in seconds.")
    f_psus = Family("fleetctl_server_psus", "Power supplies a server's BMC reports.")
    f_psus_ok = Family("fleetctl_server_psus_ok", "Power supplies of a server that are present and healthy.")
    f_fans_ok = Family("fleetctl_server_fans_ok", "Fans of a server that are present and healthy.")
    f_sw = Family("fleetctl_switch_health",
                  "Health of a switch from SNMP: 1 OK, 2 warning, 3 critical, 0 unknown (the switch could not be read).")  # fmt: skip
    # Only targets with an acknowledged finding have these (the rest: the same as their health), so the series stay
    # few; alert rules take `(fleetctl_server_health_unacknowledged or fleetctl_server_health)`.
    f_srv_open = Family("fleetctl_server_health_unacknowledged",
                        "Health of a server with an acknowledged finding, from its other findings (1 OK, 2, 3, 0 as "
                        "fleetctl_server_health); only servers with an acknowledged finding.")  # fmt: skip
    f_sw_open = Family("fleetctl_switch_health_unacknowledged",
                       "Health of a switch with an acknowledged finding, from its other findings (1 OK, 2, 3, 0 as "
                       "fleetctl_switch_health); only switches with an acknowledged finding.")  # fmt: skip
    f_up = Family("fleetctl_switch_uptime_seconds", "Time since the switch's SNMP agent restarted, in seconds.")
    f_ports = Family("fleetctl_switch_ports", "Ports of a switch.")
    f_ports_up = Family("fleetctl_switch_ports_up", "Ports of a switch whose operational state is up.")
    f_swtemp = Family("fleetctl_switch_temperature_max_celsius", "The hottest temperature sensor of a switch, in degrees Celsius.")
    f_err = Family("fleetctl_switch_port_errors_per_second",
                   "Errors per second on a switch port between the last two sweeps, by direction; only ports with errors.")  # fmt: skip
    f_disc = Family("fleetctl_switch_port_discards_per_second",
                    "Discards per second on a switch port between the last two sweeps, by direction; only ports that discard.")  # fmt: skip

    f_run.add(rid)
    f_ts.add(_unix(run.get("finished_at")))
    f_start.add(_unix(run.get("started_at")))
    f_dur.add(_num(run.get("duration_s")))

    by_kind: dict[str, dict[str, int]] = {k: dict.fromkeys(TARGET_STATUSES, 0) for k in ("server", "switch")}
    q = select(T.sweep_target.c.kind, T.sweep_target.c.name, T.sweep_target.c.site, T.sweep_target.c.rack,
               T.sweep_target.c.status, T.sweep_target.c.metrics).where(T.sweep_target.c.run_id == rid)  # fmt: skip
    # Per target with an acknowledged finding: the worst status of its findings no ack silences (None: none).
    rank = {"ok": 0, "warning": 1, "unknown": 2, "critical": 3}
    open_worst: dict[tuple[str, str], str] = {}
    aq = (select(T.finding.c.kind, T.finding.c.target).where(T.finding.c.run_id == rid, T.finding.c.ack_id.is_not(None))
          .distinct())  # fmt: skip
    for kind, target in conn.execute(aq):
        open_worst[(kind, target)] = "ok"
    if open_worst:
        uq = (select(T.finding.c.kind, T.finding.c.target, T.finding.c.status)
              .where(T.finding.c.run_id == rid, T.finding.c.ack_id.is_(None)).distinct())  # fmt: skip
        for kind, target, status in conn.execute(uq):
            k = (kind, target)
            if k in open_worst and rank.get(status, 2) > rank[open_worst[k]]:
                open_worst[k] = status if status in HEALTH_VALUE else "unknown"
    for t in conn.execute(q.order_by(T.sweep_target.c.kind, T.sweep_target.c.name)):
        status = t.status if t.status in HEALTH_VALUE else "unknown"
        unacked = open_worst.get((t.kind, t.name))
        by_kind.setdefault(t.kind, dict.fromkeys(TARGET_STATUSES, 0))[status] += 1
        m: dict[str, Any] = t.metrics or {}
        where = {"site": t.site, "rack": t.rack}
        if t.kind == "server":
            who = {"server": t.name, **where}
            f_srv.add(HEALTH_VALUE[status], **who)
            if unacked is not None:
                f_srv_open.add(HEALTH_VALUE[unacked], **who)
            f_temp.add(_max_temperature(m), **who)
            f_skew.add(_num(m.get("clock_skew_s")), **who)
            f_psus.add(_num(m.get("psus")), **who)
            f_psus_ok.add(_num(m.get("psus_ok")), **who)
            f_fans_ok.add(_num(m.get("fans_ok")), **who)
        elif t.kind == "switch":
            who = {"switch": t.name, **where}
            f_sw.add(HEALTH_VALUE[status], **who)
            if unacked is not None:
                f_sw_open.add(HEALTH_VALUE[unacked], **who)
            f_up.add(_num(m.get("uptime_s")), **who)
            f_ports.add(_num(m.get("ports")), **who)
            f_ports_up.add(_num(m.get("ports_up")), **who)
            f_swtemp.add(_max_temperature(m), **who)
            for port, rates in sorted((m.get("port_rates") or {}).items()):
                for direction in ("in", "out"):
                    f_err.add(_num((rates or {}).get(f"{direction}_errors_ps")), switch=t.name, port=port, direction=direction, **where)
                    f_disc.add(_num((rates or {}).get(f"{direction}_discards_ps")), switch=t.name, port=port, direction=direction, **where)
    for kind, counts in by_kind.items():
        for status in TARGET_STATUSES:
            f_targets.add(counts[status], kind=kind, status=status)

    new = dict.fromkeys(FINDING_STATUSES, 0)
    acked = dict.fromkeys(FINDING_STATUSES, 0)
    per_check: dict[tuple[str, str, bool], int] = {}
    fq = (select(T.finding.c.status, T.finding.c.check, T.finding.c.new, T.finding.c.ack_id.is_not(None).label("acked"), func.count())
          .where(T.finding.c.run_id == rid)
          .group_by(T.finding.c.status, T.finding.c.check, T.finding.c.new, T.finding.c.ack_id.is_not(None)))  # fmt: skip
    for status, check, is_new, is_acked, n in conn.execute(fq):
        per_check[(status, check, bool(is_acked))] = per_check.get((status, check, bool(is_acked)), 0) + n
        new.setdefault(status, 0)
        acked.setdefault(status, 0)
        if is_new and not is_acked:  # as the exit code: an acknowledged finding is never news
            new[status] += n
        if is_acked:
            acked[status] += n
    for (status, check, is_acked), n in sorted(per_check.items()):
        f_find.add(n, status=status, check=check, acknowledged="true" if is_acked else "false")
    for status in new:
        f_new.add(new[status], status=status)
        f_ack.add(acked[status], status=status)

    return [f_run, f_ts, f_start, f_dur, f_targets, f_find, f_new, f_ack,
            f_srv, f_srv_open, f_temp, f_skew, f_psus, f_psus_ok, f_fans_ok,
            f_sw, f_sw_open, f_up, f_ports, f_ports_up, f_swtemp, f_err, f_disc]  # fmt: skip


def render(conn: Any, run_id: int | None = None) -> str:
    """The Prometheus exposition of one sweep run (the latest finished one when ``run_id`` is None).

    Args:
        conn: a SQLAlchemy connection to the fleet's store.
        run_id: the run; None for the latest finished run.

    Raises:
        NotFound: there is no such run (or no finished run yet).
    """
    return exposition(families(conn, run_id))


def write_textfile(conn: Any, directory: Path, run_id: int | None = None) -> Path:
    """Write ``fleetctl.prom`` into ``directory`` for node_exporter's textfile collector, atomically.

    The text goes to a temporary file in the same directory (a name that does
    not end in ``.prom``, so the collector never reads it), is flushed to
    disk, then renamed over ``fleetctl.prom``: a scrape sees the old file or
    the new one, never half of one.

    Returns:
        The path written.
    """
    text = render(conn, run_id)
    directory = Path(directory)
    target = directory / TEXTFILE_NAME
    fd, tmp = tempfile.mkstemp(prefix=f".{TEXTFILE_NAME}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes it 0600; node_exporter often runs as another user.
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:  # the rename itself survives a crash once the directory is synced
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return target
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return target
