"""The sweep report: one self-contained HTML file an operator can open anywhere.

Everything the page needs is inside it: CSS and a little JavaScript inline,
plots as inline SVG drawn here in Python, no font, script or image from the
web (a Content-Security-Policy says so to the browser as well), so it opens
on an air-gapped laptop. Every text that comes from the database (names,
messages, subjects) is escaped: a BMC writes what it likes in its logs.

Sections: rack elevations coloured by each device's status in the latest
run (click one: its findings), a filter box, what changed since the baseline
run, firmware compliance per model and component, temperatures per rack and
findings per day.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sqlalchemy import select

from fleetctl.errors import InputError, NotFound
from fleetctl.report_html import BASE_CSS, escape, page_head
from fleetctl.report_html import axis as _axis
from fleetctl.report_html import badge as _badge
from fleetctl.report_html import nice_top as _nice_top
from fleetctl.report_html import when as _when
from fleetctl.store import tables as T
from fleetctl.sweep import history
from fleetctl.times import aware_utc, duration, span
from fleetctl.workflows.firmware import baseline_key

STATUSES = ("critical", "unknown", "warning", "ok")
RANK = {"critical": 0, "unknown": 1, "warning": 2, "ok": 3}
COLOURS = {"critical": "#d62728", "unknown": "#9467bd", "warning": "#f0a500", "ok": "#2ca02c", "none": "#b8b8b8"}
UNIT_PX = 14  # one rack unit in the elevation
DEFAULT_DAYS = 30  # the per-day plot's window without --since



def parse_since(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """``--since``: yesterday, today, a date (2026-11-30) or a duration (12h, 7d, 2w), as an aware UTC datetime.

    Days start at local midnight, as the operator reading the report counts them.
    """
    now = now or dt.datetime.now(dt.UTC)
    local = now.astimezone()
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    t = text.strip().lower()
    if t == "today":
        return midnight.astimezone(dt.UTC)
    if t == "yesterday":
        return (midnight - dt.timedelta(days=1)).astimezone(dt.UTC)
    d = duration(t, units="hdw")
    if d:
        n, unit = d
        if n == 0:
            raise InputError(f"{text!r}: a duration must be at least 1{unit}", field="--since")
        return now - span(n, unit)
    try:
        day = dt.date.fromisoformat(t)
    except ValueError:
        raise InputError(f"{text!r}: give yesterday, today, a date (2026-11-30) or a duration (12h, 7d, 2w)",
                         field="--since") from None  # fmt: skip
    since = dt.datetime.combine(day, dt.time(), tzinfo=local.tzinfo).astimezone(dt.UTC)
    if since > now:
        raise InputError(f"{text!r} is in the future", field="--since")
    return since


_utc = aware_utc


# ------------------------------------------------------------------ the data


@dataclass
class Device:
    kind: str  # server, switch
    name: str
    rack_id: int
    position: int
    height: int
    model: str
    status: str = "none"  # none: not in the latest run
    error: str | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)
    panel: str = ""


@dataclass
class Report:
    html: str
    servers: int
    findings: int


def choose_baseline(conn: Any, latest: dict[str, Any], since: dt.datetime | None) -> tuple[dict[str, Any] | None, str]:
    """The run the latest is compared with, and a line saying which and why.

    Without ``since``: the finished run before the latest. With it: the first
    finished run that started at or after ``since`` (the latest excluded); if
    there is none, the finished run before the latest.
    """
    rows = list(conn.execute(select(T.sweep_run.c.id, T.sweep_run.c.started_at)
                             .where(T.sweep_run.c.state == "finished", T.sweep_run.c.id < latest["id"])
                             .order_by(T.sweep_run.c.id)))  # fmt: skip
    if not rows:
        return None, "the first finished sweep: nothing to compare with"
    pick = None
    why = "the finished sweep before it"
    if since is not None:
        after = [r for r in rows if (s := _utc(r.started_at)) is not None and s >= since]
        if after:
            pick, why = after[0], f"the first finished sweep since {since.strftime('%Y-%m-%d %H:%M')} UTC"
        else:
            why = f"no other finished sweep since {since.strftime('%Y-%m-%d %H:%M')} UTC: the one before the latest"
    if pick is None:
        pick = rows[-1]
    return history.get_run(conn, pick.id), why


def _devices(conn: Any) -> tuple[list[dict[str, Any]], list[Device]]:
    racks = [dict(r._mapping) for r in conn.execute(
        select(T.rack.c.id, T.rack.c.name, T.rack.c.height, T.rack.c.row, T.site.c.name.label("site"))
        .join(T.site, T.site.c.id == T.rack.c.site_id)
        .order_by(T.site.c.name, T.rack.c.row, T.rack.c.position, T.rack.c.name))]  # fmt: skip
    devs: list[Device] = []
    for kind, tbl in (("server", T.server), ("switch", T.switch)):
        q = (select(tbl.c.name, tbl.c.rack_id, tbl.c.position, tbl.c.height, T.hardware_model.c.name.label("model"))
             .join(T.hardware_model, T.hardware_model.c.id == tbl.c.model_id))  # fmt: skip
        devs += [Device(kind, r.name, r.rack_id, r.position or 1, r.height or 1, r.model) for r in conn.execute(q)]
    return racks, devs


def _firmware(conn: Any, servers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model and baseline component: servers at baseline, off it, not reporting it, not read."""
    baselines: dict[str, dict[str, str]] = {}
    for r in conn.execute(select(T.hardware_model.c.name, T.firmware_baseline.c.component, T.firmware_baseline.c.version)
                          .join(T.hardware_model, T.hardware_model.c.id == T.firmware_baseline.c.model_id)):  # fmt: skip
        baselines.setdefault(r.name, {})[r.component] = r.version
    q = select(T.server.c.name, T.hardware_model.c.name.label("model")).join(T.hardware_model, T.hardware_model.c.id == T.server.c.model_id)
    model_of = {r.name: r.model for r in conn.execute(q)}
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for t in servers:
        model = model_of.get(t["name"])
        want = baselines.get(model or "")
        if not model or not want:
            continue
        fw = (t.get("metrics") or {}).get("firmware")
        seen: dict[str, set[str]] = {}
        if isinstance(fw, dict):
            for cid, version in fw.items():
                k = baseline_key(want, SimpleNamespace(id=str(cid), name=None))
                if k is not None:
                    seen.setdefault(k, set()).add(str(version))
        for comp, version in sorted(want.items()):
            row = rows.setdefault((model, comp), {"model": model, "component": comp, "baseline": version, "at": 0, "off": 0,
                                                  "missing": 0, "unread": 0, "versions": {}, "off_servers": []})  # fmt: skip
            if not isinstance(fw, dict):
                row["unread"] += 1
            elif comp not in seen:
                row["missing"] += 1
                row["off_servers"].append(t["name"])
            elif seen[comp] == {version}:
                row["at"] += 1
            else:
                row["off"] += 1
                row["off_servers"].append(t["name"])
                for v in seen[comp] - {version}:
                    row["versions"][v] = row["versions"].get(v, 0) + 1
    return [rows[k] for k in sorted(rows)]


