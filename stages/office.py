"""Office → PDF conversion with LibreOffice headless, bounded in time.

Two paths; :func:`convert_office` says which one ran (``Conversion.route``) and logs it:

- ``"warm"``: a running unoserver (the dev stack's ``converter`` service,
  :mod:`devstack.converter`) converts over XML-RPC (stdlib ``xmlrpc.client``),
  ~0.1-0.5 s a file instead of ~1.3-2 s.  Used when it answers a probe within
  :data:`PROBE_TIMEOUT_S` and the type is in :data:`WARM_TYPES`.  The per-file
  timeout is the socket timeout of the call: on expiry :class:`ConversionTimeout`
  is raised and the server's LibreOffice may still be busy or stuck (restarting the
  service is up to the operator: ``ragstream`` dev stack ``down``/``up``).
  Spreadsheets go cold: unoserver 3.7 + LibreOffice 7.4 failed to load
  ``stanley-cups.xlsx`` and crashed its LibreOffice on ``vodafone.xlsx``.
  A busy server (one conversion at a time) fails the probe, so the call goes cold.
- ``"cold"``: otherwise, each conversion runs ``soffice --headless --convert-to pdf`` in its own process
group with a private ``-env:UserInstallation`` profile directory (concurrent
conversions otherwise collide on the shared profile lock), and the whole group is
killed when the time budget runs out.

Links are stripped first (:mod:`stages.external_refs`) and LibreOffice runs with a
profile that blocks them (:mod:`stages.office_profile`) on both paths.  With the
converter sandbox on (:mod:`stages.sandbox`, the default) every conversion is cold,
in its own sandbox without network: the warm path (one shared LibreOffice on the
host network) is used only with ``RAGSTREAM_CONVERTER_SANDBOX=off``.
"""
from __future__ import annotations

import http.client
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import xmlrpc.client
from dataclasses import dataclass
from pathlib import Path

from stages import sandbox
from stages.errors import ConversionFailed, ConversionTimeout, CorruptDocument
from stages.external_refs import strip_external_references
from stages.office_profile import seed_profile

log = logging.getLogger(__name__)

SOFFICE_NAMES = ("soffice", "libreoffice")
#: types the warm converter handles (Calc types crash or fail under unoserver: cold)
WARM_TYPES = frozenset({"docx", "doc", "pptx", "ppt", "odt", "odp", "rtf"})
#: seconds the probe (unoserver ``info``) may take before the cold path is used
PROBE_TIMEOUT_S = 1.0
DEFAULT_CONVERTER_PORT = 12003


@dataclass(frozen=True)
class Conversion:
    """Result of :func:`convert_office`: the PDF, which path ran, wall seconds."""

    path: Path
    route: str  # "warm" (unoserver) or "cold" (one soffice per call)
    seconds: float


def converter_url() -> str | None:
    """The warm converter's XML-RPC URL: ``RAGSTREAM_CONVERTER_URL`` if set (empty or
    ``off`` disables it), else ``http://127.0.0.1:{RAGSTREAM_CONVERTER_PORT or 12003}``
    (the same variable :class:`streams.settings.Settings` reads for ``converter_port``)."""
    url = os.environ.get("RAGSTREAM_CONVERTER_URL")
    if url is not None:
        return None if url.strip().lower() in ("", "off", "none") else url
    port = os.environ.get("RAGSTREAM_CONVERTER_PORT", str(DEFAULT_CONVERTER_PORT))
    return f"http://127.0.0.1:{int(port)}"


class _TimeoutTransport(xmlrpc.client.Transport):
    def __init__(self, timeout_s: float) -> None:
        super().__init__()
        self._timeout_s = timeout_s

    def make_connection(self, host):  # noqa: ANN001 - stdlib signature
        conn = super().make_connection(host)
        conn.timeout = self._timeout_s
        return conn


