"""Lease files: public recordings of each format (tests/data/discovery/SOURCES.md) and strictness on bad ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetctl.discovery.leases import detect, parse_dhcpd, parse_dnsmasq, parse_kea, read_leases
from fleetctl.errors import InputError

DATA = Path(__file__).resolve().parents[2] / "data" / "discovery" / "leases"


def held(path: Path, fmt: str | None = None) -> tuple[str, list[tuple[str, str | None, str | None]]]:
    found, leases = read_leases(path, fmt)
    return found, [(lease.address, lease.mac, lease.hostname) for lease in leases]


def test_kea_memfile_of_a_bmc_reporter() -> None:
    # metal-bmc's test file: a lease in state 4, a lease deleted by a later line (valid_lifetime 0), one without a MAC.
    assert held(DATA / "metal-bmc-kea-leases4.test.csv") == ("kea", [
        ("192.168.1.254", "00:00:00:00:00:02", None),
        ("10.0.0.130", None, None),
        ("10.0.0.1", "00:00:00:00:00:01", "storage01"),
    ])  # fmt: skip
    assert held(DATA / "metal-bmc-kea-leases4.csv")[1] == [
        ("192.168.2.27", "ac:1f:6b:35:ac:62", None),
        ("192.168.2.30", "ac:1f:6b:35:ab:2d", None),
    ]


def test_kea_a_later_line_holds_a_deleted_address_again() -> None:
    text = ("address,hwaddr,client_id,valid_lifetime,expire,subnet_id,fqdn_fwd,fqdn_rev,hostname,state,user_context,pool_id\n"
            "10.0.0.5,aa:bb:cc:dd:ee:01,,3600,1,1,0,0,,0,,0\n"
            "10.0.0.5,aa:bb:cc:dd:ee:01,,0,1,1,0,0,,0,,0\n"
            "10.0.0.5,AA-BB-CC-DD-EE-02,,3600,1,1,0,0,bmc2.,0,,0\n")  # fmt: skip
    assert [(x.address, x.mac, x.hostname, x.line) for x in parse_kea(text)] == [("10.0.0.5", "aa:bb:cc:dd:ee:02", "bmc2", 4)]


def test_dnsmasq_leases() -> None:
    assert held(DATA / "dnsmasq-ui.dnsmasq.leases") == ("dnsmasq", [
        ("10.10.10.1", "de:ad:be:af:de:ad", None),
        ("10.10.10.2", "de:ad:be:af:de:ad", "deadbeaf"),
        ("10.10.10.3", "de:ad:be:af:de:ad", "beafdeaf"),
    ])  # fmt: skip


def test_dnsmasq_ipv6_section_is_skipped() -> None:
    text = ("1750000000 aa:bb:cc:11:22:33 192.168.1.120 pc 01:aa:bb:cc:11:22:33\n"
            "duid 00:01:00:01:2c:6a:aa:bb:cc:dd:ee:ff\n"
            "1750000000 1234 2001:db8::77 nas *\n")  # fmt: skip
    assert [(x.address, x.mac) for x in parse_dnsmasq(text)] == [("192.168.1.120", "aa:bb:cc:11:22:33")]


def test_dhcpd_leases_active_only() -> None:
    assert held(DATA / "isc-dhcp-leases-pfsense.leases") == ("dhcpd", [
        ("10.0.10.72", "64:5a:04:6a:07:a2", "Satellite-C700"),
        ("10.0.0.36", "14:da:e9:04:c8:a3", "Gebruiker-PC"),
    ])  # fmt: skip
    assert held(DATA / "isc-dhcp-leases-debian7.leases") == ("dhcpd", [])  # every lease there is free


def test_dhcpd_the_last_block_of_an_address_wins() -> None:
    text = ('lease 10.1.1.5 {\n  binding state active;\n  hardware ethernet 00:11:22:33:44:55;\n}\n'
            'lease 10.1.1.5 {\n  binding state free;\n  hardware ethernet 00:11:22:33:44:55;\n  uid "\\001;{}";\n}\n'
            'lease 10.1.1.6 {\n  hardware ethernet 00:11:22:33:44:66;\n  client-hostname "bmc-6";\n}\n')  # fmt: skip
    assert [(x.address, x.mac, x.hostname) for x in parse_dhcpd(text)] == [("10.1.1.6", "00:11:22:33:44:66", "bmc-6")]


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("kea.csv", "address,hwaddr,client_id,valid_lifetime\n10.0.0.300,aa:bb:cc:dd:ee:ff,,5\n", "kea.csv:2: address"),
        ("kea.csv", "address,hwaddr,client_id,valid_lifetime\n10.0.0.3,not-a-mac,,5\n", "kea.csv:2: hwaddr"),
        ("kea.csv", "address,hwaddr,client_id,valid_lifetime\n10.0.0.3,,,soon\n", "kea.csv:2: valid_lifetime"),
        ("dnsmasq.leases", "1750000000 aa:bb:cc:11:22:33 192.168.1.120 pc 01\n17 x\n", "dnsmasq.leases:2"),
        ("dhcpd.leases", "lease 10.0.0.1 {\n  hardware ethernet zz:zz;\n}\n", "dhcpd.leases:2: hardware ethernet"),
        ("dhcpd.leases", "# x\nlease 10.0.0.1 {\n  binding state active;\n", "dhcpd.leases:2: this block has no closing"),
        ("dhcpd.leases", 'lease 10.0.0.1 {\n  client-hostname "open;\n}\n', "dhcpd.leases:2"),
    ],
)
def test_a_bad_line_names_its_file_and_line(tmp_path: Path, name: str, text: str, where: str) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(InputError) as e:
        read_leases(p)
    assert str(e.value).startswith(str(tmp_path / where)), str(e.value)


@pytest.mark.parametrize(
    "text",
    ["sites:\n- name: tyo1\n", "{}", "serial,bmc_mac,model\nX1,aa:bb:cc:dd:ee:ff,m\n", "\x00\x01\x02", ""],
)
def test_a_file_of_another_format_is_refused(tmp_path: Path, text: str) -> None:
    p = tmp_path / "leases"
    p.write_text(text)
    with pytest.raises(InputError, match="not a lease file"):
        read_leases(p)


def test_a_format_given_that_the_content_contradicts(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a kea lease file, not dnsmasq"):
        read_leases(DATA / "metal-bmc-kea-leases4.csv", "dnsmasq")


def test_detect() -> None:
    assert detect((DATA / "isc-dhcp-leases-pfsense.leases").read_text()) == "dhcpd"
    assert detect("# The format of this file is documented in the dhcpd.leases(5) manual page.\n") == "dhcpd"
    assert detect("hello world\n") is None


@pytest.mark.parametrize("path", ["/dev/zero", "/proc/self/status", "/"])
def test_devices_folders_and_proc_files_are_refused_without_reading_forever(path: str) -> None:
    from fleetctl.discovery.expect import read_sheet

    with pytest.raises(InputError, match=r"not a regular file|not a lease file"):
        read_leases(Path(path))
    with pytest.raises(InputError, match=r"not a regular file|header"):
        read_sheet(Path(path))
