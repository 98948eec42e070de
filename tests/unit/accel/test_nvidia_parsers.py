"""NVIDIA output parsers: nvidia-smi CSV and XML, dcgmi diag JSON, gpu-burn, Xid lines.

Every recorded file in shared/accel-outputs/{nvidia-smi-query-gpu-csv,
nvidia-smi-xml, dcgmi, gpu-burn} that a parser claims is read (the folders are
listed, so a file added later is tested too, at least for parsing and for
refusing its first half); the values asserted per file were read by hand from
the files. Hand-made inputs cover what no recording shows: noheader/nounits
CSV, DCGM 4's JSON shape, a FAULTY gpu-burn run, entity declarations.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fleetctl_drivers.accel.nvidia import (
    DCGM_ERRORS,
    AccelParseError,
    DiagStatus,
    parse_dcgmi_diag,
    parse_gpu_burn,
    parse_query_gpu_csv,
    parse_smi_xml,
    parse_xid,
)

from fleetctl.errors import DriverError
from tests.alone import in_child


def _accel_outputs() -> Path | None:
    env = os.environ.get("FLEETCTL_SHARED")
    base = Path(env) if env else Path(__file__).resolve().parents[3] / ".." / "shared"
    path = base / "accel-outputs"
    return path.resolve() if path.is_dir() else None


ACCEL = _accel_outputs()
needs_shared = pytest.mark.skipif(ACCEL is None, reason="shared/accel-outputs not found beside the repository (set FLEETCTL_SHARED)")


def _files(folder: str, suffix: str) -> list[str]:
    if ACCEL is None or not (ACCEL / folder).is_dir():
        return []
    return sorted(p.name for p in (ACCEL / folder).iterdir() if p.name.endswith(suffix))


def _read(folder: str, name: str) -> str:
    assert ACCEL is not None
    # newline="" keeps gpu-burn's carriage returns as they were recorded
    with open(ACCEL / folder / name, encoding="utf-8", newline="") as f:
        return f.read()


def test_parse_error_is_a_driver_error():
    assert issubclass(AccelParseError, DriverError)


# ------------------------------------------------------------------ nvidia-smi --query-gpu CSV

CSV = "nvidia-smi-query-gpu-csv"
# Files in the folder that are not --query-gpu output, with the reason.
CSV_NOT_CLAIMED = {
    "h100-80gb-hbm3_drv590.48.01_query-retired-pages.csv": "--query-retired-pages output: a row per retired page, not per GPU",
}
# Per file: number of GPU rows and, per row, attributes read by hand.
CSV_EXPECTED: dict[str, tuple[int, dict[int, dict]]] = {
    "h100-80gb-hbm3_drv590.48.01_idle.csv": (1, {0: {
        "index": 0, "name": "NVIDIA H100 80GB HBM3", "serial": "0000000000000", "pci_bus_id": "00000000:00:09.0",
        "uuid": "GPU-00000000-0000-0000-0000-000000000000", "driver_version": "590.48.01",
        "temperature_gpu_c": 41, "temperature_memory_c": 48, "power_draw_w": 69.85, "power_limit_w": 700.0,
        "clocks_sm_mhz": 345, "clocks_max_sm_mhz": 1980, "memory_total_mib": 81559, "utilization_gpu_pct": 0,
        "ecc_uncorrected_volatile_total": 0, "ecc_corrected_volatile_total": 0,
        "retired_pages_single_bit": None, "retired_pages_double_bit": None, "retired_pages_pending": None,
        "remapped_rows_correctable": 0, "remapped_rows_uncorrectable": 0,
        "remapped_rows_pending": False, "remapped_rows_failure": False,
        "pcie_link_gen_current": 5, "pcie_link_gen_max": 5, "pcie_link_width_current": 16, "pcie_link_width_max": 16,
        "clocks_event_reasons_active": 0x1, "mig_mode_current": "Disabled"}}),
    "h100-80gb-hbm3-mig-enabled_drv590.48.01_idle.csv": (1, {0: {
        "temperature_gpu_c": 42, "power_draw_w": 71.15, "memory_used_mib": 59, "utilization_gpu_pct": None,
        "mig_mode_current": "Enabled", "remapped_rows_correctable": None, "remapped_rows_pending": None}}),
    "h100-80gb-hbm3_drv590.48.01_load-gpuburn.csv": (1, {0: {
        "temperature_gpu_c": 59, "temperature_memory_c": 54, "power_draw_w": 631.95, "power_draw_instant_w": 625.68,
        "clocks_sm_mhz": 1980, "utilization_gpu_pct": 100, "memory_used_mib": 19818, "clocks_event_reasons_active": 0}}),
    "l40s_drv595.80_load.csv": (1, {0: {
        "name": "NVIDIA L40S", "temperature_gpu_c": 54, "temperature_memory_c": None, "power_draw_w": 110.23,
        "power_limit_w": 350.0, "pcie_link_gen_current": 4, "pcie_link_width_current": 16, "driver_version": "595.80"}}),
    "rtx4080super_drv595.71.05_idle_gen1-of-gen4.csv": (1, {0: {
        "name": "NVIDIA GeForce RTX 4080 SUPER", "serial": None, "pstate": "P8", "temperature_gpu_c": 43,
        "power_draw_w": 26.2, "pcie_link_gen_current": 1, "pcie_link_gen_max": 4, "ecc_mode_current": None,
        "ecc_uncorrected_volatile_total": None}}),
    "h100-80gb-hbm3-x8_drv535.161.07_EDITED-rows4-7-duplicate.csv": (8, {
        0: {"index": 0, "pci_bus_id": "00000000:0A:00.0", "temperature_gpu_c": 26, "temperature_memory_c": 35,
            "power_draw_average_w": 70.89, "power_draw_w": None, "clocks_sm_mhz": 345, "pcie_link_gen_max": 5},
        1: {"index": 1, "pci_bus_id": "00000000:11:00.0", "temperature_memory_c": 34, "power_draw_average_w": 71.71},
        7: {"index": 7, "pci_bus_id": "00000000:69:00.0", "temperature_gpu_c": 25, "power_draw_instant_w": 71.44}}),
    "unknown-gpu_power-draw-series_pkb.csv": (91, {
        0: {"index": 0, "power_draw_w": 16.48, "timestamp": "2022/09/28 15:36:51.68"},
        90: {"index": 0, "power_draw_w": 70.01}}),
}  # fmt: skip


@needs_shared
@pytest.mark.parametrize("name", _files(CSV, ".csv"))
def test_recorded_query_gpu_csv(name):
    if name in CSV_NOT_CLAIMED:
        pytest.skip(CSV_NOT_CLAIMED[name])
    text = _read(CSV, name)
    rows = parse_query_gpu_csv(text)
    header = [h.split(" [")[0] for h in text.splitlines()[0].split(", ")]
    for row in rows:
        assert list(row.fields) == header  # every field kept raw, in order
    if name not in CSV_EXPECTED:
        return  # a file added later: it parses; add its values here
    count, expected = CSV_EXPECTED[name]
    assert len(rows) == count
    for i, attrs in expected.items():
        assert {k: getattr(rows[i], k) for k in attrs} == attrs, f"{name} row {i}"


@needs_shared
def test_raw_fields_keep_what_was_printed():
    row = parse_query_gpu_csv(_read(CSV, "h100-80gb-hbm3_drv590.48.01_idle.csv"))[0]
    assert row.fields["retired_pages.pending"] == "[N/A]"
    assert row.fields["power.draw"] == "69.85 W"
    assert row.fields["clocks_event_reasons.active"] == "0x0000000000000001"


@needs_shared
@pytest.mark.parametrize("name", [n for n in _files(CSV, ".csv") if n not in CSV_NOT_CLAIMED])
def test_query_gpu_csv_first_half_is_refused(name):
    text = _read(CSV, name)
    with pytest.raises(AccelParseError):
        parse_query_gpu_csv(text[: len(text) // 2])


HEADER = "index, name, temperature.gpu, power.draw [W], clocks.sm [MHz], retired_pages.pending, pci.bus_id\n"


def test_csv_with_units_and_without():
    with_units = HEADER + "0, NVIDIA H100, 45, 71.50 W, 1980 MHz, No, 00000000:3B:00.0\n"
    no_units = HEADER + "0, NVIDIA H100, 45, 71.50, 1980, No, 00000000:3B:00.0\n"
    for text in (with_units, no_units):
        (g,) = parse_query_gpu_csv(text)
        assert (g.index, g.name, g.temperature_gpu_c, g.power_draw_w, g.clocks_sm_mhz) == (0, "NVIDIA H100", 45, 71.5, 1980)
        assert g.retired_pages_pending is False and g.pci_bus_id == "00000000:3B:00.0"
        assert g.line == 2


def test_csv_noheader_needs_fields_and_reads_aliases():
    fields = ["index", "temperature.gpu", "power.draw", "clocks.sm", "uuid"]
    for text in ("0, 45, 45.00 W, 1410 MHz, GPU-a\n1, 47, 46.10 W, 1395 MHz, GPU-b\n",  # noheader
                 "0, 45, 45.00, 1410, GPU-a\n1, 47, 46.10, 1395, GPU-b\n"):  # noheader,nounits  # fmt: skip
        rows = parse_query_gpu_csv(text, fields=fields)
        assert [(r.index, r.temperature_gpu_c, r.power_draw_w, r.clocks_sm_mhz, r.uuid) for r in rows] == [
            (0, 45, 45.0, 1410, "GPU-a"), (1, 47, 46.1, 1395, "GPU-b")]  # fmt: skip
        assert rows[0].fields["clocks.current.sm"] in ("1410 MHz", "1410")
    with pytest.raises(AccelParseError, match="no header line"):
        parse_query_gpu_csv("0, 45, 45.00 W\n")
    with pytest.raises(AccelParseError, match="has a header line"):
        parse_query_gpu_csv("index, temperature.gpu\n0, 45\n", fields=["index", "temperature.gpu"])


def test_csv_not_available_and_unreadable_values():
    text = HEADER + "0, [N/A], N/A, [Not Supported], [Unknown Error], [N/A], [GPU is lost]\n"
    (g,) = parse_query_gpu_csv(text)
    assert g.name is None and g.temperature_gpu_c is None and g.power_draw_w is None and g.clocks_sm_mhz is None
    assert g.unreadable == {"clocks.current.sm": "[Unknown Error]", "pci.bus_id": "[GPU is lost]"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        (HEADER, "no GPU rows"),
        (HEADER + "0, NVIDIA H100, 45, 71.50 W\n", r"line 2: 4 columns, the header names 7"),
        (HEADER + "0, NVIDIA H100, hot, 71.50 W, 1980 MHz, No, x\n", r"line 2, field 'temperature.gpu': 'hot' is not a number"),
        (HEADER + "0, NVIDIA H100, 45, 71.50 MHz, 1980 MHz, No, x\n", r"field 'power.draw'.*unit 'MHz', expected 'W'"),
        (HEADER + "0, NVIDIA H100, 45.5, 71.50 W, 1980 MHz, No, x\n", "not a whole number"),
        (HEADER + "0, NVIDIA H100, 45, 71.50 W, 1980 MHz, Maybe, x\n", "neither Yes nor No"),
        ("<html>502 Bad Gateway</html>\n", "no header line"),
    ],
)
def test_csv_garbage_is_a_clear_error(text, message):
    with pytest.raises(AccelParseError, match=message):
        parse_query_gpu_csv(text)


# ------------------------------------------------------------------ nvidia-smi -q -x

XML = "nvidia-smi-xml"
XML_EXPECTED = {
    "tesla-t4_drv515.105.01_dtd-v11_pcie-x8-of-x16.xml": {
        "pci_bus_id": "00000000:00:1E.0", "name": "Tesla T4", "uuid": "GPU-d37e67a5-91dd-3774-a5cb-99096249601a",
        "serial": "0000000000000", "driver_version": "515.105.01", "cuda_version": "11.7",
        "temperature_gpu_c": 40, "temperature_memory_c": None, "temperature_slowdown_c": 93, "temperature_shutdown_c": 96,
        "power_draw_w": 26.78, "power_limit_w": 70.0, "clocks_sm_mhz": 585, "clocks_memory_mhz": 5000,
        "retired_pages_single_bit": 0, "retired_pages_double_bit": 0, "retired_pages_pending": False,
        "remapped_rows_correctable": None, "remapped_rows_pending": None,
        "pcie_link_gen_current": 3, "pcie_link_gen_max": 3, "pcie_link_width_current": 8, "pcie_link_width_max": 16,
        "memory_total_mib": 15360, "memory_used_mib": 1032},
    "a100-sxm4-80gb_mig-enabled_drv535.54.03_dtd-v12.xml": {
        "pci_bus_id": "00000000:01:00.0", "name": "NVIDIA A100-SXM4-80GB", "serial": "1650522003820",
        "driver_version": "535.54.03", "mig_mode_current": "Enabled",
        "temperature_gpu_c": 27, "temperature_memory_c": 44, "temperature_slowdown_c": 89, "temperature_shutdown_c": 92,
        "temperature_max_memory_c": 95, "power_draw_w": 67.03, "power_limit_w": 500.0, "clocks_sm_mhz": 1275,
        "retired_pages_single_bit": None, "retired_pages_pending": None, "remapped_rows_uncorrectable": None,
        "pcie_link_gen_current": 4, "pcie_link_width_current": 16},
}  # fmt: skip
# SOURCES.md: the contributor kept only the first of the A100's 4 <gpu> elements.
XML_TRIMMED = {"a100-sxm4-80gb_mig-enabled_drv535.54.03_dtd-v12.xml"}


@needs_shared
@pytest.mark.parametrize("name", _files(XML, ".xml"))
def test_recorded_smi_xml(name):
    text = _read(XML, name)
    if name in XML_TRIMMED:
        with pytest.raises(AccelParseError, match="attached_gpus says 4, the report has 1"):
            parse_smi_xml(text)
    gpus = parse_smi_xml(text, expect_all=name not in XML_TRIMMED)
    assert gpus and all(g.pci_bus_id for g in gpus)
    if name in XML_EXPECTED:
        want = XML_EXPECTED[name]
        assert {k: getattr(gpus[0], k) for k in want} == want
        ecc = gpus[0].ecc_volatile
        assert ecc is not None and (ecc.correctable, ecc.uncorrectable, ecc.dram_uncorrectable) == (0, 0, 0)


@needs_shared
@pytest.mark.parametrize("name", _files(XML, ".xml"))
def test_smi_xml_first_half_is_refused(name):
    text = _read(XML, name)
    with pytest.raises(AccelParseError, match="not well-formed XML"):
        parse_smi_xml(text[: len(text) // 2], expect_all=False)


OLD_AND_NEW = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v10.dtd">
<nvidia_smi_log>
  <driver_version>450.80.02</driver_version>
  <attached_gpus>2</attached_gpus>
  <gpu id="00000000:3B:00.0">
    <product_name>Tesla V100-SXM2-32GB</product_name>
    <ecc_errors><volatile>
      <single_bit><device_memory>2</device_memory><total>3</total></single_bit>
      <double_bit><device_memory>0</device_memory><total>1</total></double_bit>
    </volatile></ecc_errors>
    <retired_pages>
      <multiple_single_bit_retirement><retired_count>2</retired_count></multiple_single_bit_retirement>
      <double_bit_retirement><retired_count>1</retired_count></double_bit_retirement>
      <pending_retirement>Yes</pending_retirement>
    </retired_pages>
    <temperature><gpu_temp>[Unknown Error]</gpu_temp></temperature>
    <power_readings><power_draw>250.10 W</power_draw><power_limit>300.00 W</power_limit></power_readings>
  </gpu>
  <gpu id="00000000:86:00.0">
    <product_name>NVIDIA H100 80GB HBM3</product_name>
    <remapped_rows>
      <remapped_row_corr>3</remapped_row_corr><remapped_row_unc>1</remapped_row_unc>
      <remapped_row_pending>Yes</remapped_row_pending><remapped_row_failure>No</remapped_row_failure>
    </remapped_rows>
  </gpu>
</nvidia_smi_log>
"""


