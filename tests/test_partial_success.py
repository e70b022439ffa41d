"""Partial success (issue 28 item 4) on the real API, stack and worker: a split PDF
whose middle page range fails for good (a page too large to render for OCR: a
permanent ``limit_exceeded``) completes as COMPLETED with ``partial: true`` and that range
listed, in the API and the status event, and its other pages are searchable; with
the profile's ``allow_partial`` off it fails as before; a document whose every range
fails fails with the ranges' code."""
from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from api_helpers import create_key, upload, wait_status
from conftest import run

pytestmark = pytest.mark.integration

FIRST = "First page: the reservoir pump station logged its energy use."
THIRD = "Third page: the valve house was inspected in May."


def huge_page_pdf(path: Path, pages: str) -> Path:
    """A PDF whose pages are ``t`` (a line of text) or ``H`` (14,400 pt square with
    a picture and no text: OCR would render it at 200 dpi = 1.6 gigapixels, over the
    pixel limit, so its range fails with limit_exceeded before any render)."""
    from PIL import Image, ImageDraw
    from reportlab.pdfgen import canvas

    picture = path.with_suffix(".png")
    image = Image.new("RGB", (400, 100), "white")
    ImageDraw.Draw(image).text((10, 40), "scanned words", fill="black")
    image.save(picture)
    c = canvas.Canvas(str(path), pagesize=(612, 792))
    texts = iter([FIRST, THIRD, "More text on another page."])
    for kind in pages:
        if kind == "t":
            c.setPageSize((612, 792))
            c.drawString(72, 700, next(texts))
        else:
            c.setPageSize((14400, 14400))
            c.drawImage(str(picture), 100, 100, 4000, 1000)
        c.showPage()
    c.save()
    return path


async def _profiles(settings) -> None:
    from adapters.profiles_store import ProfileStore
    from stages.profiles import Profile

    async with ProfileStore(settings.pg_dsn) as store:
        await store.put(Profile(name="pagewise", max_pages_per_task=1))
        await store.put(Profile(name="pagewise_whole", max_pages_per_task=1, allow_partial=False))


@pytest.fixture(scope="module")
def setup(api, stack):
    run(_profiles(stack))
    project = "p" + uuid.uuid4().hex[:10]
    return {"project": project, "key": create_key(project)}


def test_a_failed_range_leaves_the_rest_completed_and_searchable(api, setup, tmp_path):
    key = setup["key"]
    pdf = huge_page_pdf(tmp_path / "three-pages.pdf", "tHt")
    r = upload(api.url, key, pdf, category="pagewise")
    assert r.status_code == 202, r.text
    body = wait_status(api.url, key, r.json()["document_id"], {"COMPLETED", "FAILED"})
    assert body["status"] == "COMPLETED", body
    assert body["partial"] is True
    assert [(f["part"], f["code"]) for f in body["failed_parts"]] == [("pages 2-2", "limit_exceeded")]
    assert "pixels" in body["failed_parts"][0]["reason"]
    hits = httpx.post(f"{api.url}/v1/search", headers={"X-API-Key": key}, timeout=120,
                      json={"query": "valve house inspected reservoir pump", "k": 10}).json()["hits"]
    text = " ".join(h["text"] for h in hits if h["document_id"] == body["document_id"])
    assert FIRST in text and THIRD in text  # pages 1 and 3 (small: chunked together)
    # the listing shows it too
    listing = httpx.get(f"{api.url}/v1/documents", headers={"X-API-Key": key}, timeout=30).json()["items"]
    assert next(d for d in listing if d["document_id"] == body["document_id"])["partial"] is True
    # and the CLI's status table (a newcomer found it only in --json)
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "cli", "status", "-p", setup["project"]],
                         cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "COLUMNS": "250"})
    assert out.returncode == 0 and "COMPLETED (partial)" in out.stdout, out.stdout + out.stderr


def test_without_allow_partial_the_document_fails_as_before(api, setup, tmp_path):
    key = setup["key"]
    pdf = huge_page_pdf(tmp_path / "strict.pdf", "tHt")
    r = upload(api.url, key, pdf, category="pagewise_whole")
    body = wait_status(api.url, key, r.json()["document_id"], {"COMPLETED", "FAILED"})
    assert (body["status"], body["error_code"], body["partial"]) == ("FAILED", "limit_exceeded", False), body


def test_a_document_whose_every_range_fails_fails(api, setup, tmp_path):
    key = setup["key"]
    pdf = huge_page_pdf(tmp_path / "all-huge.pdf", "HH")
    r = upload(api.url, key, pdf, category="pagewise")
    body = wait_status(api.url, key, r.json()["document_id"], {"COMPLETED", "FAILED"})
    assert (body["status"], body["error_code"]) == ("FAILED", "limit_exceeded"), body
    assert "every part failed" in body["error"] and "pages 1-1" in body["error"] and "pages 2-2" in body["error"]
