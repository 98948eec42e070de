"""The schema as light Core tables for the read path. GENERATED: do not edit.

Regenerate with: python -m fleetctl.store.gentables > fleetctl/store/tables.py
"""

from sqlalchemy import JSON, Boolean, DateTime, Float, Integer, String, column, table

__all__ = [
    "accelerator_board",
    "bios_profile",
    "board_rma",
    "burnin_result",
    "burnin_run",
    "event",
    "finding",
    "finding_ack",
    "finding_state",
    "firmware_baseline",
    "hardware_model",
    "job",
    "job_step",
    "k8s_maintenance",
    "link",
    "nic",
    "power_admission",
    "rack",
    "rack_unit",
    "server",
    "server_tag",
    "site",
    "sweep_cursor",
    "sweep_run",
    "sweep_target",
    "switch",
    "switch_port",
]

accelerator_board = table(
    "accelerator_board",
    column("id", Integer()),
    column("kind", String()),
    column("serial", String()),
    column("position", Integer()),
    column("server_id", Integer()),
    column("slot", Integer()),
    column("pci_address", String()),
    column("model", String()),
    column("firmware", JSON()),
    column("state", String()),
)

bios_profile = table(
    "bios_profile",
    column("id", Integer()),
    column("name", String()),
    column("description", String()),
    column("attributes", JSON()),
)

board_rma = table(
    "board_rma",
    column("id", Integer()),
    column("board_id", Integer()),
    column("serial", String()),
    column("kind", String()),
    column("model", String()),
    column("server", String()),
    column("slot", Integer()),
    column("source", String()),
    column("reason", String()),
    column("evidence", JSON()),
    column("actor", String()),
    column("opened_at", DateTime(timezone=True)),
    column("closed_at", DateTime(timezone=True)),
    column("closed_reason", String()),
)

burnin_result = table(
    "burnin_result",
    column("id", Integer()),
    column("run_id", Integer()),
    column("server", String()),
    column("serial", String()),
    column("device", String()),
    column("slot", Integer()),
    column("model", String()),
    column("verdict", String()),
    column("reasons", JSON()),
    column("metrics", JSON()),
    column("telemetry", JSON()),
    column("started_at", DateTime(timezone=True)),
    column("finished_at", DateTime(timezone=True)),
)

burnin_run = table(
    "burnin_run",
    column("id", Integer()),
    column("started_at", DateTime(timezone=True)),
    column("finished_at", DateTime(timezone=True)),
    column("state", String()),
    column("kind", String()),
    column("level", String()),
    column("duration_s", Float()),
    column("selector", String()),
    column("actor", String()),
    column("host", String()),
    column("pid", Integer()),
    column("servers", JSON()),
    column("counts", JSON()),
)

event = table(
    "event",
    column("id", Integer()),
    column("at", DateTime(timezone=True)),
    column("actor", String()),
    column("action", String()),
    column("object_kind", String()),
    column("object_name", String()),
    column("detail", String()),
    column("reason", String()),
)

finding = table(
    "finding",
    column("id", Integer()),
    column("run_id", Integer()),
    column("kind", String()),
    column("target", String()),
    column("check", String()),
    column("subject", String()),
    column("status", String()),
    column("message", String()),
    column("evidence", JSON()),
    column("first_seen", DateTime(timezone=True)),
    column("last_seen", DateTime(timezone=True)),
    column("new", Boolean()),
    column("ack_id", Integer()),
)

finding_ack = table(
    "finding_ack",
    column("id", Integer()),
    column("kind", String()),
    column("target", String()),
    column("check", String()),
    column("subject", String()),
    column("status", String()),
    column("reason", String()),
    column("actor", String()),
    column("created_at", DateTime(timezone=True)),
    column("until", DateTime(timezone=True)),
    column("ended_at", DateTime(timezone=True)),
    column("ended_why", String()),
)

finding_state = table(
    "finding_state",
    column("kind", String()),
    column("target", String()),
    column("check", String()),
    column("subject", String()),
    column("status", String()),
    column("message", String()),
    column("first_seen", DateTime(timezone=True)),
    column("last_seen", DateTime(timezone=True)),
    column("run_id", Integer()),
)

firmware_baseline = table(
    "firmware_baseline",
    column("id", Integer()),
    column("model_id", Integer()),
    column("component", String()),
    column("version", String()),
)

hardware_model = table(
    "hardware_model",
    column("id", Integer()),
    column("name", String()),
    column("kind", String()),
    column("vendor", String()),
    column("model", String()),
    column("height", Integer()),
    column("power_idle_w", Integer()),
    column("power_peak_w", Integer()),
    column("board_kind", String()),
    column("board_count", Integer()),
    column("bios_profile", String()),
    column("driver", String()),
    column("ports", String()),
)

job = table(
    "job",
    column("id", Integer()),
    column("kind", String()),
    column("target", String()),
    column("state", String()),
    column("actor", String()),
    column("args", JSON()),
    column("created_at", DateTime(timezone=True)),
    column("finished_at", DateTime(timezone=True)),
    column("error", String()),
)

