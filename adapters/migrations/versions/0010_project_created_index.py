"""add index document_versions (project, created_at): a project's recent uploads

The uploader counts a project's versions in flight (registered in the last minutes,
not finished) to send a bulk upload to the bulk lane (topics/lanes.py ``burst_lane``,
``Metadata.in_flight_versions``); without the index that count scans every project's
versions.

Revision ID: 0010_project_created_index
Revises: 0009_source_claims
Create Date: 2026-12-06
"""
from alembic import op

revision = "0010_project_created_index"
down_revision = "0009_source_claims"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS document_versions_project_created"
               " ON document_versions (project, created_at)")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS document_versions_project_created")
