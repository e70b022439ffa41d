"""Office → PDF conversion with LibreOffice headless, bounded in time.

Each conversion runs ``soffice --headless --convert-to pdf`` in its own process
group with a private ``-env:UserInstallation`` profile directory (concurrent
conversions otherwise collide on the shared profile lock), and the whole group is
killed when the time budget runs out.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from stages.errors import ConversionFailed, ConversionTimeout, CorruptDocument

SOFFICE_NAMES = ("soffice", "libreoffice")


def find_soffice() -> str | None:
    """Path of the LibreOffice binary, or None (``RAGSTREAM_SOFFICE`` overrides)."""
    override = os.environ.get("RAGSTREAM_SOFFICE")
    if override:
        return override if Path(override).exists() else None
    return next((p for p in map(shutil.which, SOFFICE_NAMES) if p), None)


def convert_to_pdf(src: Path, out_dir: Path, filetype: str, timeout_s: float) -> Path:
    """Convert ``src`` (content type ``filetype``) to PDF inside ``out_dir``.

    Args:
        src: the Office file (any name; it is linked under a name with the right
            extension so LibreOffice picks the right import filter).
        out_dir: writable directory that receives ``<stem>.converted.pdf``.
        filetype: detected type, e.g. ``"docx"``, ``"doc"``.
        timeout_s: wall-clock budget; the process group is killed after it.
    Returns:
        path of the PDF.
    Raises:
        ConversionFailed: soffice not installed, non-zero exit, or no PDF written.
        ConversionTimeout: the budget ran out (the process group was killed).
        CorruptDocument: soffice exited cleanly but wrote no/empty PDF (it does this
            for files its filters cannot read).
    """
    soffice = find_soffice()
    if soffice is None:
        raise ConversionFailed("LibreOffice (soffice) not installed; cannot convert "
                               f"{filetype.upper()} to PDF", permanent=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="soffice-", dir=out_dir) as tmp:
        tmp_path = Path(tmp)
        staged = tmp_path / f"input.{filetype}"
        try:
            os.link(src, staged)
        except OSError:
            shutil.copyfile(src, staged)
        profile_dir = tmp_path / "profile"
        cmd = [soffice, f"-env:UserInstallation={profile_dir.as_uri()}", "--headless",
               "--norestore", "--nolockcheck", "--convert-to", "pdf", "--outdir", str(tmp_path),
               str(staged)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "HOME": str(tmp_path)})
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise ConversionTimeout(f"LibreOffice conversion of {filetype.upper()} timed out "
                                    f"after {timeout_s:g} s") from None
        finally:
            _kill_group(proc)  # soffice may leave helpers (oosplash) behind
        produced = tmp_path / "input.pdf"
        detail = output.decode("utf-8", "replace").strip()[-300:]
        if proc.returncode != 0:
            raise ConversionFailed(f"LibreOffice exited with {proc.returncode} converting "
                                   f"{filetype.upper()}: {detail}")
        if not produced.exists() or produced.stat().st_size == 0:
            raise CorruptDocument(f"LibreOffice could not read the {filetype.upper()} file "
                                  f"(no PDF written): {detail}")
        final = out_dir / f"{src.stem}.converted.pdf"
        shutil.move(str(produced), final)
        return final


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass
