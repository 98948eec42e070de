"""The sweep report's parts without a lab: --since, escaping, the plots, the baseline, the atomic write."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from fleetctl.errors import InputError, NotFound
from fleetctl.sweep import report as R

EVIL = '<marquee id="evil">x</marquee>\'&"<script>alert(1)</script>'


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Local time is Tokyo's (UTC+9, no DST): days start at 15:00 UTC."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


NOW = dt.datetime(2026, 12, 1, 18, 0, tzinfo=dt.UTC)  # 2026-12-02 03:00 in Tokyo


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("today", dt.datetime(2026, 12, 1, 15, 0, tzinfo=dt.UTC)),
        ("Yesterday", dt.datetime(2026, 11, 30, 15, 0, tzinfo=dt.UTC)),
        ("2026-11-30", dt.datetime(2026, 11, 29, 15, 0, tzinfo=dt.UTC)),
        ("7d", NOW - dt.timedelta(days=7)),
        ("12h", NOW - dt.timedelta(hours=12)),
        ("2w", NOW - dt.timedelta(weeks=2)),
    ],
)
def test_since_values(tokyo: None, text: str, want: dt.datetime) -> None:
    got = R.parse_since(text, NOW)
    assert got == want and got.tzinfo is not None


@pytest.mark.parametrize("text", ["", "soon", "7", "0d", "-1d", "7 days", "2026-02-30", "2026-12-03"])
def test_bad_since_names_the_option(tokyo: None, text: str) -> None:
    with pytest.raises(InputError) as e:
        R.parse_since(text, NOW)
    assert str(e.value).startswith("--since: ") and "\n" not in str(e.value)
    assert e.value.exit_code == 2


def test_plots_are_well_formed_svg_and_escape_names() -> None:
    targets = [
        {"kind": "server", "name": EVIL, "rack": "r<1>", "status": "critical", "metrics": {"max_temp_c": 61.5}},
        {"kind": "server", "name": "b", "rack": "r<1>", "status": "ok", "metrics": {"max_temp_c": 30}},
        {"kind": "server", "name": "c", "rack": "r2", "status": "warning", "metrics": {}},  # no reading: no dot
        {"kind": "switch", "name": "sw", "rack": "r2", "status": "ok", "metrics": {"max_temp_c": 50}},  # servers only
    ]
    svg = R.temperature_svg(targets, [{"name": "r2"}, {"name": "r<1>"}])
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert len(root.findall(f"{ns}circle")) == 2
    titles = [t.text for t in root.iter(f"{ns}title")]
    assert f"{EVIL}: 61.5 °C (critical)" in titles  # the name came back as text, not markup
    assert [t.text for t in root.iter(f"{ns}text") if t.text and t.text.startswith("r")] == ["r<1>"]

    days = [{"day": "2026-11-30", "run_id": 1, "critical": 1, "unknown": 0, "warning": 3},
            {"day": "2026-12-01", "run_id": 2, "critical": 0, "unknown": 2, "warning": 0}]  # fmt: skip
    root = ET.fromstring(R.per_day_svg(days))
    rects = root.findall(f"{ns}rect")
    assert len(rects) == 3  # a bar part per status with findings
    assert {r.get("fill") for r in rects} == {R.COLOURS["critical"], R.COLOURS["warning"], R.COLOURS["unknown"]}
    assert "No finished sweep" in R.per_day_svg([])
    assert "No temperatures" in R.temperature_svg([], [])


def test_write_atomic_replaces_and_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "r.html"
    out.write_text("old")
    R.write_atomic(out, "new")
    assert out.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["r.html"]

    def boom(*_a: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        R.write_atomic(out, "half")
    assert out.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["r.html"]


# ------------------------------------------------------------ a hand-made history


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A site with one rack, two servers (one with a hostile name) and a switch; no sweep yet."""
    from fleetctl.models import FirmwareBaseline, HardwareModel, Rack, Server, Site, Switch
    from fleetctl.store import get_engine, session

    url = f"sqlite:///{tmp_path / 'r.db'}"
    with session(url) as s:
        site = Site(name="s1")
        s.add(site)
        s.flush()
        rack = Rack(site_id=site.id, name="rack-<1>", height=42)
        box = HardwareModel(name="box", kind="server", vendor="v", model="m", height=2)
        tor = HardwareModel(name="tor", kind="switch", vendor="v", model="t")
        s.add_all([rack, box, tor])
        s.flush()
        s.add_all([FirmwareBaseline(model_id=box.id, component="BIOS", version="1.0"),
                   FirmwareBaseline(model_id=box.id, component="BMC", version="2.0")])  # fmt: skip
        s.add_all([Server(name=EVIL, serial="S1", model_id=box.id, rack_id=rack.id, position=1, height=2),
                   Server(name="good-1", serial="S2", model_id=box.id, rack_id=rack.id, position=3, height=2),
                   Switch(name="tor-1", model_id=tor.id, platform="eos", role="leaf", mgmt_address="127.0.0.2",
                          rack_id=rack.id, position=42)])  # fmt: skip
    return get_engine(url)