def test_smi_xml_old_ecc_counters_and_remapped_rows():
    """Hand-made: single/double bit counters (before Ampere) and remapped rows (Ampere and later)."""
    old, new = parse_smi_xml(OLD_AND_NEW)
    assert old.ecc_volatile is not None
    assert (old.ecc_volatile.single_bit_total, old.ecc_volatile.correctable, old.ecc_volatile.uncorrectable) == (3, 3, 1)
    assert (old.retired_pages_single_bit, old.retired_pages_double_bit, old.retired_pages_pending) == (2, 1, True)
    assert (old.power_draw_w, old.power_limit_w, old.driver_version) == (250.1, 300.0, "450.80.02")
    assert old.temperature_gpu_c is None and old.unreadable == {"temperature/gpu_temp": "[Unknown Error]"}
    assert old.remapped_rows_correctable is None  # old drivers lack the element
    assert (new.remapped_rows_correctable, new.remapped_rows_uncorrectable) == (3, 1)
    assert (new.remapped_rows_pending, new.remapped_rows_failure) == (True, False)
    assert new.ecc_volatile is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><nvidia_smi_log>&b;</nvidia_smi_log>',
         "internal subset is refused"),
        ("<nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>", "no <gpu> element"),
        ("<html><body>nope</body></html>", "root element <html>"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "not well-formed XML"),
        ('<nvidia_smi_log><gpu id="0000:01:00.0"><temperature><gpu_temp>hot C</gpu_temp></temperature></gpu></nvidia_smi_log>',
         r"gpu 0000:01:00.0, field 'temperature/gpu_temp': 'hot C' is not a number"),
        ('<nvidia_smi_log><gpu id="0000:01:00.0"><temperature><gpu_temp>40 W</gpu_temp></temperature></gpu></nvidia_smi_log>',
         "unit 'W', expected 'C'"),
    ],
)
def test_smi_xml_garbage_is_a_clear_error(text, message):
    with pytest.raises(AccelParseError, match=message):
        parse_smi_xml(text)


