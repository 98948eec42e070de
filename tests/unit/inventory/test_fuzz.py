"""Bad input, fuzzed (issue #13): broken site files and CLI arguments never crash and never write.

Hypothesis takes the example site (inventory/site-tyo1.yaml) and breaks it:
a required key deleted, a value of the wrong type, a duplicate name, an
unknown key, a reference to nothing, garbage bytes, a truncated file, random
unicode, deep nesting. Every case must give exit 2 and one line
``error: FILE:LINE: ...`` (no traceback, no internal error) and leave the
store as it was (the export before and after is the same). A mutation that
happens to be valid (a truncation at the end of a rack leaves a smaller,
valid site) must apply cleanly: importing it again changes nothing.

The CLI arguments of `inventory import`, `server list --state`, `power status`
and selectors get the same treatment: exit 2, one line naming the argument.

Then YAML's aliases and merge keys, which the loader's own line tracking
implements: an aliased site loads to the same inventory as the expanded one,
errors point at the line where the bad value is written, and a "billion
laughs" document is refused by the alias expansion bound, never expanded.

Runs are derandomized (the same cases every run, CI included) and kept small
(max_examples below); each test prints how many cases it ran (`pytest -s`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, note, settings
from hypothesis import strategies as st
from invtest_sites import line_of

from fleetctl.errors import InputError
from fleetctl.inventory.loader import ALIAS_LIMIT, load_text

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "inventory" / "site-tyo1.yaml"
SITE = EXAMPLE.read_text(encoding="utf-8")
LINES = SITE.splitlines(keepends=True)

FUZZ = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
CASES_RUN: dict[str, int] = {}


def _count(test: str) -> None:
    CASES_RUN[test] = CASES_RUN.get(test, 0) + 1


def _report(test: str) -> None:
    print(f"\n{test}: {CASES_RUN.get(test, 0)} cases run")


# -- the site-file mutations -------------------------------------------------------------------------------

_KEY_LINE = re.compile(r"^(?P<indent>\s*(?:- )?)(?P<key>[a-z_]+): ?(?P<value>.*)$")
_REQUIRED = {"name", "serial", "model", "position", "kind", "vendor", "platform", "role", "address", "switch", "port", "slot"}
_REFERENCES = {"model", "switch", "server", "nic", "peer", "peer_port", "port", "bios_profile"}


def _key_lines(keys: set[str] | None = None) -> list[int]:
    """Indexes of the lines ``key: value`` (with a value), optionally only these keys."""
    out = []
    for i, line in enumerate(LINES):
        m = _KEY_LINE.match(line.rstrip("\n"))
        if m and m["value"] and (keys is None or m["key"] in keys):
            out.append(i)
    return out


KEY_LINES = _key_lines()
REQUIRED_LINES = _key_lines(_REQUIRED)
REFERENCE_LINES = _key_lines(_REFERENCES)
SERVER_NAMES = [m["value"] for line in LINES if (m := _KEY_LINE.match(line.rstrip("\n"))) and m["key"] == "name"]


def _with_line(i: int, new: str | None) -> str:
    """The site with line ``i`` replaced (None: deleted)."""
    lines = list(LINES)
    if new is None:
        del lines[i]
    else:
        lines[i] = new
    return "".join(lines)


def _set_value(i: int, value: str) -> str:
    m = _KEY_LINE.match(LINES[i].rstrip("\n"))
    assert m
    # A "- key:" line keeps its dash: the item stays an item.
    return _with_line(i, f"{m['indent']}{m['key']}: {value}\n")


WRONG_VALUES = st.sampled_from([
    "two", "-1", "0", "99999999999999999999", "1.5", "[1, 2]", "{a: 1}", "null", "''", "true", "~", "[]", "{}",
    "'   '", "!!binary aGVsbG8=", "!custom x", "*nosuch", "&a", "'x' 'y'", "0x1F", "1e400", "2024-01-02", ".nan",
])  # fmt: skip
UNICODE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


@st.composite
def delete_required(draw: st.DrawFn) -> str:
    return _with_line(draw(st.sampled_from(REQUIRED_LINES)), None)


@st.composite
def wrong_type(draw: st.DrawFn) -> str:
    return _set_value(draw(st.sampled_from(KEY_LINES)), draw(WRONG_VALUES))


@st.composite
def duplicate_name(draw: st.DrawFn) -> str:
    i = draw(st.sampled_from(_key_lines({"name", "serial", "mac", "address"})))
    m = _KEY_LINE.match(LINES[i].rstrip("\n"))
    assert m
    others = [v for line in LINES if (n := _KEY_LINE.match(line.rstrip("\n"))) and n["key"] == m["key"] and (v := n["value"]) != m["value"]]
    return _set_value(i, draw(st.sampled_from(others)))


@st.composite
def unknown_key(draw: st.DrawFn) -> str:
    i = draw(st.sampled_from(KEY_LINES))
    m = _KEY_LINE.match(LINES[i].rstrip("\n"))
    assert m
    key = draw(st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True))
    indent = " " * len(m["indent"])  # the same mapping as the line it follows
    lines = list(LINES)
    lines.insert(i + 1, f"{indent}{key}: {draw(st.sampled_from(['red', '1', '[x]']))}\n")
    return "".join(lines)


@st.composite
def bad_reference(draw: st.DrawFn) -> str:
    i = draw(st.sampled_from(REFERENCE_LINES))
    return _set_value(i, draw(st.sampled_from([*SERVER_NAMES, "nosuch", "Ethernet999", "eth9"])))


@st.composite
def truncated(draw: st.DrawFn) -> str:
    return SITE[: draw(st.integers(0, len(SITE) - 1))]


@st.composite
def random_unicode(draw: st.DrawFn) -> str:
    at = draw(st.integers(0, len(SITE)))
    return SITE[:at] + draw(UNICODE) + SITE[at:]


@st.composite
def deep_nesting(draw: st.DrawFn) -> str:
    depth = draw(st.integers(50, 5000))
    open_, close = draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
    return _set_value(draw(st.sampled_from(KEY_LINES)), open_ * depth + "1" + close * depth)


@st.composite
def garbage_bytes(draw: st.DrawFn) -> bytes:
    raw = SITE.encode()
    at = draw(st.integers(0, len(raw)))
    return raw[:at] + draw(st.binary(min_size=1, max_size=16)) + raw[at:]


MUTATIONS = {
    "delete a required key": delete_required(), "wrong type": wrong_type(), "duplicate name": duplicate_name(),
    "unknown key": unknown_key(), "bad reference": bad_reference(), "truncated": truncated(),
    "random unicode": random_unicode(), "deep nesting": deep_nesting(), "garbage bytes": garbage_bytes(),
}  # fmt: skip
SITE_MUTATIONS = st.one_of(*(st.tuples(st.just(kind), strategy) for kind, strategy in MUTATIONS.items()))


def _first(key: str) -> int:
    return next(i for i in KEY_LINES if _KEY_LINE.match(LINES[i].rstrip("\n"))["key"] == key)  # type: ignore[index]


# One fixed case of each kind, run first (Hypothesis's explicit phase): every
# kind is tried on every run, whatever the generated cases turn out to be.
_RAW = SITE.encode()
EXPLICIT = [
    ("delete a required key", _with_line(REQUIRED_LINES[len(REQUIRED_LINES) // 2], None)),
    ("wrong type", _set_value(_first("position"), "two")),
    ("duplicate name", _set_value(_key_lines({"serial"})[1], _KEY_LINE.match(LINES[_key_lines({"serial"})[0]].rstrip())["value"])),  # type: ignore[index]
    ("unknown key", "".join([*LINES[:_first("position") + 1], "      colour: red\n", *LINES[_first("position") + 1:]])),
    ("bad reference", _set_value(_first("bios_profile"), "nosuch")),
    ("truncated", SITE[: len(SITE) // 2]),
    ("random unicode", SITE[:5000] + "\u2028\u00e9\U0001f600\ufeff" + SITE[5000:]),
    ("deep nesting", _set_value(_first("position"), "[" * 3000 + "1" + "]" * 3000)),
    ("garbage bytes", _RAW[:1000] + b"\xff\xfe\x00\x80" + _RAW[1000:]),
]


def _assert_refused(r, what: str) -> None:  # type: ignore[no-untyped-def]
    """Exit 2, one line ``error: ...`` naming ``what`` (a file:line, or the argument), no traceback."""
    assert r.code == 2, (r.code, r.out, r.err)
    err = r.err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    assert what in err, (what, err)


class Baseline:
    """The store's export as the next case must leave it (a short repr: Hypothesis prints its arguments)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return other == self.text

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<export of {len(self.text.splitlines())} lines>"


