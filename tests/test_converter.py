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