# ------------------------------------------------------------------ dcgmi diag -j

DCGMI = "dcgmi"


def _diag_files() -> list[str]:
    # dcgmi/ also holds health, discovery, dmon and modules output: only diag JSON is claimed
    return [n for n in _files(DCGMI, ".json") if "diag" in n]


@needs_shared
@pytest.mark.parametrize("name", _diag_files())
def test_recorded_dcgmi_diag(name):
    report = parse_dcgmi_diag(_read(DCGMI, name))
    assert report.categories
    if name != "tesla-t4_dcgmi-diag-r2-j.json":
        return
    assert report.legacy and report.runtime_error is None and report.failures == []
    assert [c.name for c in report.categories] == ["Deployment", "Integration", "Hardware"]
    deployment = report.categories[0]
    assert len(deployment.tests) == 9 and deployment.tests[0].name == "Denylist"
    assert all(r.status is DiagStatus.PASS and r.entity_id is None for t in deployment.tests for r in t.results)
    (pcie,) = report.categories[1].tests[0].results
    assert (report.categories[1].tests[0].name, pcie.status, pcie.entity_group, pcie.entity_id, pcie.gpu_ids) == (
        "PCIe", DiagStatus.PASS, "GPU", 0, [0])  # fmt: skip
    assert "Host to GPU bandwidth:\t\t13.11 GB/s" in pcie.info[0]
    (memory,) = report.categories[2].tests[0].results
    assert memory.info == ["GPU 0 Allocated 15206918958 bytes (97.3%)"]


