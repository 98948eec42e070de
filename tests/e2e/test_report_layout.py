"""The report's layout at 2,000 servers and 50 racks, measured in a real headless Chromium (#25 item 17).

The store is filled by ``report_scale_fleet.fill`` (a generated fleet and two
sweeps); the report is written by ``fleetctl report`` and opened at a laptop's
width (1,280 px), 1,400 px and 1,920 px. A script run in the page measures with
the DOM (getBoundingClientRect, ranges of text): every target name and time
in a findings table is one line high; in the device panel, the ack column is
wide enough to read and its right edge can be scrolled into view inside its
scroll container, which is inside the window; a rack header (and the device
panel) scrolled to is not under the sticky filter; the plot's rack labels do
not overlap. The rack axis is measured again at 200 racks. No request may
leave the page, and no script error may happen, as in test_report.py.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

CHROMIUM = Path(os.environ.get("FLEETCTL_TEST_CHROMIUM", "/usr/lib/chromium/chromium"))
WIDTHS = (1280, 1400, 1920)

# Measures the page; returns numbers, the test judges them. A cell's height in lines is the height of its
# text's boxes (a Range's client rects) over its line height: 1.0 on one line, 2.0 when it wraps once.
MEASURE = r"""
(acked) => {
  const lines = el => {
    const r = document.createRange(); r.selectNodeContents(el);
    const rs = [...r.getClientRects()].filter(x => x.width > 0 && x.height > 0);
    if (!rs.length) return 0;
    return (Math.max(...rs.map(x => x.bottom)) - Math.min(...rs.map(x => x.top))) / parseFloat(getComputedStyle(el).lineHeight);
  };
  const out = {vw: innerWidth, doc_w: document.documentElement.scrollWidth};

  // Names and times in every findings table: the page's, the changes', and (below) the panel's.
  const wrapped = [];
  let cells = 0;
  const oneLine = table => {
    const head = [...table.querySelectorAll('thead th')].map(th => th.textContent.trim());
    const cols = ['target', 'since', 'first seen'].map(h => head.indexOf(h)).filter(i => i >= 0);
    table.querySelectorAll('tbody tr').forEach(tr => {
      const tds = tr.querySelectorAll('td');
      cols.forEach(i => { cells++; const n = lines(tds[i]); if (n > 1.5) wrapped.push([tds[i].textContent, n]); });
    });
  };
  document.querySelectorAll('#findings table, #changes table').forEach(oneLine);

  // The device panel of a server with an acknowledged finding.
  const dev = document.querySelector('.dev[data-name="' + acked + '"]');
  dev.scrollIntoView(); dev.click();
  const panel = document.querySelector('.panel:not([hidden])');
  panel.querySelectorAll('table').forEach(oneLine);
  out.cells = cells; out.wrapped = wrapped.length; out.wrapped_sample = wrapped.slice(0, 5);
  const ackTd = panel.querySelector('.ack').closest('td');
  let box = ackTd.parentElement;  // the ack column's scroll container: the nearest ancestor that scrolls across
  while (box && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
  box = box || document.scrollingElement;
  box.scrollLeft = box.scrollWidth;  // as far right as it goes
  const a = ackTd.getBoundingClientRect(), b = box.getBoundingClientRect();
  out.ack = {left: a.left, right: a.right, width: a.width, lines: lines(ackTd),
             box_left: b.left, box_right: b.right, box: box.id || box.className || box.tagName};
  box.scrollLeft = 0;

  // A rack header, and the panel (a target's name clicked in a table scrolls to it), after scrolling to them.
  const filter = () => document.querySelector('.filter').getBoundingClientRect().bottom;
  const headers = [...document.querySelectorAll('.rack h3')];
  out.headers = [headers[0], headers[Math.floor(headers.length / 2)], headers[headers.length - 1]].map(h => {
    h.scrollIntoView();
    return {name: h.textContent, top: h.getBoundingClientRect().top, filter: filter(), lines: lines(h)};
  });
  document.querySelector('#findings .tgt').click();
  out.panel = {top: document.querySelector('#panels h2').getBoundingClientRect().top, filter: filter()};

  // The temperature plot's labels under the axis (rack names, and any other text there).
  out.plot = measurePlot(document.getElementById('plot-temps'));
  return out;
}
"""

# Shared with the 200-rack page: every text below the x axis (rack labels, "max" lines) and the boxes that meet.
MEASURE_PLOT = r"""
() => { window.measurePlot = svg => {
  svg.scrollIntoView();
  const axisY = svg.getBoundingClientRect().top + 190;  // the plot's x axis (y0 in temperature_svg)
  const s = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')].filter(t => t.getBoundingClientRect().top >= axisY - 2);
  const boxes = texts.map(t => t.getBoundingClientRect());
  const meet = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const p = boxes[i], q = boxes[j];
    if (p.left < q.right - 0.5 && q.left < p.right - 0.5 && p.top < q.bottom - 0.5 && q.top < p.bottom - 0.5)
      meet.push([texts[i].firstChild.textContent, texts[j].firstChild.textContent]);
  }
  const titles = [...svg.querySelectorAll('title')].map(t => t.textContent);
  return {texts: texts.length, labelled: texts.map(t => t.firstChild.textContent), overlaps: meet.length, sample: meet.slice(0, 5),
          outside: boxes.filter(b => b.bottom > s.bottom + 0.5 || b.top < s.top - 0.5).length, titles: titles};
}; }
"""


@pytest.fixture(scope="module")
def sync_api():  # type: ignore[no-untyped-def]
    """Playwright's sync API with a Chromium to drive, or a skip that says what is missing."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set FLEETCTL_TEST_CHROMIUM)")
    return pytest.importorskip("playwright.sync_api", reason="playwright is not installed in the venv")


