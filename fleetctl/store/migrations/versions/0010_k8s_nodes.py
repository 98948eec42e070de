"""Kubernetes nodes in the inventory: a site's clusters (references), a server's cluster and node

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 07:50:00

``site.k8s_clusters`` holds the site file's ``clusters:`` (a name, and a
kubeconfig path and context or ``in_cluster``: references, never a token);
``server.k8s_cluster`` / ``server.k8s_node`` what the site file declares (NULL:
the site's only cluster; the node name learned, docs/kubernetes.md).
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("site") as batch_op:
        batch_op.add_column(sa.Column("k8s_clusters", sa.JSON(none_as_null=True), nullable=True))
    with op.batch_alter_table("server") as batch_op:
        batch_op.add_column(sa.Column("k8s_cluster", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("k8s_node", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("server") as batch_op:
        batch_op.drop_column("k8s_node")
        batch_op.drop_column("k8s_cluster")
    with op.batch_alter_table("site") as batch_op:
        batch_op.drop_column("k8s_clusters")