@needs_shared
@pytest.mark.parametrize("name", _diag_files())
def test_dcgmi_diag_first_half_is_refused(name):
    text = _read(DCGMI, name)
    with pytest.raises(AccelParseError, match="not JSON"):
        parse_dcgmi_diag(text[: len(text) // 2])


# Hand-made in DCGM 4's shape (keys from DCGM's NvvsJsonStrings.h: entity_group,
# entity_id, warnings[].warning/error_id/error_category/error_severity,
# entity_groups[].entities[].serial_num/device_id, metadata.version).
DCGM4 = {
    "DCGM Diagnostic": {"test_categories": [
        {"category": "Hardware", "tests": [
            {"name": "memory", "test_summary": {"status": "Fail"}, "results": [
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Fail", "warnings": [
                    {"warning": "Faulty memory detected on GPU 1", "error_id": 52, "error_category": 10, "error_severity": 2}]},
            ]},
        ]},
        {"category": "Stress", "tests": [
            {"name": "diagnostic", "results": [
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Fail", "warnings": [
                    {"warning": "The fabricmanager is not initialized", "error_id": 108, "error_category": 3, "error_severity": 5}]},
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Skip"},
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 2, "status": "Fail", "warnings": [
                    {"warning": "a new kind of configuration error", "error_id": 999, "error_category": 3, "error_severity": 5}]},
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 3, "status": "Exploded"},
            ]},
        ]},
    ]},
    "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [
        {"entity_id": 0, "serial_num": "1650522003820", "device_id": "20b2"},
        {"entity_id": 1, "serial_num": "1650522003821", "device_id": "20b2"}]}],
    "metadata": {"version": "4.1.1", "Driver Version Detected": "550.54.15"},
}  # fmt: skip


