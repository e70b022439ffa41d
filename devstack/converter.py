"""The warm Office → PDF converter: unoserver as the dev stack service ``converter``.

unoserver keeps one LibreOffice running and converts over XML-RPC (client:
:func:`stages.office.convert_office`, which falls back to one ``soffice`` per file
when this service is not running).  It must run under a Python that can ``import
uno``: Debian's ``python3-uno`` for ``/usr/bin/python3``, so it lives in its own venv
``.venv-uno`` (``--system-site-packages``; ``scripts/setup_uno_env.sh``).

Ports (127.0.0.1): ``settings.converter_port`` (12003) XML-RPC, and
``converter_port + 1`` for LibreOffice's UNO socket.  Profile (links and macros
blocked: :mod:`stages.office_profile`) and temp files live under
``{data_dir}/converter/``; clients send documents by value.  LibreOffice is
unoserver's child in the same process group, so the dev stack's ``down`` stops both
(SIGKILL: unoserver 3.7 hangs on SIGTERM).

**Only with** ``RAGSTREAM_CONVERTER_SANDBOX=off`` (trusted input): one long-lived
LibreOffice serving every document cannot be sandboxed per document, and in a
sandbox it would still need the host network for its XML-RPC port — a fresh
helper's attack (2026-12-04) made it fetch an ODT's XForms instance over HTTP,
including another project's upload from SeaweedFS's unauthenticated filer port.
With the sandbox on (the default) the service is disabled (``dev up`` skips it)
and :func:`stages.office.convert_office` converts every file cold, each in its own
sandbox without network.  A conversion running past
:data:`SERVER_CONVERSION_TIMEOUT_S` makes unoserver kill LibreOffice and exit (the
service then shows unhealthy until the next ``up``).  Health: ``info()`` answers.

Measured (unoserver 3.7, LibreOffice 7.4, this VM): DOCX/PPTX 0.1-0.5 s warm vs
1.3-1.9 s cold; XLSX failed ("Could not load document") or crashed LibreOffice, so
stages/office.py sends Calc types down the cold path.
"""
from __future__ import annotations

import asyncio
import shutil
import signal
from pathlib import Path

from streams.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VENV = REPO_ROOT / ".venv-uno"
SETUP_SCRIPT = REPO_ROOT / "scripts" / "setup_uno_env.sh"
LOOPBACK = "127.0.0.1"
SERVER_CONVERSION_TIMEOUT_S = 300


class ConverterServiceError(RuntimeError):
    """unoserver is not installed or does not answer."""


def url(settings: Settings) -> str:
    """XML-RPC URL of the converter for ``settings``."""
    return f"http://{LOOPBACK}:{settings.converter_port}"


def unoserver_bin(venv: Path = DEFAULT_VENV) -> Path:
    """Path of the ``unoserver`` script; raises when the venv lacks it."""
    binary = venv / "bin" / "unoserver"
    if not binary.exists():
        raise ConverterServiceError(f"{binary} missing: run {SETUP_SCRIPT} "
                                    "(needs apt package python3-uno)")
    return binary


def enabled(settings: Settings) -> bool:
    """True when the warm converter may run: the converter sandbox is off."""
    from stages import sandbox

    return sandbox.mode() == "off"


def server_argv(settings: Settings, data: Path, venv: Path = DEFAULT_VENV) -> list[str]:
    """unoserver command line for ``settings`` with its profile/temp under ``data``."""
    return [str(unoserver_bin(venv)), "--interface", LOOPBACK, "--port", str(settings.converter_port),
            "--uno-interface", LOOPBACK, "--uno-port", str(settings.converter_port + 1),
            "--user-installation", str(data / "profile"), "--temp-dir", str(data / "tmp"),
            "--conversion-timeout", str(SERVER_CONVERSION_TIMEOUT_S)]


def prepare_home(data: Path, venv: Path = DEFAULT_VENV) -> None:
    """Fresh profile (links and macros blocked: :mod:`stages.office_profile`) and an
    empty temp dir (a killed server may have left documents there)."""
    from stages.office_profile import seed_profile

    unoserver_bin(venv)
    shutil.rmtree(data / "profile", ignore_errors=True)
    seed_profile(data / "profile")
    shutil.rmtree(data / "tmp", ignore_errors=True)
    (data / "tmp").mkdir(parents=True, exist_ok=True)


def _register_devstack() -> None:
    from devstack.supervisor import Paths, Service, register

    def command(settings: Settings, paths: Paths) -> list[str]:
        return server_argv(settings, paths.data)

    async def prepare(settings: Settings, paths: Paths) -> None:
        prepare_home(paths.data)

    async def health(settings: Settings) -> None:
        from stages.office import probe_converter

        ok = await asyncio.get_running_loop().run_in_executor(None, probe_converter, url(settings), 2.0)
        if not ok:
            raise ConverterServiceError("unoserver not answering")

    register(Service(
        name="converter",
        command=command,
        health=health,
        ports=lambda s: [s.converter_port, s.converter_port + 1],
        endpoint=url,
        prepare=prepare,
        enabled=enabled,
        env=lambda s: {"RAGSTREAM_CONVERTER_PORT": str(s.converter_port)},
        # unoserver 3.7 hangs in its SIGTERM handler (stop() joining the XML-RPC
        # thread) and was killed after the grace period every time; its state is
        # a throwaway profile, so the group (unoserver + soffice) is SIGKILLed
        stop_signal=signal.SIGKILL,
    ))


try:  # registered when devstack imports this module (SERVICE_MODULES)
    _register_devstack()
except ImportError:  # pragma: no cover - devstack not present
    pass
