"""``ragstream partition FILE [--strategy S]``: one file's elements as JSON lines.

Runs the same blocking stage functions the agents run (normalize, then partition),
without Kafka.  Each line: ``type``, ``element_id``, ``page_number``, ``text`` and, for
tables, ``text_as_html``, for a slide's speaker notes ``speaker_notes: true``
(``--full`` prints unstructured's whole element dict, image payloads included).  A file that cannot be parsed prints ``error: <reason>``
on stderr and exits with status 1 (2 for a bad option).
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import typer

from stages.profiles import STRATEGIES


def _line(element: dict, full: bool) -> str:
    if full:
        return json.dumps(element, ensure_ascii=False, default=str)
    meta = element.get("metadata", {})
    out = {"type": element["type"], "element_id": element["element_id"],
           "page_number": meta.get("page_number"), "text": element["text"]}
    if meta.get("text_as_html"):
        out["text_as_html"] = meta["text_as_html"]
    if meta.get("image_mime_type"):
        out["image_mime_type"] = meta["image_mime_type"]
    if meta.get("speaker_notes"):
        out["speaker_notes"] = True
    return json.dumps(out, ensure_ascii=False)


def partition_command(
    file: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True,
                                help="document to partition"),
    strategy: str = typer.Option("auto", help=f"PDF strategy: {', '.join(STRATEGIES)}"),
    category: str = typer.Option("default", help="profile (category) to use"),
    full: bool = typer.Option(False, "--full", help="print whole element dicts (with payloads)"),
) -> None:
    """Partition FILE and print its elements as JSON lines (exit 1 with the reason on failure)."""
    from stages.errors import DocumentError
    from stages.normalize import normalize_file
    from stages.partition import partition_file
    from stages.profiles import get_profile

    if strategy not in STRATEGIES:
        typer.echo(f"error: unknown strategy {strategy!r} (choose from {', '.join(STRATEGIES)})", err=True)
        raise typer.Exit(code=2)
    profile = get_profile(category).with_strategy(strategy)
    try:
        with tempfile.TemporaryDirectory(prefix="ragstream-cli-") as tmp:
            norm = normalize_file(file, Path(tmp), profile)
            if norm.reason:
                typer.echo(f"note: {norm.reason}", err=True)
            elements = partition_file(norm.path, norm.filetype, profile, filename=file.name)
    except DocumentError as exc:
        typer.echo(f"error: {exc.reason}", err=True)
        raise typer.Exit(code=1) from None
    for element in elements:
        sys.stdout.write(_line(element, full) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":  # python -m cli.partition FILE
    typer.run(partition_command)
