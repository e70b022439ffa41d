"""Processing profiles: how a document category is normalized and partitioned.

A profile is chosen by the upload's ``category``; ``DEFAULT_PROFILES`` holds the
built-in ones; ``adapters.profiles_store`` keeps them in PostgreSQL
(``pipeline_profiles``, seeded from ``DEFAULT_PROFILES``; its ``load_profile`` reads
them with a short cache).  ``Profile.to_dict`` / ``Profile.from_dict`` are the row
format.  ``get_profile(category)`` falls back to ``"default"`` for an unknown category.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

STRATEGIES = ("auto", "fast", "ocr_only", "hi_res")
#: how a profile's text is chunked (stages/chunk.py ``ChunkParams.fit_to_embedder``)
CHUNKINGS = ("fit", "characters")

#: every type ``partition_file`` can handle natively (legacy Office needs LibreOffice)
NATIVE_TYPES = frozenset({
    "pdf", "docx", "pptx", "xlsx", "html", "xml", "md", "txt", "csv", "tsv", "eml",
    "png", "jpeg", "tiff", "bmp", "gif", "webp", "heic",
})
#: types that only LibreOffice can turn into something partitionable (as PDF)
CONVERT_ONLY_TYPES = frozenset({"doc", "ppt", "xls", "odt", "ods", "odp", "rtf"})


@dataclass(frozen=True)
class Profile:
    """How to process one category of documents.

    Attributes:
        name: profile / category name.
        strategy: PDF strategy — ``"auto"`` (text layer with ``fast`` per page, OCR
            for pages without one), ``"fast"`` (text layer only), ``"ocr_only"``
            (OCR every page), ``"hi_res"`` (layout model; falls back to ``auto`` when
            no layout model is available offline).
        convert_office_to_pdf: convert DOCX/PPTX/XLSX to PDF with LibreOffice first
            (page numbers for Word files, at ~30× the cost); legacy formats
            (doc/ppt/xls/odt/rtf) are always converted.
        ocr_languages: tesseract language codes, e.g. ``("eng",)``.
        extract_tables: recover PDF tables (pdfplumber) as Table elements with HTML.
        extract_images: add PDF images as Image elements with a PNG payload.
        use_vlm: let the enhance stage summarise tables/images with the configured
            vision-language model (when one is configured; otherwise the
            deterministic text rendering is used either way).
        max_size_bytes: larger files are rejected (TooLarge).
        timeout_s: budget for a conversion and for one partition call.
        max_pages_per_task: normalize suggests page ranges of at most this many pages
            for a PDF, and parts of at most this many pages' worth of text
            (``stages.document_parts.CHARS_PER_PAGE`` characters each) for other
            long documents.
        filetypes: accepted detected types (``detect.DetectedType.filetype``).
        allow_partial: a part of a split document (a page range, a unit range) that
            fails for good leaves the document COMPLETED with ``partial: true`` and
            the part listed (adapters/failed_parts.py); off, it fails the document.
        chunking: ``"fit"`` (chunks sized so the embedder reads every character: at
            most 256 word pieces each, stages/chunk.py) or ``"characters"`` (by title
            at fixed 3,000 / 2,400 / 500 characters, unstructured's defaults; the
            embedder reads each chunk's first 256 word pieces and drops the rest, as
            unstructured-ingest does).  Fewer chunks, less embedding, worse recall.
    """

    name: str = "default"
    strategy: str = "auto"
    convert_office_to_pdf: bool = False
    ocr_languages: tuple[str, ...] = ("eng",)
    extract_tables: bool = True
    extract_images: bool = True
    use_vlm: bool = True
    max_size_bytes: int = 200 * 1024 * 1024
    timeout_s: float = 600.0
    max_pages_per_task: int = 32
    filetypes: frozenset[str] = field(default_factory=lambda: NATIVE_TYPES | CONVERT_ONLY_TYPES)
    allow_partial: bool = True
    chunking: str = "fit"

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; expected one of {STRATEGIES}")
        if self.chunking not in CHUNKINGS:
            raise ValueError(f"unknown chunking {self.chunking!r}; expected one of {CHUNKINGS}")
        object.__setattr__(self, "filetypes", frozenset(self.filetypes))
        object.__setattr__(self, "ocr_languages", tuple(self.ocr_languages))

    def with_strategy(self, strategy: str) -> "Profile":
        """A copy with another strategy (validated)."""
        return replace(self, strategy=strategy)

    def to_dict(self) -> dict:
        """JSON-able dict (lists for the set/tuple fields)."""
        d = asdict(self)
        d["filetypes"] = sorted(self.filetypes)
        d["ocr_languages"] = list(self.ocr_languages)
        return d

    @classmethod
    def from_dict(cls, data: dict) -> "Profile":
        """Inverse of ``to_dict``; unknown keys are ignored, missing ones default."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


DEFAULT_PROFILES: dict[str, Profile] = {
    "default": Profile(),
    # text-layer only: never OCR, cheapest (pages without text fail specifically)
    "fast": Profile(name="fast", strategy="fast", extract_images=False),
    # scanned archives: OCR every page, smaller ranges per task
    "scanned": Profile(name="scanned", strategy="ocr_only", max_pages_per_task=10, timeout_s=3600.0),
    # legal / contracts: page numbers matter, so Word files go through PDF
    "legal": Profile(name="legal", convert_office_to_pdf=True),
    # the work unstructured-ingest does by default (``ragstream bench peer``'s
    # same-work run): text layer, OCR where a page has none, no tables or images, no
    # VLM, chunks by title at 3,000 characters of which the embedder reads 256 word pieces
    "basic": Profile(name="basic", extract_tables=False, extract_images=False, use_vlm=False,
                     chunking="characters"),
}


def get_profile(category: str | None) -> Profile:
    """The profile for ``category``, or ``DEFAULT_PROFILES["default"]``."""
    return DEFAULT_PROFILES.get(category or "default", DEFAULT_PROFILES["default"])
