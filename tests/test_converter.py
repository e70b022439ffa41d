"""The warm converter: unoserver started as the dev stack service ``converter``,
a DOCX converted through it, a per-file timeout, and the cold fallback."""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from stages.errors import ConversionTimeout
from stages.office import convert_office, find_soffice, probe_converter
from stages.samples import generate_samples
import devstack
from devstack import converter as converter_service
from streams.settings import Settings
from tests.conftest import CORPUS, free_port_block

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(180),
    pytest.mark.skipif(find_soffice() is None, reason="LibreOffice not installed"),
    pytest.mark.skipif(not (converter_service.DEFAULT_VENV / "bin" / "unoserver").exists(),
                       reason=".venv-uno missing (python3-uno + scripts/setup_uno_env.sh)"),
]


@pytest.fixture(scope="module")
def converter():
    """The warm converter, which runs only with the converter sandbox off: this
    module's tests run with ``RAGSTREAM_CONVERTER_SANDBOX=off`` unless they say."""
    saved = os.environ.get("RAGSTREAM_CONVERTER_SANDBOX")
    os.environ["RAGSTREAM_CONVERTER_SANDBOX"] = "off"
    root = Path(tempfile.mkdtemp(prefix="ragstream-converter-", dir="/tmp"))
    root.chmod(0o755)
    settings = Settings(data_dir=root / "data", converter_port=free_port_block(2))
    try:
        started = devstack.up(settings, names=["converter"], timeout_s=90)
        assert started["converter"].healthy, started
        yield settings
    finally:
        devstack.down(settings, names=["converter"], grace_s=5)
        if not os.environ.get("RAGSTREAM_KEEP_TEST_DIR"):
            shutil.rmtree(root, ignore_errors=True)
        if saved is None:
            os.environ.pop("RAGSTREAM_CONVERTER_SANDBOX", None)
        else:
            os.environ["RAGSTREAM_CONVERTER_SANDBOX"] = saved


def _pages(path: Path) -> int:
    return len(pdfium.PdfDocument(str(path)))


def test_docx_converts_warm(converter: Settings, tmp_path: Path) -> None:
    url = converter_service.url(converter)
    assert probe_converter(url)
    docx = generate_samples(tmp_path / "in")[1]
    warm = convert_office(docx, tmp_path / "warm", "docx", 60, url)
    assert warm.route == "warm"
    assert warm.path.read_bytes()[:5] == b"%PDF-" and _pages(warm.path) >= 1
    cold = convert_office(docx, tmp_path / "cold", "docx", 60, "")
    assert cold.route == "cold" and _pages(cold.path) == _pages(warm.path)
    print(f"DOCX warm {warm.seconds:.2f} s, cold {cold.seconds:.2f} s")


def test_spreadsheet_goes_cold_even_with_converter(converter: Settings, tmp_path: Path) -> None:
    corpus = CORPUS / "stanley-cups.xlsx"
    if not corpus.exists():
        pytest.skip("corpus XLSX missing")
    res = convert_office(corpus, tmp_path, "xlsx", 60, converter_service.url(converter))
    assert res.route == "cold" and _pages(res.path) >= 1


def test_warm_timeout_raises_and_server_survives(converter: Settings, tmp_path: Path) -> None:
    url = converter_service.url(converter)
    docx = generate_samples(tmp_path / "in")[1]
    with pytest.raises(ConversionTimeout, match="warm converter"):
        convert_office(docx, tmp_path / "t", "docx", 0.001, url)
    deadline = time.monotonic() + 30  # the abandoned conversion finishes in well under 1 s
    while not probe_converter(url) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert convert_office(docx, tmp_path / "again", "docx", 60, url).route == "warm"


def test_no_converter_falls_back_cold(tmp_path: Path) -> None:
    docx = generate_samples(tmp_path / "in")[1]
    res = convert_office(docx, tmp_path / "out", "docx", 60, f"http://127.0.0.1:{free_port_block(2)}")
    assert res.route == "cold" and _pages(res.path) >= 1


def test_warm_converter_strips_links_and_blocks_them(converter: Settings, tmp_path: Path) -> None:
    """The warm path (sandbox off, trusted input) still gets files by value, after
    the links were stripped, with the locked profile: the canary stays out and no
    request reaches the listener (issue 24 kind 1, layers 1 and 2)."""
    import http.server
    import threading

    from tests.test_converter_isolation import CANARY_WORD, _Requests, _hostile_set, _pdf_text

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Requests)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    canary = tmp_path / "canary"
    canary.mkdir()
    canary.chmod(0o755)
    (canary / "canary.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="900" height="120">'
                                       f'<text x="10" y="60" font-size="36">{CANARY_WORD} x</text></svg>')
    (canary / "canary.txt").write_text(f"{CANARY_WORD}\n")
    shutil.copyfile(Path(__file__).parent / "data" / "hostile" / "ragstream-canary.svg", "/tmp/ragstream-canary.svg")
    try:
        _Requests.seen.clear()
        for src, marker in _hostile_set(tmp_path, canary, server.server_port).items():
            conv = convert_office(src, tmp_path / "out" / src.stem, src.suffix.lstrip("."), 60,
                                  converter_service.url(converter))
            text = _pdf_text(conv.path)
            assert conv.route == "warm" and marker in text, src.name
            assert CANARY_WORD not in text.replace(" ", "") and "CANARYSECRET" not in text, src.name
        assert _Requests.seen == []
    finally:
        server.shutdown()


def test_sandbox_on_never_takes_the_warm_path(converter: Settings, tmp_path: Path, monkeypatch) -> None:
    """With the sandbox on, a running warm converter is not used: each file converts
    cold in a sandbox of its own without network (a shared LibreOffice on the host
    network fetched an XForms instance in a helper's attack)."""
    docx = generate_samples(tmp_path / "in")[1]
    monkeypatch.setenv("RAGSTREAM_CONVERTER_SANDBOX", "bwrap")
    assert probe_converter(converter_service.url(converter))
    assert convert_office(docx, tmp_path / "o", "docx", 60, converter_service.url(converter)).route == "cold"
    with pytest.raises(devstack.DevStackError, match="disabled in this configuration"):
        devstack.up(converter, names=["converter"], timeout_s=30)
