"""Hostile file names at the edge: sanitised once (API upload, CLI ingest), the
original kept, never an OSError or a transient retry; control and bidi characters
never reach terminals or log records raw; the CLI names the dot-files it skipped."""
from __future__ import annotations

import logging
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest

from stages.filenames import MAX_NAME_BYTES, install_log_escaping, printable, safe_filename

HOSTILE = {
    "dotdot": "..",
    "dot": ".",
    "empty": "",
    "slash": "../../etc/passwd.txt",
    "backslash": "..\\..\\win.txt",
    "long": "n" * 300 + ".txt",
    "long_utf8": "é" * 200 + ".txt",
    "control": "bell\x07esc\x1b[31m.txt",
    "bidi": "invoice\u202etxt.exe.txt",
    "isolate": "a\u2066b\u2069.txt",
}


@pytest.mark.parametrize("name", list(HOSTILE.values()), ids=list(HOSTILE))
def test_safe_filename_is_one_safe_component(name):
    safe = safe_filename(name)
    assert safe not in ("", ".", "..") and "/" not in safe and "\\" not in safe
    assert len(safe.encode("utf-8")) <= MAX_NAME_BYTES
    assert printable(safe) == safe  # nothing left to escape
    if name.endswith(".txt"):
        assert safe.endswith(".txt")
    assert safe_filename(safe) == safe  # idempotent


def test_printable_and_log_records_escape_controls_and_bidi(caplog):
    install_log_escaping()
    with caplog.at_level(logging.INFO):
        logging.getLogger("ragstream.test").info("file %s", "a\x1b[2Jb\u202ec")
    msg = caplog.records[-1].getMessage()
    assert "\x1b" not in msg and "\u202e" not in msg and "\\x1b" in msg and "\\u202e" in msg


def _multipart(filename_header: bytes, data: bytes, fields: dict[str, str]) -> tuple[bytes, str]:
    """A multipart body built by hand, so the file name's bytes go out exactly as given."""
    b = "b" + uuid.uuid4().hex
    parts = [f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
             for k, v in fields.items()]
    parts.append(f"--{b}\r\n".encode() + b'Content-Disposition: form-data; name="file"; filename="'
                 + filename_header + b'"\r\nContent-Type: text/plain\r\n\r\n' + data + b"\r\n")
    return b"".join(parts) + f"--{b}--\r\n".encode(), f"multipart/form-data; boundary={b}"


def _raw_metadata(settings, key: str) -> dict:
    from adapters.object_store import ObjectStore
    from conftest import run

    async def go():
        async with ObjectStore(settings) as store:
            return (await store.client.head_object(Bucket=store.bucket, Key=key))["Metadata"]

    return run(go())


@pytest.mark.slow
def test_hostile_names_over_http_are_sanitised_and_complete(api, project, stack):
    from api_helpers import create_key, wait_status
    from streams.document_ids import default_document_id, scoped_id

    key = create_key(project)
    docs = {}
    for label, name in HOSTILE.items():
        body, ctype = _multipart(name.encode("utf-8"), f"The {label} note about pumps.\n".encode(),
                                 {"project": project})
        r = httpx.post(api.url + "/v1/documents", content=body,
                       headers={"X-API-Key": key, "Content-Type": ctype}, timeout=60)
        assert r.status_code == 202, (label, r.text)
        got = r.json()
        assert got["filename"] == safe_filename(name), label
        if got["filename"] != name:
            assert got["original_filename"] == name, label
        docs[label] = (got["document_id"], name)
    for label, (doc, name) in docs.items():
        final = wait_status(api.url, key, doc, {"COMPLETED", "FAILED"}, timeout_s=300)
        assert final["status"] == "COMPLETED", (label, final)
        assert final["filename"] == safe_filename(name)
    # the original name is kept beside the raw bytes
    doc, name = docs["bidi"]
    raw = f"raw/{project}/default/v1/{scoped_id(project, doc)}.txt"
    assert unquote(_raw_metadata(stack, raw)["original-filename"]) == name
    assert doc == default_document_id(name)


def test_cli_ingest_names_skipped_dot_files_and_escapes_names(stack, worker, tmp_path, project):
    folder = tmp_path / "in"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "config").write_text("[core]\n")
    (folder / ".hidden.txt").write_text("hidden pumps\n")
    (folder / "ok\x1b[31m\u202e.txt").write_text("visible pumps\n")
    out = subprocess.run(
        [str(Path(sys.executable).with_name("ragstream")), "ingest", str(folder), "-p", project,
         "--timeout", "300"], capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout + out.stderr
    assert "skipped 2 dot-file(s)" in text and ".hidden.txt" in text and ".git/config" in text
    assert "\x1b" not in text and "\u202e" not in text
    assert "\\u202e" in text and "\\x1b" in text
    assert "1 completed, 0 failed" in text