@pytest.fixture
def example_store(cli, export):  # type: ignore[no-untyped-def]
    """The example site imported, on SQLite (test_bad_input.py shows bad input is refused the same way on PostgreSQL)."""
    r = cli("inventory", "import", str(EXAMPLE))
    assert r.code == 0, r.err
    return Baseline(export())


# No shrinking: a case is a 40 kB file, and `note` already says what it was and what the CLI said.
# max_examples counts the generated cases; the explicit ones come on top.
@settings(FUZZ, max_examples=16, phases=[Phase.explicit, Phase.generate])
@given(case=SITE_MUTATIONS)
@example(case=EXPLICIT[0])
@example(case=EXPLICIT[1])
@example(case=EXPLICIT[2])
@example(case=EXPLICIT[3])
@example(case=EXPLICIT[4])
@example(case=EXPLICIT[5])
@example(case=EXPLICIT[6])
@example(case=EXPLICIT[7])
@example(case=EXPLICIT[8])
def test_a_broken_site_file_is_refused_with_file_and_line(example_store, cli, export, tmp_path, case) -> None:  # type: ignore[no-untyped-def]
    kind, mutated = case
    _count("site files")
    _count(f"site files: {kind}")
    path = tmp_path / "broken" / f"case-{CASES_RUN['site files']}.yaml"
    path.parent.mkdir(exist_ok=True)
    if isinstance(mutated, bytes):
        path.write_bytes(mutated)
    else:
        path.write_text(mutated, encoding="utf-8")
    r = cli("inventory", "import", str(path))
    note(f"{kind}: exit {r.code}: {r.err.strip()}")
    _count(f"site files: exit {r.code}")
    if r.code == 0:
        # A valid mutation (a truncation that leaves a smaller site): it applied
        # as a whole, so a second import of the same file changes nothing.
        again = cli("inventory", "import", str(path))
        assert again.code == 0 and "nothing to change" in again.out, (again.out, again.err)
        # Back to the example for the next case. Not quite the same store: an
        # import never removes models or BIOS profiles, so one the mutation
        # added (a renamed profile) stays, and is the next case's baseline.
        assert cli("inventory", "import", str(EXAMPLE)).code == 0
        example_store.text = export()
        return
    _assert_refused(r, f"{path}:")
    m = re.match(rf"error: {re.escape(str(path))}:(\d+)(:\d+)?: ", r.err)
    assert m, f"no file:line in {r.err!r}"
    assert 1 <= int(m[1]) <= len(LINES) + 1
    assert export() == example_store


