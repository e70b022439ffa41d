"""A long text PDF for tests: ``pages`` pages of seeded prose, a numbered section
heading every few pages, and a nonce in every paragraph so its chunk texts are new to
any database (the embedding cache).  ``changed_page`` rewrites one paragraph of that
page (another length and other words), as a one-page edit of a new version."""
from __future__ import annotations

import random
from pathlib import Path

WORDS = ("pump station energy reservoir storage level treatment capacity pipe renewal budget "
         "leakage kilometre billing customer network pressure valve meter district supply "
         "demand summer winter drainage works inspection council report annual figure target "
         "maintenance contract survey sample quality turbidity chlorine filter basin").split()


def _paragraph(rng: random.Random, nonce: str, tag: str) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(45, 90))]
    sentences, i = [], 0
    while i < len(words):
        n = rng.randint(8, 16)
        sentences.append(" ".join(words[i:i + n]).capitalize() + ".")
        i += n
    return f"{' '.join(sentences)} Reference {nonce}-{tag}."


def write_long_pdf(path: Path, nonce: str, pages: int = 100, changed_page: int | None = None,
                   section_every: int = 3) -> Path:
    """Write the PDF to ``path`` (reportlab, Letter, Helvetica 10): each page 1-based
    ``p`` has 4 paragraphs; pages ``1, 1 + section_every, ...`` start with a heading
    "Section k".  Returns ``path``."""
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    styles = getSampleStyleSheet()
    rng = random.Random(7)
    story = []
    for p in range(1, pages + 1):
        if (p - 1) % section_every == 0:
            story.append(Paragraph(f"Section {(p - 1) // section_every + 1}", styles["Heading1"]))
        for j in range(4):
            text = _paragraph(rng, nonce, f"{p}.{j}")
            if p == changed_page and j == 1:
                text = _paragraph(random.Random(p * 1000), nonce, f"{p}.{j} revised edition") + \
                    " This paragraph was rewritten for the second version."
            story.append(Paragraph(text, styles["BodyText"]))
        story.append(PageBreak())
    SimpleDocTemplate(str(path), pagesize=letter).build(story)
    return path
