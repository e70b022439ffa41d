"""project_secrets: a previous secret and when it was rotated out

``ragstream apikey secret --rotate`` (adapters/callbacks.py ``Callbacks.rotate_secret``)
moves ``callback_secret`` to ``previous_secret`` and sets ``rotated_at``; while
``rotated_at`` is less than ``settings.callback_secret_overlap_s`` old, callbacks are
signed with both (two ``v1=`` entries), so receivers can switch without a gap.
Existing rows keep their secret and have no previous one.

Revision ID: 0004_callback_secret_rotation
Revises: 0003_embedding_cache
Create Date: 2026-12-03
"""
from alembic import op

revision = "0004_callback_secret_rotation"
down_revision = "0003_embedding_cache"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE project_secrets ADD COLUMN IF NOT EXISTS previous_secret text")
    op.execute("ALTER TABLE project_secrets ADD COLUMN IF NOT EXISTS rotated_at timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE project_secrets DROP COLUMN IF EXISTS rotated_at")
    op.execute("ALTER TABLE project_secrets DROP COLUMN IF EXISTS previous_secret")
