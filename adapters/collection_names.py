"""Milvus names of a project's collections and aliases: injective and suffix-proof.

A project name is ``[A-Za-z0-9_-]{1,64}``; Milvus names allow only letters, digits
and ``_``.  The old mapping (``-`` → ``_``) sent ``acme-corp`` and ``acme_corp`` to
one collection, and its suffixes collided with project names (``sales_test`` was
``sales``'s test alias, ``sales_v2`` its second collection): one project searched,
and a reindex emptied, another's chunks (issue 23).

The stem of a project is ``chunks_`` + the project with every ``_`` written ``_0``
and every ``-`` written ``_1`` (letters and digits as they are), so in the encoded
part an ``_`` is always followed by ``0`` or ``1`` and never by another ``_``:

- the encoding is injective (a prefix code: decode left to right);
- every suffix is joined with ``__`` (:data:`SEP`), which no encoded project holds,
  so ``chunks_{enc}__test``, ``chunks_{enc}__v3`` and ``chunks_{enc}__previous``
  can never be another project's stem, alias or version.

A project without ``_`` or ``-`` keeps its old stem (``chunks_demo``); its physical
collections are now ``chunks_demo__v{n}``.  A stack made before this change still
serves through its alias; the first reindex builds ``__v1`` beside the old ``_v{n}``.
Lengths: at most 7 + 128 + 2 + 4 + 2 + 8 = 151 characters (Milvus allows 255).
"""
from __future__ import annotations

import re

PREFIX = "chunks_"
SEP = "__"
PROJECT_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ENCODE = str.maketrans({"_": "_0", "-": "_1"})


class InvalidProjectName(ValueError):
    """A project name outside ``[A-Za-z0-9_-]{1,64}``."""


def check_project(project: str) -> str:
    """``project`` itself when it matches ``[A-Za-z0-9_-]{1,64}``; else InvalidProjectName."""
    if not isinstance(project, str) or not PROJECT_RE.fullmatch(project):
        raise InvalidProjectName(f"project name {project!r} must match [A-Za-z0-9_-]{{1,64}}")
    return project


def project_stem(project: str) -> str:
    """``chunks_`` + the injective encoding of ``project`` (``acme-corp`` →
    ``chunks_acme_1corp``, ``acme_corp`` → ``chunks_acme_0corp``).  Raises
    InvalidProjectName."""
    return PREFIX + check_project(project).translate(_ENCODE)


def project_of_stem(name: str) -> str:
    """The project whose stem is ``name`` (inverse of :func:`project_stem`); ValueError
    for a name that is no stem."""
    if not name.startswith(PREFIX) or SEP in name[len(PREFIX):]:
        raise ValueError(f"{name!r} is not a project's collection stem")
    out, enc, i = [], name[len(PREFIX):], 0
    while i < len(enc):
        if enc[i] == "_":
            code = enc[i + 1:i + 2]
            if code not in ("0", "1"):
                raise ValueError(f"{name!r} is not a project's collection stem")
            out.append("_" if code == "0" else "-")
            i += 2
        else:
            out.append(enc[i])
            i += 1
    return check_project("".join(out))


def with_suffix(name: str, suffix: str) -> str:
    """``{name}__{suffix}``: a stem's or alias's version, test alias or memory."""
    return f"{name}{SEP}{suffix}"
