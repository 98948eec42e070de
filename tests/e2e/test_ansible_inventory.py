"""The Ansible inventory source, run by the real `ansible-inventory`.

The example site is imported into a fresh store (SQLite, and PostgreSQL
where one can be had); `ansible-inventory -i inventory/fleetctl.py` runs as a
subprocess with FLEETCTL_DB pointing at it, exactly as an operator would run
it. What each group should hold is worked out from the site file itself, not
from fleetctl's code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "inventory"
SCRIPT = REPO / "inventory" / "fleetctl.py"
VENV_BIN = Path(sys.executable).parent
ANSIBLE_INVENTORY = VENV_BIN / "ansible-inventory"
SITE_FILE = EXAMPLE / "site-tyo1.yaml"

# Secrets an operator might have in the environment while running Ansible;
# none of them may reach the inventory's output.
SECRET_ENV = {
    "BMC_TYO1_USERNAME": "bmc-admin-user",
    "BMC_TYO1_PASSWORD": "s3cret-bmc-pa55",
    "SWITCH_USERNAME": "switch-admin-user",
    "SWITCH_PASSWORD": "s3cret-switch-pa55",
}

needs_ansible = pytest.mark.skipif(
    not ANSIBLE_INVENTORY.exists(), reason=f"ansible-inventory not installed beside {sys.executable} (ansible-core)"
)


def group(prefix: str, value: str) -> str:
    return prefix + "_" + "".join(c if c.isalnum() or c == "_" else "_" for c in value)


def expected_from_site_file() -> tuple[dict[str, set[str]], dict[str, dict], set[str]]:
    """Groups -> hosts, host -> facts, and every credential reference, read from the YAML."""
    doc = yaml.safe_load(SITE_FILE.read_text())
    board_kind = {m["name"]: (m.get("boards") or {}).get("kind") for m in doc["models"]}
    groups: dict[str, set[str]] = defaultdict(set)
    hosts: dict[str, dict] = {}
    refs: set[str] = set()
    for site in doc["sites"]:
        for rack in site["racks"]:
            for s in rack.get("servers", []):
                kinds = {b.get("kind") or board_kind[s["model"]] for b in s.get("boards", [])}
                if board_kind[s["model"]]:
                    kinds.add(board_kind[s["model"]])
                names = [group("site", site["name"]), group("rack", rack["name"]), "role_server",
                         group("state", s.get("state", "registered"))] + [group("accel", k) for k in kinds]  # fmt: skip
                for g in names:
                    groups[g].add(s["name"])
                hosts[s["name"]] = {"rack": rack["name"], "position": s["position"], "bmc": s.get("bmc"), "kind": "server"}
                refs.add(s.get("credential") or "")
            for w in rack.get("switches", []):
                for g in (group("site", site["name"]), group("rack", rack["name"]), group("role", w["role"])):
                    groups[g].add(w["name"])
                hosts[w["name"]] = {"rack": rack["name"], "position": w["position"], "address": w["address"], "kind": "switch"}
                refs.add(w.get("credential") or "")
    refs.discard("")
    return groups, hosts, refs


def run_ansible_inventory(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, **SECRET_ENV)
    env.update(
        # A script that fails must fail the command, not leave an empty inventory and a warning.
        ANSIBLE_INVENTORY_UNPARSED_FAILED="true",
        ANSIBLE_HOME=str(tmp_path / "ansible-home"),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
        ANSIBLE_NOCOLOR="1",
    )
    done = subprocess.run(
        [str(ANSIBLE_INVENTORY), "-i", "inventory/fleetctl.py", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"ansible-inventory {' '.join(args)} failed:\n{done.stderr}"
    assert "WARNING" not in done.stderr, done.stderr
    return done


def parse_graph(text: str) -> dict[str, set[str]]:
    """`ansible-inventory --graph` -> group -> its hosts (child groups as '@name')."""
    groups: dict[str, set[str]] = defaultdict(set)
    stack: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("@"):
            stack = [line[1:].rstrip(":")]
            continue
        prefix, _, item = line.partition("|--")
        stack = stack[: prefix.count("|") + 1]
        if item.startswith("@"):
            name = item[1:].rstrip(":")
            groups[stack[-1]].add("@" + name)
            groups.setdefault(name, set())
            stack.append(name)
        else:
            groups[stack[-1]].add(item)
    return groups


def assert_no_secrets(text: str, refs: set[str]) -> None:
    assert refs, "the example site should declare credential references"
    for ref in refs:
        assert ref not in text, f"credential reference {ref!r} leaked"
        assert ref.partition(":")[2] not in text, f"credential reference {ref!r} leaked"
    for name, value in SECRET_ENV.items():
        assert value not in text, f"secret from {name} leaked"
    assert "credential" not in text.lower()
    assert "password" not in text.lower()


@pytest.fixture
def fleet(db_url, cli):  # type: ignore[no-untyped-def]
    """The example site imported; two servers moved on by the lifecycle."""
    r = cli("inventory", "import", str(EXAMPLE))
    assert r.code == 0, r.err
    from sqlalchemy import update

    from fleetctl.models import Server
    from fleetctl.store import get_engine

    # No CLI sets a lifecycle state yet; the provisioning workflow will. Do
    # what it would, so the state groups have more than one member.
    srv = Server.__table__  # type: ignore[attr-defined]
    with get_engine(db_url).begin() as c:
        c.execute(update(srv).where(srv.c.name == "mn-tyo1-r12-01").values(state="in-service"))
        c.execute(update(srv).where(srv.c.name == "gpu-tyo1-r11-02").values(state="maintenance"))
    return db_url


def moved_states(groups: dict[str, set[str]]) -> dict[str, set[str]]:
    out = {g: set(h) for g, h in groups.items()}
    out["state_registered"] -= {"mn-tyo1-r12-01", "gpu-tyo1-r11-02"}
    out["state_in_service"] = {"mn-tyo1-r12-01"}
    out["state_maintenance"] = {"gpu-tyo1-r11-02"}
    return out


@needs_ansible
def test_graph_groups_by_site_rack_role_state_and_accelerator(fleet, tmp_path):  # type: ignore[no-untyped-def]
    done = run_ansible_inventory(tmp_path, "--graph")
    graph = parse_graph(done.stdout)
    expected, hosts, refs = expected_from_site_file()
    expected = moved_states(expected)

    for name, members in expected.items():
        assert graph.get(name) == members, f"group {name}"
    # The example's promises, spelled out.
    rack12 = graph["rack_rack_12"]
    assert len({h for h in rack12 if hosts[h]["kind"] == "server"}) == 19
    assert {h for h in rack12 if hosts[h]["kind"] == "switch"} == {"leaf-tyo1-r12-a", "leaf-tyo1-r12-b", "mgmt-tyo1-r12"}
    mncore = graph["accel_mncore2"]
    assert len({h for h in mncore if h.startswith("mn-tyo1-r12-")}) == 16
    assert mncore == {h for h in hosts if h.startswith("mn-")}
    assert graph["accel_gpu"] == {h for h in hosts if h.startswith("gpu-")}
    assert graph["role_leaf"] == {h for h in hosts if h.startswith("leaf-")}
    assert graph["role_spine"] == {"spine-tyo1-01", "spine-tyo1-02"}
    assert graph["site_tyo1"] == set(hosts)
    # Every host is in `all` through its groups; none is left ungrouped.
    assert graph.get("ungrouped", set()) == set()
    assert_no_secrets(done.stdout + done.stderr, refs)


@needs_ansible
def test_list_and_host_carry_bmc_rack_position_and_no_secrets(fleet, tmp_path):  # type: ignore[no-untyped-def]
    done = run_ansible_inventory(tmp_path, "--list")
    data = json.loads(done.stdout)
    _, hosts, refs = expected_from_site_file()
    hostvars = data["_meta"]["hostvars"]
    assert set(hostvars) == set(hosts)
    for name, facts in hosts.items():
        v = hostvars[name]
        assert v["fleetctl_rack"] == facts["rack"], name
        assert v["fleetctl_position"] == facts["position"], name
        assert v["fleetctl_site"] == "tyo1"
        if facts["kind"] == "server":
            assert v["fleetctl_bmc_url"] == facts["bmc"], name
            assert v["fleetctl_serial"]
        else:
            assert v["ansible_host"] == facts["address"], name
    assert hostvars["mn-tyo1-r12-01"]["fleetctl_state"] == "in-service"
    assert hostvars["mn-tyo1-r12-01"]["fleetctl_accelerators"] == ["mncore2"]
    assert set(hostvars["mn-tyo1-r12-01"]["fleetctl_macs"]) == {"bmc", "eth0", "eth1"}
    assert "mn-tyo1-r12-01" in data["state_in_service"]["hosts"]
    assert_no_secrets(done.stdout + done.stderr, refs)

    one = run_ansible_inventory(tmp_path, "--host", "mn-tyo1-r12-05")
    assert json.loads(one.stdout)["fleetctl_bmc_url"] == hosts["mn-tyo1-r12-05"]["bmc"]
    assert_no_secrets(one.stdout, refs)


def test_bmc_url_with_a_password_is_refused_and_never_reaches_ansible(fleet, cli):  # type: ignore[no-untyped-def]
    """A BMC URL typed with user:password@ is refused; a clean one reaches Ansible as given."""
    r = cli("server", "add", "probe-01", "--rack", "rack-12", "--position", "45", "--model", "mn-server-2-1u",
            "--serial", "PROBE01", "--bmc", "https://root:calvin@10.99.0.1:8443", "--credential", "env:BMC_TYO1")  # fmt: skip
    assert r.code == 2 and "credential reference" in r.err and "calvin" not in r.err
    r = cli("server", "add", "probe-01", "--rack", "rack-12", "--position", "45", "--model", "mn-server-2-1u",
            "--serial", "PROBE01", "--bmc", "https://10.99.0.1:8443", "--credential", "env:BMC_TYO1")  # fmt: skip
    assert r.code == 0, r.err
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--list"], capture_output=True, text=True, timeout=60, check=False,
        env=dict(os.environ, **SECRET_ENV),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout)["_meta"]["hostvars"]["probe-01"]
    assert probe["fleetctl_bmc_url"] == "https://10.99.0.1:8443"
    assert "calvin" not in done.stdout


def test_unknown_host_is_one_line_and_exit_1(fleet):  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--host", "no-such-host"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip() == "fleetctl.py: error: no host named 'no-such-host'"


def _python_without_fleetctl() -> str:
    """The interpreter the venv was made from, if it cannot import fleetctl itself."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    if not base.exists():
        pytest.skip(f"no base interpreter at {base}")
    probe = subprocess.run([str(base), "-c", "import fleetctl"], capture_output=True, cwd="/", check=False)
    if probe.returncode == 0:
        pytest.skip(f"{base} can import fleetctl; the fall-backs cannot be exercised")
    return str(base)