job_step = table(
    "job_step",
    column("id", Integer()),
    column("job_id", Integer()),
    column("server_id", Integer()),
    column("name", String()),
    column("state", String()),
    column("attempt", Integer()),
    column("started_at", DateTime(timezone=True)),
    column("finished_at", DateTime(timezone=True)),
    column("output", String()),
    column("error", String()),
)

k8s_maintenance = table(
    "k8s_maintenance",
    column("id", Integer()),
    column("server", String()),
    column("cluster", String()),
    column("node", String()),
    column("job_id", Integer()),
    column("why", String()),
    column("state", String()),
    column("was_cordoned", Boolean()),
    column("evicted", Integer()),
    column("waited_s", Float()),
    column("reason", String()),
    column("detail", JSON()),
    column("started_at", DateTime(timezone=True)),
    column("updated_at", DateTime(timezone=True)),
    column("released_at", DateTime(timezone=True)),
)

link = table(
    "link",
    column("id", Integer()),
    column("port_id", Integer()),
    column("nic_id", Integer()),
    column("peer_port_id", Integer()),
    column("mode", String()),
    column("vlans", String()),
)

nic = table(
    "nic",
    column("id", Integer()),
    column("server_id", Integer()),
    column("name", String()),
    column("mac", String()),
)

power_admission = table(
    "power_admission",
    column("id", Integer()),
    column("rack", String()),
    column("server", String()),
    column("peak_w", Integer()),
    column("start_at", Float()),
    column("holder", String()),
)

rack = table(
    "rack",
    column("id", Integer()),
    column("site_id", Integer()),
    column("name", String()),
    column("row", String()),
    column("position", Integer()),
    column("height", Integer()),
    column("power_budget_w", Integer()),
)

rack_unit = table(
    "rack_unit",
    column("rack_id", Integer()),
    column("unit", Integer()),
    column("server_id", Integer()),
    column("switch_id", Integer()),
)

server = table(
    "server",
    column("id", Integer()),
    column("name", String()),
    column("serial", String()),
    column("model_id", Integer()),
    column("rack_id", Integer()),
    column("position", Integer()),
    column("height", Integer()),
    column("bmc_url", String()),
    column("bmc_system_id", String()),
    column("credential", String()),
    column("bmc_fingerprint", String()),
    column("host_address", String()),
    column("host_vars", JSON()),
    column("k8s_cluster", String()),
    column("k8s_node", String()),
    column("state", String()),
    column("target_state", String()),
    column("last_error", String()),
    column("reservation", String()),
    column("reserved_at", DateTime(timezone=True)),
    column("reserved_for", String()),
    column("created_at", DateTime(timezone=True)),
    column("updated_at", DateTime(timezone=True)),
)

server_tag = table(
    "server_tag",
    column("server_id", Integer()),
    column("tag", String()),
)

site = table(
    "site",
    column("id", Integer()),
    column("name", String()),
    column("description", String()),
    column("provisioning", JSON()),
    column("k8s_clusters", JSON()),
)

sweep_cursor = table(
    "sweep_cursor",
    column("kind", String()),
    column("target", String()),
    column("value", JSON()),
    column("updated_at", DateTime(timezone=True)),
)

sweep_run = table(
    "sweep_run",
    column("id", Integer()),
    column("started_at", DateTime(timezone=True)),
    column("finished_at", DateTime(timezone=True)),
    column("state", String()),
    column("level", String()),
    column("selector", String()),
    column("actor", String()),
    column("host", String()),
    column("pid", Integer()),
    column("duration_s", Float()),
    column("servers", Integer()),
    column("switches", Integer()),
    column("counts", JSON()),
    column("worst_new", String()),
)

sweep_target = table(
    "sweep_target",
    column("id", Integer()),
    column("run_id", Integer()),
    column("kind", String()),
    column("name", String()),
    column("site", String()),
    column("rack", String()),
    column("position", Integer()),
    column("status", String()),
    column("elapsed", Float()),
    column("error", String()),
    column("metrics", JSON()),
)

switch = table(
    "switch",
    column("id", Integer()),
    column("name", String()),
    column("serial", String()),
    column("model_id", Integer()),
    column("platform", String()),
    column("role", String()),
    column("mgmt_address", String()),
    column("credential", String()),
    column("ssh_port", Integer()),
    column("snmp_version", String()),
    column("snmp_credential", String()),
    column("snmp_port", Integer()),
    column("rack_id", Integer()),
    column("position", Integer()),
    column("height", Integer()),
)

switch_port = table(
    "switch_port",
    column("id", Integer()),
    column("switch_id", Integer()),
    column("name", String()),
    column("description", String()),
)

# Keep the imports used whatever the schema holds.
_TYPES = (JSON, Boolean, DateTime, Float, Integer, String)
