"""An e-mail's attachments and forwarded messages are documents of their own,
partitioned with every check of an upload, to a bounded depth; one that fails is named
and never loses the others (``stages.email_attachments``).  Before, one corrupt
attachment or any forwarded message failed the whole e-mail."""
from __future__ import annotations

import io
from email.message import EmailMessage
from pathlib import Path

from stages.partition import partition_file
from stages.profiles import Profile

PROFILE = Profile(name="default")


def message(subject: str, body: str, attachments: list = ()) -> EmailMessage:
    """An e-mail; each attachment is an EmailMessage (forwarded) or ``(name, bytes, mime)``."""
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "a@example.com", "b@example.com", subject
    msg.set_content(body)
    for item in attachments:
        if isinstance(item, EmailMessage):
            msg.add_attachment(item)
        else:
            name, data, mime = item
            maintype, subtype = mime.split("/")
            msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return msg


def docx_bytes(text: str) -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _write(tmp_path: Path, msg: EmailMessage) -> Path:
    path = tmp_path / "mail.eml"
    path.write_bytes(bytes(msg))
    return path


def _by_marker(elements: list[dict]) -> dict[str, dict]:
    return {word: e for e in elements for word in e["text"].split() if word.endswith("MARKER")}


def test_attachments_forwarded_messages_and_a_broken_one(tmp_path):
    forwarded = message("Original", "FORWARDEDBODYMARKER the original text.",
                        [("inner.txt", b"INNERFILEMARKER attached to the original.\n", "text/plain")])
    src = _write(tmp_path, message("Fwd: Original", "OUTERBODYMARKER see the attachments.", [
        ("broken.pdf", b"%PDF-1.4\n1 0 obj garbage", "application/pdf"),
        ("notes.docx", docx_bytes("DOCXFILEMARKER in a Word file."),
         "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        forwarded,
        ("plain.txt", b"TEXTFILEMARKER a plain attachment.\n", "text/plain"),
    ]))
    elements = partition_file(src, "eml", PROFILE, filename="mail.eml")
    found = _by_marker(elements)
    assert set(found) == {"OUTERBODYMARKER", "DOCXFILEMARKER", "FORWARDEDBODYMARKER",
                          "INNERFILEMARKER", "TEXTFILEMARKER"}
    assert found["DOCXFILEMARKER"]["metadata"]["filename"] == "notes.docx"
    assert found["DOCXFILEMARKER"]["metadata"]["attached_to_filename"] == "mail.eml"
    assert found["INNERFILEMARKER"]["metadata"]["attached_to_filename"].startswith("forwarded message 3")
    skipped = elements[0]["metadata"]["skipped_parts"]
    assert skipped == ["broken.pdf: truncated or corrupt PDF: neither pypdf nor qpdf could read it"]
    assert len({e["element_id"] for e in elements}) == len(elements)


def test_depth_limit_skips_and_names_what_lies_deeper(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSTREAM_MAX_EMAIL_DEPTH", "2")
    level3 = message("Three", "LEVELTHREEMARKER body.", [("deep.txt", b"DEEPFILEMARKER\n", "text/plain")])
    level2 = message("Two", "LEVELTWOMARKER body.", [level3])
    src = _write(tmp_path, message("One", "LEVELONEMARKER body.", [level2]))
    elements = partition_file(src, "eml", PROFILE, filename="mail.eml")
    assert set(_by_marker(elements)) == {"LEVELONEMARKER", "LEVELTWOMARKER", "LEVELTHREEMARKER"}
    assert elements[0]["metadata"]["skipped_parts"] == [
        "forwarded message 1 (Two)/forwarded message 1 (Three)/deep.txt: not opened, attachments nested deeper than 2 levels "
        "(RAGSTREAM_MAX_EMAIL_DEPTH)"]


def test_same_file_twice_and_unsupported_ones(tmp_path):
    data = b"TWICEFILEMARKER the same bytes.\n"
    src = _write(tmp_path, message("Twice", "BODYMARKER.", [
        ("a.txt", data, "text/plain"), ("b.txt", data, "text/plain"),
        ("archive.zip", b"PK\x05\x06" + b"\0" * 18, "application/zip"),
        ("empty.txt", b"", "text/plain"),
    ]))
    elements = partition_file(src, "eml", PROFILE, filename="mail.eml")
    twice = [e for e in elements if "TWICEFILEMARKER" in e["text"]]
    assert [e["metadata"]["filename"] for e in twice] == ["a.txt", "b.txt"]
    assert twice[0]["element_id"] != twice[1]["element_id"]
    assert elements[0]["metadata"]["skipped_parts"] == [
        "archive.zip: ZIP archive that is not an Office/OpenDocument file"]  # the empty one: nothing lost


def test_body_empty_attachments_carry_the_message(tmp_path):
    msg = EmailMessage()
    msg["From"], msg["Subject"] = "a@example.com", "scan"
    msg.add_attachment(b"ONLYATTACHMENTMARKER the whole content.\n", maintype="text", subtype="plain",
                       filename="only.txt")
    elements = partition_file(_write(tmp_path, msg), "eml", PROFILE)
    assert "ONLYATTACHMENTMARKER" in _by_marker(elements)


def test_message_without_attachments_is_unchanged(tmp_path):
    src = _write(tmp_path, message("Plain", "PLAINBODYMARKER nothing attached."))
    elements = partition_file(src, "eml", PROFILE)
    assert [e["text"] for e in elements] == ["PLAINBODYMARKER nothing attached."]
    assert "skipped_parts" not in elements[0]["metadata"]
