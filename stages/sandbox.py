"""Run LibreOffice where it can read nothing of the worker's and reach no network.

Third layer of "the converter reads nothing outside the document" (README; the
others: :mod:`stages.external_refs`, :mod:`stages.office_profile`).  A conversion's
argv is wrapped in bubblewrap (``bwrap``, Debian package ``bubblewrap``):

- its own user, mount, PID, IPC and UTS namespaces, and (``network=False``) its own
  network namespace with nothing but a loopback that is down: no connection leaves;
- a file system of ``/usr`` and a few files of ``/etc`` read-only (the program, its
  fonts and libraries), fresh ``/proc``, ``/dev`` and an empty ``/tmp``; no ``/home``,
  ``/root``, ``/var``, ``/work``, no repository, no other document: only the one
  job directory is bound, read-write;
- as root, ``bwrap`` itself runs as the unprivileged user :data:`SANDBOX_USER`
  (created on first use), so inside the namespaces nothing maps to root: files only
  root may read (``/etc/shadow``) stay unreadable.  As another user it runs as that
  user.

``RAGSTREAM_CONVERTER_SANDBOX`` = ``bwrap`` (default) or ``off`` (trusted input
only; the other two layers still hold).  When it is ``bwrap`` and bubblewrap cannot
run (not installed, or user namespaces forbidden, as in an unprivileged container),
:class:`SandboxUnavailable` fails the document's conversion with that reason: it
never falls back to an unsandboxed LibreOffice.
"""
from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
from pathlib import Path

from stages.errors import ConversionFailed

SANDBOX_USER = "ragstream-conv"
#: read-only binds (when present): the program and its libraries, and of ``/etc`` only
#: what LibreOffice needs to start and find fonts (measured: soffice 7.4 converts
#: with exactly these; a fresh helper read /etc/fonts/fonts.conf through an XForms
#: instance when all of /etc was bound)
_RO_BINDS = ("/usr", "/opt/libreoffice", "/var/lib/fontconfig", "/var/cache/fontconfig",
             "/etc/fonts", "/etc/ld.so.cache", "/etc/libreoffice", "/etc/alternatives", "/etc/passwd",
             "/etc/group", "/etc/nsswitch.conf", "/etc/localtime")
#: merged-/usr systems link these into /usr
_USR_LINKS = ("bin", "sbin", "lib", "lib64", "lib32", "libx32")


class SandboxUnavailable(ConversionFailed):
    """The converter sandbox cannot run here (reason in the message); permanent."""

    def __init__(self, message: str) -> None:
        super().__init__(message, permanent=True)


def mode() -> str:
    """``"bwrap"`` or ``"off"``, from ``RAGSTREAM_CONVERTER_SANDBOX``."""
    value = os.environ.get("RAGSTREAM_CONVERTER_SANDBOX", "bwrap").strip().lower()
    return "off" if value in ("off", "0", "false", "none") else "bwrap"


def sandbox_user() -> str | None:
    """As root: the unprivileged user bwrap runs as (created if missing); else None."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SANDBOX_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                        "--shell", "/usr/sbin/nologin", SANDBOX_USER], check=False, capture_output=True)
        pwd.getpwnam(SANDBOX_USER)  # KeyError here: useradd failed
    return SANDBOX_USER


def give_to_sandbox(path: Path) -> None:
    """Make ``path`` (a job directory, recursively) the sandbox user's, so the
    converter can write its output and profile there; no-op unless root."""
    user = sandbox_user() if mode() == "bwrap" else None
    if not user:
        return
    for root, dirs, files in os.walk(path):
        shutil.chown(root, user, user)
        for name in files:
            shutil.chown(os.path.join(root, name), user, user)


def wrap(argv: list[str], binds: list[Path], *, network: bool = False, chdir: Path | None = None,
         env: dict[str, str] | None = None) -> list[str]:
    """``argv`` wrapped to run in the sandbox with ``binds`` (directories, bound
    read-write at the same path) as the only writable and the only non-system
    paths it sees.  ``network=True`` keeps the host's network namespace (the warm
    converter's XML-RPC port); otherwise it has none.  Returns ``argv`` unchanged
    when the mode is ``off``.  The environment inside is cleared but for ``HOME``
    (``chdir``, default the first bind), ``PATH``, ``LANG``, ``TMPDIR`` and ``env``.  Raises :class:`SandboxUnavailable` when bwrap is
    missing or cannot create its namespaces."""
    if mode() == "off":
        return argv
    check_available()
    home = chdir or (binds[0] if binds else Path("/tmp"))
    cmd = _prefix(network)
    for path in binds:
        cmd += ["--bind", str(path), str(path)]
    cmd += ["--clearenv", "--setenv", "HOME", str(home), "--setenv", "PATH", "/usr/bin:/bin",
            "--setenv", "LANG", "C.UTF-8", "--setenv", "TMPDIR", "/tmp", "--chdir", str(home)]
    for key, value in (env or {}).items():
        cmd += ["--setenv", key, value]
    return cmd + ["--"] + argv


def _prefix(network: bool) -> list[str]:
    """setpriv (as root) + bwrap with the namespaces and the read-only system binds."""
    user = sandbox_user()
    cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--"] if user else []
    cmd += [_bwrap(), "--unshare-all", "--die-with-parent", "--new-session"]
    if network:
        cmd += ["--share-net"]
    for path in _RO_BINDS:
        if Path(path).exists():
            cmd += ["--ro-bind", path, path]
    for name in _USR_LINKS:
        if Path(f"/{name}").is_symlink():
            cmd += ["--symlink", os.readlink(f"/{name}"), f"/{name}"]
    return cmd + ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]


def _bwrap() -> str:
    found = shutil.which("bwrap")
    if not found:
        raise SandboxUnavailable("converter sandbox unavailable: bubblewrap (bwrap) is not installed "
                                 "(apt-get install bubblewrap; or RAGSTREAM_CONVERTER_SANDBOX=off "
                                 "for trusted input only)")
    return found


@functools.lru_cache(maxsize=1)
def _probe() -> str:
    """'' when a sandbox can be made here, else why not (cached per process)."""
    proc = subprocess.run(_prefix(False) + ["--", "/usr/bin/true"], capture_output=True, text=True,
                          timeout=30)
    return "" if proc.returncode == 0 else (proc.stderr.strip() or f"exit {proc.returncode}")[:300]


def check_available() -> None:
    """Raise :class:`SandboxUnavailable` when bwrap cannot make its namespaces here."""
    why = _probe()
    if why:
        raise SandboxUnavailable(f"converter sandbox unavailable: bwrap failed ({why}); user "
                                 "namespaces may be disabled (or RAGSTREAM_CONVERTER_SANDBOX=off "
                                 "for trusted input only)")


def job_dir(prefix: str = "ragstream-convert-") -> Path:
    """A fresh, empty directory the sandbox may be given: under the system temp
    directory (which every user can traverse, unlike a checkout under a 0700 home),
    mode 0700 and, as root, owned by :data:`SANDBOX_USER`.  The caller removes it."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=prefix))
    give_to_sandbox(path)
    return path
