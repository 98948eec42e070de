"""A vendor's delivery sheet: which servers should be on the network (``--expect sheet.csv``).

A CSV with a header naming the columns, in any order: ``serial``, ``bmc_mac``
and ``model`` (spellings with spaces, hyphens or other case are the same:
``BMC MAC``, ``bmc-mac``); other columns (asset tag, PO number ...) are
left out. Every row needs a serial and a BMC MAC; the model may be empty.
A serial or a MAC given twice is an error naming both lines.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from fleetctl.errors import InputError
from fleetctl.files import FileRefused, read_capped
from fleetctl.inventory.schema import normalise_mac

#: The columns, by their normalised header, and the other spellings taken for them (vendors' sheets differ).
COLUMNS: dict[str, tuple[str, ...]] = {
    "serial": ("serial", "serialnumber", "serialno", "sn"),
    "bmc_mac": ("bmcmac", "bmcmacaddress", "ipmimac", "bmcnicmac"),
    "model": ("model", "modelname", "product"),
}
REQUIRED = ("serial", "bmc_mac")
MAX_BYTES = 16 * 1024 * 1024
MAX_TEXT = 255  # as a site file's text value


@dataclass(frozen=True)
class Expected:
    """One row of the sheet."""

    serial: str
    bmc_mac: str
    model: str | None
    line: int


def _norm(header: str) -> str:
    return re.sub(r"[^a-z0-9]", "", header.strip().lower())


def read_sheet(path: Path) -> list[Expected]:
    """The sheet's rows. Raises InputError naming the file, line and column of the first problem."""
    where = str(path)
    try:
        text = read_capped(path, MAX_BYTES).decode("utf-8-sig")  # spreadsheets save a BOM
    except FileRefused as e:
        raise InputError(f"{e}; not a delivery sheet", location=where) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", location=where) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text (byte {e.start})", location=where) from None
    return parse_sheet(text, where)


def parse_sheet(text: str, where: str = "<sheet>") -> list[Expected]:
    rows = csv.reader(io.StringIO(text))
    index: dict[str, int] | None = None
    out: list[Expected] = []
    serials: dict[str, int] = {}
    macs: dict[str, int] = {}
    try:
        for row in rows:
            line = rows.line_num
            if not any(c.strip() for c in row):
                continue
            if index is None:
                index = {}
                for i, h in enumerate(row):
                    key = next((k for k, names in COLUMNS.items() if _norm(h) in names), None)
                    if key is None:
                        continue
                    if key in index:
                        raise InputError(f"two columns are {key} ({row[index[key]]!r} and {h!r})", location=f"{where}:{line}")
                    index[key] = i
                missing = [k for k in REQUIRED if k not in index]
                if missing:
                    found = ", ".join(repr(h) for h in row) or "none"
                    raise InputError(f"the header has no {' and no '.join(missing)} column (columns: {found})",
                                     location=f"{where}:{line}")  # fmt: skip
                continue

            def cell(key: str, row: list[str] = row, line: int = line, index: dict[str, int] = index) -> str:
                i = index.get(key)
                v = row[i].strip() if i is not None and i < len(row) else ""
                if len(v) > MAX_TEXT or any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in v):
                    raise InputError("longer than 255 characters or holds a control character", location=f"{where}:{line}",
                                     field=key)  # fmt: skip
                return v

            serial = cell("serial")
            if not serial:
                raise InputError("empty", location=f"{where}:{line}", field="serial")
            raw_mac = cell("bmc_mac")
            try:
                mac = normalise_mac(raw_mac)
            except ValueError:
                raise InputError(f"{raw_mac!r} is not a MAC address", location=f"{where}:{line}", field="bmc_mac") from None
            if serial in serials:
                raise InputError(f"serial {serial} is also on line {serials[serial]}", location=f"{where}:{line}", field="serial")
            if mac in macs:
                raise InputError(f"BMC MAC {mac} is also on line {macs[mac]}", location=f"{where}:{line}", field="bmc_mac")
            serials[serial], macs[mac] = line, line
            out.append(Expected(serial, mac, cell("model") or None, line))
    except csv.Error as e:
        raise InputError(f"not CSV: {e}", location=f"{where}:{rows.line_num}") from None
    if index is None:
        raise InputError("empty: no header line", location=where)
    return out
