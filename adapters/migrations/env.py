"""Alembic environment: run the revisions on the connection the caller passes.

:func:`adapters.migrations.upgrade_head` opens the connection (asyncpg through
SQLAlchemy), takes the advisory lock and begins the transaction; this file only
runs the migrations inside it.  There is no offline (``--sql``) mode and no URL in
a config file: the DSN comes from ``RAGSTREAM_PG_DSN`` via the caller.
"""
from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through adapters.migrations.upgrade_head "
                       "or `ragstream db upgrade`, which pass the connection")
context.configure(connection=connection, transactional_ddl=True)
with context.begin_transaction():  # joins the caller's transaction
    context.run_migrations()
