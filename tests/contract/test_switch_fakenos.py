"""The switch driver's sweep through netmiko against fakenos (canned real `show` output over SSH).

fakenos serves what real Arista EOS and Cisco NX-OS switches printed; it
keeps no state and takes no configuration. What every switch must answer
(facts, interfaces, LLDP, VLANs, and the clear refusals where fakenos's
recordings fall short) is in test_switch_contract.py, peers fakenos-eos and
fakenos-nxos, against the same fakenos (conftest ``fakenos_peer``). Here:
a sweep where one login is refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from fleetctl_drivers.switch import run_many

from fleetctl.errors import AuthError
from fleetctl.interfaces.switch import SwitchTarget


@pytest.fixture(scope="module")
def fake(fakenos_peer: dict[str, Any]) -> dict[str, SwitchTarget]:
    eos = fakenos_peer["fakenos-eos"]
    return {"eos1": SwitchTarget("eos1", "127.0.0.1", eos.port, "eos", "admin", "fleet-pw", timeout=10)}


# fakenos's server thread trips over the refused login after netmiko hangs up.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_sweep_with_one_bad_password(fake: dict[str, SwitchTarget]) -> None:
    from dataclasses import replace

    targets = [
        fake["eos1"],
        replace(fake["eos1"], name="eos-bad", password="wrong", timeout=5),
    ]
    results = run_many(targets, lambda sw: sw.get_facts().os_version, concurrency=2)
    assert results[0].ok and results[0].value == "4.14.7M"
    assert not results[1].ok and results[1].error_type == AuthError.__name__
