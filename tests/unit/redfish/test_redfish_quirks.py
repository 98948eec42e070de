"""Vendor detection and the quirk table."""

from __future__ import annotations

import dataclasses

import pytest
from fleetctl_drivers.redfish.quirks import GENERIC, PROFILES, Quirks, detect_vendor, quirks_for


@pytest.mark.parametrize(
    "root,manager_model,expected",
    [
        ({"Vendor": "HPE", "Product": "ProLiant XL675d Gen10 Plus", "Oem": {"Hpe": {}}}, None, "hpe"),
        ({"Vendor": "AMI", "Product": "AMI Redfish Server", "Oem": {"Ami": {}}}, None, "ami"),
        ({"Vendor": "Dell", "Oem": {"Dell": {}}}, None, "dell"),
        ({"Oem": {"Dell": {}}}, None, "dell"),
        ({"Vendor": "Lenovo"}, None, "lenovo"),
        ({"Vendor": "Supermicro"}, None, "supermicro"),
        ({"RedfishVersion": "1.17.0"}, "OpenBmc", "openbmc"),
        ({"RedfishVersion": "1.15.0"}, "Joo Janta 200", "generic"),
        ({}, None, "generic"),
    ],
)
def test_detect_vendor(root, manager_model, expected):
    assert detect_vendor(root, manager_model).name == expected


def test_hint_overrides_detection():
    assert detect_vendor({"Vendor": "HPE"}, hint="lenovo").name == "lenovo"


def test_every_workaround_names_vendor_model_firmware_and_a_real_field():
    fields = {f.name for f in dataclasses.fields(Quirks)}
    for profile in PROFILES:
        for w in profile.workarounds:
            assert w.field in fields, (profile.name, w.field)
            assert w.vendor and w.models and w.firmware and w.why, (profile.name, w)


def test_quirks_for_hpe_carries_values_and_notes():
    q = quirks_for(detect_vendor({"Vendor": "HPE"}))
    assert q.vendor == "hpe" and q.pci_ids_decimal and q.oem_devices == "hpe"
    assert q.media_locations[0] == "managers"
    assert any(n.startswith("pci_ids_decimal: HPE") for n in q.notes)
    g = quirks_for(GENERIC)
    assert g == Quirks(vendor="generic") and g.notes == ()
