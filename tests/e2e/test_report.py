"""`fleetctl report --html FILE`: the sweep report, opened in a real headless Chromium.

One lab (the example site) is swept twice: the first sweep finds a failed fan
on mn-tyo1-r13-02, then the fan is repaired, a PSU fails on mn-tyo1-r12-03,
a sensor runs hot on mn-tyo1-r13-05 and a known firmware finding is
acknowledged with a hostile reason (a script tag and an image on a loopback
URL). The report of that history is opened in Chromium with every request
that is not the file itself aborted and recorded: none may be attempted.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests_helpers_bmc import lab_db_of  # (path set in conftest)

from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "inventory" / "site-tyo1.yaml"
CHROMIUM = Path(os.environ.get("FLEETCTL_TEST_CHROMIUM", "/usr/lib/chromium/chromium"))
HOSTILE = '<script>window.__pwned=1</script><img src="http://127.0.0.1:9/pwned.png">'


def _run(*args: str) -> tuple[int, str, str]:
    """`fleetctl ARGS` in-process, as the `cli` fixture runs it (which a module-scoped fixture cannot use)."""
    r = run_cli(*args)
    return r.code, r.out, r.err


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The lab's database after two sweeps (the lab itself is down again by then)."""
    from fleetctl.store import reset_engines

    base = tmp_path_factory.mktemp("report-lab")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLEETCTL_LAB_DIR", str(base / "lab"))
        mp.setenv("FLEETCTL_DATA_DIR", str(base / "data"))
        mp.setenv("FLEETCTL_DB", str(base / "unused.db"))
        mp.setenv("FLEETCTL_ACTOR", "tester@ci")
        reset_engines()
        code, out, err = _run("lab", "up", "--site", str(SITE), "--no-hosts")
        assert code == 0, err
        db = lab_db_of(out)
        mp.setenv("FLEETCTL_DB", db)
        try:
            assert _run("lab", "fault", "mn-tyo1-r13-02", "--set", "fan_failed=true")[0] == 0
            code, _, err = _run("sweep")
            assert code in (1, 5), err  # new findings: the fan, and the lab's GPU firmware off its baseline
            assert _run("lab", "fault", "mn-tyo1-r13-02", "--clear")[0] == 0
            assert _run("lab", "fault", "mn-tyo1-r12-03", "--set", "psu_failed=true")[0] == 0
            assert _run("lab", "fault", "mn-tyo1-r13-05", "--set", "hot_sensor=true")[0] == 0
            code, _, err = _run("finding", "ack", "gpu-tyo1-r11-01:firmware.baseline:vbios", "--reason", HOSTILE)
            assert code == 0, err
            code, _, err = _run("sweep")
            assert code == 5, err  # a new critical finding: the PSU
        finally:
            assert _run("lab", "down")[0] == 0
            reset_engines()
        yield Path(db)
    reset_engines()


