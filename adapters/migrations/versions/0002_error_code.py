"""add error_code: a machine-readable failure code per document version

``document_versions.error_code`` (text, NULL until a version fails with a coded
error).  ``IF NOT EXISTS``: a database where the column was added by hand (the
interim ``ALTER`` line in adapters/metadata.py) upgrades too.

Revision ID: 0002_error_code
Revises: 0001_baseline
Create Date: 2026-11-30
"""
from alembic import op

revision = "0002_error_code"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE document_versions ADD COLUMN IF NOT EXISTS error_code text")


def downgrade() -> None:
    op.execute("ALTER TABLE document_versions DROP COLUMN IF EXISTS error_code")