def test_site_file_cases_count() -> None:
    """Not a check: prints how many broken files the run above tried, by kind and exit code (`pytest -s`)."""
    for name in sorted(CASES_RUN):
        if name.startswith("site files"):
            _report(name)


# -- CLI arguments -----------------------------------------------------------------------------------------

STATES = {"registered", "inspected", "preparing", "installing", "configuring", "validating", "ready", "in-service",
          "maintenance", "failed", "rma"}  # fmt: skip
# Arguments: printable or not, never a word the example names (a valid TARGET would reach for its BMCs).
ARGS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00"), max_size=20)
KNOWN = {*SERVER_NAMES, *STATES, "all", "tyo1", "mncore2", "gpu", "batch-2026q3"}


_KNOWN_FOLDED = {k.casefold() for k in KNOWN}


def _unknown(value: str) -> bool:
    """Names nothing in the example, however it is cut, stripped or cased (a valid TARGET would reach for its BMCs)."""
    words = [value, *re.split(r"[=/,\s]", value)]
    return value.strip() != "" and not any(w.strip().casefold() in _KNOWN_FOLDED for w in words)


@FUZZ
@given(value=ARGS.filter(_unknown))
def test_power_status_refuses_an_unknown_target(example_store, cli, export, value) -> None:  # type: ignore[no-untyped-def]
    _count("power status")
    r = cli("power", "status", value)
    _assert_refused(r, repr(value) if "=" not in value else value.partition("=")[0])
    assert export() == example_store