def test_dcgm4_shape_setup_errors_and_serials():
    report = parse_dcgmi_diag(json.dumps(DCGM4, indent=2))
    assert not report.legacy and report.version == "4.1.1" and report.driver_version == "550.54.15"
    memory = report.categories[0].tests[0]
    assert memory.summary_status is DiagStatus.FAIL
    bad = memory.results[1]
    assert (bad.status, bad.entity_id, bad.setup_error) == (DiagStatus.FAIL, 1, False)
    (w,) = bad.warnings
    assert (w.error_id, w.error_name, w.error_category, w.error_severity) == (52, "DCGM_FR_FAULTY_MEMORY", 10, 2)
    assert report.serial_of(1) == "1650522003821" and report.serial_of(5) is None
    fm, skipped, unknown_id, odd = report.categories[1].tests[0].results
    assert fm.setup_error and fm.warnings[0].error_name == "DCGM_FR_CUDA_FM_NOT_INITIALIZED"
    assert skipped.status is DiagStatus.SKIP and not skipped.setup_error
    assert unknown_id.setup_error and unknown_id.warnings[0].error_name is None  # by its category: software configuration
    assert odd.status is DiagStatus.UNKNOWN and odd.status_text == "Exploded"
    assert [(c, t, r.entity_id) for c, t, r in report.failures] == [("Hardware", "memory", 1), ("Stress", "diagnostic", 0),
                                                                    ("Stress", "diagnostic", 2)]  # fmt: skip


def test_dcgm_setup_table_is_data():
    assert DCGM_ERRORS[67] == ("DCGM_FR_DCGM_API", True)
    assert DCGM_ERRORS[21] == ("DCGM_FR_BAD_PARAMETER", True)
    assert DCGM_ERRORS[52] == ("DCGM_FR_FAULTY_MEMORY", False)
    assert sorted(DCGM_ERRORS) == list(range(112))


