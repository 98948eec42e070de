"""Issue #13: bad values are refused where they enter (options, environment, site files).

Each test asserts exit 2, one line naming the option, variable or file:line,
and, for the inventory, that nothing was stored.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "inventory"))

from invtest_sites import BASE, line_of, replace_once


def _one_line_error(r) -> str:  # type: ignore[no-untyped-def]
    assert r.code == 2, (r.out, r.err)
    err = r.err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


@pytest.fixture
def loaded(tmp_path, cli):  # type: ignore[no-untyped-def]
    """BASE imported into the test's SQLite store; returns a function giving the export."""
    base = tmp_path / "base.yaml"
    base.write_text(BASE, encoding="utf-8")
    assert cli("inventory", "import", str(base)).code == 0

    def export() -> str:
        r = cli("inventory", "export")
        assert r.code == 0, r.err
        return str(r.out)

    return export


def _import(tmp_path, cli, text: str, name: str = "bad.yaml"):  # type: ignore[no-untyped-def]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path, cli("inventory", "import", str(path))


# -- site files: control characters ------------------------------------------


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f"], ids=["nul", "bel", "esc", "del"])
def test_control_character_names_file_line_and_column(tmp_path, cli, loaded, char):
    before = loaded()
    text = replace_once(BASE, "      serial: SER-2\n", f"      serial: SER{char}-2\n")
    path, r = _import(tmp_path, cli, text)
    err = _one_line_error(r)
    line = line_of(text, f"serial: SER{char}")
    assert f"{path}:{line}:18: control character U+{ord(char):04X}" in err, err
    assert loaded() == before


# -- CLI numeric options ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option", "fragment"),
    [
        (["events", "list", "--limit", "-1"], "--limit", "greater than or equal to 1"),
        (["jobs", "list", "--limit", "0"], "--limit", "greater than or equal to 1"),
        (["power", "on", "all", "--stagger", "-1"], "--stagger", "-1 is not a finite number >= 0"),
        (["power", "on", "all", "--stagger", "nan"], "--stagger", "nan is not a finite number >= 0"),
        (["power", "on", "all", "--stagger", "inf"], "--stagger", "inf is not a finite number >= 0"),
        (["server", "health", "all", "--max-skew", "nan"], "--max-skew", "nan is not a finite number"),
        (["switch", "poll", "all", "--interval", "inf"], "--interval", "inf is not a finite number"),
        (["switch", "poll", "all", "--max-temp", "0"], "--max-temp", "0 is not a finite number > 0"),
        (["rack", "add", "r9", "--site", "lab1", "--height", "-1"], "--height", ""),
        (["rack", "set", "r1", "--power-budget", "-5"], "--power-budget", ""),
        (["server", "set", "s1", "--position", "-1"], "--position", ""),
        (["board", "set", "B-1", "--slot", "-1"], "--slot", ""),
        (["switch", "vlan", "set", "sw1", "Ethernet1", "--access", "0"], "--access", ""),
        (["sweep", "s1", "--timeout", "inf"], "--timeout", "inf is not a finite number >= 1"),
        (["sweep", "s1", "--request-timeout", "nan"], "--request-timeout", "nan is not a finite number >= 0.1"),
        (["sweep", "s1", "--max-skew", "inf"], "--max-skew", "inf is not a finite number >= 0"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_bad_numeric_option_is_refused_naming_it(cli, loaded, args, option, fragment):
    before = loaded()
    r = cli(*args)
    assert r.code == 2, (r.out, r.err)
    assert len(r.err.splitlines()) == 1, r.err  # one line: no usage block before it
    error = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(error) == 1, r.err
    assert f"Invalid value for '{option}'" in error[0], r.err
    assert fragment in error[0], r.err
    assert "Traceback" not in r.err
    assert loaded() == before


# -- numbers from the environment ----------------------------------------------------


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("FLEETCTL_BMC_TIMEOUT", "-1", "FLEETCTL_BMC_TIMEOUT=-1: must be a number of seconds > 0"),
        ("FLEETCTL_BMC_TIMEOUT", "0", "FLEETCTL_BMC_TIMEOUT=0: must be a number of seconds > 0"),
        ("FLEETCTL_BMC_TIMEOUT", "nan", "FLEETCTL_BMC_TIMEOUT=nan: must be a number of seconds > 0"),
        ("FLEETCTL_BMC_TIMEOUT", "inf", "FLEETCTL_BMC_TIMEOUT=inf: must be a number of seconds > 0"),
        ("FLEETCTL_BMC_TIMEOUT", "soon", "FLEETCTL_BMC_TIMEOUT=soon: must be a number of seconds > 0"),
        ("FLEETCTL_BMC_RETRIES", "-3", "FLEETCTL_BMC_RETRIES=-3: must be a whole number of retries"),
        ("FLEETCTL_BMC_RETRIES", "two", "FLEETCTL_BMC_RETRIES=two: must be a whole number of retries"),
        ("FLEETCTL_BMC_AUTH", "basci", "FLEETCTL_BMC_AUTH=basci: must be one of session, basic"),
    ],
)
def test_bad_number_in_the_environment_is_refused_before_any_bmc(cli, loaded, monkeypatch, env, value, message):
    monkeypatch.setenv(env, value)
    err = _one_line_error(cli("power", "status", "s1", "s2"))
    assert f"error: {message}" in err, err
    # The sweep too: one line, exit 2, and no run begun (it was a shard that could not be read, exit 1).
    err = _one_line_error(cli("sweep", "all"))
    assert f"error: {message}" in err, err
    monkeypatch.delenv(env)
    runs = cli("sweep", "list", "-o", "json")
    assert runs.code == 0 and json.loads(runs.out) == [], runs.out


def test_numbers_from_the_environment_parse_when_good(monkeypatch):
    from fleetctl.config import bmc_limits

    monkeypatch.delenv("FLEETCTL_BMC_TIMEOUT", raising=False)
    monkeypatch.delenv("FLEETCTL_BMC_RETRIES", raising=False)
    assert bmc_limits() == {}
    monkeypatch.setenv("FLEETCTL_BMC_TIMEOUT", " 2.5 ")
    monkeypatch.setenv("FLEETCTL_BMC_RETRIES", "0")
    assert bmc_limits() == {"timeout": 2.5, "retries": 0}


# -- site files: values the schema refuses ------------------------------------------

_PROV = "  provisioning:\n    vlan: 200\n    boot: pxe\n    firmware_images: https://fw.lab1.example/firmware\n"


def _with_prov(extra: str) -> str:
    return replace_once(BASE, "- name: lab1\n", "- name: lab1\n" + _PROV + extra)


@pytest.mark.parametrize(
    ("text", "needle", "field", "fragment"),
    [
        (replace_once(BASE, "  model: S2\n  height: 2\n", "  model: S2\n  height: true\n"),
         "height: true", "models[1].height", "valid integer, not true"),
        (replace_once(BASE, "      position: 2\n", "      position: yes\n"),
         "position: yes", "sites[0].racks[0].servers[1].position", "valid integer, not true"),
        (replace_once(BASE, "    height: 10\n", "    height: 10\n    power_budget: false\n"),
         "power_budget: false", "sites[0].racks[0].power_budget", "valid integer, not false"),
        (replace_once(BASE, "        slot: 1\n", "        slot: on\n"),
         "slot: on", "sites[0].racks[0].servers[0].boards[1].slot", "valid integer, not true"),
        (replace_once(BASE, "    nic: eth0\n    vlans:\n    - 100\n  - switch", "    nic: eth0\n    vlans:\n    - true\n  - switch"),
         "- true", "sites[0].cabling[0].vlans[0]", "valid integer, not true"),
        (replace_once(BASE, "- name: lab1\n", "- name: lab1\n  description: " + "x" * 4097 + "\n"),
         "description: xxx", "sites[0].description", "at most 4096 characters"),
        (replace_once(BASE, "  vendor: Acme\n  model: S2\n", "  vendor: " + "A" * 256 + "\n  model: S2\n"),
         "vendor: AAA", "models[1].vendor", "at most 255 characters"),
        (replace_once(BASE, "      serial: SER-2\n", '      serial: "SER\\0-2"\n'),
         "serial: \"SER", "sites[0].racks[0].servers[1].serial", "control character U+0000"),
        (_with_prov("    firmware_template: '{base}/{id:>999999999}'\n"),
         "firmware_template:", "sites[0].provisioning.firmware_template", "{id:>999999999}: a format spec or conversion is not allowed"),
        (_with_prov("    firmware_template: '{base}/{id!r}-{version}.bin'\n"),
         "firmware_template:", "sites[0].provisioning.firmware_template", "{id!r}: a format spec or conversion is not allowed"),
        (_with_prov("    firmware_template: '{base}/{version[0]}.bin'\n"),
         "firmware_template:", "sites[0].provisioning.firmware_template", "not {version[0]}"),
        (_with_prov("    firmware_template: '{base}/{}.bin'\n"),
         "firmware_template:", "sites[0].provisioning.firmware_template", "not {}"),
    ],
    ids=["height-true", "position-yes", "power-budget-false", "slot-on", "vlan-true", "description-4097", "vendor-256",
         "escaped-nul", "template-format-spec", "template-conversion", "template-index", "template-positional"],
)  # fmt: skip
def test_bad_value_in_a_site_file_names_file_line_field(tmp_path, cli, loaded, text, needle, field, fragment):
    before = loaded()
    path, r = _import(tmp_path, cli, text)
    err = _one_line_error(r)
    assert f"{path}:{line_of(text, needle)}: {field}: " in err, err
    assert fragment in err, err
    assert loaded() == before


