"""`fleetctl firmware update` refuses what it cannot mean, before any BMC is read or anything is written (issue #25, 7 and 8).

- ``--template`` is plain placeholders only, as a site file's ``firmware_template``: a format spec
  (``{id!r:>99999999}`` sent a 100 MB URL to a BMC), a conversion, attribute or index access
  (``{base.__class__}`` rendered) are exit 2, one line;
- ``--component`` must name a component of the servers' baselines (by name, or a BMC id that answers to one):
  ``nosuch`` flashed nothing and said "at baseline" with exit 0; now exit 2 naming what the baseline has.
"""

from __future__ import annotations

import pytest

from fleetctl.errors import InputError
from fleetctl.workflows.firmware_campaign import check_template

BASE = "http://127.0.0.1:9/fw"
MN = "mn-tyo1-r12-01"  # MN-Server 2: BMC, BIOS, mncore2-board in its baseline (inventory/site-tyo1.yaml)
GPU = "gpu-tyo1-r12-17"


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("{base}/{id!r:>99999999}.bin", "a format spec or conversion is not allowed"),
        ("{base}/{id:>99999999}.bin", "a format spec or conversion is not allowed"),
        ("{base}/{version!s}.bin", "a format spec or conversion is not allowed"),
        ("{base.__class__}/{id}.bin", "{base.__class__} is not a placeholder"),
        ("{base}/{id[0]}.bin", "{id[0]} is not a placeholder"),
        ("{base}/{nope}.bin", "{nope} is not a placeholder"),
        ("{base}/{0}.bin", "{0} is not a placeholder"),
        ("{base}/{}.bin", "{} is not a placeholder"),
        ("{base}/{id.bin", "does not render"),
        ("{base}/}{id}.bin", "does not render"),
    ],
)
def test_a_template_is_plain_placeholders_only(template: str, says: str) -> None:
    with pytest.raises(InputError) as e:
        check_template(template, BASE)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_plain_templates_render() -> None:
    for template in ("{base}/{id}-{version}.bin", "{base}/{component}/{id}-{version}.bin", "{base}/fixed.bin", "{base}/{{literal}}/{id}"):
        check_template(template, BASE)


@pytest.mark.parametrize("template", ["{base}/{id!r:>99999999}.bin", "{base.__class__}/{id}.bin", "{base}/{id[0]}.bin"])
def test_the_command_refuses_a_template_with_exit_2_and_one_line(example_loaded, cli, template: str) -> None:  # type: ignore[no-untyped-def]
    r = cli("firmware", "update", MN, "--image-base", BASE, "--template", template)
    assert r.code == 2, (r.code, r.out, r.err)
    [line] = r.err.strip().splitlines()
    assert "template" in line, line
    assert r.out.strip() == ""


def test_an_unknown_component_is_exit_2_naming_the_baselines_components(example_loaded, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("firmware", "update", MN, GPU, "--image-base", BASE, "--component", "nosuch")
    assert r.code == 2, (r.code, r.out, r.err)
    [line] = r.err.strip().splitlines()
    assert line.startswith("error: --component: 'nosuch' is not in the firmware baseline"), line
    assert line.endswith("it has: BIOS, BMC, mncore2-board, vbios"), line  # both servers' models
    # one unknown among known ones is refused the same way
    r = cli("firmware", "update", MN, "--image-base", BASE, "--component", "BIOS", "--component", "CPLD", "--dry-run")
    assert r.code == 2 and "'CPLD'" in r.err and "BIOS, BMC, mncore2-board" in r.err and "vbios" not in r.err, r.err


@pytest.mark.parametrize("component", ["BIOS", "bios", "mncore2-board", "mncore2_slot0_mncore2-board"])
def test_a_component_of_the_baseline_by_name_or_bmc_id_is_taken(example_loaded, cli, component: str) -> None:  # type: ignore[no-untyped-def]
    # (the example's BMCs are not reachable: the run goes past the checks of the input and stops at the BMCs' preflight or reads)
    r = cli("firmware", "update", MN, "--image-base", BASE, "--component", component, "--dry-run", "--output", "json")
    assert r.err.strip() and "--component" not in r.err and "not in the firmware baseline" not in r.err, r.err
    assert "credential" in r.err or "BMC" in r.err, r.err  # it got past the input checks to the BMCs