@pytest.fixture(scope="module")
def big_report(sync_api, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:  # type: ignore[no-untyped-def]
    """`fleetctl report` of a 2,000-server, 50-rack store with two sweeps."""
    from report_scale_fleet import fill  # (tests/e2e is on the path: conftest)

    from fleetctl.store import reset_engines

    base = tmp_path_factory.mktemp("report-scale")
    db = base / "fleet.db"
    info = fill(f"sqlite:///{db}", servers=2000, racks=50, now=dt.datetime.now(dt.UTC))
    out = base / "report.html"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLEETCTL_DB", str(db))
        mp.setenv("FLEETCTL_DATA_DIR", str(base / "data"))
        reset_engines()
        r = run_cli("report", "--html", str(out))
        reset_engines()
    assert r.code == 0, r.err
    assert r.out.strip().startswith(f"report: {out} (2000 servers, ")
    yield out, info


@contextmanager
def _open(sync_api, width: int) -> Iterator[tuple[Any, list[str], list[str]]]:  # type: ignore[no-untyped-def]
    """A page of that width that lets only file: and data: URLs load, recording any other request and any error."""
    attempted: list[str] = []
    errors: list[str] = []

    def guard(route) -> None:  # type: ignore[no-untyped-def]
        if route.request.url.startswith(("file://", "data:", "about:")):
            route.continue_()
        else:
            attempted.append(route.request.url)
            route.abort()

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.route("**/*", guard)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            yield page, attempted, errors
        finally:
            browser.close()


@pytest.mark.slow  # ~2 s to fill the store and write the report, ~3 s per width in Chromium
@pytest.mark.parametrize("width", WIDTHS)
def test_layout_at_2000_servers(sync_api, big_report: tuple[Path, dict[str, Any]], width: int, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, info = big_report
    with _open(sync_api, width) as (page, attempted, errors):
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        page.evaluate(MEASURE_PLOT)
        m = page.evaluate(MEASURE, info["acked"])
        artifacts = os.environ.get("FLEETCTL_TEST_ARTIFACTS")
        if artifacts:
            Path(artifacts).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(artifacts) / f"report-2000-{width}.png"))
    assert attempted == [] and errors == [], (attempted, errors)

    # Names and times: one line each, in every table (hundreds of cells).
    assert m["cells"] > 400
    assert m["wrapped"] == 0, f"{m['wrapped']} of {m['cells']} name/time cells wrap, e.g. {m['wrapped_sample']}"

    # The ack column: readable (not squeezed to a sliver), and its right edge reachable inside its scroll
    # container, which is itself inside the window (nothing is cut at the window's edge).
    ack = m["ack"]
    assert ack["width"] >= 160 and ack["lines"] <= 5, ack
    assert ack["box_left"] - 1 <= ack["left"] and ack["right"] <= ack["box_right"] + 1, ack
    assert ack["box_left"] >= 0 and ack["box_right"] <= m["vw"], ack
    assert m["doc_w"] <= m["vw"], "the page itself scrolls sideways"

    # Rack headers and the panel, scrolled to, are below the sticky filter; a header is one line.
    for h in m["headers"]:
        assert h["top"] >= h["filter"], f"rack header {h['name']} under the filter: {h}"
        assert h["lines"] <= 1.5, h
    assert m["panel"]["top"] >= m["panel"]["filter"], m["panel"]

    # The plot's rack labels: one per rack at 50 racks, no two boxes meet, none cut by the plot's edge.
    plot = m["plot"]
    assert plot["overlaps"] == 0, f"{plot['overlaps']} overlapping labels, e.g. {plot['sample']}"
    assert set(info["racks"]) <= set(plot["labelled"]), "a rack has no label at 50 racks"
    assert plot["outside"] == 0, plot


@pytest.mark.slow  # ~3 s in Chromium
def test_rack_labels_at_200_racks_are_thinned_and_apart(sync_api) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.report_html import BASE_CSS
    from fleetctl.sweep import report as R

    racks = [{"name": f"tyo1-hall-b-r{i:03d}"} for i in range(1, 201)]
    targets = [{"kind": "server", "name": f"mn-{r['name']}-{j:02d}", "rack": r["name"], "status": "ok",
                "metrics": {"max_temp_c": 40 + (i * 7 + j) % 30}} for i, r in enumerate(racks) for j in range(4)]  # fmt: skip
    html = (f'<!DOCTYPE html><html><head><meta charset="utf-8"><style>{BASE_CSS}</style></head><body>'
            f'<div class="plot">{R.temperature_svg(targets, racks)}</div></body></html>')  # fmt: skip
    with _open(sync_api, 1280) as (page, attempted, errors):
        page.set_content(html)
        page.evaluate(MEASURE_PLOT)
        plot = page.evaluate("measurePlot(document.getElementById('plot-temps'))")
    assert attempted == [] and errors == [], (attempted, errors)
    assert plot["overlaps"] == 0, f"{plot['overlaps']} overlapping labels, e.g. {plot['sample']}"
    assert plot["outside"] == 0, plot
    assert 100 <= len(plot["labelled"]) < 200  # thinned: every other rack named on the axis
    assert all(any(t.startswith(f"{r['name']}: max") for t in plot["titles"]) for r in racks)  # every rack named in a title
