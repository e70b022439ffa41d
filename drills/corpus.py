"""The drills' corpus: N seeded documents of mixed kinds and sizes (small .txt/.md/
.html, DOCX, multi-page PDFs, and one PDF longer than the profile's
``max_pages_per_task`` so that it is split into page ranges).  The same seed gives
the same bytes; ``revision=2`` gives changed bytes under the same names.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Optional, Sequence


def _words(rng: random.Random) -> list[str]:
    from stages.samples import SECTIONS

    text = " ".join(p for _, ps in SECTIONS for p in ps)
    return sorted({w.strip(".,;:()").lower() for w in text.split() if w.strip(".,;:()").isalpha()})


def _paragraphs(rng: random.Random, tag: str, n: int) -> list[str]:
    """``n`` paragraphs of seeded prose; each names ``tag`` so content is distinct."""
    words = _words(rng)
    out = []
    for p in range(n):
        sentences = []
        for s in range(rng.randint(3, 6)):
            body = " ".join(rng.choice(words) for _ in range(rng.randint(8, 16)))
            sentences.append(f"{tag} paragraph {p + 1} sentence {s + 1}: {body}.")
        out.append(" ".join(sentences))
    return out


def _kinds(n: int) -> list[str]:
    """The mix for ``n`` documents: one split PDF, ~15% multi-page PDFs, ~12% DOCX,
    the rest cycling txt, md, html."""
    pdfs, docx = max(1, round(n * 0.15)), max(1, round(n * 0.12))
    kinds = ["pdf-split"] + ["pdf"] * pdfs + ["docx"] * docx
    small = ("txt", "md", "html")
    kinds += [small[i % 3] for i in range(max(0, n - len(kinds)))]
    return kinds[:n]


def write_document(path: Path, kind: str, rng: random.Random, tag: str, split_pages: int) -> Path:
    """Write one document of ``kind`` (pdf-split, pdf, docx, txt, md, html) to ``path``."""
    title = f"Drill document {tag}"
    if kind in ("pdf", "pdf-split"):
        from reportlab.lib.pagesizes import A4
        from reportlab.lib.styles import getSampleStyleSheet
        from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

        styles = getSampleStyleSheet()
        pages = split_pages if kind == "pdf-split" else rng.randint(2, 5)
        story = []
        for n in range(1, pages + 1):
            story.append(Paragraph(f"{title}, section {n}", styles["Heading1"]))
            story += [Paragraph(p, styles["BodyText"]) for p in _paragraphs(rng, f"{tag} page {n}", 2)]
            story.append(PageBreak())
        SimpleDocTemplate(str(path), pagesize=A4, invariant=1, title=title,
                          creator="ragstream drill").build(story)
    elif kind == "docx":
        import io

        import docx

        from stages.samples import FIXED_DATE, normalize_zip

        document = docx.Document()
        document.add_heading(title, level=0)
        for h in range(rng.randint(2, 4)):
            document.add_heading(f"Part {h + 1}", level=1)
            for p in _paragraphs(rng, f"{tag} part {h + 1}", 2):
                document.add_paragraph(p)
        props = document.core_properties
        props.created = props.modified = props.last_printed = FIXED_DATE
        buf = io.BytesIO()
        document.save(buf)
        path.write_bytes(normalize_zip(buf.getvalue()))
    elif kind == "html":
        import html

        paras = "".join(f"<p>{html.escape(p)}</p>" for p in _paragraphs(rng, tag, rng.randint(2, 6)))
        path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
                        f"</head><body><h1>{title}</h1>{paras}</body></html>\n", encoding="utf-8")
    elif kind == "md":
        paras = _paragraphs(rng, tag, rng.randint(2, 6))
        path.write_text(f"# {title}\n\n" + "\n\n".join(f"## Part {i + 1}\n\n{p}" for i, p in
                                                       enumerate(paras)) + "\n", encoding="utf-8")
    else:
        path.write_text(title + "\n\n" + "\n\n".join(_paragraphs(rng, tag, rng.randint(1, 5))) + "\n",
                        encoding="utf-8")
    return path


EXT = {"pdf-split": "pdf", "pdf": "pdf", "docx": "docx", "txt": "txt", "md": "md", "html": "html"}


def make_corpus(out_dir: Path, n: int, seed: int, revision: int = 1,
                only: Optional[Sequence[int]] = None) -> list[Path]:
    """Write the drill corpus (``n`` documents) into ``out_dir``; the same (n, seed,
    revision) gives the same content.  ``revision`` > 1 changes the content under the
    same names (a new version); ``only`` limits which indices are written."""
    from stages.profiles import Profile

    out_dir.mkdir(parents=True, exist_ok=True)
    split_pages = Profile().max_pages_per_task + 8
    paths = []
    for i, kind in enumerate(_kinds(n)):
        if only is not None and i not in only:
            continue
        rng = random.Random(f"{seed}:{i}:{revision}")
        path = out_dir / f"doc-{i:03d}-{kind}.{EXT[kind]}"
        paths.append(write_document(path, kind, rng, f"s{seed}-d{i}-r{revision}", split_pages))
    return paths
