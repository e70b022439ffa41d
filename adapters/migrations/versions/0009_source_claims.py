"""add source_objects.claimed_sha256: the bytes a sync is uploading for a known path

``ragstream sync`` (streams/source_sync.py) sets it to the sha256 of a changed
object's bytes before it uploads them and clears it when the row takes the new
version.  A pass killed in between leaves it set, and the next pass recognises the
document's latest version (those bytes) as its own upload instead of calling the
document "changed outside this sync" for ever.  NULL: no upload in flight.

Revision ID: 0009_source_claims
Revises: 0008_source_objects
Create Date: 2026-12-05
"""
from alembic import op

revision = "0009_source_claims"
down_revision = "0008_source_objects"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE source_objects ADD COLUMN IF NOT EXISTS claimed_sha256 text")


def downgrade() -> None:
    op.execute("ALTER TABLE source_objects DROP COLUMN IF EXISTS claimed_sha256")
