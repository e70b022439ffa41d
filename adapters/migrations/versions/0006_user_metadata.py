"""add user_metadata: the client's metadata object per document version

``document_versions.user_metadata`` (jsonb, NULL when the upload gave none):
schemas/user_metadata.py says what it may hold; the index stage writes it onto
every chunk of the version (Milvus field ``metadata``); a delete blanks it
(adapters/erasure.py).

Revision ID: 0006_user_metadata
Revises: 0005_document_keys
Create Date: 2026-12-05
"""
from alembic import op

revision = "0006_user_metadata"
down_revision = "0005_document_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE document_versions ADD COLUMN IF NOT EXISTS user_metadata jsonb")


def downgrade() -> None:
    op.execute("ALTER TABLE document_versions DROP COLUMN IF EXISTS user_metadata")