def test_system_python_reexecs_under_the_repo_venv(fleet):  # type: ignore[no-untyped-def]
    if not (REPO / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv in the repository")
    python = _python_without_fleetctl()
    done = subprocess.run([python, str(SCRIPT), "--list"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["rack_rack_12"]["hosts"]) == 22


def test_without_venv_falls_back_to_fleetctl_on_path_or_says_why(fleet, tmp_path):  # type: ignore[no-untyped-def]
    python = _python_without_fleetctl()
    # A copy of the script in a tree with no .venv, as in an installed checkout.
    script = tmp_path / "checkout" / "inventory" / "fleetctl.py"
    script.parent.mkdir(parents=True)
    shutil.copy(SCRIPT, script)
    command = shutil.which("fleetctl") or str(VENV_BIN / "fleetctl")
    if not Path(command).exists():
        pytest.skip("no fleetctl command installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fleetctl").symlink_to(command)

    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    done = subprocess.run([python, str(script), "--list"], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert "mn-tyo1-r12-01" in json.loads(done.stdout)["accel_mncore2"]["hosts"]

    env["PATH"] = f"/usr/bin{os.pathsep}/bin"
    if shutil.which("fleetctl", path=env["PATH"]):
        pytest.skip("a fleetctl command is installed system-wide")
    done = subprocess.run([python, str(script), "--list"], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "cannot find fleetctl" in done.stderr and "no fleetctl command on PATH" in done.stderr
    assert "Traceback" not in done.stderr