def build(conn: Any, *, since: dt.datetime | None = None, now: dt.datetime | None = None, fleet: str = "") -> Report:
    """The report of the latest finished sweep; NotFound when there is none."""
    now = now or dt.datetime.now(dt.UTC)
    try:
        latest = history.get_run(conn, "latest")
    except NotFound:
        raise NotFound("no finished sweep run yet: run `fleetctl sweep` first") from None
    base, base_why = choose_baseline(conn, latest, since)
    targets = history.targets(conn, latest["id"])
    found = history.findings(conn, latest["id"])
    changes = history.diff(conn, base["id"], latest["id"]) if base else None
    days = max(1, math.ceil((now - since).total_seconds() / 86400)) if since else DEFAULT_DAYS
    per_day = history.per_day(conn, days, now=now)
    if since is not None:
        # per_day counts whole days back from now; keep the days whose sweep started since then.
        first = [r.id for r in conn.execute(select(T.sweep_run.c.id, T.sweep_run.c.started_at).where(T.sweep_run.c.state == "finished"))
                 if (s := _utc(r.started_at)) is not None and s >= since]  # fmt: skip
        per_day = [d for d in per_day if first and d["run_id"] >= min(first)]
    racks, devs = _devices(conn)

    verdict = {(t["kind"], t["name"]): t for t in targets}
    by_target: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in found:
        by_target.setdefault((f["kind"], f["target"]), []).append(f)
    for i, d in enumerate(devs):
        d.panel = f"p{i}"
        t = verdict.get((d.kind, d.name))
        if t is not None:
            d.status, d.error = t["status"], t.get("error")
        d.findings = by_target.get((d.kind, d.name), [])
    panel_of = {(d.kind, d.name): d.panel for d in devs}
    servers = [t for t in targets if t["kind"] == "server"]
    firmware = _firmware(conn, servers)

    parts = [
        _head(latest, base, base_why, fleet, now, since),
        _summary(latest, found),
        _filter_box(),
        '<div class="elev-wrap">',
        _elevations(racks, devs),
        _panels(devs),
        "</div>",
        _changes(changes, base, base_why, panel_of),
        _findings_table(found, panel_of),
        _firmware_section(firmware),
        _plots(targets, racks, per_day, days),
        "</main>",
        f"<script>{_JS}</script>",
        "</body></html>",
    ]
    return Report(html="\n".join(parts), servers=len(servers), findings=len(found))