def test_dcgm_legacy_warning_strings_and_runtime_error():
    legacy = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "GPU Memory", "results": [
        {"gpu_ids": "0,1", "status": "Fail", "warnings": ["GPU 0 memory error"]}]}]}]}}  # fmt: skip
    (r,) = parse_dcgmi_diag(json.dumps(legacy)).categories[0].tests[0].results
    assert (r.gpu_ids, r.entity_id, r.setup_error) == ([0, 1], None, False)
    assert (r.warnings[0].message, r.warnings[0].error_id) == ("GPU 0 memory error", None)
    failed = {"DCGM GPU Diagnostic": {"version": "3.3.8", "runtime_error": "Error: unable to establish a connection"}}
    report = parse_dcgmi_diag(json.dumps(failed))
    assert report.runtime_error == "Error: unable to establish a connection" and report.categories == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Error: unable to establish a connection to the specified host: localhost", "not JSON"),
        ("", "not JSON"),
        ('{"Health Monitor Report": {}}', "neither 'DCGM Diagnostic' nor 'DCGM GPU Diagnostic'"),
        ('{"DCGM Diagnostic": {}}', "no test_categories and no runtime_error"),
        ('{"DCGM Diagnostic": {"test_categories": {}}}', "test_categories: expected a list"),
        ('{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "x", "results": [{}]}]}]}}', "a result without a status"),
        ('{"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "x", "results": [{"status": "Pass", "entity_id": "GPU0"}]}]}]}}',
         "'GPU0' is not a number"),
    ],
)
def test_dcgmi_diag_garbage_is_a_clear_error(text, message):
    with pytest.raises(AccelParseError, match=message):
        parse_dcgmi_diag(text)


# ------------------------------------------------------------------ gpu-burn

BURN = "gpu-burn"


@needs_shared
@pytest.mark.parametrize("name", _files(BURN, ".log"))
def test_recorded_gpu_burn(name):
    result = parse_gpu_burn(_read(BURN, name))
    assert result.gpus and all(g.max_errors is not None for g in result.gpus)
    if name == "quadro-rtx8000-plus-titan-rtx_gpu-burn_all-ok.log":
        q, t = result.gpus
        assert (q.index, q.name, q.uuid, q.ok) == (0, "Quadro RTX 8000", "GPU-a8fcddc5-c749-bbba-8e62-4e5d95662995", True)
        assert (t.name, t.ok, t.max_errors, t.died) == ("TITAN RTX", True, 0, False)
        assert (q.gflops_last, t.gflops_last, q.gflops_max) == (11396.0, 11221.0, 11625.0)
        assert (q.max_temp_c, t.max_temp_c) == (71, 79)
        assert result.ok
    elif name == "v100-sxm2-16gb-x8_gpu-burn_all-ok.log":
        assert len(result.gpus) == 8 and result.ok
        assert {g.name for g in result.gpus} == {"Tesla V100-SXM2-16GB"}
        assert [g.gflops_last for g in result.gpus] == [13529.0, 13534.0, 13517.0, 13558.0, 13777.0, 13147.0, 13294.0, 13139.0]
        assert result.gpus[7].uuid == "GPU-69139328-c5ae-c9f9-404e-eba0ae52794a" and result.gpus[7].max_temp_c == 52


@needs_shared
@pytest.mark.parametrize("name", _files(BURN, ".log"))
def test_gpu_burn_first_half_is_refused(name):
    text = _read(BURN, name)
    with pytest.raises(AccelParseError, match="no 'Tested N GPUs:' line"):
        parse_gpu_burn(text[: len(text) // 2])


FAULTY = (
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)\n"
    "\r50.0%  proc'd: 100 (50000 Gflop/s) - 100 (49000 Gflop/s)   errors: 0 - 12   temps: 60 C - 61 C "
    "\r100.0%  proc'd: 200 (51000 Gflop/s) - 200 (48000 Gflop/s)   errors: 0 - 7 (DIED!)   temps: 62 C - 63 C \n"
    "Killing processes.. done\n\nTested 2 GPUs:\n\tGPU 0: OK\n\tGPU 1: FAULTY\n"
)


def test_gpu_burn_faulty_is_read_from_the_text():
    """Hand-made in gpu-burn's format: it exits 0 here too, the verdict is in the text."""
    result = parse_gpu_burn(FAULTY)
    ok, bad = result.gpus
    assert (ok.ok, ok.max_errors, ok.gflops_last, ok.gflops_max) == (True, 0, 51000.0, 51000.0)
    assert (bad.ok, bad.max_errors, bad.died, bad.max_temp_c) == (False, 12, True, 63)
    assert not result.ok


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no 'Tested N GPUs:' line"),
        ("bash: ./gpu_burn: No such file or directory\n", "no 'Tested N GPUs:' line"),
        ("Tested 2 GPUs:\n\tGPU 0: OK\n", r"'Tested 2 GPUs' but verdicts for GPUs \[0\]"),
        ("Tested 1 GPUs:\n\tGPU 0: MAYBE\n", "verdict 'MAYBE' is neither OK nor FAULTY"),
        ("10.0%  proc'd: 1 (2 Gflop/s) - 1 (2 Gflop/s)   errors: 0   temps: 50 C\nTested 2 GPUs:\n", "2 GPUs in proc'd, 1 in errors"),
        ("10.0%  proc'd: lots   errors: 0   temps: 50 C\n", "proc'd 'lots' is not"),
    ],
)
def test_gpu_burn_garbage_is_a_clear_error(text, message):
    with pytest.raises(AccelParseError, match=message):
        parse_gpu_burn(text)


