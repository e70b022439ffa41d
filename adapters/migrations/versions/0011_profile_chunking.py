"""add pipeline_profiles.chunking: how a category's text is chunked

``fit`` (the default, and what every existing row gets): chunks sized so the embedder
reads all of each; ``characters``: by title at fixed 3,000 / 2,400 / 500 characters,
the embedder reading each chunk's first 256 word pieces (stages/profiles.py
``Profile.chunking``, stages/chunk.py).

Revision ID: 0011_profile_chunking
Revises: 0010_project_created_index
Create Date: 2026-12-07
"""
from alembic import op

revision = "0011_profile_chunking"
down_revision = "0010_project_created_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE pipeline_profiles ADD COLUMN IF NOT EXISTS chunking text NOT NULL DEFAULT 'fit'")


def downgrade() -> None:
    op.execute("ALTER TABLE pipeline_profiles DROP COLUMN IF EXISTS chunking")