def _sweep(engine: Any, at: dt.datetime, findings: list[tuple[str, str, str, str]], *, state: str = "finished") -> int:
    """A run at ``at`` with a verdict for both servers and the switch, and these (target, check, status, message)."""
    from fleetctl.models import Finding, SweepRun, SweepTarget
    from fleetctl.store import session

    with session(str(engine.url)) as s:
        run = SweepRun(started_at=at, finished_at=at + dt.timedelta(seconds=3), state=state, duration_s=3.0, servers=2, switches=1)
        s.add(run)
        s.flush()
        worst: dict[str, str] = {}
        for target, check, status, message in findings:
            s.add(Finding(run_id=run.id, kind="server", target=target, check=check, subject=EVIL, status=status, message=message,
                          first_seen=at, last_seen=at, new=True))  # fmt: skip
            worst[target] = min(worst.get(target, "ok"), status, key=R.RANK.__getitem__)
        fw = {EVIL: {"BIOS": "1.0", "BMC": "1.9"}, "good-1": {"BIOS": "1.0", "BMC": "2.0"}}
        for name in (EVIL, "good-1"):
            s.add(SweepTarget(run_id=run.id, kind="server", name=name, rack="rack-<1>", status=worst.get(name, "ok"),
                              metrics={"max_temp_c": 40.0, "firmware": fw[name]}))  # fmt: skip
        s.add(SweepTarget(run_id=run.id, kind="switch", name="tor-1", rack="rack-<1>", status="ok", metrics={}))
        return int(run.id or 0)


def test_no_finished_run_is_not_found(store: Any) -> None:
    _sweep(store, NOW, [], state="interrupted")
    with store.connect() as c, pytest.raises(NotFound, match="no finished sweep run yet"):
        R.build(c)


