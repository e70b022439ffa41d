"""The embedded PostgreSQL: the system server run by initdb/pg_ctl as the
``postgres`` user in a private data directory; creates the ``ragstream`` role and
database after start.  Registered with the supervisor on import.

As root, PostgreSQL runs as an unprivileged user, who must be able to traverse every
parent of its data directory.  When ``data_dir`` sits under a directory that user
cannot enter (a CI checkout under a ``0700`` home, say), the data directory lives in
:data:`OUTSIDE_ROOT` instead, one per ``data_dir``, and ``data_dir/postgres`` is a
symlink to it.  That symlink is also the data's lifeline: a ``data_dir`` removed and
made again (a fresh test stack) has no symlink, so the outside directory it left is
wiped before ``initdb`` rather than silently reused.
"""
from __future__ import annotations

import asyncio
import glob
import grp
import hashlib
import os
import pwd
import shutil
import signal
import stat
import subprocess
from pathlib import Path
from urllib.parse import urlparse

from devstack.supervisor import LOOPBACK, DevStackError, Paths, Service, log_tail, alive, register
from streams.settings import Settings

# ---------------------------------------------------------------- postgres

_PG_SUPERUSER = "postgres"
_PG_USERS = ("postgres", "ragstream-pg")  # the first that exists; the second is created
OUTSIDE_ROOT = Path("/var/tmp/ragstream-postgres")


