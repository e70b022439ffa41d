"""No project module over ``LIMIT`` lines unless its opening docstring says why, on
a line starting ``Size:`` (e.g. ``Size: one state machine; split, its transitions
would be read across files``).  A long module is a place a newcomer gets lost in;
the reason tells them it is long on purpose, and the next editor when it is not.
"""
from __future__ import annotations

import ast

from tests.test_import_graph import ROOT, project_modules

LIMIT = 400


def size_reason(source: str) -> str | None:
    """The paragraph of the module's docstring that starts with ``Size:`` (without
    that word, lines joined), or None when there is none or it is empty."""
    doc = ast.get_docstring(ast.parse(source)) or ""
    for para in doc.split("\n\n"):
        if para.lstrip().startswith("Size:"):
            return " ".join(para.lstrip()[len("Size:"):].split()) or None
    return None


def test_size_reason_is_read_from_the_docstring():
    assert size_reason('"""Thing.\n\nSize: one parser,\none grammar.\n"""\nx = 1\n') == "one parser, one grammar."
    assert size_reason('"""Thing.\n\nSize:\n"""\n') is None
    assert size_reason('"""Thing. Size: not at a line start."""\n') is None
    assert size_reason("x = 1  # Size: a comment is not the docstring\n") is None


def test_long_modules_say_why():
    unexplained = []
    for name, path in sorted(project_modules().items()):
        source = path.read_text()
        lines = len(source.splitlines())
        if lines > LIMIT and size_reason(source) is None:
            unexplained.append(f"{name} ({path.relative_to(ROOT)}): {lines} lines")
    assert not unexplained, (f"modules over {LIMIT} lines without a 'Size:' line in their docstring "
                             "(split them, or say why they are long):\n" + "\n".join(unexplained))