# ------------------------------------------------------------------ Xid


def test_xid_lines():
    text = (
        "[12345.678901] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
        "[12345.700000] nvidia-nvswitch0: unrelated line\n"
        "Dec 01 10:00:00 host kernel: NVRM: Xid (PCI:0000:86:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error\n"
    )
    a, b = parse_xid(text)
    assert (a.line, a.pci, a.xid, a.message) == (1, "0000:3b:00", 79, "pid=1234, name=python, GPU has fallen off the bus.")
    assert (b.line, b.pci, b.xid) == (3, "0000:86:00", 48)
    assert parse_xid("no xid here\n") == []


def test_csv_noheader_values_are_not_taken_for_a_header():
    with pytest.raises(AccelParseError, match="no header line"):
        parse_query_gpu_csv("P0, Enabled\nP8, Disabled\n")  # --query-gpu=pstate,ecc.mode.current --format=csv,noheader


# ------------------------------------------------------------------ issue 20: recordings kept in tests/data/accel
# (SOURCES.md there names each file's repository, commit and license)

DATA = Path(__file__).resolve().parents[2] / "data" / "accel"


def _data(folder: str, name: str) -> str:
    return (DATA / folder / name).read_text(encoding="utf-8")


# DTD v13 (drivers 590 and later, some 580/595 builds): <average_power_draw> and
# <instant_power_draw>, no <power_draw>. Values read by hand from the files.
V13_EXPECTED = {
    "geforce-rtx3080_drv595.58.03_dtd-v13.xml": {
        "pci_bus_id": "00000000:0C:00.0", "name": "NVIDIA GeForce RTX 3080", "driver_version": "595.58.03",
        "power_draw_w": 139.62, "power_draw_average_w": 139.62, "power_draw_instant_w": 142.33, "power_limit_w": 320.0,
        "temperature_gpu_c": 27, "clocks_sm_mhz": 1950, "pcie_link_gen_current": 4, "pcie_link_width_current": 16},
    "rtx4000-sff-ada_drv595.84_dtd-v13.xml": {
        "pci_bus_id": "00000000:06:00.0", "name": "NVIDIA RTX 4000 SFF Ada Generation", "driver_version": "595.84",
        "power_draw_w": 8.81, "power_draw_average_w": 8.81, "power_draw_instant_w": 8.44, "power_limit_w": 70.0,
        "temperature_gpu_c": 38, "ecc_mode_current": "Disabled", "remapped_rows_uncorrectable": 0,
        "pcie_link_gen_current": 1, "pcie_link_gen_max": 4},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(V13_EXPECTED))
def test_smi_xml_dtd_v13_power_is_read(name):
    (gpu,) = parse_smi_xml(_data("nvidia-smi-xml", name))
    want = V13_EXPECTED[name]
    assert {k: getattr(gpu, k) for k in want} == want


def test_smi_xml_instant_only_and_old_power_draw_first():
    """Hand-made around the v13 shape: an instant reading alone is the draw; <power_draw>, where printed, wins."""
    doc = '<nvidia_smi_log><gpu id="0000:01:00.0"><gpu_power_readings>{}</gpu_power_readings></gpu></nvidia_smi_log>'
    (only,) = parse_smi_xml(doc.format("<average_power_draw>N/A</average_power_draw><instant_power_draw>61.50 W</instant_power_draw>"))
    assert (only.power_draw_w, only.power_draw_average_w, only.power_draw_instant_w) == (61.5, None, 61.5)
    (both,) = parse_smi_xml(doc.format("<power_draw>70.00 W</power_draw><average_power_draw>65.00 W</average_power_draw>"))
    assert (both.power_draw_w, both.power_draw_average_w) == (70.0, 65.0)


DCGM3_NULLS = "dcgm-3.1.0_x8_diag-j_null-between-tests.json"


