"""server host endpoints (SSH address, Ansible variables), switch SSH port, model driver

A fleet says itself how to reach each installed OS and each switch's CLI, so
that a lab (a fleet of its own, in its own database) needs no address
swapped in at run time.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 14:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hardware_model", schema=None) as batch_op:
        batch_op.add_column(sa.Column("driver", sa.String(), nullable=True))
    with op.batch_alter_table("server", schema=None) as batch_op:
        batch_op.add_column(sa.Column("host_address", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("host_vars", sa.JSON(), nullable=True))
    with op.batch_alter_table("switch", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ssh_port", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("switch", schema=None) as batch_op:
        batch_op.drop_column("ssh_port")
    with op.batch_alter_table("server", schema=None) as batch_op:
        batch_op.drop_column("host_vars")
        batch_op.drop_column("host_address")
    with op.batch_alter_table("hardware_model", schema=None) as batch_op:
        batch_op.drop_column("driver")
