"""The Kubernetes maintenance journal: nodes fleetctl cordoned and drained, for which job, and where that stands

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 10:40:00

One row per maintenance of one server's node (``fleetctl.k8s.maintenance``):
``draining`` and ``drained`` while its job works, ``released`` once
uncordoned, ``held`` when left cordoned on purpose (the action failed, the
drain timed out) until an operator looks. No credential: the cluster by name.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "k8s_maintenance",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("server", sa.String(), nullable=False),
        sa.Column("cluster", sa.String(), nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("why", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("was_cordoned", sa.Boolean(), nullable=False),
        sa.Column("evicted", sa.Integer(), nullable=False),
        sa.Column("waited_s", sa.Float(), nullable=False),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("detail", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_k8s_maintenance_server", "k8s_maintenance", ["server"])
    op.create_index("ix_k8s_maintenance_job_id", "k8s_maintenance", ["job_id"])
    op.create_index("ix_k8s_maintenance_state", "k8s_maintenance", ["state"])


def downgrade() -> None:
    op.drop_index("ix_k8s_maintenance_state", table_name="k8s_maintenance")
    op.drop_index("ix_k8s_maintenance_job_id", table_name="k8s_maintenance")
    op.drop_index("ix_k8s_maintenance_server", table_name="k8s_maintenance")
    op.drop_table("k8s_maintenance")
