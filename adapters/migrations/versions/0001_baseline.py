"""baseline: the schema the hand-written migrate() functions created (2026-11-30)

Every table of the database as it stood before Alembic: the document registry and
status projection (adapters/metadata.py), the delivery ledger
(adapters/version_ledger.py), API keys, callbacks and category profiles.  Idempotent
(``IF NOT EXISTS`` throughout, the columns added later by ``ALTER ... ADD COLUMN IF
NOT EXISTS``), so a database those functions created — wholly, partly, or in an
older shape — upgrades in place without a stamp.

The strategy CHECK of ``pipeline_profiles`` is frozen here as it was
(``stages.profiles.STRATEGIES`` then): a new strategy needs a revision of its own.

Revision ID: 0001_baseline
Revises:
Create Date: 2026-11-30
"""
from alembic import op

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None

METADATA = """
CREATE TABLE IF NOT EXISTS document_versions (
    document_id text NOT NULL,
    version     integer NOT NULL,
    project     text NOT NULL,
    category    text NOT NULL,
    filename    text NOT NULL,
    sha256      text NOT NULL,
    size        bigint NOT NULL,
    raw_key     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, version)
);
CREATE TABLE IF NOT EXISTS documents (
    document_id  text PRIMARY KEY,
    project      text NOT NULL,
    filename     text NOT NULL DEFAULT '',
    version      integer NOT NULL,
    status       text NOT NULL,
    seq          integer NOT NULL,
    stage        text NOT NULL,
    chunks_total integer NOT NULL DEFAULT 0,
    chunks_done  integer NOT NULL DEFAULT 0,
    pages        integer NOT NULL DEFAULT 0,
    error        text,
    callback_url text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_project_status ON documents (project, status);
ALTER TABLE document_versions ADD COLUMN IF NOT EXISTS queued_at timestamptz;
ALTER TABLE document_versions ADD COLUMN IF NOT EXISTS callback_url text;
ALTER TABLE document_versions ADD COLUMN IF NOT EXISTS content_type text;
"""

LEDGER = """
CREATE TABLE IF NOT EXISTS version_outcomes (
    document_id text NOT NULL,
    version     integer NOT NULL,
    project     text NOT NULL,
    outcome     text NOT NULL CHECK (outcome IN ('COMPLETED', 'FAILED')),
    chunks      integer NOT NULL DEFAULT 0,
    reason      text,
    announced   boolean NOT NULL DEFAULT false,
    at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, version)
);
CREATE TABLE IF NOT EXISTS document_deletions (
    document_id   text PRIMARY KEY,
    project       text NOT NULL,
    up_to_version integer NOT NULL,
    at            timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS version_steps (
    document_id text NOT NULL,
    version     integer NOT NULL,
    step        text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, version, step)
);
"""

API_KEYS = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id       text PRIMARY KEY,
    project      text NOT NULL,
    key_hash     text NOT NULL,
    name         text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    last_used_at timestamptz
);
CREATE INDEX IF NOT EXISTS api_keys_project ON api_keys (project);
"""

CALLBACKS = """
CREATE TABLE IF NOT EXISTS project_secrets (
    project         text PRIMARY KEY,
    callback_secret text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS callbacks (
    idempotency_key text PRIMARY KEY,
    document_id     text NOT NULL,
    version         integer NOT NULL,
    status          text NOT NULL,
    project         text NOT NULL,
    url             text NOT NULL,
    body            bytea NOT NULL,
    state           text NOT NULL DEFAULT 'pending',
    attempts        integer NOT NULL DEFAULT 0,
    last_code       integer,
    reason          text,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_owner     text,
    lease_until     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz
);
CREATE INDEX IF NOT EXISTS callbacks_due ON callbacks (next_attempt_at) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS callbacks_document ON callbacks (document_id);
"""

PROFILES = """
CREATE TABLE IF NOT EXISTS pipeline_profiles (
    category              text PRIMARY KEY,
    strategy              text NOT NULL CHECK (strategy IN ('auto', 'fast', 'ocr_only', 'hi_res')),
    ocr_languages         text[] NOT NULL,
    extract_tables        boolean NOT NULL,
    extract_images        boolean NOT NULL,
    convert_office_to_pdf boolean NOT NULL,
    use_vlm               boolean NOT NULL,
    filetypes             text[] NOT NULL,
    max_size_bytes        bigint NOT NULL CHECK (max_size_bytes > 0),
    timeout_s             double precision NOT NULL CHECK (timeout_s > 0),
    max_pages_per_task    integer NOT NULL CHECK (max_pages_per_task > 0),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
"""

TABLES = ("pipeline_profiles", "callbacks", "project_secrets", "api_keys", "version_steps",
          "document_deletions", "version_outcomes", "documents", "document_versions")


def upgrade() -> None:
    # one statement per execute: asyncpg prepares each, and a prepared statement
    # holds one command (no ';' occurs inside any statement above)
    for sql in (METADATA, LEDGER, API_KEYS, CALLBACKS, PROFILES):
        for statement in filter(None, (s.strip() for s in sql.split(";"))):
            op.execute(statement)


def downgrade() -> None:
    op.execute(f"DROP TABLE IF EXISTS {', '.join(TABLES)}")