def _proxy(url: str, timeout_s: float) -> xmlrpc.client.ServerProxy:
    return xmlrpc.client.ServerProxy(url, transport=_TimeoutTransport(timeout_s), allow_none=True)


def probe_converter(url: str | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when a unoserver answers ``info()`` at ``url`` (default :func:`converter_url`)."""
    url = url if url is not None else converter_url()
    if not url:
        return False
    try:
        with _proxy(url, timeout_s) as proxy:
            return "unoserver" in proxy.info()
    except (OSError, xmlrpc.client.Error, http.client.HTTPException):
        return False


def find_soffice() -> str | None:
    """Path of the LibreOffice binary, or None (``RAGSTREAM_SOFFICE`` overrides)."""
    override = os.environ.get("RAGSTREAM_SOFFICE")
    if override:
        return override if Path(override).exists() else None
    return next((p for p in map(shutil.which, SOFFICE_NAMES) if p), None)


def convert_to_pdf(src: Path, out_dir: Path, filetype: str, timeout_s: float,
                   url: str | None = None) -> Path:
    """Convert ``src`` to PDF inside ``out_dir``: warm through unoserver when one
    answers and the type is in :data:`WARM_TYPES`, else one cold soffice run (see
    :func:`convert_office`, which also reports the route; this logs it)."""
    return convert_office(src, out_dir, filetype, timeout_s, url).path


def convert_office(src: Path, out_dir: Path, filetype: str, timeout_s: float,
                   url: str | None = None) -> Conversion:
    """Convert ``src`` to PDF, through the warm converter when possible.

    ``url`` is the unoserver XML-RPC URL (None: :func:`converter_url`; ``""``: cold
    only).  Same arguments, result file and exceptions as :func:`convert_cold`; a warm
    failure raises :class:`ConversionFailed` (retryable: if the server died, the
    retry's probe fails and it runs cold) and a warm timeout :class:`ConversionTimeout`.
    """
    url = converter_url() if url is None else (url or None)  # used only with the sandbox off
    t0 = time.perf_counter()
    if url and filetype in WARM_TYPES and sandbox.mode() == "off" and probe_converter(url):
        path, route = convert_warm(src, out_dir, filetype, timeout_s, url), "warm"
    else:
        path, route = convert_cold(src, out_dir, filetype, timeout_s), "cold"
    result = Conversion(path, route, time.perf_counter() - t0)
    log.info("converted %s (%s) to PDF on the %s path in %.2f s", src.name, filetype,
             route, result.seconds)
    return result


def convert_warm(src: Path, out_dir: Path, filetype: str, timeout_s: float, url: str) -> Path:
    """Convert through unoserver's XML-RPC ``convert(inpath, indata, outpath, convert_to,
    filtername, filter_options, update_index, infiltername, password)`` by value: the
    file's bytes go in, the PDF's bytes come back, so the server
    (:mod:`devstack.converter`) needs no access to the worker's files.  External
    references are stripped first (:mod:`stages.external_refs`).  ``timeout_s``
    bounds the whole call."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="unoserver-", dir=out_dir) as tmp:
        staged = _without_links(src, filetype, Path(tmp))
        try:
            with _proxy(url, timeout_s) as proxy:
                result = proxy.convert(None, xmlrpc.client.Binary(staged.read_bytes()), None, "pdf",
                                       None, [], False, None, None)
        except (socket.timeout, TimeoutError):
            raise ConversionTimeout(
                f"warm converter ({url}) did not convert the {filetype.upper()} within "
                f"{timeout_s:g} s; its LibreOffice may be stuck (restart the converter "
                "service)") from None
        except xmlrpc.client.Fault as e:
            raise ConversionFailed(f"warm converter failed on the {filetype.upper()}",
                                   detail=e.faultString.strip()[:300]) from None
        except (OSError, xmlrpc.client.Error, http.client.HTTPException) as e:
            raise ConversionFailed(f"warm converter ({url}) failed on the {filetype.upper()}",
                                   detail=repr(e)[:400]) from None
    data = result.data if isinstance(result, xmlrpc.client.Binary) else b""
    if not data:
        raise CorruptDocument(f"warm converter wrote no PDF for the {filetype.upper()} file")
    final = out_dir / f"{src.stem}.converted.pdf"
    final.write_bytes(data)
    return final


def _without_links(src: Path, filetype: str, tmp: Path) -> Path:
    """``src``, or a copy in ``tmp`` without its external references (logged)."""
    path, removed = strip_external_references(src, filetype, tmp)
    if removed:
        log.warning("removed %d external reference(s) from %s before conversion: %s",
                    len(removed), src.name, "; ".join(removed[:5]))
    return path


def convert_cold(src: Path, out_dir: Path, filetype: str, timeout_s: float, target: str = "pdf") -> Path:
    """Convert ``src`` (content type ``filetype``) to PDF (or ``target``, an extension
    such as ``"xlsx"``: a round trip that recalculates) inside ``out_dir`` with one
    ``soffice --convert-to`` run (the cold path): external references stripped
    (:mod:`stages.external_refs`), a fresh profile that blocks links and macros
    (:mod:`stages.office_profile`), in the sandbox without network or access to
    the worker's files (:mod:`stages.sandbox`).

    Args:
        src: the Office file (any name; it is copied under a name with the right
            extension so LibreOffice picks the right import filter).
        out_dir: writable directory that receives ``<stem>.converted.<target>``.
        filetype: detected type, e.g. ``"docx"``, ``"doc"``.
        timeout_s: wall-clock budget; the process group is killed after it.
    Returns:
        path of the PDF.
    Raises:
        ConversionFailed: soffice not installed, non-zero exit, or no PDF written;
            :class:`stages.sandbox.SandboxUnavailable` when the sandbox cannot run.
        ConversionTimeout: the budget ran out (the process group was killed).
        CorruptDocument: soffice exited cleanly but wrote no/empty PDF (it does this
            for files its filters cannot read).
    """
    soffice = find_soffice()
    if soffice is None:
        raise ConversionFailed("LibreOffice (soffice) not installed; cannot convert "
                               f"{filetype.upper()} to PDF", permanent=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    job = sandbox.job_dir()
    try:
        with tempfile.TemporaryDirectory(prefix="soffice-", dir=out_dir) as tmp:
            staged = job / f"input.{filetype}"
            shutil.copyfile(_without_links(src, filetype, Path(tmp)), staged)
        profile_dir = job / "profile"
        seed_profile(profile_dir)
        (job / "out").mkdir()
        sandbox.give_to_sandbox(job)
        cmd = sandbox.wrap([soffice, f"-env:UserInstallation={profile_dir.as_uri()}", "--headless",
                            "--norestore", "--nolockcheck", "--convert-to", target, "--outdir",
                            str(job / "out"), str(staged)], [job])
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=job,
                                start_new_session=True, env={**os.environ, "HOME": str(job)})
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise ConversionTimeout(f"LibreOffice conversion of {filetype.upper()} timed out "
                                    f"after {timeout_s:g} s") from None
        finally:
            _kill_group(proc)  # soffice may leave helpers (oosplash) behind
        produced = job / "out" / f"input.{target}"
        detail = output.decode("utf-8", "replace").strip()[-300:]
        if proc.returncode != 0:
            raise ConversionFailed(f"LibreOffice exited with {proc.returncode} converting "
                                   f"{filetype.upper()}", detail=detail)
        if not produced.exists() or produced.stat().st_size == 0:
            raise CorruptDocument(f"LibreOffice could not read the {filetype.upper()} file "
                                  f"(no {target.upper()} written)", detail=detail)
        final = out_dir / f"{src.stem}.converted.{target}"
        shutil.copyfile(produced, final)
        return final
    finally:
        shutil.rmtree(job, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass
