"""Delivery sheets (hand-made: no vendor publishes one): columns by header in any order, strict rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetctl.discovery.expect import parse_sheet, read_sheet
from fleetctl.errors import InputError


def test_columns_in_any_order_spellings_and_extra_columns() -> None:
    text = "PO,Model,BMC MAC,Asset tag,Serial Number\n4711,XE9680,AA-BB-CC-00-00-01,A1,SN1\n4711,,aabb.cc00.0002,A2,SN2\n"
    rows = parse_sheet(text, "sheet.csv")
    assert [(r.serial, r.bmc_mac, r.model, r.line) for r in rows] == [
        ("SN1", "aa:bb:cc:00:00:01", "XE9680", 2),
        ("SN2", "aa:bb:cc:00:00:02", None, 3),
    ]


def test_a_spreadsheet_bom_is_not_part_of_the_first_header(tmp_path: Path) -> None:
    p = tmp_path / "sheet.csv"
    p.write_bytes("\ufeffserial,bmc_mac\nSN1,aa:bb:cc:00:00:01\n".encode())
    assert [r.serial for r in read_sheet(p)] == ["SN1"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("serial,model\nSN1,X\n", "sheet.csv:1: the header has no bmc_mac column (columns: 'serial', 'model')"),
        ("mac,model\n", "sheet.csv:1: the header has no serial and no bmc_mac column"),
        ("serial,bmc_mac\nSN1,aa:bb:cc:00:00:0g\n", "sheet.csv:2: bmc_mac: 'aa:bb:cc:00:00:0g' is not a MAC address"),
        ("serial,bmc_mac\n,aa:bb:cc:00:00:01\n", "sheet.csv:2: serial: empty"),
        ("serial,bmc_mac\nSN1,aa:bb:cc:00:00:01\nSN1,aa:bb:cc:00:00:02\n", "sheet.csv:3: serial: serial SN1 is also on line 2"),
        ("serial,bmc_mac\nSN1,aa:bb:cc:00:00:01\nSN2,AA:BB:CC:00:00:01\n",
         "sheet.csv:3: bmc_mac: BMC MAC aa:bb:cc:00:00:01 is also on line 2"),
        ("serial,Serial Number,bmc_mac\n", "sheet.csv:1: two columns are serial"),
        ("", "sheet.csv: empty: no header line"),
    ],
)
def test_bad_sheets_are_one_line_naming_where(text: str, message: str) -> None:
    with pytest.raises(InputError) as e:
        parse_sheet(text, "sheet.csv")
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)
