"""add partial success: failed parts per version, the projection's partial flag, the
profile's allow_partial

- ``version_failed_parts``: one row per part (page range, unit range, attachment)
  of a document version that failed for good while the rest went on
  (adapters/failed_parts.py);
- ``documents.partial`` / ``documents.failed_parts``: the status projection of a
  COMPLETED version that lacks some parts (the list as JSON);
- ``pipeline_profiles.allow_partial`` (default true): whether a failed part leaves
  the document COMPLETED and partial, or fails it as before.

Revision ID: 0007_partial_success
Revises: 0006_user_metadata
Create Date: 2026-12-05
"""
from alembic import op

revision = "0007_partial_success"
down_revision = "0006_user_metadata"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
CREATE TABLE IF NOT EXISTS version_failed_parts (
    document_id text NOT NULL,
    version     integer NOT NULL,
    part        text NOT NULL,
    code        text NOT NULL,
    reason      text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, version, part)
)""")
    op.execute("ALTER TABLE documents ADD COLUMN IF NOT EXISTS partial boolean NOT NULL DEFAULT false")
    op.execute("ALTER TABLE documents ADD COLUMN IF NOT EXISTS failed_parts jsonb")
    op.execute("ALTER TABLE pipeline_profiles ADD COLUMN IF NOT EXISTS allow_partial boolean NOT NULL DEFAULT true")


def downgrade() -> None:
    op.execute("ALTER TABLE pipeline_profiles DROP COLUMN IF EXISTS allow_partial")
    op.execute("ALTER TABLE documents DROP COLUMN IF EXISTS failed_parts")
    op.execute("ALTER TABLE documents DROP COLUMN IF EXISTS partial")
    op.execute("DROP TABLE IF EXISTS version_failed_parts")