def test_every_text_from_the_store_is_escaped_and_every_section_is_there(store: Any) -> None:
    first = _sweep(store, NOW - dt.timedelta(days=2), [(EVIL, "psu", "critical", EVIL), ("good-1", "fan", "warning", "fan 1")])
    latest = _sweep(store, NOW - dt.timedelta(hours=1), [(EVIL, "psu", "critical", EVIL), (EVIL, "temperature", "warning", "hot")])
    with store.connect() as c:
        rep = R.build(c, now=NOW, fleet="<fleet>")
    assert (rep.servers, rep.findings) == (2, 2)
    html = rep.html
    assert EVIL not in html and "<fleet>" not in html
    p = _Tags()
    p.feed(html)
    tags = [t for t, _ in p.tags]
    assert "marquee" not in tags and tags.count("script") == 1  # ours, at the end
    assert not any(a.get("id") == "evil" for _, a in p.tags)
    for section in ("summary", "elevations", "panels", "changes", "findings", "firmware", "plots"):
        assert f'id="{section}"' in html
    devs = [a for t, a in p.tags if t == "button" and "dev" in (a.get("class") or "")]
    assert {(d["data-name"], d["data-status"]) for d in devs} == {(EVIL, "critical"), ("good-1", "ok"), ("tor-1", "ok")}
    evil = next(d for d in devs if d["data-name"] == EVIL)
    assert "bottom:2px;height:26px" in (evil.get("style") or "")  # U1, two units high
    assert "temperature" in (evil.get("data-search") or "")
    # Changed since the run before: the temperature new, the fan resolved, the PSU persisting.
    assert f"compared with sweep {first}" in html and f"sweep {latest}" in html
    changes = html[html.index('id="changes"') : html.index('id="findings"')]
    assert changes.index("New: 1") < changes.index(">hot<") < changes.index("Resolved: 1") < changes.index("fan 1")
    persisting = changes[changes.index("Persisting: 1") :]
    assert "<td>psu</td>" in persisting and "&lt;script&gt;alert(1)" in persisting and "<td>fan</td>" not in persisting
    # Firmware: BIOS at baseline on both, BMC off on one.
    fw = html[html.index('id="firmware"') : html.index('id="plots"')]
    assert '<td>BMC</td><td>2.0</td><td class="num">1</td><td class="num">1</td>' in fw
    assert '<td>BIOS</td><td>1.0</td><td class="num">2</td><td class="num">0</td>' in fw


def test_since_picks_the_first_run_after_it(store: Any) -> None:
    runs = [_sweep(store, NOW - dt.timedelta(days=d), []) for d in (5, 3, 2, 0)]
    with store.connect() as c:
        latest = {"id": runs[-1]}
        assert R.choose_baseline(c, latest, None)[0]["id"] == runs[2]  # type: ignore[index]
        assert R.choose_baseline(c, latest, NOW - dt.timedelta(days=4))[0]["id"] == runs[1]  # type: ignore[index]
        assert R.choose_baseline(c, latest, NOW - dt.timedelta(days=10))[0]["id"] == runs[0]  # type: ignore[index]
        base, why = R.choose_baseline(c, latest, NOW - dt.timedelta(hours=1))  # nothing since but the latest
        assert base is not None and base["id"] == runs[2] and "no other finished sweep since" in why
        assert R.choose_baseline(c, {"id": runs[0]}, None) == (None, "the first finished sweep: nothing to compare with")


def test_the_per_day_window_starts_at_since(store: Any) -> None:
    for days in (6, 4, 3, 1, 0):
        _sweep(store, NOW - dt.timedelta(days=days, hours=1), [("good-1", "fan", "warning", "fan 1")])
    with store.connect() as c:
        week = R.build(c, now=NOW, since=NOW - dt.timedelta(days=7)).html
        three = R.build(c, now=NOW, since=NOW - dt.timedelta(days=3, hours=2)).html
    assert week.count("warning (sweep") == 5 and "last 7 days" in week
    assert three.count("warning (sweep") == 3 and "last 4 days" in three  # the sweeps 3 days ago, 1 day ago and today


# ------------------------------------------------------------ the layout at scale (#25 item 17; measured in a browser by
# tests/e2e/test_report_layout.py, these check the markup that layout rests on)

SVG = "{http://www.w3.org/2000/svg}"


def _rack_plot(n: int, name: str = "tyo1-hall-b-r{:03d}") -> tuple[list[dict[str, Any]], ET.Element]:
    racks = [{"name": name.format(i)} for i in range(1, n + 1)]
    targets = [{"kind": "server", "name": f"s{i}-{j}", "rack": r["name"], "status": "ok", "metrics": {"max_temp_c": 40 + j}}
               for i, r in enumerate(racks) for j in range(3)]  # fmt: skip
    return racks, ET.fromstring(R.temperature_svg(targets, racks))


