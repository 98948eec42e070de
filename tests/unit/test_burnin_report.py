"""The burn-in report page on a hand-made run: verdicts, reasons, plots, history, the RMA list, escaping, no network."""

from __future__ import annotations

import datetime as dt
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from fleetctl.burnin.report import render
from fleetctl.errors import NotFound

EVIL = '<script>alert(1)</script>"&\'<marquee id="evil">'
T0 = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
SVG_NS = "{http://www.w3.org/2000/svg}"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _host(n: int, temp0: float, *, clock: bool = True) -> list[dict[str, Any]]:
    return [{"t": 10.0 * i, "source": "host", "temp_c": temp0 + i, "power_w": 300.0 + 5 * i, **({"clock_mhz": 1500.0} if clock else {})}
            for i in range(n)]  # fmt: skip


def _bmc(n: int) -> list[dict[str, Any]]:
    return [{"t": 15.0 * i, "source": "bmc", "sensor": sensor, "temp_c": base + i}
            for i in range(n) for sensor, base in (("CPU0 Temp", 50.0), ("Inlet", 24.0))]  # fmt: skip


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A migrated SQLite store with no burn-in yet."""
    from fleetctl.store import get_engine

    return get_engine(f"sqlite:///{tmp_path / 'b.db'}")


def _run(engine: Any, at: dt.datetime, results: list[dict[str, Any]], **run: Any) -> int:
    from fleetctl.models import BurninResult, BurninRun
    from fleetctl.store import session

    with session(str(engine.url)) as s:
        r = BurninRun(started_at=at, finished_at=at + dt.timedelta(minutes=12), state="finished", kind="mncore", level="standard",
                      duration_s=600.0, actor="tester@ci", host="ops-1", servers=sorted({x["server"] for x in results}), **run)  # fmt: skip
        s.add(r)
        s.flush()
        for x in results:
            s.add(BurninResult(run_id=r.id, started_at=at, finished_at=at + dt.timedelta(minutes=11), **x))
        return int(r.id or 0)


FAIL_MSG = "throughput 41% of expected (below the 70% fail line)"


def _latest_results() -> list[dict[str, Any]]:
    return [
        {"server": "mn-01", "serial": "MNC-PASS-1", "device": "mnc0", "slot": 0, "model": "MN-Core 2", "verdict": "pass",
         "metrics": {"throughput": 98.5, "unit": "TFLOPS", "throughput_fraction": 0.99, "max_temp_c": 71.0, "samples": 6},
         "telemetry": _host(6, 60.0) + _bmc(4)},
        {"server": "mn-01", "serial": "MNC-DEG-2", "device": "mnc1", "slot": 1, "model": "MN-Core 2", "verdict": "degraded",
         "reasons": [{"criterion": "temperature", "severity": "degraded", "message": "ran at 88 °C (degraded above 85)",
                      "evidence": {"max_temp_c": 88.0}}],
         "metrics": {"throughput": 95.0, "unit": "TFLOPS", "max_temp_c": 88.0}, "telemetry": _host(5, 80.0, clock=False)},
        {"server": "mn-02", "serial": "MNC-FAIL-3", "device": "mnc0", "slot": 0, "model": "MN-Core 2", "verdict": "fail",
         "reasons": [{"criterion": "throughput", "severity": "fail", "message": FAIL_MSG,
                      "evidence": {"throughput": 40.6, "expected": 99.0, "log": "<b>ecc</b> storm"}},
                     {"criterion": "host", "severity": "note", "message": "kernel 6.8"}],
         "metrics": {"throughput": 40.6, "unit": "TFLOPS", "throughput_fraction": 0.41, "memory_errors": 12},
         "telemetry": _host(8, 70.0) + _bmc(6)},
        {"server": EVIL, "serial": EVIL, "device": "mnc0", "slot": 0, "model": "MN-Core 2", "verdict": "pass",
         "metrics": {"throughput": 97.0}, "telemetry": []},
        {"server": "mn-03", "serial": None, "device": "", "slot": None, "verdict": "error",
         "reasons": [{"criterion": "host", "severity": "error", "message": "ssh: connection refused", "evidence": {}}]},
    ]


@pytest.fixture
def page(store: Any) -> str:
    from fleetctl.models import BoardRma
    from fleetctl.store import session

    earlier = {"server": "mn-02", "serial": "MNC-FAIL-3", "device": "mnc0", "slot": 0, "verdict": "pass", "metrics": {"throughput": 97.25}}
    _run(store, T0 - dt.timedelta(days=7), [earlier])
    latest = _run(store, T0, _latest_results())
    with session(str(store.url)) as s:
        s.add(BoardRma(serial="MNC-FAIL-3", kind="mncore", model="MN-Core 2", server="mn-02", slot=0, source=f"burnin:{latest}",
                       reason=FAIL_MSG, evidence={"throughput": 40.6}, actor="tester@ci"))  # fmt: skip
        s.add(BoardRma(serial="OLD-1", kind="mncore", server="mn-09", reason="shipped", closed_at=T0, closed_reason="shipped"))
    with store.connect() as c:
        return render(c)


def _board(html: str, anchor_of: str) -> str:
    """The board's section of the page, from its heading to the next board's."""
    start = html.index(f">{anchor_of} <span class=\"badge")
    end = html.find('<div class="board ', start)
    return html[start : end if end > 0 else len(html)]


def test_every_board_with_its_verdict_worst_first(page: str) -> None:
    boards = page[page.index('id="boards"') : page.index('id="rma"')]
    order = [boards.index(f">{name} <span") for name in ("MNC-FAIL-3", "server mn-03", "MNC-DEG-2", "MNC-PASS-1")]
    assert order == sorted(order)
    for name, verdict in (("MNC-FAIL-3", "fail"), ("server mn-03", "error"), ("MNC-DEG-2", "degraded"), ("MNC-PASS-1", "pass")):
        assert f'>{name} <span class="badge st-{verdict}">{verdict}</span>' in boards
    assert 'class="card fail"><b>1</b>fail' in page and 'class="card pass"><b>2</b>pass' in page
    assert 'class="card degraded"><b>1</b>' in page and 'class="card error"><b>1</b>' in page
    assert "mncore burn-in, level standard, workload 600 s" in page and "by tester@ci on ops-1" in page


def test_reasons_evidence_plots_and_history(page: str) -> None:
    fail = _board(page, "MNC-FAIL-3")
    assert FAIL_MSG in fail and "expected: 99.0" in fail and "&lt;b&gt;ecc&lt;/b&gt; storm" in fail
    assert fail.index(FAIL_MSG) < fail.index("kernel 6.8")  # the failing criterion before the note
    # Telemetry: a plot per value the samples carry; the host's line and one per BMC sensor.
    svgs = re.findall(r"<svg.*?</svg>", fail, re.S)
    assert len(svgs) == 3  # temperature, power, clock
    temp = ET.fromstring(svgs[0])
    names = [t.text for t in temp.iter(f"{SVG_NS}title")]
    assert len(temp.findall(f"{SVG_NS}polyline")) == 3
    assert [n.split(":")[0] for n in names if n] == ["host", "BMC CPU0 Temp", "BMC Inlet"]
    # History: the earlier pass, then this run's fail.
    hist = fail[fail.index("<h4>History</h4>") :]
    assert hist.index("st-pass") < hist.index("st-fail") and "97.25" in hist
    # The degraded board has no clock samples: temperature and power only; its reason is there.
    deg = _board(page, "MNC-DEG-2")
    assert len(re.findall(r"<svg", deg)) == 2 and "ran at 88 °C" in deg and "No earlier burn-in" in deg
    # A board without telemetry says so; the server that could not run shows why.
    assert "No telemetry stored" in page and "ssh: connection refused" in page


def test_open_rma_list(page: str) -> None:
    rma = page[page.index('id="rma"') :]
    assert "MNC-FAIL-3" in rma and FAIL_MSG in rma and "OLD-1" not in rma
    assert 'class="card"><b>1</b>boards to ship back' in page


def test_every_stored_text_is_escaped(page: str) -> None:
    assert EVIL not in page and "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    p = _Tags()
    p.feed(page)
    tags = [t for t, _ in p.tags]
    assert "script" not in tags and "marquee" not in tags and "<b>ecc" not in page
    assert not any(a.get("id") == "evil" for _, a in p.tags)


def test_self_contained(page: str) -> None:
    # The only URL on the page is the SVG namespace, a name, never fetched.
    rest = page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/|@import|url\(", rest, re.I)
    assert "default-src 'none'" in page
    p = _Tags()
    p.feed(page)
    for tag, attrs in p.tags:
        for k in ("src", "href"):
            v = attrs.get(k)
            assert v is None or v.startswith(("#", "data:")), (tag, k, v)


def test_an_earlier_run_by_number(store: Any) -> None:
    first = _run(store, T0 - dt.timedelta(days=7), [{"server": "mn-02", "serial": "MNC-X", "device": "mnc0", "slot": 0, "verdict": "pass"}])
    _run(store, T0, [{"server": "mn-02", "serial": "MNC-Y", "device": "mnc0", "slot": 0, "verdict": "fail"}])
    with store.connect() as c:
        html = render(c, first)
        latest = render(c)
    assert f"burn-in report: run {first}" in html and "MNC-X" in html and "MNC-Y" not in html
    assert "MNC-Y" in latest and "None open." in latest
    with store.connect() as c, pytest.raises(NotFound, match="no burn-in run 999"):
        render(c, 999)


def test_no_run_is_not_found(store: Any) -> None:
    with store.connect() as c, pytest.raises(NotFound, match="no burn-in has run yet"):
        render(c)
