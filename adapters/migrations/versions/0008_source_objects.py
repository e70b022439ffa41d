"""add source_objects: what each synced source produced (``ragstream sync``)

One row per object a source (a local folder or an S3 prefix) holds and a sync
ingested: keyed by ``(project, source_id, path)`` — ``source_id`` the source's
canonical name (``file:///abs/folder/``, ``s3://bucket/prefix/``), ``path`` the
object's path relative to the source root (``/``-separated) — with the document it
became (``document_id``, scoped ``{project}.{id}``), the version ingested, the
cheap pre-check of its bytes as last seen (``etag`` for S3, ``size`` in bytes,
``mtime_ns``: modification time in nanoseconds since the epoch) and the truth
(``sha256``, hex).  ``seen_pass`` marks the last pass that listed it: rows a
finished pass did not mark left the source and are deleted (streams/source_sync.py).
A document belongs to one source at most (unique ``(project, document_id)``), so one
source can never delete what another produced, and nothing here names a document
the sync did not produce.

Revision ID: 0008_source_objects
Revises: 0007_partial_success
Create Date: 2026-12-05
"""
from alembic import op

revision = "0008_source_objects"
down_revision = "0007_partial_success"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
CREATE TABLE IF NOT EXISTS source_objects (
    project     text NOT NULL,
    source_id   text NOT NULL,
    path        text NOT NULL,
    document_id text NOT NULL,
    version     integer NOT NULL,
    etag        text,
    size        bigint NOT NULL CHECK (size >= 0),
    mtime_ns    bigint NOT NULL,
    sha256      text NOT NULL,
    seen_pass   text NOT NULL,
    synced_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, source_id, path),
    UNIQUE (project, document_id)
)""")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS source_objects")