def test_dcgmi_diag_dcgm3_nulls_between_tests_are_skipped():
    text = _data("dcgmi", DCGM3_NULLS)
    assert "},\n\t\t\t\t\tnull,\n" in text  # the recording has the nulls this test is about
    report = parse_dcgmi_diag(text)
    assert (report.legacy, report.version, report.runtime_error) == (True, "3.1.0", None)
    assert report.preamble == "WARNING: THIS SHOULD NOT HAPPEN"
    deployment, custom = report.categories
    assert [t.name for t in deployment.tests] == [
        "Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS-related Blocks", "Persistence Mode",
        "Environmental Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"]  # fmt: skip
    assert all(r.gpu_ids == list(range(8)) and r.entity_id is None for t in deployment.tests for r in t.results)
    (software,) = custom.tests
    assert [(r.entity_group, r.entity_id, r.status) for r in software.results] == [("GPU", i, DiagStatus.PASS) for i in range(8)]
    assert len(report.results) == 17 and report.failures == []
    # the document alone, without the line NVIDIA's test put before it, reads the same
    body = text[text.index("{") :]
    assert parse_dcgmi_diag(body).categories == report.categories and parse_dcgmi_diag(body).preamble is None


def test_dcgmi_diag_nulls_at_every_level_and_dcgm3_serials():
    """Hand-made: DCGM's reader skips null tests, results and warnings; a null category, info or entity is skipped too."""
    doc = {"DCGM GPU Diagnostic": {
        "version": "3.3.8",
        "test_categories": [None, {"category": "Hardware", "tests": [None, {"name": "GPU Memory", "results": [
            None, {"gpu_ids": "1", "status": "Fail", "info": [None, "GPU 1 allocated 95%"],
                   "warnings": [None, {"warning": "Faulty memory on GPU 1", "error_id": 52, "error_category": 10, "error_severity": 2}]},
        ]}, None]}],
        "GPU Device Serials": {"0": "1650522003820", "1": "1650522003821"},
    }}  # fmt: skip
    report = parse_dcgmi_diag(json.dumps(doc))
    ((cat, test, r),) = report.failures
    assert (cat, test, r.entity_id, r.info) == ("Hardware", "GPU Memory", 1, ["GPU 1 allocated 95%"])
    assert [w.error_name for w in r.warnings] == ["DCGM_FR_FAULTY_MEMORY"]
    assert report.serial_of(1) == "1650522003821" and report.serial_of(2) is None


# ------------------------------------------------------------------ issue 20: output 100x larger than any real one


def _xml_100x() -> str:
    """The v13 recording with its <gpu> repeated 100 times (~4.6 MB): 100x a real one-GPU answer."""
    text = _data("nvidia-smi-xml", "geforce-rtx3080_drv595.58.03_dtd-v13.xml")
    start, end = text.index("<gpu "), text.index("</gpu>") + len("</gpu>")
    return text[:start] + text[start:end] * 100 + text[end:]


def _peak_while(fn) -> int:
    """tracemalloc's peak while ``fn()`` runs, taken in a forked child (tests/alone.py): ``fn``'s own, not the worker's threads'."""

    def measure() -> int:
        import tracemalloc

        tracemalloc.start()
        try:
            fn()
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        return peak

    return in_child(measure)


def test_smi_xml_100x_is_refused_unread():
    text = _xml_100x()
    assert len(text) > 100 * 46_000

    def parse() -> None:
        with pytest.raises(AccelParseError, match="refused unread"):
            parse_smi_xml(text)

    assert _peak_while(parse) < 1 << 20  # nothing is built from it (parsing it whole takes some 30 MB)


def test_smi_xml_element_flood_is_refused_before_a_tree_is_built():
    """Under the size bound, but a million elements: the counting pass stops it; no tree of them is built."""
    text = "<nvidia_smi_log>" + "<a/>" * 1_000_000 + "</nvidia_smi_log>"

    def parse() -> None:
        with pytest.raises(AccelParseError, match="more than 50000 elements"):
            parse_smi_xml(text)

    assert _peak_while(parse) < 3 * len(text)  # expat's copy of the text, no tree (a tree of them takes ~100 MB)


def test_dcgmi_diag_100x_and_deep_nesting_are_refused():
    text = _data("dcgmi", DCGM3_NULLS)
    # 17 results, each with 400 kB of info: ~6.8 MB, 100x the largest real diag output (~60 kB) and more
    big = text.replace('"status" : "PASS"', '"status" : "PASS", "info" : ["' + "x" * 400_000 + '"]')
    assert len(big) > 100 * 60_000
    with pytest.raises(AccelParseError, match="refused unread"):
        parse_dcgmi_diag(big)
    with pytest.raises(AccelParseError, match="nested deeper than any real output"):
        parse_dcgmi_diag('{"DCGM Diagnostic": ' + "[" * 200_000 + "]" * 200_000 + "}")


@pytest.mark.parametrize(("parse", "source"), [(parse_query_gpu_csv, "nvidia-smi --query-gpu"), (parse_gpu_burn, "gpu-burn")])
def test_other_parsers_refuse_more_than_any_real_output(parse, source):
    from fleetctl_drivers.accel.nvidia import MAX_TEXT_CHARS

    with pytest.raises(AccelParseError, match="refused unread"):
        parse("index, name\n" + "0, x\n" * (MAX_TEXT_CHARS[source] // 5))