def write_atomic(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file beside it: a reader never sees half a report."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ------------------------------------------------------------------ the page

# The sweep's own rules, after the shared ones.
_CSS = BASE_CSS + """
:root{--filter-h:56px}
html{scroll-padding-top:calc(var(--filter-h) + 8px)}
.card.critical{border-left-color:var(--crit)}.card.unknown{border-left-color:var(--unk)}
.card.warning{border-left-color:var(--warn)}.card.ok{border-left-color:var(--ok)}
.filter{position:sticky;top:0;z-index:5;background:#fafafa;height:var(--filter-h);display:flex;align-items:center;
 border-bottom:1px solid var(--line)}
.filter input{font:inherit;padding:6px 10px;width:min(420px,100%);border:1px solid #aaa;border-radius:4px}
.filter span{margin-left:10px;color:var(--muted);white-space:nowrap}
.site{margin:6px 0 2px;font-weight:600}
.racks{display:flex;gap:18px;flex-wrap:wrap;align-items:flex-end}
.rack{width:190px}
.rack h3{margin:4px 0;font-size:13px;text-align:center;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.frame{position:relative;border:3px solid #444;border-radius:3px;
 background:repeating-linear-gradient(to top,#fff 0,#fff 13px,#eee 13px,#eee 14px)}
.dev{position:absolute;left:2px;right:2px;border:1px solid rgba(0,0,0,.35);border-radius:2px;font:10px/1 ui-monospace,monospace;
 color:#000;text-align:left;padding:0 4px;overflow:hidden;white-space:nowrap;cursor:pointer}
.dev.switch{background-image:repeating-linear-gradient(90deg,rgba(0,0,0,.12) 0 2px,transparent 2px 6px)}
.dev.sel{outline:3px solid #0a58ca;z-index:2}
.dev:focus-visible{outline:3px solid #0a58ca}
.st-critical{background-color:var(--crit);color:#fff}.st-unknown{background-color:var(--unk);color:#fff}
.st-warning{background-color:var(--warn)}.st-ok{background-color:var(--ok);color:#fff}.st-none{background-color:var(--none)}
.nomatch.dev{visibility:hidden}
tr.nomatch,li.nomatch{display:none}
.elev-wrap{display:flex;gap:20px;align-items:flex-start}
#elevations{flex:1 1 auto;min-width:0}
#panels{flex:0 0 min(900px,50%);position:sticky;top:calc(var(--filter-h) + 8px);max-height:calc(100vh - var(--filter-h) - 24px);
 overflow:auto;margin-top:28px;
 background:#fff;border:1px solid var(--line);border-left:6px solid #0a58ca;padding:0 12px}
#panels h2{margin-top:10px}
.ack{color:var(--muted);font-style:italic}
td.msg{min-width:12em}
td.ackc{min-width:14em}
.new{font-weight:700}
.tgt{color:#0a58ca;cursor:pointer;text-decoration:underline}
@media print{.filter{position:static}.dev{cursor:default}}
"""

_JS = """
(function(){
  var panels=document.getElementById('panels');
  function show(id){
    panels.hidden=false;
    document.querySelectorAll('.panel').forEach(function(p){p.hidden=(p.id!==id);});
    document.querySelectorAll('.dev').forEach(function(d){d.classList.toggle('sel',d.dataset.panel===id);});
  }
  document.querySelectorAll('[data-panel]').forEach(function(el){
    el.addEventListener('click',function(){show(el.dataset.panel); if(!el.classList.contains('dev')){panels.scrollIntoView();}});
  });
  var box=document.getElementById('filter'), count=document.getElementById('filter-count');
  box.addEventListener('input',function(){
    var q=box.value.trim().toLowerCase(), shown=0, devs=0;
    document.querySelectorAll('[data-search]').forEach(function(el){
      var hit=(q===''||el.dataset.search.indexOf(q)>=0);
      el.classList.toggle('nomatch',!hit);
      if(el.classList.contains('dev')){devs++; if(hit){shown++;}}
    });
    count.textContent=q===''?'':(shown+' of '+devs+' devices match');
  });
})();
"""


def _head(latest: dict[str, Any], base: dict[str, Any] | None, base_why: str, fleet: str, now: dt.datetime,
          since: dt.datetime | None) -> str:  # fmt: skip
    title = f"fleetctl health report: sweep {latest['id']}"
    compared = f"compared with sweep {base['id']} of {_when(base['started_at'])} UTC ({escape(base_why)})" if base else escape(base_why)
    lines = [
        f"sweep {latest['id']} ({escape(str(latest.get('selector') or 'all'))}) started {_when(latest['started_at'])} UTC, "
        f"took {float(latest.get('duration_s') or 0):.1f} s: {latest.get('servers', 0)} servers, {latest.get('switches', 0)} switches",
        compared,
        f"generated {_when(now)} UTC" + (f" from {escape(fleet)}" if fleet else "")
        + (f"; window since {since.strftime('%Y-%m-%d %H:%M')} UTC" if since else ""),
    ]  # fmt: skip
    return page_head(title, lines, _CSS)


def _summary(latest: dict[str, Any], found: list[dict[str, Any]]) -> str:
    counts = latest.get("counts") or {}
    new = sum(1 for f in found if f.get("new"))
    acked = sum(1 for f in found if f.get("ack_id"))
    cards = "".join(f'<div class="card {s}"><b>{int(counts.get(s, 0))}</b>{s}</div>' for s in STATUSES)
    cards += f'<div class="card"><b>{len(found)}</b>findings ({new} new, {acked} acknowledged)</div>'
    return f'<section id="summary"><div class="cards">{cards}</div><p class="muted">Targets by their worst status.</p></section>'


def _filter_box() -> str:
    return ('<div class="filter"><input id="filter" type="search" placeholder="Filter: a name, a check, a message ..." '
            'aria-label="Filter servers and findings" autocomplete="off"><span id="filter-count"></span></div>')  # fmt: skip


def _search_text(d: Device) -> str:
    words = [d.name, d.kind, d.model, d.status]
    for f in d.findings:
        words += [f["check"], f["subject"], f["message"], f["status"]]
    return " ".join(w for w in words if w).lower()


def _elevations(racks: list[dict[str, Any]], devs: list[Device]) -> str:
    legend = "".join(f'<span><i style="background:{COLOURS[s]}"></i>{label}</span>'
                     for s, label in (("critical", "critical"), ("unknown", "unknown"), ("warning", "warning"), ("ok", "ok"),
                                      ("none", "not in this sweep")))  # fmt: skip
    out = ['<section id="elevations"><h2>Rack elevations</h2>',
           f'<p class="legend">{legend} <span class="muted">Click a device for its findings; switches are striped.</span></p>']  # fmt: skip
    in_rack: dict[int, list[Device]] = {}
    for d in devs:
        in_rack.setdefault(d.rack_id, []).append(d)
    site = None
    for r in racks:
        if r["site"] != site:
            if site is not None:
                out.append("</div>")
            site = r["site"]
            out.append(f'<div class="site">site {escape(str(site))}</div><div class="racks">')
        height = max([int(r["height"] or 42)] + [d.position + d.height - 1 for d in in_rack.get(r["id"], [])])
        out.append(f'<div class="rack"><h3 title="{escape(r["name"])}">{escape(r["name"])}</h3>'
                   f'<div class="frame" style="height:{height * UNIT_PX + 6}px">')  # fmt: skip
        for d in sorted(in_rack.get(r["id"], []), key=lambda d: d.position):
            bottom = (d.position - 1) * UNIT_PX + 2
            tip = f"{d.name} ({d.kind}, {d.model}) U{d.position}" + (f"-{d.position + d.height - 1}" if d.height > 1 else "")
            tip += f": {d.status if d.status != 'none' else 'not in this sweep'}, {len(d.findings)} findings"
            if d.error:
                tip += f"; {d.error}"
            out.append(f'<button type="button" class="dev {d.kind} st-{escape(d.status)}" data-panel="{d.panel}" '
                       f'data-name="{escape(d.name)}" data-status="{escape(d.status)}" data-search="{escape(_search_text(d))}" '
                       f'title="{escape(tip)}" style="bottom:{bottom}px;height:{d.height * UNIT_PX - 2}px">'
                       f"{escape(d.name)}</button>")  # fmt: skip
        out.append("</div></div>")
    if site is not None:
        out.append("</div>")
    if not racks:
        out.append('<p class="muted">No racks in the inventory.</p>')
    out.append("</section>")
    return "\n".join(out)


def _finding_rows(rows: list[dict[str, Any]], panel_of: dict[tuple[str, str], str] | None, *, target: bool = True,
                  since_col: str = "since") -> str:  # fmt: skip
    out = []
    for f in rows:
        ack = ""
        if f.get("ack_id"):
            until = f" until {_when(f.get('ack_until'))}" if f.get("ack_until") else ""
            ack = f'<span class="ack"><span class="nw">acked{escape(until)}:</span> {escape(str(f.get("ack_reason") or ""))}</span>'
        mark = "NEW" if f.get("new") and not f.get("ack_id") else ""
        search = " ".join([f["target"], f["check"], f["subject"], f["message"], f["status"]]).lower()
        # (cell, its class): at thousands of rows the browser squeezes every column it may wrap (#25 item 17), so
        # the target's name and the times stay on one line (a long name is cut with an ellipsis, its title whole)
        # and the message and the ack's reason take what is left, with a floor (.msg, .ackc) that keeps them readable.
        cells = [(_badge(f["status"]), "")]
        if target:
            panel = (panel_of or {}).get((f["kind"], f["target"]))
            name = escape(f["target"])
            link = f' class="nm tgt" data-panel="{panel}"' if panel else ' class="nm"'
            cells.append((f'<span{link} title="{name}">{name}</span>', "nw"))
        cells += [(escape(f["check"]), ""), (escape(f["subject"]), ""), (escape(f["message"]), "msg"),
                  (escape(_when(f.get("first_seen"))), "nw"), (f'<span class="new">{mark}</span>{ack}', "ackc")]  # fmt: skip
        tds = "".join(f'<td class="{k}">{c}</td>' if k else f"<td>{c}</td>" for c, k in cells)
        out.append(f'<tr data-search="{escape(search)}">{tds}</tr>')
    head = ["status", *(["target"] if target else []), "check", "subject", "message", since_col, ""]
    return ('<div class="tscroll"><table><thead><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(out) + "</tbody></table></div>")  # fmt: skip


def _panels(devs: list[Device]) -> str:
    out = ['<section id="panels" hidden><h2>Findings of the selected device</h2>']
    for d in devs:
        out.append(f'<div class="panel" id="{d.panel}" data-name="{escape(d.name)}" hidden>')
        out.append(f"<h3>{escape(d.name)} {_badge(d.status if d.status != 'none' else 'none')} "
                   f'<span class="muted">{escape(d.kind)}, {escape(d.model)}, U{d.position}</span></h3>')  # fmt: skip
        if d.error:
            out.append(f'<p class="muted">read error: {escape(d.error)}</p>')
        if d.findings:
            out.append(_finding_rows(d.findings, None, target=False))
        elif d.status == "none":
            out.append('<p class="muted">Not in the latest sweep.</p>')
        else:
            out.append('<p class="muted">No findings in the latest sweep.</p>')
        out.append("</div>")
    out.append("</section>")
    return "\n".join(out)


def _changes(changes: dict[str, list[dict[str, Any]]] | None, base: dict[str, Any] | None, base_why: str,
             panel_of: dict[tuple[str, str], str]) -> str:  # fmt: skip
    out = ['<section id="changes"><h2>Changed since the baseline sweep</h2>']
    if changes is None or base is None:
        out.append(f'<p class="muted">{escape(base_why)}.</p></section>')
        return "\n".join(out)
    out.append(f'<p class="muted">Sweep {base["id"]} ({_when(base["started_at"])} UTC, {escape(base_why)}) to the latest; '
               "only targets both sweeps read are compared.</p>")  # fmt: skip
    for key, label, note in (("new", "New", "appeared, or changed status"), ("resolved", "Resolved", "gone since the baseline"),
                             ("persisting", "Persisting", "open in both")):  # fmt: skip
        rows = changes.get(key, [])
        out.append(f'<h3 id="changes-{key}">{label}: {len(rows)} <span class="muted">({note})</span></h3>')
        if rows:
            out.append(_finding_rows(rows, panel_of, since_col="first seen"))
    out.append("</section>")
    return "\n".join(out)


def _findings_table(found: list[dict[str, Any]], panel_of: dict[tuple[str, str], str]) -> str:
    body = _finding_rows(found, panel_of) if found else '<p class="muted">No findings: every target is ok.</p>'
    return f'<section id="findings"><h2>All findings of the latest sweep ({len(found)})</h2>{body}</section>'


def _firmware_section(rows: list[dict[str, Any]]) -> str:
    out = ['<section id="firmware"><h2>Firmware compliance</h2>',
           '<p class="muted">Servers of the latest sweep by model and baseline component, '
           "from the versions their BMCs reported.</p>"]  # fmt: skip
    if not rows:
        out.append('<p class="muted">No firmware baseline for the models swept.</p></section>')
        return "\n".join(out)
    out.append("<table><thead><tr><th>model</th><th>component</th><th>baseline</th><th>at baseline</th><th>off</th>"
               "<th>not reported</th><th>not read</th><th></th><th>other versions</th></tr></thead><tbody>")  # fmt: skip
    for r in rows:
        total = r["at"] + r["off"] + r["missing"] + r["unread"]
        bar = "".join(f'<span class="bar" style="width:{120 * n / total:.1f}px;background:{c}"></span>'
                      for n, c in ((r["at"], COLOURS["ok"]), (r["off"], COLOURS["warning"]), (r["missing"], COLOURS["critical"]),
                                   (r["unread"], COLOURS["none"])) if n and total)  # fmt: skip
        other = ", ".join(f"{escape(v)} ({n})" for v, n in sorted(r["versions"].items()))
        search = " ".join([r["model"], r["component"], "firmware", *r["off_servers"]]).lower()
        out.append(f'<tr data-search="{escape(search)}"><td>{escape(r["model"])}</td><td>{escape(r["component"])}</td>'
                   f'<td>{escape(r["baseline"])}</td><td class="num">{r["at"]}</td><td class="num">{r["off"]}</td>'
                   f'<td class="num">{r["missing"]}</td><td class="num">{r["unread"]}</td><td>{bar}</td><td>{other}</td></tr>')  # fmt: skip
    out.append("</tbody></table></section>")
    return "\n".join(out)


# ------------------------------------------------------------------ the plots (inline SVG)


# The rack axis of the temperature plot at any number of racks (#25 item 17: at 50 racks the labels overlapped).
PLOT_W = 1150  # px the rack columns share: the plot fits a 1,280 px screen up to PLOT_W / COL_MIN racks, then scrolls
COL_MAX, COL_MIN = 70, 12  # px a rack's column may take
CHAR_W = 7.0  # px a character of a 10 px label takes, with room (DejaVu Sans, Chromium's fallback on Debian: ~6.4 for a-z0-9)
LABEL_CHARS = 24  # a longer rack name is cut with an ellipsis on the axis (its title keeps it whole)
LABEL_ACROSS = 14  # px a label turned upright needs across: a 10 px line, and a gap


@dataclass(frozen=True)
class RackAxis:
    """How the rack labels of a plot of ``n`` racks are laid out; every ``step``-th rack is labelled."""

    col: int  # px per rack
    upright: bool  # labels turned to read bottom to top (they do not fit across a column)
    step: int  # 1: every rack labelled; 2: every other one ...
    depth: int  # px the labels take below the axis


def rack_axis(names: list[str]) -> RackAxis:
    """Columns sized from the count, labels across when the longest fits its column, upright when not, thinned below 14 px.

    Upright labels are boxes LABEL_ACROSS wide, so labelling every ``step``-th
    rack with ``col * step >= LABEL_ACROSS`` keeps them apart at any count.
    """
    n = max(1, len(names))
    col = max(COL_MIN, min(COL_MAX, PLOT_W // n))
    longest = max((len(axis_label(x)) for x in names), default=0) * CHAR_W
    if longest <= col - 6:
        return RackAxis(col, False, 1, 30)
    return RackAxis(col, True, math.ceil(LABEL_ACROSS / col), int(longest) + 12)


def axis_label(name: str) -> str:
    return name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "\u2026"


def temperature_svg(targets: list[dict[str, Any]], racks: list[dict[str, Any]]) -> str:
    """Each server's hottest sensor in the latest sweep, a dot per server, a column per rack.

    The columns narrow as racks are added (the plot stays about a screen wide
    up to ~100 racks); the labels are laid out by ``rack_axis``.
    """
    order = {r["name"]: i for i, r in enumerate(racks)}
    temps: dict[str, list[tuple[str, float, str]]] = {}
    for t in targets:
        v = (t.get("metrics") or {}).get("max_temp_c")
        if t["kind"] == "server" and isinstance(v, int | float):
            temps.setdefault(t.get("rack") or "?", []).append((t["name"], float(v), t["status"]))
    if not temps:
        return '<p class="muted">No temperatures read.</p>'
    names = sorted(temps, key=lambda n: (order.get(n, len(order)), n))
    ax = rack_axis(names)
    col, x0, y0, plot_h = ax.col, 44, 190, 170
    width = col * len(names)
    half = min(22.0, col / 2 - 2)  # the rack's maximum: a dashed line across its column
    spread = min(5.0, (col - 8) / 6)  # dots of a rack side by side, inside its column
    top = _nice_top(max(v for vals in temps.values() for _, v, _ in vals) * 1.1)
    out = [f'<svg id="plot-temps" xmlns="http://www.w3.org/2000/svg" width="{x0 + width + 10}" height="{y0 + 4 + ax.depth}" '
           f'role="img" aria-label="Hottest sensor per server, by rack">']  # fmt: skip
    out += _axis(x0, y0, plot_h, width, top, "°")
    for i, rack in enumerate(names):
        cx = x0 + col * i + col / 2
        vals = sorted(temps[rack], key=lambda x: x[1])
        hottest = vals[-1][1]
        out.append(f'<line x1="{cx - half:.1f}" y1="{y0 - plot_h * hottest / top:.1f}" x2="{cx + half:.1f}" '
                   f'y2="{y0 - plot_h * hottest / top:.1f}" stroke="#444" stroke-dasharray="3 2"><title>{escape(rack)}: '
                   f"max {hottest:g} °C</title></line>")  # fmt: skip
        for j, (name, v, status) in enumerate(vals):
            dx = ((j % 7) - 3) * spread
            out.append(f'<circle cx="{cx + dx:.1f}" cy="{y0 - plot_h * v / top:.1f}" r="3.5" fill="{COLOURS.get(status, COLOURS["none"])}" '
                       f'stroke="#0006"><title>{escape(name)}: {v:g} °C ({escape(status)})</title></circle>')  # fmt: skip
        if i % ax.step:
            continue  # thinned: this rack's name is in its line's and dots' titles
        tip = f"<title>{escape(rack)}: max {hottest:g} °C</title>"
        if ax.upright:
            # Read bottom to top, ending at the axis; the maximum is in the title and the dashed line.
            out.append(f'<text class="rack-label" x="{cx:.1f}" y="{y0 + 6}" text-anchor="end" dominant-baseline="middle" '
                       f'transform="rotate(-90 {cx:.1f} {y0 + 6})">{escape(axis_label(rack))}{tip}</text>')  # fmt: skip
        else:
            out.append(f'<text class="rack-label" x="{cx:.1f}" y="{y0 + 14}" text-anchor="middle">{escape(rack)}{tip}</text>')
            out.append(f'<text x="{cx:.1f}" y="{y0 + 26}" text-anchor="middle" fill="#666">max {hottest:g}°</text>')
    out.append("</svg>")
    return "".join(out)


def per_day_svg(days: list[dict[str, Any]]) -> str:
    """Findings per day (the day's last finished sweep), stacked by status."""
    if not days:
        return '<p class="muted">No finished sweep in the window.</p>'
    col, x0, y0, plot_h = 34, 40, 180, 160
    width = col * len(days)
    top = _nice_top(max(sum(int(d.get(s, 0)) for s in ("critical", "unknown", "warning")) for d in days))
    out = [f'<svg id="plot-per-day" xmlns="http://www.w3.org/2000/svg" width="{x0 + width + 10}" height="{y0 + 46}" '
           f'role="img" aria-label="Findings per day by status">']  # fmt: skip
    out += _axis(x0, y0, plot_h, width, top, "")
    for i, d in enumerate(days):
        x = x0 + col * i + 5
        y = float(y0)
        for s in ("warning", "unknown", "critical"):
            n = int(d.get(s, 0))
            if not n:
                continue
            h = plot_h * n / top
            y -= h
            out.append(f'<rect x="{x}" y="{y:.1f}" width="{col - 10}" height="{h:.1f}" fill="{COLOURS[s]}">'
                       f'<title>{escape(str(d["day"]))}: {n} {s} (sweep {d.get("run_id")})</title></rect>')  # fmt: skip
        total = sum(int(d.get(s, 0)) for s in ("critical", "unknown", "warning"))
        out.append(f'<text x="{x + (col - 10) / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">{total}</text>')
        label = escape(str(d["day"])[5:])
        out.append(f'<text x="{x + (col - 10) / 2:.1f}" y="{y0 + 12}" text-anchor="end" '
                   f'transform="rotate(-45 {x + (col - 10) / 2:.1f} {y0 + 12})">{label}</text>')  # fmt: skip
    out.append("</svg>")
    return "".join(out)


def _plots(targets: list[dict[str, Any]], racks: list[dict[str, Any]], per_day: list[dict[str, Any]], days: int) -> str:
    legend = "".join(f'<span><i style="background:{COLOURS[s]}"></i>{s}</span>' for s in ("critical", "unknown", "warning", "ok"))
    return ('<section id="plots"><h2>Plots</h2>'
            f'<p class="legend">{legend}</p><div class="plots">'
            '<div class="plot"><h3>Hottest sensor per server, by rack (°C, latest sweep)</h3>'
            f"{temperature_svg(targets, racks)}</div>"
            f'<div class="plot"><h3>Findings per day, last {days} day{"s" if days != 1 else ""}</h3>'
            f"{per_day_svg(per_day)}</div></div></section>")  # fmt: skip
