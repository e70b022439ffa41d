"""Table recovery accuracy: recovered ``text_as_html`` against a ground-truth CSV.

Grid convention (the one the corpus CSVs use): a table is a rectangular grid of
positions; a merged cell's text sits in its TOP-LEFT position and every other
position it covers is the empty string.  So an HTML cell ``<td rowspan="2">X</td>``
in row 0, column 0 becomes ``grid[0][0] = "X"`` and ``grid[1][0] = ""``.  Short CSV
rows are padded with empty strings to the widest row.

Cell accuracy = (number of ground-truth positions whose recovered text is exactly
equal after whitespace normalisation) / (number of ground-truth positions).  The
denominator counts every position of the truth grid, empty ones included (an empty
position is recovered only when the prediction has nothing there); predicted rows
or columns beyond the truth grid are reported but do not change the fraction.
Whitespace normalisation: runs of whitespace become one space, ends are stripped;
case and punctuation must match.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path


def normalise(text: str) -> str:
    """Collapse whitespace runs to one space and strip the ends."""
    return re.sub(r"\s+", " ", text or "").strip()


def read_truth_csv(path: Path) -> list[list[str]]:
    """The ground-truth CSV as a rectangular grid (rows padded with ``""``).

    Raises:
        FileNotFoundError, csv.Error, UnicodeDecodeError: unreadable file.
    """
    with open(path, newline="", encoding="utf-8-sig") as fh:
        rows = [row for row in csv.reader(fh)]
    while rows and not any(c.strip() for c in rows[-1]):
        rows.pop()  # trailing blank lines
    width = max((len(r) for r in rows), default=0)
    return [[normalise(c) for c in r] + [""] * (width - len(r)) for r in rows]


class _TableParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[tuple[str, int, int]]] = []
        self._cell: list[str] | None = None
        self._span = (1, 1)

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            if not self.rows:
                self.rows.append([])
            a = dict(attrs)
            self._span = (_int(a.get("rowspan")), _int(a.get("colspan")))
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append((normalise("".join(self._cell)), *self._span))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _int(value) -> int:
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return 1


def html_to_grid(table_html: str) -> list[list[str]]:
    """``<table>`` HTML → rectangular grid (spans expanded per the module convention)."""
    parser = _TableParser()
    parser.feed(table_html or "")
    occupied: dict[tuple[int, int], str] = {}
    for r, row in enumerate(parser.rows):
        c = 0
        for text, rowspan, colspan in row:
            while (r, c) in occupied:
                c += 1
            for dr in range(rowspan):
                for dc in range(colspan):
                    occupied[(r + dr, c + dc)] = text if (dr, dc) == (0, 0) else ""
            c += colspan
    if not occupied:
        return []
    n_rows = max(r for r, _ in occupied) + 1
    n_cols = max(c for _, c in occupied) + 1
    return [[occupied.get((r, c), "") for c in range(n_cols)] for r in range(n_rows)]


@dataclass
class CellScore:
    """Comparison of one recovered grid with the truth grid.

    Attributes:
        correct / total: exact matches / truth positions (see module docstring).
        diffs: ``(row, col, expected, got)`` for every mismatch (0-based).
        shape: (rows, cols) of the recovered grid; truth_shape likewise.
    """

    correct: int
    total: int
    shape: tuple[int, int]
    truth_shape: tuple[int, int]
    diffs: list[tuple[int, int, str, str]] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        """``correct / total`` (0.0 for an empty truth grid)."""
        return self.correct / self.total if self.total else 0.0


def score_grid(predicted: list[list[str]], truth: list[list[str]]) -> CellScore:
    """Cell accuracy of ``predicted`` against ``truth`` (both aligned at the top-left)."""
    correct, diffs = 0, []
    for r, row in enumerate(truth):
        for c, want in enumerate(row):
            got = normalise(predicted[r][c]) if r < len(predicted) and c < len(predicted[r]) else ""
            if got == normalise(want):
                correct += 1
            else:
                diffs.append((r, c, want, got))
    shape = (len(predicted), max((len(r) for r in predicted), default=0))
    truth_shape = (len(truth), max((len(r) for r in truth), default=0))
    return CellScore(correct, sum(len(r) for r in truth), shape, truth_shape, diffs)


def best_table(elements: list[dict], truth: list[list[str]]) -> tuple[int | None, CellScore]:
    """Score every Table element's ``text_as_html`` against ``truth``; the best one.

    Returns:
        (index of the best table among the Table elements, or None when there is
        none; its CellScore — all-zero with every truth cell as a diff when None).
    """
    empty = score_grid([], truth)  # no table: nothing recovered, not even the empty cells
    empty.correct, empty.diffs = 0, [(r, c, w, "") for r, row in enumerate(truth) for c, w in enumerate(row)]
    best: tuple[int | None, CellScore] = (None, empty)
    tables = [e for e in elements if e.get("type") == "Table"]
    for i, el in enumerate(tables):
        score = score_grid(html_to_grid(el.get("metadata", {}).get("text_as_html") or ""), truth)
        if best[0] is None or score.accuracy > best[1].accuracy:
            best = (i, score)
    return best