def test_description_at_the_limit_and_a_good_template_are_stored(tmp_path, cli, loaded):
    text = replace_once(_with_prov("    firmware_template: '{base}/{component}/{id}-{version}.bin'\n"),
                        "- name: lab1\n", "- name: lab1\n  description: " + "x" * 4096 + "\n")  # fmt: skip
    _, r = _import(tmp_path, cli, text)
    assert r.code == 0, r.err
    assert "x" * 4096 in loaded()


@pytest.mark.parametrize(
    ("args", "option"),
    [(["site", "set", "lab1", "--description", "x" * 50_000], "--description"),
     (["site", "add", "lab9", "--description", "x" * 4097], "--description"),
     (["site", "set", "lab1", "--description", "new", "--reason", "x" * 50_000], "--reason"),
     (["server", "set-state", "s1", "inspected", "--reason", "x" * 4097], "--reason"),
     (["board", "set", "B-1", "--model", "M2", "--reason", "bad\x00reason"], "--reason")],
    ids=["site-set-description", "site-add-description", "reason", "set-state-reason", "reason-nul"],
)  # fmt: skip
def test_free_text_options_are_limited_and_nothing_is_stored(cli, loaded, args, option):
    before = loaded()
    events = cli("events", "list", "-o", "json").out
    r = cli(*args)
    assert r.code == 2, (r.out, r.err)
    assert len(r.err.splitlines()) == 1, r.err  # one line: no usage block before it
    error = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and f"Invalid value for '{option}'" in error[0], r.err
    assert "at most 4096" in error[0] or "control character U+0000" in error[0], r.err
    assert loaded() == before
    assert cli("events", "list", "-o", "json").out == events


# -- the database setting ----------------------------------------------------------


@pytest.mark.parametrize("how", ["env", "option"])
def test_a_database_path_that_is_not_a_database_is_refused_and_nothing_is_created(cli, tmp_path, monkeypatch, how):
    monkeypatch.chdir(tmp_path)
    if how == "env":
        monkeypatch.setenv("FLEETCTL_DB", "garbage")
        r, named = cli("site", "list"), "FLEETCTL_DB=garbage"
    else:
        r, named = cli("--db", "garbage", "site", "list"), "--db garbage"
    err = _one_line_error(r)
    assert f"error: {named}: no such database file; give a path ending in .db to create one, or a URL" in err, err
    assert not (tmp_path / "garbage").exists()


def test_a_folder_as_the_database_is_refused(cli, tmp_path, monkeypatch):
    (tmp_path / "base.yaml").write_text(BASE, encoding="utf-8")
    monkeypatch.setenv("FLEETCTL_DB", str(tmp_path))
    err = _one_line_error(cli("inventory", "import", str(tmp_path / "base.yaml")))
    assert f"FLEETCTL_DB={tmp_path}: is a folder, not a database file" in err, err


@pytest.mark.parametrize("name", ["new.db", "new.sqlite", "new.sqlite3"])
def test_a_new_database_needs_a_database_ending(cli, tmp_path, monkeypatch, name):
    monkeypatch.setenv("FLEETCTL_DB", str(tmp_path / "sub" / name))
    assert cli("site", "list").code == 0
    assert (tmp_path / "sub" / name).is_file()


