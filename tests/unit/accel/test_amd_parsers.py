"""The AMD Instinct driver's parsers on every recorded output (tests/data/accel/amd/SOURCES.md), and what they refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleetctl_drivers.accel import AccelParseError
from fleetctl_drivers.accel.amd import (
    MAX_GPUS,
    MAX_JSON_BYTES,
    MAX_PAGES,
    AmdInstinctDriver,
    amd_config,
    match_boards,
    parse_bad_pages,
    parse_list,
    parse_metric,
    parse_process,
    parse_rvs,
    parse_static,
)

from fleetctl import plugins
from fleetctl.interfaces.accel import InvBoard

DATA = Path(__file__).resolve().parents[2] / "data" / "accel" / "amd"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_every_recorded_file_is_parsed_by_a_test() -> None:
    parsed = {"amdsmi-changelog-metric-power.json", "amdsmi-changelog-process.json", "gpu-notifier-metric-gpu_data.json",
              "handmade-bad-pages.json", "handmade-mi300x-list.json", "handmade-mi300x-static.json", "rvs-gst-mi355x.txt",
              "rvs-pesm-gst-older.txt"}  # fmt: skip
    assert {p.name for p in DATA.iterdir() if p.name != "SOURCES.md"} == parsed
    sources = _read("SOURCES.md")
    assert all(f"`{name}`" in sources for name in parsed)


def test_metric_in_the_gpu_data_form_of_newer_amd_smi() -> None:
    got = parse_metric(_read("gpu-notifier-metric-gpu_data.json"))
    assert [m.index for m in got] == [0, 1]
    g0 = got[0]
    assert g0.temp_c == {"hotspot": 63.0, "edge": 54.0, "mem": 70.0}
    assert g0.temperature(["hotspot", "edge"]) == 63.0
    assert (g0.power_w, g0.pcie_width, g0.pcie_gts) == (12.3, 8, 2.5)
    assert (g0.ecc_corrected, g0.ecc_uncorrected, g0.ecc_deferred) == (0, 0, 0)
    assert got[1].temp_c["hotspot"] == 32.0 and got[1].power_w == 23.4


def test_metric_in_the_list_form_with_only_the_power_group() -> None:
    (m,) = parse_metric(_read("amdsmi-changelog-metric-power.json"))
    assert (m.index, m.power_w) == (0, 10.0)
    assert m.temp_c == {} and m.pcie_width is None and m.ecc_uncorrected is None  # groups not asked for: None, not 0


def test_metric_before_units_and_with_n_a_values() -> None:
    # amd-smi before "Added units of measure to JSON output" printed plain numbers; an MI300X has no edge sensor.
    doc = [{"gpu": 3, "temperature": {"edge": "N/A", "hotspot": 71, "mem": 60}, "power": {"average_socket_power": 530},
            "pcie": {"width": 16, "speed": 32000}, "ecc": {"total_correctable_count": 2, "total_uncorrectable_count": "N/A"}}]  # fmt: skip
    (m,) = parse_metric(json.dumps(doc))
    assert m.temp_c == {"hotspot": 71.0, "mem": 60.0} and m.temperature(["edge", "hotspot"]) == 71.0
    assert (m.power_w, m.pcie_width, m.pcie_gts, m.ecc_corrected, m.ecc_uncorrected) == (530.0, 16, 32.0, 2, None)


def test_static_gives_the_serial_the_model_and_the_link_it_can_do() -> None:
    (g,) = parse_static(_read("handmade-mi300x-static.json"))
    # No FRU serial on this board ("N/A"): the ASIC's serial stands for it.
    assert (g.index, g.bdf, g.serial, g.model, g.device_id) == (0, "0000:05:00.0", "0xAF54E92B0A5D57C8", "MI300X-O", "0x74a1")
    assert (g.max_pcie_width, g.max_pcie_gts) == (16, 32.0)


def test_static_names_a_board_without_a_market_name_from_the_data() -> None:
    doc = [{"gpu": 0, "asic": {"market_name": "N/A", "device_id": "0x74A1", "asic_serial": "0x1"}, "board": {"product_serial": "PCB-9"},
            "bus": {"bdf": "0000:0C:00.0", "max_pcie_speed": "32 GT/s"}}]  # fmt: skip
    (g,) = parse_static(json.dumps(doc), models=amd_config().model_names())
    assert (g.model, g.serial, g.bdf, g.max_pcie_gts) == ("AMD Instinct MI300X", "PCB-9", "0000:0c:00.0", 32.0)


def test_list_gives_index_address_and_uuid() -> None:
    got = parse_list(_read("handmade-mi300x-list.json"))
    assert [(g.index, g.bdf, g.kfd_id) for g in got] == [(0, "0000:05:00.0", None), (1, "0000:26:00.0", None), (2, "0000:46:00.0", None)]
    assert got[0].uuid == "afff74a1-0000-1000-8054-e92b0a5d57c8"


def test_bad_pages_in_each_shape_amd_smi_prints() -> None:
    got = {b.index: (b.retired, b.pending, b.unreservable) for b in parse_bad_pages(_read("handmade-bad-pages.json"))}
    assert got == {0: (0, 0, 0), 1: (1, 0, 0), 2: (2, 1, 0), 3: (None, None, None)}


def test_process_names_who_holds_a_gpu() -> None:
    (p,) = parse_process(_read("amdsmi-changelog-process.json"))
    assert p.processes == [("TransferBench", 420157), ("rvs", 420315)]
    (none,) = parse_process(json.dumps([{"gpu": 0, "process_list": [{"process_info": "No running processes detected"}]}]))
    assert none.processes == []


def test_rvs_gst_results_and_the_summary_that_names_each_gpu() -> None:
    r = parse_rvs(_read("rvs-gst-mi355x.txt"))
    assert r.gpus[42583] == (0, "0000:05:00.0") and r.gpus[57875] == (7, "0000:f5:00.0") and len(r.gpus) == 8
    assert r.actions == {"gst-Tflops-2K2K2K-trig-fp4": "PASS"}
    final = r.results[42583]
    assert (final.gflops, final.target, final.met, final.samples) == (1063560.0, 0.0, True, 6)
    # The documentation abridged GPU 36479's lines ("..."): an interval figure, no verdict.
    assert r.results[36479].met is None and r.results[36479].gflops == 554189.0


def test_rvs_of_an_older_version_without_the_result_prefix() -> None:
    r = parse_rvs(_read("rvs-pesm-gst-older.txt"))
    assert list(r.results) == [33367]
    assert (r.results[33367].gflops, r.results[33367].target, r.results[33367].met) == (6478.066983, 5000.0, True)
    assert r.gpus == {}


def test_rvs_met_false_is_read() -> None:
    r = parse_rvs("[RESULT] [1.0] [gst-1] [GPU:: 7] GFLOPS 90.5 Target GFLOPS: 100.000000 met: FALSE\n")
    assert r.results[7].met is False and r.results[7].gflops == 90.5


@pytest.mark.parametrize(("text", "message"), [
    ("", "no JSON in the output (empty)"),
    ("amd-smi: command failed\n", "no JSON in the output: 'amd-smi: command failed'"),
    ("[{\"gpu\": 0,", "not valid JSON"),
    ("{\"gpus\": []}", "expected a list of GPUs"),
    ("[{\"bdf\": \"0000:05:00.0\"}]", "no GPU index"),
    ("[{\"gpu\": true}]", "no GPU index"),
    ("[{\"gpu\": 0}, {\"gpu\": 0}]", "GPU 0 listed twice"),
    ("[{\"gpu\": 0, \"power\": {\"socket_power\": {\"value\": \"lots\", \"unit\": \"W\"}}}]", "not a number: 'lots'"),
    ("[{\"gpu\": 0, \"power\": {\"socket_power\": {\"value\": 5, \"unit\": \"kW\"}}}]", "unit 'kW' is not one of ['W']"),
    ("[{\"gpu\": 0, \"pcie\": {\"width\": -1}}]", "not a count"),
    ("[{\"gpu\": 0, \"temperature\": [1, 2]}]", "expected an object, got list"),
])  # fmt: skip
def test_metric_refuses_what_is_not_amd_smi_json(text: str, message: str) -> None:
    with pytest.raises(AccelParseError, match="amd-smi metric") as e:
        parse_metric(text)
    assert message in str(e.value)


def test_a_warning_line_before_the_json_is_skipped() -> None:
    # Hand-made banner (amd-smi warns on stdout when the user lacks the render/video groups; wording not recorded).
    (m,) = parse_metric(
        "WARNING: User is missing the following required groups: render, video.\n" + _read("amdsmi-changelog-metric-power.json")
    )
    assert m.power_w == 10.0


def test_inputs_are_bounded() -> None:
    with pytest.raises(AccelParseError, match="more than"):
        parse_metric("[" + " " * MAX_JSON_BYTES + "]")
    with pytest.raises(AccelParseError, match=f"more than {MAX_GPUS}"):
        parse_list(json.dumps([{"gpu": i} for i in range(MAX_GPUS + 1)]))
    page = {"page_address": 1, "page_size": 4096, "status": "RESERVED"}
    with pytest.raises(AccelParseError, match=f"more than {MAX_PAGES}"):
        parse_bad_pages(json.dumps([{"gpu": 0, "retired": [page] * (MAX_PAGES + 1)}]))
    with pytest.raises(AccelParseError, match="not a PCI address"):
        parse_list(json.dumps([{"gpu": 0, "bdf": "0000:05:00.0; rm -rf /"}]))
    with pytest.raises(AccelParseError, match="expected pages"):
        parse_bad_pages(json.dumps([{"gpu": 0, "retired": "some"}]))


def test_boards_are_matched_by_serial_then_address_and_a_missing_one_takes_no_other_place() -> None:
    gpus = parse_static(json.dumps([
        {"gpu": 0, "asic": {"asic_serial": "0xA"}, "bus": {"bdf": "0000:0c:00.0"}},
        {"gpu": 1, "asic": {"asic_serial": "0xB"}, "bus": {"bdf": "0000:22:00.0"}},
    ]))  # fmt: skip
    boards = [InvBoard(serial="0xb", kind="amd-instinct", slot=0), InvBoard(serial="0xA", kind="amd-instinct", slot=1),
              InvBoard(serial="0xC", kind="amd-instinct", slot=2, pci_address="0000:38:00.0")]  # fmt: skip
    got = {s: (g.index if g else None) for s, g in match_boards(boards, gpus).items()}
    assert got == {"0xb": 1, "0xA": 0, "0xC": None}
    # A GPU whose serial amd-smi cannot read is found by its address only: an absent board does not take its place.
    gpus = parse_static(json.dumps([{"gpu": 0, "asic": {"asic_serial": "N/A"}, "bus": {"bdf": "0000:0c:00.0"}}]))
    got = {s: (g.index if g else None) for s, g in match_boards([InvBoard(serial="0xZ", kind="amd-instinct", slot=0)], gpus).items()}
    assert got == {"0xZ": None}
    got = {s: (g.index if g else None) for s, g in match_boards([InvBoard(serial="0xZ", kind="amd-instinct", slot=0,
                                                                           pci_address="0000:0C:00.0")], gpus).items()}  # fmt: skip
    assert got == {"0xZ": 0}


def test_the_driver_is_registered_for_its_kind_with_its_criteria() -> None:
    drv = plugins.accel_driver("amd-instinct")
    assert isinstance(drv, AmdInstinctDriver) and drv.kinds == ("amd-instinct",)
    crit = drv.criteria()
    assert set(crit["levels"]["amd-instinct"]) == {"quick", "standard", "extended"}
    kind = crit["kinds"]["amd-instinct"]
    assert kind["unit"] == "GFLOPS" and kind["link_judges_generation"] is False
