"""The converter reads nothing outside the document and opens no connection (issue
24, kind 1; shared/cases R11).  Each of the three layers is shown on its own, with a
control that proves the test can fail (LibreOffice without the layer does read the
canary or make the request), then all three together through the cold and warm
paths, ``ragstream partition`` and the pipeline.

The canary files are world-readable on purpose: file permissions do not hide them,
only the layers do."""
from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import zipfile
from pathlib import Path

import pytest

from stages import sandbox
from stages.external_refs import is_external, strip_external_references
from stages.office import convert_office, find_soffice
from stages.office_profile import seed_profile

DATA = Path(__file__).parent / "data" / "hostile"
CANARY_WORD = "CANARYWORD"
pytestmark = [pytest.mark.skipif(find_soffice() is None, reason="LibreOffice not installed"),
              pytest.mark.timeout(300)]


class _Requests(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def _any(self) -> None:
        self.seen.append(f"{self.command} {self.path}")
        if self.path.endswith(".xml"):  # an XForms instance: LibreOffice aborts on a 404
            body = b"<a><b>REMOTEINSTANCE</b></a>"
            self.send_response(200)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(body)
            return
        self.send_response(404)
        self.end_headers()

    do_GET = do_OPTIONS = do_HEAD = do_PROPFIND = _any  # noqa: N815

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture(scope="module")
def listener():
    """A loopback HTTP server that records every request made to it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Requests)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


@pytest.fixture(scope="module")
def canary_dir():
    """World-readable canary files outside any document: an SVG whose text would
    show in the PDF, and a text file."""
    root = Path(tempfile.mkdtemp(prefix="ragstream-canary-", dir="/tmp"))
    root.chmod(0o755)
    (root / "canary.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="900" height="120">'
                                     f'<text x="10" y="60" font-size="36">{CANARY_WORD} secret</text></svg>')
    (root / "canary.txt").write_text(f"{CANARY_WORD} text\n")
    for f in root.iterdir():
        f.chmod(0o644)
    shutil.copyfile(DATA / "ragstream-canary.svg", "/tmp/ragstream-canary.svg")  # what R11 links
    os.chmod("/tmp/ragstream-canary.svg", 0o644)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _odt(path: Path, body: str) -> Path:
    ns = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
          'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
          'xmlns:xlink="http://www.w3.org/1999/xlink" '
          'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
          'xmlns:form="urn:oasis:names:tc:opendocument:xmlns:form:1.0" '
          'xmlns:xforms="http://www.w3.org/2002/xforms"')
    content = (f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ns} office:version="1.2">'
               f"<office:body><office:text>{body}</office:text></office:body></office:document-content>")
    manifest = ('<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
                '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
                '<manifest:file-entry manifest:full-path="/" manifest:media-type='
                '"application/vnd.oasis.opendocument.text"/><manifest:file-entry manifest:full-path='
                '"content.xml" manifest:media-type="text/xml"/></manifest:manifest>')
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", content, zipfile.ZIP_DEFLATED)
        z.writestr("META-INF/manifest.xml", manifest, zipfile.ZIP_DEFLATED)
    return path


def _xforms_odt(path: Path, src: str, nodeset: str) -> Path:
    """An ODT whose XForms model loads its instance from ``src`` into a text field
    bound to ``nodeset`` (a fresh helper's attack, 2026-12-04: it passed the first two
    layers and LibreOffice fetched http:// and file:// instances into the PDF)."""
    forms = ('<office:forms form:automatic-focus="false" form:apply-design-mode="false">'
             '<xforms:model xforms:id="Model1" xforms:schema=""><xforms:instance xforms:id="inst1" '
             f'src="{src}"/><xforms:bind xforms:id="bind1" xforms:nodeset="{nodeset}"/></xforms:model>'
             '<form:form form:name="Form1" form:apply-filter="true" form:command-type="table" '
             'form:control-implementation="ooo:com.sun.star.form.component.Form"><form:text form:name="T1" '
             'form:control-implementation="ooo:com.sun.star.form.component.TextField" xml:id="control1" '
             'form:id="control1" xforms:bind="bind1"/></form:form></office:forms>')
    control = ('<text:p><draw:control text:anchor-type="as-char" svg:width="16cm" svg:height="1.5cm" '
               'draw:control="control1"/></text:p>')
    return _odt(path, forms + "<text:p>XFORMSMARKER a form</text:p>" + control)


def _linked_image_odt(path: Path, href: str) -> Path:
    return _odt(path, '<text:p>ODTLINKMARKER before the picture '
                      '<text:a xlink:type="simple" xlink:href="https://example.org/kept">a hyperlink</text:a></text:p>'
                      '<text:p><draw:frame svg:width="12cm" svg:height="2cm"><draw:image xlink:href="'
                      f'{href}" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/></draw:frame></text:p>')


def _include_rtf(path: Path, canary_dir: Path) -> Path:
    path.write_text(r"{\rtf1\ansi {\fonttbl{\f0 Arial;}} RTFLINKMARKER before\par "
                    r'{\field{\*\fldinst INCLUDEPICTURE "' + (canary_dir / "canary.svg").as_uri()
                    + r'" \\d}{\fldrslt }}\par after\par}')
    return path


def _linked_docx(path: Path, canary_dir: Path) -> Path:
    """A DOCX with INCLUDETEXT and INCLUDEPICTURE fields and an external image
    relationship, plus a hyperlink relationship that must stay."""
    import docx

    document = docx.Document()
    document.add_paragraph("DOCXLINKMARKER before the fields")
    document.save(path)
    with zipfile.ZipFile(path) as src:
        parts = {i.filename: src.read(i) for i in src.infolist()}
    uri = (canary_dir / "canary.txt").as_uri()
    fields = (f'<w:p><w:fldSimple w:instr=" INCLUDETEXT &quot;{uri}&quot; "><w:r><w:t>cached</w:t></w:r>'
              f'</w:fldSimple></w:p><w:p><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText>'
              f' INCLUDEPICTURE "{(canary_dir / "canary.svg").as_uri()}" \\d </w:instrText></w:r>'
              '<w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>')
    body = parts["word/document.xml"].decode()
    parts["word/document.xml"] = body.replace("<w:sectPr", fields + "<w:sectPr", 1).encode()
    rels = parts["word/_rels/document.xml.rels"].decode()
    extra = ('<Relationship Id="rIdLinked" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
             f'relationships/image" Target="{(canary_dir / "canary.svg").as_uri()}" TargetMode="External"/>'
             '<Relationship Id="rIdHyper" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
             'relationships/hyperlink" Target="https://example.org/kept" TargetMode="External"/>')
    parts["word/_rels/document.xml.rels"] = rels.replace("</Relationships>", extra + "</Relationships>").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in parts.items():
            out.writestr(name, data)
    return path


def _pdf_text(pdf: Path) -> str:
    return subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout


def _raw_soffice(src: Path, out: Path, *, profile: bool, sandboxed: bool) -> str:
    """Convert with LibreOffice directly (no stripping): with or without the locked
    profile, inside or outside the sandbox.  Returns the PDF's text."""
    job = sandbox.job_dir()
    try:
        staged = job / src.name
        shutil.copyfile(src, staged)
        if profile:
            seed_profile(job / "profile")
        sandbox.give_to_sandbox(job)
        argv = [find_soffice(), f"-env:UserInstallation={(job / 'profile').as_uri()}", "--headless",
                "--norestore", "--convert-to", "pdf", "--outdir", str(job), str(staged)]
        if sandboxed:
            argv = sandbox.wrap(argv, [job])
        subprocess.run(argv, capture_output=True, timeout=120, cwd=job, env={**os.environ, "HOME": str(job)})
        pdf = job / (staged.stem + ".pdf")
        assert pdf.exists(), f"no PDF from {src.name}"
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pdf, out / pdf.name)
        return _pdf_text(out / pdf.name)
    finally:
        shutil.rmtree(job, ignore_errors=True)


# -- layer 1: the external references are stripped ------------------------------------

def test_is_external():
    for href in ("file:///etc/passwd", "http://x/y.png", "smb://h/s", "/etc/passwd", "\\\\host\\share\\a",
                 "../../secret.png", "vnd.sun.star.expand:$BRAND_BASE_DIR/x", "FILE:/x"):
        assert is_external(href), href
    for href in ("Pictures/1.png", "./Object 1", "#bookmark", "", "media/image1.png"):
        assert not is_external(href), href


def test_stripping_removes_every_link_and_keeps_hyperlinks(tmp_path, canary_dir):
    odt = _linked_image_odt(tmp_path / "img.odt", (canary_dir / "canary.svg").as_uri())
    stripped, removed = strip_external_references(odt, "odt", tmp_path / "o")
    assert removed == [f"content.xml: image {(canary_dir / 'canary.svg').as_uri()}"]
    content = zipfile.ZipFile(stripped).read("content.xml").decode()
    assert "canary" not in content and "https://example.org/kept" in content
    assert zipfile.ZipFile(stripped).infolist()[0].filename == "mimetype"  # still a valid ODF package

    docx_file = _linked_docx(tmp_path / "f.docx", canary_dir)
    stripped, removed = strip_external_references(docx_file, "docx", tmp_path / "d")
    assert len(removed) == 3, removed  # two fields and the linked image; the hyperlink stays
    with zipfile.ZipFile(stripped) as z:
        everything = b"".join(z.read(n) for n in z.namelist()).decode("utf-8", "replace")
    assert "canary" not in everything and "https://example.org/kept" in everything

    rtf = _include_rtf(tmp_path / "f.rtf", canary_dir)
    stripped, removed = strip_external_references(rtf, "rtf", tmp_path / "r")
    assert removed and "INCLUDEPICTURE" not in stripped.read_text()

    plain = _odt(tmp_path / "plain.odt", "<text:p>nothing linked</text:p>")
    assert strip_external_references(plain, "odt", tmp_path / "p") == (plain, [])


def test_stripped_file_reads_no_canary_even_unsandboxed_without_profile(tmp_path, canary_dir):
    odt = _linked_image_odt(tmp_path / "img.odt", (canary_dir / "canary.svg").as_uri())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGSTREAM_CONVERTER_SANDBOX", "off")
        assert CANARY_WORD in _raw_soffice(odt, tmp_path / "control", profile=False, sandboxed=False)
        stripped, _ = strip_external_references(odt, "odt", tmp_path / "s")
        text = _raw_soffice(stripped, tmp_path / "out", profile=False, sandboxed=False)
    assert "ODTLINKMARKER" in text and CANARY_WORD not in text


# -- layer 2: the profile blocks untrusted links --------------------------------------

def test_profile_blocks_linked_files_and_requests(tmp_path, canary_dir, listener):
    odt = _linked_image_odt(tmp_path / "img.odt", (canary_dir / "canary.svg").as_uri())
    remote = _linked_image_odt(tmp_path / "remote.odt", f"http://127.0.0.1:{listener.server_port}/x.svg")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGSTREAM_CONVERTER_SANDBOX", "off")
        _Requests.seen.clear()
        assert CANARY_WORD in _raw_soffice(odt, tmp_path / "c1", profile=False, sandboxed=False)
        _raw_soffice(remote, tmp_path / "c2", profile=False, sandboxed=False)
        assert _Requests.seen, "control: LibreOffice without the profile made no request"
        _Requests.seen.clear()
        assert CANARY_WORD not in _raw_soffice(odt, tmp_path / "p1", profile=True, sandboxed=False)
        assert "ODTLINKMARKER" in _raw_soffice(remote, tmp_path / "p2", profile=True, sandboxed=False)
    assert _Requests.seen == []


def test_profile_alone_does_not_stop_an_rtf_includepicture(tmp_path, canary_dir):
    """Measured, and why the profile is not the only layer: LibreOffice 7.4 resolves an
    RTF INCLUDEPICTURE field even with untrusted links blocked."""
    rtf = _include_rtf(tmp_path / "f.rtf", canary_dir)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGSTREAM_CONVERTER_SANDBOX", "off")
        text = _raw_soffice(rtf, tmp_path / "p", profile=True, sandboxed=False)
    assert "RTFLINKMARKER" in text
    if CANARY_WORD not in text.replace(" ", ""):
        pytest.xfail("this LibreOffice no longer follows INCLUDEPICTURE with links blocked")


# -- layer 3: the sandbox ------------------------------------------------------------

@pytest.mark.skipif(sandbox.mode() == "off", reason="RAGSTREAM_CONVERTER_SANDBOX=off")
def test_sandbox_sees_no_files_no_network_and_no_root(tmp_path, canary_dir, listener):
    job = sandbox.job_dir()
    try:
        def inside(*argv: str) -> subprocess.CompletedProcess:
            return subprocess.run(sandbox.wrap(list(argv), [job]), capture_output=True, text=True, timeout=30)

        assert inside("cat", str(canary_dir / "canary.txt")).returncode != 0
        assert inside("cat", "/tmp/ragstream-canary.svg").returncode != 0
        assert inside("ls", str(Path(__file__).parent)).returncode != 0  # no repository
        assert inside("sh", "-c", f"echo ok > {job}/w && cat {job}/w").stdout.strip() == "ok"
        if os.geteuid() == 0:
            assert inside("cat", "/etc/shadow").returncode != 0
        assert inside("cat", "/etc/os-release").returncode != 0  # only the /etc files LibreOffice needs
        probe = ("import socket,sys\ns=socket.socket()\ns.settimeout(3)\n"
                 f"sys.exit(s.connect_ex(('127.0.0.1', {listener.server_port})) == 0)")
        assert inside("/usr/bin/python3", "-c", probe).returncode == 0  # connect failed
        assert subprocess.run(["/usr/bin/python3", "-c", probe]).returncode == 1  # control: outside it connects
    finally:
        shutil.rmtree(job, ignore_errors=True)


@pytest.mark.skipif(sandbox.mode() == "off", reason="RAGSTREAM_CONVERTER_SANDBOX=off")
def test_sandbox_alone_stops_what_the_profile_misses(tmp_path, canary_dir, listener):
    rtf = _include_rtf(tmp_path / "f.rtf", canary_dir)
    odt = _linked_image_odt(tmp_path / "img.odt", (canary_dir / "canary.svg").as_uri())
    remote = _linked_image_odt(tmp_path / "remote.odt", f"http://127.0.0.1:{listener.server_port}/x.svg")
    _Requests.seen.clear()
    assert CANARY_WORD not in _raw_soffice(rtf, tmp_path / "a", profile=False, sandboxed=True).replace(" ", "")
    assert CANARY_WORD not in _raw_soffice(odt, tmp_path / "b", profile=False, sandboxed=True)
    assert "ODTLINKMARKER" in _raw_soffice(remote, tmp_path / "c", profile=False, sandboxed=True)
    assert _Requests.seen == []


# -- all layers: the product's own paths ------------------------------------------------

def _hostile_set(tmp_path: Path, canary_dir: Path, port: int) -> dict[Path, str]:
    r11 = tmp_path / "R11.odt"
    shutil.copyfile(DATA / "R11-odt-linked-local-images.odt", r11)
    return {r11: "LINKIMGMARKER",
            _linked_image_odt(tmp_path / "img.odt", (canary_dir / "canary.svg").as_uri()): "ODTLINKMARKER",
            _linked_image_odt(tmp_path / "remote.odt", f"http://127.0.0.1:{port}/x.svg"): "ODTLINKMARKER",
            _include_rtf(tmp_path / "f.rtf", canary_dir): "RTFLINKMARKER",
            _linked_docx(tmp_path / "f.docx", canary_dir): "DOCXLINKMARKER"}


def test_xforms_instances_are_stripped(tmp_path, listener):
    remote = _xforms_odt(tmp_path / "xf.odt", f"http://127.0.0.1:{listener.server_port}/i.xml", "/a/b")
    local = DATA / "xforms-instance-etc.odt"  # the helper's file: instance file:///etc/fonts/fonts.conf
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGSTREAM_CONVERTER_SANDBOX", "off")
        _Requests.seen.clear()
        _raw_soffice(remote, tmp_path / "c1", profile=True, sandboxed=False)
        assert _Requests.seen, "control: LibreOffice with the locked profile did not fetch the XForms instance"
        assert "Default configuration file" in _raw_soffice(local, tmp_path / "c2", profile=True, sandboxed=False)
    _, removed = strip_external_references(remote, "odt", tmp_path / "s")
    assert any(r.startswith("content.xml: model") for r in removed), removed
    _Requests.seen.clear()
    for src in (remote, local):
        conv = convert_office(src, tmp_path / "out" / src.stem, "odt", 120, "")
        text = _pdf_text(conv.path)
        assert "MARKER" in text and "Default configuration file" not in text
    assert _Requests.seen == []


def test_cold_conversion_of_linking_documents_reads_nothing_outside(tmp_path, canary_dir, listener):
    _Requests.seen.clear()
    for src, marker in _hostile_set(tmp_path, canary_dir, listener.server_port).items():
        conv = convert_office(src, tmp_path / "out" / src.stem, src.suffix.lstrip("."), 120, "")
        text = _pdf_text(conv.path)
        assert conv.route == "cold" and marker in text, src.name
        assert CANARY_WORD not in text.replace(" ", "") and "CANARYSECRET" not in text, src.name
    assert _Requests.seen == []


def test_partition_cli_on_r11(tmp_path, canary_dir):
    proc = subprocess.run([str(Path(".venv/bin/ragstream").resolve()), "partition",
                           str(DATA / "R11-odt-linked-local-images.odt")],
                          capture_output=True, text=True, timeout=180, env={**os.environ, "RAGSTREAM_CONVERTER_URL": "off"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "LINKIMGMARKER" in proc.stdout and "CANARYSECRET" not in proc.stdout
    assert "removed 2 external reference(s)" in proc.stderr


@pytest.mark.integration
def test_r11_through_the_pipeline_leaks_nothing(stack, worker, project, canary_dir):
    """R11 ingested on the test stack: its own text is indexed, the canary's is not
    (in the processed chunks and in a search)."""
    from tests.conftest import ingest, run
    from tests.test_hostile import _processed_text

    outcome = ingest([DATA / "R11-odt-linked-local-images.odt"], project)
    [result] = outcome.results
    event = outcome.last[result.document_id]
    assert event.status == "COMPLETED", event.error
    text = run(_processed_text(stack, project, result.document_id))
    assert "LINKIMGMARKER" in text and "CANARYSECRET" not in text and "hunter2" not in text
    proc = subprocess.run([str(Path(".venv/bin/ragstream").resolve()), "search", "CANARYSECRET db_password",
                           "-p", project, "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1000:]
    hits = json.loads(proc.stdout)["hits"]
    assert hits and not any("CANARYSECRET" in h["text"] or "hunter2" in h["text"] for h in hits)


@pytest.mark.parametrize("name", ["reattack-xforms-namespace-variant.odt", "reattack-dtd-default-href.odt",
                                  "reattack-embedded-svg-link.odt"])
def test_second_attack_files_read_nothing_outside(tmp_path, name):
    """A second fresh helper's files (2026-12-04): an XForms namespace other than
    2002's with a percent-encoded ``..`` path, an attribute default from a DOCTYPE
    ATTLIST, and an SVG part linking a file: each read /usr or /etc/fonts through
    the sandbox's read-only system files before layer 1 covered them."""
    conv = convert_office(DATA / name, tmp_path / "out", "odt", 120, "")
    text = _pdf_text(conv.path)
    assert "MARKER" in text
    assert "Default configuration file" not in text and "postgresql-common" not in text