@FUZZ
@given(key=st.sampled_from(["state", "tag", "model", "rack", "site", "colour", "State", ""]), value=ARGS)
def test_a_selector_with_a_bad_value_is_refused(example_store, cli, key, value) -> None:  # type: ignore[no-untyped-def]
    if key in ("state", "tag", "model", "rack", "site") and not _unknown(value):
        value = value + "-nosuch" if value.strip() else value
    _count("selectors")
    r = cli("power", "status", f"{key}={value}")
    _assert_refused(r, "")
    # Names the selector: its key, or the TARGET that held it.
    assert key in r.err or "TARGET" in r.err or repr(f"{key}={value}") in r.err, r.err


@FUZZ
@given(value=ARGS.filter(lambda v: v not in STATES))
def test_server_list_refuses_an_unknown_state(example_store, cli, value) -> None:  # type: ignore[no-untyped-def]
    _count("server list --state")
    r = cli("server", "list", "--state", value)
    _assert_refused(r, "state")


@FUZZ
@given(name=ARGS.filter(lambda v: v.strip() not in ("", ".") and ".." not in v and not v.startswith(("-", "/"))))
def test_inventory_import_refuses_a_path_that_is_not_there(example_store, cli, export, tmp_path, name) -> None:  # type: ignore[no-untyped-def]
    _count("inventory import PATH")
    path = tmp_path / "absent" / name
    r = cli("inventory", "import", str(path))
    _assert_refused(r, "no such file or folder")
    assert export() == example_store


def test_cli_argument_cases_count() -> None:
    """Not a check: prints how many arguments the runs above tried (`pytest -s`)."""
    for name in ("power status", "selectors", "server list --state", "inventory import PATH"):
        _report(name)


# -- YAML aliases and merge keys ---------------------------------------------------------------------------

# BASE (invtest_sites.py) written with anchors, aliases and merge keys; EXPANDED says the same without them.
ALIASED = """\
models:
- &server_model
  name: srv1u
  kind: server
  vendor: &vendor Acme
  model: S1
  height: 1
  boards:
    kind: mncore2
    count: 2
- <<: *server_model
  name: srv2u
  model: S2
  height: 2
  boards: {kind: mncore2, count: 4}
- name: sw8
  kind: switch
  vendor: *vendor
  model: W8
  height: 1
  ports: &ports
  - Ethernet[1-8]
  - mgmt0
sites:
- name: lab1
  racks:
  - name: r1
    height: 10
    servers:
    - &s1
      name: s1
      serial: SER-1
      model: srv1u
      position: 1
      bmc: https://10.0.0.1
      credential: &cred env:BMC_LAB
      nics:
      - name: eth0
        mac: 02:00:00:00:00:01
      boards:
      - serial: B-1
        slot: 0
      - serial: B-2
        slot: 1
    - <<: [*s1, {tags: [merged]}]
      name: s2
      serial: SER-2
      model: srv2u
      position: 2
      bmc: https://10.0.0.2
      nics:
      - name: eth0
        mac: 02:00:00:00:00:02
      - name: eth1
        mac: 02:00:00:00:00:03
      boards: []
    switches:
    - name: sw1
      model: sw8
      platform: sonic
      role: leaf
      address: 10.1.0.1
      position: 10
  cabling:
  - &cable
    switch: sw1
    port: Ethernet1
    server: s1
    nic: eth0
    vlans: &vlans
    - 100
  - <<: *cable
    port: Ethernet2
    server: s2
    vlans: *vlans
"""

EXPANDED = """\
models:
- name: srv1u
  kind: server
  vendor: Acme
  model: S1
  height: 1
  boards:
    kind: mncore2
    count: 2
- name: srv2u
  kind: server
  vendor: Acme
  model: S2
  height: 2
  boards: {kind: mncore2, count: 4}
- name: sw8
  kind: switch
  vendor: Acme
  model: W8
  height: 1
  ports:
  - Ethernet[1-8]
  - mgmt0
sites:
- name: lab1
  racks:
  - name: r1
    height: 10
    servers:
    - name: s1
      serial: SER-1
      model: srv1u
      position: 1
      bmc: https://10.0.0.1
      credential: env:BMC_LAB
      nics:
      - name: eth0
        mac: 02:00:00:00:00:01
      boards:
      - serial: B-1
        slot: 0
      - serial: B-2
        slot: 1
    - name: s2
      serial: SER-2
      model: srv2u
      position: 2
      bmc: https://10.0.0.2
      credential: env:BMC_LAB
      nics:
      - name: eth0
        mac: 02:00:00:00:00:02
      - name: eth1
        mac: 02:00:00:00:00:03
      boards: []
      tags: [merged]
    switches:
    - name: sw1
      model: sw8
      platform: sonic
      role: leaf
      address: 10.1.0.1
      position: 10
  cabling:
  - switch: sw1
    port: Ethernet1
    server: s1
    nic: eth0
    vlans:
    - 100
  - switch: sw1
    port: Ethernet2
    server: s2
    nic: eth0
    vlans:
    - 100
"""