def _pg_bin(name: str) -> str:
    """Path of PostgreSQL server binary ``name`` (newest /usr/lib/postgresql/*/bin first)."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0)
    for bindir in reversed(versions):
        if os.access(f"{bindir}/{name}", os.X_OK):
            return f"{bindir}/{name}"
    found = shutil.which(name)
    if not found:
        raise DevStackError(
            f"postgres: no PostgreSQL server found ({name} not in /usr/lib/postgresql/*/bin or on PATH); "
            "install the system package (apt-get install postgresql)"
        )
    return found


def _pg_user() -> str | None:
    """As root: an unprivileged user to run PostgreSQL as (created if missing); else None."""
    if os.geteuid() != 0:
        return None
    for name in _PG_USERS:
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            pass
    subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "ragstream-pg"], check=True, capture_output=True)
    return "ragstream-pg"


def _can_traverse(path: Path, uid: int, gids: set[int]) -> bool:
    """True when a process with ``uid``/``gids`` may enter every existing directory
    from ``/`` down to ``path`` (mode bits; ACLs are not read)."""
    for part in [*reversed(path.parents), path]:
        try:
            st = part.stat()
        except FileNotFoundError:
            return True  # created later by root with the usual 0755
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid in gids:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return False
    return True


def _outside_home(default: Path) -> Path:
    """The data directory outside ``data_dir`` for ``default``:
    ``OUTSIDE_ROOT/<first 16 hex of sha256(default)>``."""
    return OUTSIDE_ROOT / hashlib.sha256(str(default).encode()).hexdigest()[:16]


def _pg_home(settings: Settings, default: Path) -> Path:
    """Where PostgreSQL's data directory lives: ``default`` (``data_dir/postgres``)
    unless we are root and either ``default`` is already our link to the outside
    home (a probe once failed there, see :func:`_pg_prepare`) or the server's user
    cannot traverse its parents by their mode bits; then :func:`_outside_home`."""
    if os.geteuid() != 0:
        return default
    outside = _outside_home(default)
    if default.is_symlink():
        return outside if Path(os.readlink(default)) == outside else default
    for name in _PG_USERS:
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            continue
        gids = {pw.pw_gid} | {g.gr_gid for g in grp.getgrall() if name in g.gr_mem}
        if _can_traverse(default.parent, pw.pw_uid, gids):
            return default
        break
    else:  # the user is created on first start: an unprivileged stranger to every directory
        if _can_traverse(default.parent, -1, set()):
            return default
    return outside


def _link_outside_home(settings: Settings, home: Path) -> None:
    """Point ``data_dir/postgres`` at ``home`` (outside ``data_dir``); a ``data_dir``
    without that link is new, so whatever ``home`` holds is a removed stack's data
    and is wiped first (see the module docstring)."""
    link = Path(settings.data_dir).expanduser().resolve() / "postgres"
    if link.is_symlink() and Path(os.readlink(link)) == home:
        return
    _empty(home)
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)  # made while reachable; its server can no longer reach it
    link.symlink_to(home, target_is_directory=True)
    OUTSIDE_ROOT.chmod(0o755)


def _as_user(user: str | None) -> dict:
    return {"user": user, "group": user, "extra_groups": []} if user else {}


def _reachable_by(user: str, path: Path) -> bool:
    """True when ``user`` can write ``path`` (a real ``test -w`` as that user: mode
    bits, ACLs, and file systems that ignore ``chown`` all count)."""
    return subprocess.run(["test", "-w", str(path)], **_as_user(user)).returncode == 0


def _ancestry(path: Path) -> str:
    """``path`` and its parents with mode, owner and group, for an error message."""
    rows = []
    for part in [*reversed(path.parents), path]:
        try:
            st = part.stat()
            rows.append(f"{part} {stat.filemode(st.st_mode)} {st.st_uid}:{st.st_gid}")
        except OSError as exc:
            rows.append(f"{part} ({exc.__class__.__name__})")
    return "; ".join(rows)


async def _pg_prepare(settings: Settings, paths: Paths) -> None:
    """Make the data directory the server's user's own, then ``initdb`` it if new.

    As root: when that user cannot write the data directory inside ``data_dir`` (its
    parents' mode bits looked right, yet the probe fails: an ACL, or a file system
    that ignores ``chown`` — seen once in CI), the data moves to the outside home
    and ``data_dir/postgres`` becomes a link to it; the supervisor re-reads the
    paths after this hook.  Raises :class:`DevStackError` when even that home is
    unreachable, naming each parent's mode and owner."""
    user = _pg_user()
    default = Path(settings.data_dir).expanduser().resolve() / "postgres"
    if paths.data != default:
        _link_outside_home(settings, paths.data)
    if user:
        shutil.chown(paths.data, user, user)
        paths.data.chmod(0o700)
        if not _reachable_by(user, paths.data):
            if paths.data == default:
                outside = _outside_home(default)
                outside.mkdir(parents=True, exist_ok=True)
                _link_outside_home(settings, outside)
                await _pg_prepare(settings, Paths.of(settings, "postgres"))
                return
            raise DevStackError(
                f"postgres: runs as user {user!r}, who cannot write {paths.data} ({_ancestry(paths.data)}); "
                "make every parent directory searchable (chmod o+x) or use a data_dir elsewhere"
            )
    lock = paths.data / "postmaster.pid"
    if lock.exists():
        # left by a killed server; its pid may linger as a zombie (pid 1 in some
        # containers reaps slowly), which PostgreSQL mistakes for a live postmaster
        try:
            old_pid = int(lock.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            old_pid = None
        if old_pid is None or not alive(old_pid):
            lock.unlink(missing_ok=True)
    if (paths.data / "PG_VERSION").exists():
        return
    returncode = await _initdb(paths, user)
    if returncode < 0:
        # Killed by a signal: seen once, in CI (stop 41's run of 8645820: exit -11,
        # SIGSEGV, as the test stack started; not reproduced on the dev VM with
        # PostgreSQL 15.18 or 15.20, and that run's log was not kept).  A crashed
        # initdb leaves a half-made cluster; it is wiped and initdb runs once more.
        _note(paths.log, f"initdb killed by {_signal_name(returncode)}; wiping {paths.data} and running it once more")
        _empty(paths.data)
        returncode = await _initdb(paths, user)
    if returncode != 0:
        how = _signal_name(returncode) if returncode < 0 else f"exit {returncode}"
        raise DevStackError(f"postgres: initdb failed ({how}); see {paths.log}:\n{log_tail(paths.log)}")


async def _initdb(paths: Paths, user: str | None) -> int:
    """Run ``initdb`` on the (empty) data directory as ``user``; its output goes to
    the service log.  Returns the exit status (negative: killed by that signal).

    It gets a minimal environment (PATH, the C locale), not this process's: nothing
    a caller loaded or exported (``LD_*``, ``PG*``, ``TZ``, malloc tuning) reaches it."""
    with open(paths.log, "ab") as log:
        result = await asyncio.to_thread(
            subprocess.run,
            [_pg_bin("initdb"), "-D", str(paths.data), "-U", _PG_SUPERUSER, "--auth=trust",
             "-E", "UTF8", "--locale=C", "--no-sync"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=paths.data,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C", "LC_ALL": "C"}, **_as_user(user),
        )
    return result.returncode


def _signal_name(returncode: int) -> str:
    """``-11`` -> ``'signal 11 (SIGSEGV)'``: a subprocess status killed by a signal."""
    try:
        return f"signal {-returncode} ({signal.Signals(-returncode).name})"
    except ValueError:
        return f"signal {-returncode}"


def _note(log: Path, line: str) -> None:
    """Append one ``ragstream:`` line to a service log (what the supervisor did, beside
    what the service printed)."""
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"ragstream: {line}\n")


def _empty(directory: Path) -> None:
    """Remove everything inside ``directory``, keeping the directory (its owner and mode)."""
    for child in directory.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _pg_command(settings: Settings, paths: Paths) -> list[str]:
    return [_pg_bin("postgres"), "-D", str(paths.data), "-p", str(settings.pg_port),
            "-c", f"listen_addresses={LOOPBACK}", "-c", "unix_socket_directories=",
            "-c", "logging_collector=off"]


async def _pg_connect(settings: Settings, user: str, database: str):
    import asyncpg

    return await asyncpg.connect(host=LOOPBACK, port=settings.pg_port, user=user, database=database, timeout=5)


async def _pg_health(settings: Settings) -> None:
    conn = await _pg_connect(settings, _PG_SUPERUSER, "postgres")
    try:
        await conn.fetchval("select 1")
    finally:
        await conn.close()


async def _pg_post_start(settings: Settings, paths: Paths) -> None:
    """Create the role and database named in ``settings.pg_dsn`` (idempotent), then check the DSN."""
    import asyncpg

    dsn = urlparse(settings.pg_dsn)
    role, database = dsn.username or "ragstream", dsn.path.lstrip("/") or "ragstream"
    conn = await _pg_connect(settings, _PG_SUPERUSER, "postgres")
    try:
        if not await conn.fetchval("select 1 from pg_roles where rolname = $1", role):
            await conn.execute(f'create role "{role}" login')
        if not await conn.fetchval("select 1 from pg_database where datname = $1", database):
            await conn.execute(f'create database "{database}" owner "{role}"')
    finally:
        await conn.close()
    check = await asyncpg.connect(settings.pg_dsn, timeout=5)
    try:
        await check.fetchval("select 1")
    finally:
        await check.close()


POSTGRES = Service(
    name="postgres",
    command=_pg_command,
    health=_pg_health,
    ports=lambda s: [s.pg_port],
    endpoint=lambda s: f"{LOOPBACK}:{s.pg_port}",
    prepare=_pg_prepare,
    post_start=_pg_post_start,
    user=_pg_user,
    home=_pg_home,
    stop_signal=signal.SIGINT,  # fast shutdown
    signal_leader_only=True,
)


register(POSTGRES)
