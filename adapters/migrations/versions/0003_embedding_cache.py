"""add embedding_cache: one stored vector per (model, exact embedded text)

``embedding_cache`` is read and written by adapters/embedding_cache.py for the embed
stage, so an unchanged chunk of a new document version (or any repeated text) is not
embedded again.  ``content_hash`` is the hex sha256 of ``model + "\\0" + text``;
``vector`` holds ``dims`` float32 values, little-endian (``dims * 4`` bytes);
``last_used_at`` is refreshed (at most hourly) on a hit, for eviction by age.
It is a cache: deleting any of its rows only costs re-embedding.

Revision ID: 0003_embedding_cache
Revises: 0002_error_code
Create Date: 2026-12-01
"""
from alembic import op

revision = "0003_embedding_cache"
down_revision = "0002_error_code"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
CREATE TABLE IF NOT EXISTS embedding_cache (
    content_hash text PRIMARY KEY,
    model        text NOT NULL,
    dims         integer NOT NULL CHECK (dims > 0),
    vector       bytea NOT NULL CHECK (octet_length(vector) = 4 * dims),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz NOT NULL DEFAULT now()
)""")
    op.execute("CREATE INDEX IF NOT EXISTS embedding_cache_last_used ON embedding_cache (last_used_at)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS embedding_cache")
