"""The burn-in report: one self-contained HTML page per run, built like the sweep's (fleetctl/report_html.py).

The run's header and counts, then every board of the run, worst verdict first:
why (the criteria it failed or was degraded by, with their evidence), its
figures, its telemetry over the workload as inline SVG (the host's samples,
the BMC's sensors as further lines), and its earlier burn-ins. Last, the
boards waiting to be shipped back (the open RMA list). The page fetches
nothing and every stored text is escaped: a serial or a message is shown as
characters, never run as markup.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from sqlalchemy import select

from fleetctl.burnin import history
from fleetctl.report_html import BASE_CSS, badge, escape, line_svg, page_head, when

VERDICTS = ("fail", "error", "degraded", "pass")  # worst first: a failed board before a server that could not be run
RANK = {v: i for i, v in enumerate(VERDICTS)}
SEVERITY_RANK = {"fail": 0, "error": 1, "degraded": 2, "note": 3}
MAX_BMC_SENSORS = 6  # the hottest sensors a BMC reported are drawn; the rest are named under the plot

# The plots a board gets, in order, when any of its samples carry the value: (key, title, unit).
PLOTS = (("temp_c", "Temperature", "°C"), ("power_w", "Power", " W"), ("clock_mhz", "Clock", " MHz"))

_CSS = BASE_CSS + """
.card.fail{border-left-color:var(--crit)}.card.error{border-left-color:var(--unk)}
.card.degraded{border-left-color:var(--warn)}.card.pass{border-left-color:var(--ok)}
.st-fail,.st-error{color:#fff}.st-fail{background-color:var(--crit)}.st-error{background-color:var(--unk)}
.st-degraded{background-color:var(--warn)}.st-pass{background-color:var(--ok);color:#fff}
.st-note{background-color:var(--none)}
.board{background:#fff;border:1px solid var(--line);border-left:6px solid var(--none);padding:0 14px 8px;margin:14px 0}
.board.fail{border-left-color:var(--crit)}.board.error{border-left-color:var(--unk)}
.board.degraded{border-left-color:var(--warn)}.board.pass{border-left-color:var(--ok)}
.board h3{margin:10px 0 4px;font-size:15px}
.board h4{margin:10px 0 4px;font-size:13px}
.evidence{font:12px ui-monospace,monospace;white-space:pre-wrap;margin:0}
tr.this td{font-weight:700}
"""


def render(conn: Any, run_id: int | None = None) -> str:
    """The page of one burn-in run (None: the latest).

    Args:
        conn: a SQLAlchemy connection to the store.
        run_id: the run; None for the latest one.

    Returns:
        The whole HTML document.

    Raises:
        NotFound: no burn-in has run yet, or there is no run ``run_id``.
    """
    from fleetctl.store import tables as T

    rid, rows = history.results(conn, run_id)
    run = dict(conn.execute(select(T.burnin_run).where(T.burnin_run.c.id == rid)).one()._mapping)
    rows.sort(key=lambda r: (RANK.get(r["verdict"], len(RANK)), r["server"], r["slot"] if r["slot"] is not None else -1, r["device"]))
    for i, r in enumerate(rows):
        r["anchor"] = f"b{i}"
    rma = history.rma_list(conn)
    parts = [
        _head(run, rows),
        _summary(rows, rma),
        _boards_table(rows),
        '<section id="boards"><h2>Boards, worst first</h2>',
        *(_board(r, history.board_history(conn, r["serial"]) if r["serial"] else [], rid) for r in rows),
        "" if rows else '<p class="muted">This run stored no result.</p>',
        "</section>",
        _rma_section(rma),
        "</main>",
        "</body></html>",
    ]
    return "\n".join(parts)


# ------------------------------------------------------------------ the page


def _head(run: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    title = f"fleetctl burn-in report: run {run['id']}"
    servers = run.get("servers") or []
    took = ""
    started, finished = run.get("started_at"), run.get("finished_at")
    if started and finished:
        from fleetctl.times import aware_utc

        a, b = aware_utc(started), aware_utc(finished)
        if a and b:
            took = f", took {(b - a).total_seconds() / 60:.1f} min"
    who = " by " + escape(str(run["actor"])) if run.get("actor") else ""
    where = " on " + escape(str(run["host"])) if run.get("host") else ""
    lines = [
        f"{escape(str(run.get('kind') or '?'))} burn-in, level {escape(str(run.get('level') or '?'))}, "
        f"workload {float(run.get('duration_s') or 0):g} s per server: {len(servers)} server{'s' if len(servers) != 1 else ''}"
        + (f" ({escape(str(run['selector']))})" if run.get("selector") else ""),
        f"started {when(started)} UTC{took}{who}{where}; {escape(str(run.get('state') or '?'))}",
        f"{len(rows)} results; generated {when(dt.datetime.now(dt.UTC))} UTC",
    ]  # fmt: skip
    return page_head(title, lines, _CSS)


def _summary(rows: list[dict[str, Any]], rma: list[dict[str, Any]]) -> str:
    counts = {v: 0 for v in VERDICTS}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    labels = {"error": "error (not run)"}
    cards = "".join(f'<div class="card {escape(v)}"><b>{n}</b>{escape(labels.get(v, v))}</div>'
                    for v, n in sorted(counts.items(), key=lambda kv: RANK.get(kv[0], len(RANK))))  # fmt: skip
    cards += f'<div class="card"><b>{len(rma)}</b>boards to ship back (open RMA)</div>'
    return (f'<section id="summary"><div class="cards">{cards}</div>'
            '<p class="muted">Boards by verdict; an error is a server that could not be burned in (no board verdict).</p>'
            "</section>")  # fmt: skip


def _num(v: Any, fmt: str = "g", unit: str = "") -> str:
    return f"{v:{fmt}}{unit}" if isinstance(v, int | float) and not isinstance(v, bool) else ""


def _name(r: dict[str, Any]) -> str:
    return str(r["serial"]) if r["serial"] else f"server {r['server']}"


def _boards_table(rows: list[dict[str, Any]]) -> str:
    out = ['<section id="results"><h2>Results</h2><table><thead><tr><th>verdict</th><th>board</th><th>server</th><th>slot</th>'
           "<th>device</th><th>model</th><th>throughput</th><th>of expected</th><th>max °C</th><th>max W</th><th>why</th>"
           "</tr></thead><tbody>"]  # fmt: skip
    for r in rows:
        m = r["metrics"]
        why = "; ".join(str(x.get("message") or "") for x in _reasons(r) if x.get("severity") != "note")
        out.append(f'<tr><td>{badge(r["verdict"])}</td><td><a href="#{r["anchor"]}">{escape(_name(r))}</a></td>'
                   f'<td>{escape(str(r["server"]))}</td><td class="num">{_num(r["slot"])}</td><td>{escape(str(r["device"] or ""))}</td>'
                   f'<td>{escape(str(r["model"] or ""))}</td>'
                   f'<td class="num">{_num(m.get("throughput"))} {escape(str(m.get("unit") or ""))}</td>'
                   f'<td class="num">{_num(m.get("throughput_fraction"), ".0%")}</td><td class="num">{_num(m.get("max_temp_c"))}</td>'
                   f'<td class="num">{_num(m.get("max_power_w"))}</td><td>{escape(why)}</td></tr>')  # fmt: skip
    out.append("</tbody></table></section>")
    return "\n".join(out)


def _reasons(r: dict[str, Any]) -> list[dict[str, Any]]:
    reasons = [x for x in r["reasons"] if isinstance(x, dict)]
    return sorted(reasons, key=lambda x: SEVERITY_RANK.get(str(x.get("severity")), len(SEVERITY_RANK)))


def _evidence(ev: Any) -> str:
    if not ev:
        return ""
    if isinstance(ev, dict):
        text = "\n".join(f"{k}: {v if isinstance(v, str) else json.dumps(v, default=str)}" for k, v in ev.items())
    else:
        text = ev if isinstance(ev, str) else json.dumps(ev, default=str)
    return f'<pre class="evidence">{escape(text)}</pre>'


def _board(r: dict[str, Any], past: list[dict[str, Any]], rid: int) -> str:
    slot = f"slot {r['slot']}" if r["slot"] is not None else None
    # A server-level error is named after its server already.
    where = ", ".join(escape(str(x)) for x in (r["server"] if r["serial"] else None, slot, r["device"] or None, r["model"]) if x)
    out = [f'<div class="board {escape(r["verdict"])}" id="{r["anchor"]}">',
           f'<h3>{escape(_name(r))} {badge(r["verdict"])} <span class="muted">{where}</span></h3>']  # fmt: skip
    reasons = _reasons(r)
    if reasons:
        out.append("<table><thead><tr><th>severity</th><th>criterion</th><th>message</th><th>evidence</th></tr></thead><tbody>")
        for x in reasons:
            out.append(f'<tr><td>{badge(str(x.get("severity") or "?"))}</td><td>{escape(str(x.get("criterion") or ""))}</td>'
                       f'<td>{escape(str(x.get("message") or ""))}</td><td>{_evidence(x.get("evidence"))}</td></tr>')  # fmt: skip
        out.append("</tbody></table>")
    elif r["verdict"] == "pass":
        out.append('<p class="muted">Every criterion met.</p>')
    out.append(_metrics(r["metrics"]))
    out.append(_telemetry(r))
    if r["serial"]:
        out.append(_history(past, rid))
    out.append("</div>")
    return "\n".join(out)


def _metrics(m: dict[str, Any]) -> str:
    shown = [("throughput", f"{_num(m.get('throughput'))} {escape(str(m.get('unit') or ''))}".strip()),
             ("of expected", _num(m.get("throughput_fraction"), ".1%")), ("max temperature", _num(m.get("max_temp_c"), "g", " °C")),
             ("max power", _num(m.get("max_power_w"), "g", " W")), ("samples", _num(m.get("samples"))),
             ("memory errors", _num(m.get("memory_errors")))]  # fmt: skip
    cells = [(k, v) for k, v in shown if v]
    if not cells:
        return ""
    return ("<table><tr>" + "".join(f"<th>{k}</th>" for k, _ in cells) + "</tr><tr>"
            + "".join(f'<td class="num">{v}</td>' for _, v in cells) + "</tr></table>")  # fmt: skip


def _series(samples: list[dict[str, Any]], key: str) -> tuple[list[tuple[str, list[tuple[float, float]]]], list[str]]:
    """The host's line and a line per BMC sensor (the hottest ones) of one value; and the sensors left out."""
    host: list[tuple[float, float]] = []
    bmc: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        t, v = s.get("t"), s.get(key)
        if not isinstance(t, int | float) or not isinstance(v, int | float) or isinstance(v, bool):
            continue
        if s.get("source") == "bmc":
            bmc.setdefault(f"BMC {s.get('sensor') or 'sensor'}", []).append((float(t), float(v)))
        else:
            host.append((float(t), float(v)))
    hottest = sorted(bmc, key=lambda n: (-max(v for _, v in bmc[n]), n))
    series = ([("host", host)] if host else []) + [(n, bmc[n]) for n in hottest[:MAX_BMC_SENSORS]]
    return series, hottest[MAX_BMC_SENSORS:]


def _telemetry(r: dict[str, Any]) -> str:
    samples = [s for s in r["telemetry"] if isinstance(s, dict)]
    if not samples:
        return "" if r["verdict"] == "error" else '<p class="muted">No telemetry stored for this board.</p>'
    plots = []
    for key, title, unit in PLOTS:
        series, left_out = _series(samples, key)
        if not series:
            continue
        more = f'<p class="muted">Not drawn: {escape(", ".join(left_out))}.</p>' if left_out else ""
        svg = line_svg(series, unit=unit, label=f"{title} of {_name(r)} over the workload", svg_id=f"{r['anchor']}-{key}")
        plots.append(f'<div class="plot"><h3>{title} ({unit.strip()}) over the workload</h3>{svg}{more}</div>')
    if not plots:
        return '<p class="muted">The stored samples carry no temperature, power or clock.</p>'
    return '<h4>Telemetry</h4><div class="plots">' + "".join(plots) + "</div>"


def _history(past: list[dict[str, Any]], rid: int) -> str:
    if len(past) <= 1:
        return '<p class="muted">No earlier burn-in of this board.</p>'
    out = ["<h4>History</h4><table><thead><tr><th>run</th><th>finished</th><th>level</th><th>workload</th><th>verdict</th>"
           "<th>throughput</th></tr></thead><tbody>"]  # fmt: skip
    for h in past:
        mark = ' class="this"' if h["run"] == rid else ""
        out.append(f'<tr{mark}><td class="num">{int(h["run"])}</td><td>{when(h["at"])}</td><td>{escape(str(h["level"] or ""))}</td>'
                   f'<td class="num">{_num(h["duration_s"], "g", " s")}</td><td>{badge(str(h["verdict"]))}</td>'
                   f'<td class="num">{_num(h["throughput"])}</td></tr>')  # fmt: skip
    out.append("</tbody></table>")
    return "\n".join(out)


def _rma_section(rma: list[dict[str, Any]]) -> str:
    out = ['<section id="rma"><h2>Boards to ship back (open RMA)</h2>']
    if not rma:
        out.append('<p class="muted">None open.</p></section>')
        return "\n".join(out)
    out.append("<table><thead><tr><th>board</th><th>kind</th><th>model</th><th>server</th><th>slot</th><th>opened</th><th>source</th>"
               "<th>reason</th><th>evidence</th></tr></thead><tbody>")  # fmt: skip
    for x in rma:
        out.append(f'<tr><td>{escape(str(x["serial"]))}</td><td>{escape(str(x["kind"] or ""))}</td><td>{escape(str(x["model"] or ""))}</td>'
                   f'<td>{escape(str(x["server"] or ""))}</td><td class="num">{_num(x["slot"])}</td>'
                   f'<td>{when(x["opened"])}</td><td>{escape(str(x["source"] or ""))}</td>'
                   f'<td>{escape(str(x["reason"] or ""))}</td><td>{_evidence(x["evidence"])}</td></tr>')  # fmt: skip
    out.append("</tbody></table></section>")
    return "\n".join(out)
