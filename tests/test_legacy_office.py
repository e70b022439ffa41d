"""Legacy and OpenDocument formats through LibreOffice (installed by the bootstrap):
a real .doc and .odt, made here from the sample DOCX with soffice, are detected by
content, converted to PDF within the profile's timeout, and partitioned with their
table and true page numbers."""
from __future__ import annotations

import subprocess

import pytest

from stages.normalize import normalize_file
from stages.office import find_soffice
from stages.partition import partition_file
from stages.profiles import DEFAULT_PROFILES
from stages.samples import generate_samples

pytestmark = pytest.mark.skipif(find_soffice() is None, reason="LibreOffice not installed")


@pytest.fixture(scope="module")
def legacy_files(tmp_path_factory):
    out = tmp_path_factory.mktemp("legacy")
    docx = generate_samples(out / "samples")[1]
    profile_dir = out / "lo-profile"
    made = {}
    for fmt in ("doc", "odt"):
        subprocess.run([find_soffice(), f"-env:UserInstallation=file://{profile_dir}", "--headless",
                        "--convert-to", fmt, "--outdir", str(out), str(docx)],
                       check=True, capture_output=True, timeout=180)
        made[fmt] = (out / docx.name).with_suffix(f".{fmt}")
    return made


@pytest.mark.parametrize("fmt", ["doc", "odt"])
def test_legacy_office_converts_and_partitions(legacy_files, tmp_path, fmt):
    src = legacy_files[fmt].rename(tmp_path / "upload.bin")  # the name says nothing
    norm = normalize_file(src, tmp_path / "work", DEFAULT_PROFILES["default"])
    assert norm.source_filetype == fmt and norm.converted and norm.filetype == "pdf"
    elements = partition_file(norm.path, norm.filetype, DEFAULT_PROFILES["default"])
    text = " ".join(e["text"] for e in elements)
    assert "Riverside Water Authority" in text and "West Hollow" in text
    assert all(e["metadata"]["page_number"] >= 1 for e in elements)
    tables = [e for e in elements if e["type"] == "Table"]
    assert tables and "North Basin" in tables[0]["metadata"]["text_as_html"]