def test_an_existing_file_and_a_url_are_taken_as_they_are(cli, tmp_path, monkeypatch):
    import sqlite3

    sqlite3.connect(tmp_path / "fleet-inventory").close()  # an existing file, whatever its name
    monkeypatch.setenv("FLEETCTL_DB", str(tmp_path / "fleet-inventory"))
    assert cli("site", "list").code == 0
    monkeypatch.setenv("FLEETCTL_DB", f"sqlite:///{tmp_path / 'url-named'}")
    assert cli("site", "list").code == 0


# -- output formats a command does not have ------------------------------------------


def test_inventory_import_refuses_csv_and_stores_nothing(tmp_path, cli, loaded):
    before = loaded()
    text = replace_once(BASE, "      serial: SER-2\n", "      serial: SER-22\n")
    path = tmp_path / "changed.yaml"
    path.write_text(text, encoding="utf-8")
    r = cli("inventory", "import", "-o", "csv", str(path))
    assert r.code == 2, (r.out, r.err)
    assert r.out == ""
    assert len(r.err.splitlines()) == 1, r.err  # one line: no usage block before it
    error = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "'--output' / '-o'" in error[0] and "'csv' is not one of 'table', 'json', 'yaml'" in error[0], r.err
    assert loaded() == before


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [("--stagger", "inf", "--stagger: inf is not a finite number >= 0"),
     ("--stagger", "-1", "--stagger: -1.0 is not a finite number >= 0"),
     ("--ansible-window", "inf", "--ansible-window: inf is not a finite number >= 0"),
     ("--poll", "nan", "--poll: nan is not a finite number > 0"),
     ("--concurrency", "0", "--concurrency: 0 is not a finite number >= 1")],
)  # fmt: skip
def test_provision_refuses_bad_numbers_before_anything(cli, loaded, option, value, message):
    before = loaded()
    err = _one_line_error(cli("provision", "s1", "--dry-run", option, value))
    assert f"error: {message}" in err, err
    assert loaded() == before


# -- provision --dry-run shows the firmware image URLs the template renders -------------


def test_provision_dry_run_renders_the_firmware_template():
    import asyncio
    from contextlib import asynccontextmanager
    from types import SimpleNamespace

    from fleetctl.interfaces.bmc import PowerState
    from fleetctl.workflows.provision.plan import plan_server

    comps = [SimpleNamespace(id="BMC", name="BMC", version="1.0"), SimpleNamespace(id="BIOS", name="BIOS", version="2.0")]

    async def inventory():  # type: ignore[no-untyped-def]
        return comps

    async def state():  # type: ignore[no-untyped-def]
        return PowerState.OFF

    bmc = SimpleNamespace(firmware=SimpleNamespace(inventory=inventory), power=SimpleNamespace(state=state))

    @asynccontextmanager
    async def open_bmc(ctx):  # type: ignore[no-untyped-def]
        yield bmc

    prov = {"vlan": 200, "boot": "pxe", "firmware_images": "https://fw.lab1.example/fw",
            "firmware_template": "{base}/{component}/{id}-{version}.bin", "k8s": None}  # fmt: skip
    ctx = SimpleNamespace(prov=prov, baseline={"BMC": "1.1", "BIOS": "2.0"}, bios=None, ports=[], site="lab1",
                          groups=[], board_kind=None, board_count=0)  # fmt: skip
    seen: dict[str, object] = {}
    run = SimpleNamespace(ctx={"s1": ctx}, bmc=open_bmc, update=lambda name, **kw: seen.update(kw))
    asyncio.run(plan_server(run, "s1"))  # type: ignore[arg-type]
    assert seen["result"] == "planned", seen
    plan = seen["plan"]
    assert plan["firmware"] == ["BMC 1.0 -> 1.1"]  # type: ignore[index]
    assert plan["firmware_images"] == ["https://fw.lab1.example/fw/BMC/BMC-1.1.bin"]  # type: ignore[index]


def test_an_empty_import_path_is_refused_not_read_as_the_working_folder(cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "site.yaml").write_text("not: a site\n")  # would be read if "" meant "."
    r = cli("inventory", "import", "")
    assert r.code == 2 and "PATH is empty" in r.err, r.err