def _sorted(value):  # type: ignore[no-untyped-def]
    """Mappings compared without their key order (a merged key comes after the explicit ones)."""
    if isinstance(value, dict):
        return {k: _sorted(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def test_aliases_and_merge_keys_read_as_the_expanded_file() -> None:
    assert _sorted(load_text(ALIASED, "aliased.yaml").data) == _sorted(load_text(EXPANDED, "expanded.yaml").data)


def test_an_aliased_site_imports_to_the_same_inventory_as_the_expanded_one(tmp_path, monkeypatch, cli) -> None:  # type: ignore[no-untyped-def]
    from fleetctl.store import reset_engines

    exports = []
    for name, text in (("aliased", ALIASED), ("expanded", EXPANDED)):
        monkeypatch.setenv("FLEETCTL_DB", str(tmp_path / f"{name}.db"))
        reset_engines()
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        r = cli("inventory", "import", str(path))
        assert r.code == 0, r.err
        exports.append(cli("inventory", "export").out)
    assert exports[0] == exports[1]
    assert "tags:\n      - merged" in exports[0] or "merged" in exports[0]


def _refusal(cli, tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "site.yaml"
    path.write_text(text)
    r = cli("inventory", "import", str(path))
    _assert_refused(r, f"{path}:")
    return path, r.err.strip()


# (mutation of ALIASED, the text on the line the error must name (nth occurrence), the field, the message)
ALIAS_LINE_CASES = [
    # A merged key's bad value: the line where the anchored mapping writes it, the field of the server that merged it.
    ("merged-value", lambda t: t.replace("      serial: SER-2\n", ""),
     ("serial: SER-1", 1), "servers[1].serial", "already used by server s1"),
    # A merged mapping's unknown key: where it is written (inside the anchor).
    ("merged-unknown-key", lambda t: t.replace("    nic: eth0\n    vlans: &vlans\n", "    nic: eth0\n    colour: red\n    vlans: &vlans\n"),
     ("colour: red", 1), "cabling[0].colour", "unknown key 'colour'"),
    # An aliased scalar: the line of the alias, where the key that takes it is written.
    ("aliased-scalar", lambda t: t.replace("bmc: https://10.0.0.2", "bmc: &b https://10.0.0.2").replace("address: 10.1.0.1", "address: *b"),
     ("address: *b", 1), "switches[0].address", ""),
    # An aliased sequence: inside it, the line where the item is written.
    ("aliased-sequence", lambda t: t.replace("      nics:\n      - name: eth0\n        mac: 02:00:00:00:00:01\n",
                                             "      nics: &nics1\n      - name: eth0\n        mac: 02:00:00:00:00:01\n")
                                    .replace("      nics:\n      - name: eth0\n        mac: 02:00:00:00:00:02\n      - name: eth1\n"
                                             "        mac: 02:00:00:00:00:03\n", "      nics: *nics1\n"),
     ("mac: 02:00:00:00:00:01", 1), "servers[1].nics[0].mac", "already used by s1/eth0"),
    # An explicit key beside a merge: its own line.
    ("explicit-over-merge", lambda t: t.replace("    port: Ethernet2\n    server: s2\n", "    port: Ethernet99\n    server: s2\n"),
     ("port: Ethernet99", 1), "cabling[1].port", "no port 'Ethernet99'"),
    # A merge of something that is not a mapping.
    ("merge-of-a-scalar", lambda t: t.replace("  - <<: *cable\n", "  - <<: *vendor\n"),
     ("<<: *vendor", 1), None, "a merge key '<<' takes a mapping"),
    ("recursive-alias", lambda t: t.replace("    vlans: *vlans\n", "    vlans: &loop [1, *loop]\n"),
     ("&loop", 1), None, "inside the node it names"),
    # Only a plain << merges: a quoted one is a key like any other (unknown), so cabling[1] has no switch.
    ("quoted-merge-key", lambda t: t.replace("  - <<: *cable\n", "  - '<<': *cable\n"),
     ("'<<': *cable", 1), "cabling[1].switch", "missing required field 'switch' (and 1 more problem)"),
    ("unknown-alias", lambda t: t.replace("    vlans: *vlans\n", "    vlans: *nosuch\n"), ("*nosuch", 1), None, "unknown alias *nosuch"),
]  # fmt: skip


@pytest.mark.parametrize(("mutate", "where", "field", "fragment"), [c[1:] for c in ALIAS_LINE_CASES], ids=[c[0] for c in ALIAS_LINE_CASES])
def test_an_error_in_an_aliased_or_merged_value_names_the_line_it_is_written_on(  # type: ignore[no-untyped-def]
    cli, export, tmp_path, mutate: Callable[[str], str], where, field, fragment
) -> None:
    text = mutate(ALIASED)
    assert text != ALIASED
    before = export()
    path, err = _refusal(cli, tmp_path, text)
    assert f"{path}:{line_of(text, *where)}:" in err, err
    if field:
        assert field in err, err
    assert fragment in err, err
    assert export() == before


# -- billion laughs ----------------------------------------------------------------------------------------


def _bomb(levels: int, fanout: int, tail: str = "sites: *a{last}") -> str:
    """The classic: each anchor a list of ``fanout`` aliases of the one before; ``fanout ** levels`` values expanded."""
    lines = ["bomb:", f"- &a0 [{', '.join(['lol'] * fanout)}]"]
    lines += [f"- &a{i} [{', '.join([f'*a{i - 1}'] * fanout)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n" + tail.format(last=levels - 1) + "\n"


def test_a_billion_laughs_is_refused_not_expanded(cli, export, tmp_path) -> None:  # type: ignore[no-untyped-def]
    text = _bomb(9, 10)  # 10**9 'lol's once expanded, in 360 bytes
    before = export()
    path, err = _refusal(cli, tmp_path, text)
    assert f"aliases expand to more than {ALIAS_LIMIT:,} values" in err and "refused, not expanded" in err, err
    # Refused at the alias that crosses the bound: in level 5 (ten aliases of 111,111 values each), long before the last.
    assert f"{path}:{line_of(text, '- &a5 [')}:" in err, err
    assert export() == before


def test_a_billion_laughs_is_refused_by_the_loader_itself() -> None:
    with pytest.raises(InputError, match="refused, not expanded"):
        load_text(_bomb(9, 10), "bomb.yaml")


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(InputError, match=r"bomb\.yaml:1: alias \*a is inside the node it names"):
        load_text("sites: &a [*a]\n", "bomb.yaml")


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(levels=st.integers(2, 40), fanout=st.integers(2, 12))
def test_alias_bombs_of_any_shape_are_refused_once_past_the_bound(levels: int, fanout: int) -> None:
    _count("alias bombs")
    expanded = sum(fanout**i for i in range(1, levels + 1))  # the values the aliases reach, as counted
    text = _bomb(levels, fanout)
    if expanded > 2 * ALIAS_LIMIT:
        with pytest.raises(InputError, match="refused, not expanded"):
            load_text(text, "bomb.yaml")
    elif expanded <= ALIAS_LIMIT:
        load_text(text, "bomb.yaml")  # within the bound: read (the schema refuses it later)


def test_shared_defaults_on_many_servers_stay_within_the_bound() -> None:
    """`<<: *defaults` on 20,000 servers is what aliases are for: nowhere near the bound."""
    servers = "".join(f"  - <<: *d\n    name: s{i}\n    serial: S{i}\n    position: {i}\n" for i in range(20_000))
    defaults = "{model: m, credential: 'env:X', bmc: 'https://b', tags: [a, b, c, d], firmware: {BMC: '1', BIOS: '2'}}"
    text = f"defaults:\n- &d {defaults}\nservers:\n" + servers
    data = load_text(text, "many.yaml").data
    assert len(data["servers"]) == 20_000 and data["servers"][-1]["tags"] == ["a", "b", "c", "d"]


def test_alias_bomb_cases_count() -> None:
    """Not a check: prints how many bomb shapes the run above tried (`pytest -s`)."""
    _report("alias bombs")