@pytest.fixture
def report(swept: Path, cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_DB", str(swept))
    out = tmp_path / "out" / "report.html"
    out.parent.mkdir()
    r = cli("report", "--html", str(out))
    assert r.code == 0, r.err
    return out, r.out


@pytest.mark.slow  # shares the lab's two sweeps: 10-20 s once for the three
def test_report_is_one_file_that_names_nothing_on_the_network(report: tuple[Path, str]) -> None:
    path, out = report
    from fleetctl.store import get_engine
    from fleetctl.sweep import history

    with get_engine().connect() as c:
        stored = len(history.findings(c, history.get_run(c)["id"]))
    assert stored >= 10  # the PSU, the hot sensor, the lab's GPU firmware
    assert out.strip() == f"report: {path} (31 servers, {stored} findings)"
    assert [p.name for p in path.parent.iterdir()] == ["report.html"]  # no temporary file left beside it
    html = path.read_text()
    # Nothing to fetch: no src/href to a URL, no @import or url() in the CSS (the SVG namespace is a name, not a fetch).
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not re.search(r"@import|url\(", html, re.I)
    assert "default-src 'none'" in html
    # The hostile ack reason is text, escaped, never markup.
    assert HOSTILE not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html


def _stored_findings(target: str) -> list[dict[str, Any]]:
    from fleetctl.store import get_engine
    from fleetctl.sweep import history

    with get_engine().connect() as c:
        return history.findings(c, history.get_run(c)["id"], target=target)


@pytest.fixture(scope="module")
def sync_api():  # type: ignore[no-untyped-def]
    """Playwright's sync API with a Chromium to drive, or a skip that says what is missing (before the lab starts)."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set FLEETCTL_TEST_CHROMIUM)")
    return pytest.importorskip("playwright.sync_api", reason="playwright is not installed in the venv")


@pytest.mark.slow  # shares the lab's two sweeps: 10-20 s once for the three
def test_report_in_a_real_browser(sync_api, report: tuple[Path, str], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, _ = report
    artifacts = Path(os.environ.get("FLEETCTL_TEST_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)

    attempted: list[str] = []
    errors: list[str] = []

    def guard(route) -> None:  # type: ignore[no-untyped-def]
        url = route.request.url
        if url.startswith(("file://", "data:")):
            route.continue_()
        else:
            attempted.append(url)
            route.abort()

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/*", guard)
            page.on("request", lambda r: None if r.url.startswith(("file://", "data:")) else attempted.append(r.url))
            page.on("pageerror", lambda e: errors.append(str(e)))
            # A fetch the page's own Content-Security-Policy refuses never reaches the route: Chromium logs it instead.
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(path.as_uri())
            page.wait_for_load_state("load")

            # The rack elevations: every server of the example site, coloured by its status.
            assert page.locator(".dev.server").count() == 31
            faulty = page.locator('.dev[data-name="mn-tyo1-r12-03"]')
            assert faulty.get_attribute("data-status") == "critical"
            assert "st-critical" in (faulty.get_attribute("class") or "")
            assert page.locator('.dev[data-name="mn-tyo1-r12-02"]').get_attribute("data-status") == "ok"
            assert page.locator('.dev[data-name="leaf-tyo1-r12-a"]').count() == 1  # switches have a place too

            # A click shows that server's findings, and only its.
            assert page.locator("#panels").is_hidden()
            faulty.click()
            panel = page.locator(".panel:visible")
            assert panel.count() == 1
            assert panel.get_attribute("data-name") == "mn-tyo1-r12-03"
            text = panel.inner_text()
            stored = _stored_findings("mn-tyo1-r12-03")
            assert {"psu", "psu.redundancy"} <= {f["check"] for f in stored}
            for f in stored:  # every finding of that server, with its message, and none of another's
                assert f"{f['check']}\t{f['subject']}\t{f['message']}" in text
            assert text.count("\ncritical\t") + text.count("\nwarning\t") == len(stored)
            page.locator('.dev[data-name="gpu-tyo1-r11-01"]').click()
            panel = page.locator(".panel:visible")
            assert panel.get_attribute("data-name") == "gpu-tyo1-r11-01"
            assert "acked" in panel.inner_text() and "window.__pwned=1" in panel.inner_text()  # shown as text
            assert page.evaluate("window.__pwned === undefined")  # and never run

            # The filter hides what does not match, devices and findings alike.
            page.fill("#filter", "psu")
            assert page.locator('.dev[data-name="mn-tyo1-r12-03"]').is_visible()
            assert page.locator('.dev[data-name="mn-tyo1-r12-02"]').is_hidden()
            assert page.locator('.dev[data-name="gpu-tyo1-r11-01"]').is_hidden()
            rows = page.locator("#findings tbody tr:visible")
            assert rows.count() >= 2 and all("mn-tyo1-r12-03" in t for t in rows.all_inner_texts())
            assert "1 of 42 devices match" in page.inner_text("#filter-count")
            page.fill("#filter", "")
            assert page.locator('.dev[data-name="mn-tyo1-r12-02"]').is_visible()

            # What changed since the sweep before: the PSU new, the fan resolved, the firmware persisting.
            new = page.locator("#changes-new + .tscroll table").inner_text()
            assert "mn-tyo1-r12-03" in new and "psu.redundancy" in new
            assert "mn-tyo1-r13-05" in new  # the hot sensor
            resolved = page.locator("#changes-resolved + .tscroll table").inner_text()
            assert "mn-tyo1-r13-02" in resolved and "fan" in resolved.lower()
            assert "firmware.baseline" in page.locator("#changes-persisting + .tscroll table").inner_text()

            # Firmware compliance: the lab's GPU servers run another vbios than their baseline.
            vbios = page.locator("#firmware tr", has_text="vbios")
            assert vbios.count() == 1
            cells = vbios.locator("td").all_inner_texts()
            assert cells[:7] == ["gpu-8x-a100", "vbios", "92.00.45.00.03", "0", "7", "0", "0"]

            # The plots are inline SVG, with a mark per server and a bar per day.
            assert page.locator("svg#plot-temps circle").count() == 31
            assert page.locator("svg#plot-per-day rect").count() >= 2
            assert page.locator("svg#plot-temps title", has_text="mn-tyo1-r13-05").count() == 1

            page.evaluate("window.scrollTo(0, 0)")
            shot = artifacts / "report.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
    assert attempted == [], f"the page tried to fetch: {attempted}"
    assert errors == [], f"script errors: {errors}"
    if os.environ.get("FLEETCTL_TEST_ARTIFACTS"):
        shutil.copy(path, artifacts / "report.html")


@pytest.mark.slow  # shares the lab's two sweeps: 10-20 s once for the three
def test_since_picks_the_baseline_and_the_window(swept: Path, cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FLEETCTL_DB", str(swept))
    out = tmp_path / "r.html"
    for since in ("today", "yesterday", "7d", "12h"):
        r = cli("report", "--since", since, "--html", str(out))
        assert r.code == 0, (since, r.err)
        html = out.read_text()
        assert "compared with sweep 1 " in html  # the first sweep since then: the lab's first
        assert "the first finished sweep since" in html
    assert "Findings per day, last 1 day<" in html  # 12h: the window is a day


@pytest.mark.parametrize("value", ["bogus", "2026-13-01", "0d", "-3d", "3x", "2999-01-01"])
def test_bad_since_is_one_line_naming_the_option(cli, tmp_path: Path, value: str) -> None:  # type: ignore[no-untyped-def]
    r = cli("report", "--since", value, "--html", str(tmp_path / "r.html"))
    assert r.code == 2
    assert ("'--since'" in r.err or r.err.startswith("error: --since: ")) and r.err.count("\n") == 1, r.err
    if value not in ("0d", "2999-01-01"):  # unreadable: the line says every form the option takes (fleetctl.cli.common.when)
        assert "a duration" in r.err and "yesterday" in r.err and "a date" in r.err, r.err
    assert not (tmp_path / "r.html").exists()


def test_no_sweep_yet_is_a_clear_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("report", "--html", str(tmp_path / "r.html"))
    assert r.code == 2
    assert r.err.strip() == "error: no finished sweep run yet: run `fleetctl sweep` first"
    assert not (tmp_path / "r.html").exists()


def test_html_must_be_in_an_existing_folder(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("report", "--html", str(tmp_path / "nowhere" / "r.html"))
    assert r.code == 2 and "--html" in r.err
