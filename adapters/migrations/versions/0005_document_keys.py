"""add document_keys and embedding_cache_uses: erasure of deleted documents

``document_keys``: the data key (AES-256, 32 bytes) of each document version, with
which every record carrying the version's content is sealed on the topics
(schemas/sealing.py, adapters/document_keys.py).  A delete sets ``data_key`` to NULL
for every version up to the deleted one (``shredded_at``): the sealed records left on
the topics, which the broker never compacts, can then never be read again.

``embedding_cache_uses``: which ``embedding_cache`` rows (``content_hash``) each
document version's chunks used, so a delete removes the cache rows of the deleted
text (unless a live version of another document uses them) and then these rows.

Revision ID: 0005_document_keys
Revises: 0004_callback_secret_rotation
Create Date: 2026-12-04
"""
from alembic import op

revision = "0005_document_keys"
down_revision = "0004_callback_secret_rotation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
CREATE TABLE IF NOT EXISTS document_keys (
    document_id text NOT NULL,
    version     integer NOT NULL,
    data_key    bytea CHECK (data_key IS NULL OR octet_length(data_key) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    shredded_at timestamptz,
    PRIMARY KEY (document_id, version)
)""")
    op.execute("""
CREATE TABLE IF NOT EXISTS embedding_cache_uses (
    document_id  text NOT NULL,
    version      integer NOT NULL,
    content_hash text NOT NULL,
    PRIMARY KEY (document_id, version, content_hash)
)""")
    op.execute("CREATE INDEX IF NOT EXISTS embedding_cache_uses_hash ON embedding_cache_uses (content_hash)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS embedding_cache_uses")
    op.execute("DROP TABLE IF EXISTS document_keys")