@pytest.mark.parametrize(("n", "col", "upright", "step"), [(4, 70, True, 1), (50, 23, True, 1), (200, 12, True, 2)])
def test_rack_axis_sizes_columns_from_the_count_and_thins_labels(n: int, col: int, upright: bool, step: int) -> None:
    racks, svg = _rack_plot(n)
    ax = R.rack_axis([r["name"] for r in racks])
    assert (ax.col, ax.upright, ax.step) == (col, upright, step)
    labels = [t for t in svg.iter(f"{SVG}text") if t.get("class") == "rack-label"]
    assert [t.text for t in labels] == [r["name"] for r in racks][::step]  # every step-th rack, in rack order
    xs = [float(t.get("x") or 0) for t in labels]
    gaps = {round(b - a, 1) for a, b in itertools.pairwise(xs)}
    assert gaps <= {float(col * step)} and col * step >= R.LABEL_ACROSS  # an upright label's box is narrower than the gap
    assert all("rotate(-90" in (t.get("transform") or "") for t in labels)
    # Every rack keeps its name and maximum in a title (on its max line), labelled or not.
    titles = [t.text or "" for t in svg.iter(f"{SVG}title")]
    assert all(any(x.startswith(f"{r['name']}: max ") for x in titles) for r in racks)
    # The SVG is tall enough for the upright labels: the longest estimate below the axis.
    assert float(svg.get("height") or 0) >= 190 + len(racks[-1]["name"]) * R.CHAR_W


def test_short_rack_names_stay_across_and_long_ones_are_cut_on_the_axis() -> None:
    _, svg = _rack_plot(3, "r{}")
    labels = [t for t in svg.iter(f"{SVG}text") if t.get("class") == "rack-label"]
    assert [t.text for t in labels] == ["r1", "r2", "r3"] and not any(t.get("transform") for t in labels)
    assert sum(1 for t in svg.iter(f"{SVG}text") if (t.text or "").startswith("max ")) == 3  # under each label
    long = "hall-b-row-07-rack-0042-north-{}"
    _, svg = _rack_plot(2, long)
    labels = [t for t in svg.iter(f"{SVG}text") if t.get("class") == "rack-label"]
    assert all(len(t.text or "") == R.LABEL_CHARS and (t.text or "").endswith("\u2026") for t in labels)
    assert [t.find(f"{SVG}title").text.split(":")[0] for t in labels] == [long.format(1), long.format(2)]  # type: ignore[union-attr]


def test_finding_rows_keep_names_and_times_on_one_line_and_scroll_across() -> None:
    f = {"kind": "server", "target": EVIL, "check": "psu", "subject": "PSU2", "status": "critical", "message": "m",
         "first_seen": NOW, "new": False, "ack_id": 3, "ack_until": NOW, "ack_reason": "ticket"}  # fmt: skip
    html = R._finding_rows([f], {("server", EVIL): "p0"})
    assert html.startswith('<div class="tscroll"><table>') and html.endswith("</table></div>")
    p = _Tags()
    p.feed(html)
    td = [a.get("class") for t, a in p.tags if t == "td"]
    assert td == [None, "nw", None, None, "msg", "nw", "ackc"]  # the target, the time: one line
    name = next(a for t, a in p.tags if t == "span" and "tgt" in (a.get("class") or ""))
    assert name == {"class": "nm tgt", "data-panel": "p0", "title": EVIL}  # cut with an ellipsis, whole in the title
    assert '<span class="nw">acked until 2026-12-01 18:00:</span> ticket' in html


def test_the_filter_has_a_height_the_page_scrolls_below() -> None:
    css = R._CSS
    assert "html{scroll-padding-top:calc(var(--filter-h) + 8px)}" in css
    assert "height:var(--filter-h)" in css[css.index(".filter{") :].split("}")[0]
