"""The tesseract OCR binary: whether it is installed, and the ``-l`` value for a
profile's languages.  Shared by partitioning, the scanned-table OCR and the
rule-based tables.
"""
from __future__ import annotations

import shutil


def tesseract_available() -> bool:
    """True when the ``tesseract`` binary is on PATH."""
    return shutil.which("tesseract") is not None


def tesseract_lang(languages: list[str] | tuple[str, ...]) -> str:
    """Profile languages → tesseract ``-l`` value (ISO 639-1/-3 codes mapped)."""
    try:
        from unstructured.partition.common.lang import prepare_languages_for_tesseract

        return prepare_languages_for_tesseract(list(languages)) or "eng"
    except Exception:  # noqa: BLE001 - older/newer unstructured: use the codes as given
        return "+".join(languages) or "eng"
