"""The inputs and the clock of ``ragstream bench fairness`` (bench/fairness.py,
bench/fairness_projects.py): salted documents (so nothing comes from the embedding
cache) and the first time each document reached each status on the changelog."""
from __future__ import annotations

import asyncio
import random
import re
import time
from pathlib import Path
from typing import Optional

_README = Path(__file__).resolve().parents[1] / "README.md"


def _words(seed: str) -> tuple[random.Random, list[str]]:
    vocab = re.findall(r"[A-Za-z][A-Za-z'-]{2,}", _README.read_text(encoding="utf-8"))
    return random.Random(seed), vocab


def dense_pdf(path: Path, pages: int, salt: str) -> Path:
    """A born-digital PDF of ``pages`` A4 pages, each a heading and five paragraphs of
    ~90 words drawn (seeded by ``salt``) from the README's vocabulary: several chunks
    per page, text unique to ``salt``."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    rng, vocab = _words(salt)
    styles = getSampleStyleSheet()
    story = []
    for n in range(1, pages + 1):
        story.append(Paragraph(f"Part {n} ({salt})", styles["Heading1"]))
        for k in range(5):
            story.append(Paragraph(f"Paragraph {n}.{k}: " + " ".join(rng.choices(vocab, k=90)),
                                   styles["BodyText"]))
        story.append(PageBreak())
    SimpleDocTemplate(str(path), pagesize=A4, invariant=1).build(story)
    return path


def scanned_pdf(source: Path, out: Path, pages: int, dpi: int = 100) -> Path:
    """An image-only PDF of ``pages`` pages: the pages of ``source`` rendered at ``dpi``
    (grayscale JPEG, pypdfium2 + Pillow), repeated as needed; no text layer, so every
    page is OCRed (profile ``scanned``)."""
    import pypdfium2

    doc = pypdfium2.PdfDocument(str(source))
    try:
        n = len(doc)
        images = [doc[i % n].render(scale=dpi / 72).to_pil().convert("L") for i in range(pages)]
    finally:
        doc.close()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:], resolution=dpi)
    return out


def small_docs(folder: Path, n: int, salt: str) -> list[Path]:
    """``n`` one-page text documents (~300 words each), text unique to ``salt``."""
    rng, vocab = _words(salt + "-small")
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        body = "\n\n".join(f"Note {i}.{k} ({salt}): " + " ".join(rng.choices(vocab, k=60))
                           for k in range(5))
        path = folder / f"note-{i:02d}.txt"
        path.write_text(body + "\n", encoding="utf-8")
        out.append(path)
    return out


class StatusTimes:
    """First time each ``(document_id, status)`` was seen on the changelog (event
    time, Unix seconds), collected by a background task."""

    def __init__(self, settings) -> None:
        self.settings, self.first = settings, {}
        self.last: dict[str, object] = {}
        self._task: Optional[asyncio.Task] = None

    async def _run(self) -> None:
        from streams.kafka_io import tail_status

        async for ev in tail_status(self.settings.kafka_bootstrap, from_beginning=False):
            self.first.setdefault((ev.document_id, ev.status), ev.at)
            self.last[ev.document_id] = ev

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def wait_for(self, document_id: str, statuses: set[str], timeout_s: float) -> Optional[str]:
        """The first of ``statuses`` the document reaches within ``timeout_s``, else None."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for s in statuses:
                if (document_id, s) in self.first:
                    return s
            await asyncio.sleep(0.1)
        return None
