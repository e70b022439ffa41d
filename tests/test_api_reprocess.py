"""``POST /v1/documents/{id}/reprocess`` on the test stack (api/reprocess.py): a new
version from the same bytes with the same metadata, a FAILED document may be
retried, and nothing of another project, a deleted or an unknown document is reached."""
from __future__ import annotations

import json
import uuid

import httpx
import pytest

from api_helpers import create_key, upload, wait_status

pytestmark = [pytest.mark.integration]


def _reprocess(api, key: str, document_id: str) -> httpx.Response:
    return httpx.post(f"{api.url}/v1/documents/{document_id}/reprocess", headers={"X-API-Key": key},
                      timeout=60)


@pytest.mark.slow  # ~30 s on a warm worker
def test_reprocess_makes_a_new_version_of_the_same_bytes(api, tmp_path):
    project = "rp" + uuid.uuid4().hex[:8]
    key = create_key(project)
    good = tmp_path / "kiln-log.md"
    good.write_text("# Kiln log\n\nThe second firing reached cone 10 after eleven hours.\n")
    meta = {"team": "studio"}
    r = upload(api.url, key, good, metadata=json.dumps(meta))
    assert r.status_code == 202, r.text
    doc = r.json()["document_id"]
    assert wait_status(api.url, key, doc, {"COMPLETED", "FAILED"})["status"] == "COMPLETED"

    again = _reprocess(api, key, doc)
    assert again.status_code == 202, again.text
    assert (again.json()["version"], again.json()["queued"]) == (2, True)
    body = wait_status(api.url, key, doc, {"COMPLETED", "FAILED"})
    assert (body["status"], body["version"], body["metadata"]) == ("COMPLETED", 2, meta), body

    # a FAILED document may be retried: a new version, failing again for the same reason
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\nnot a pdf at all\n")
    bad = upload(api.url, key, broken).json()["document_id"]
    assert wait_status(api.url, key, bad, {"COMPLETED", "FAILED"})["status"] == "FAILED"
    retry = _reprocess(api, key, bad)
    assert retry.status_code == 202 and retry.json()["version"] == 2, retry.text
    assert wait_status(api.url, key, bad, {"COMPLETED", "FAILED"})["version"] == 2

    other = create_key("o" + uuid.uuid4().hex[:10])  # another project's key reaches nothing
    for k, d in ((other, doc), (key, "no-such-doc"), (key, "..%2F..%2Fetc")):
        assert _reprocess(api, k, d).status_code == 404
    assert httpx.delete(f"{api.url}/v1/documents/{doc}", headers={"X-API-Key": key}, timeout=60).status_code == 202
    wait_status(api.url, key, doc, {"DELETED"})
    assert _reprocess(api, key, doc).status_code == 404  # a deleted document stays deleted
