"""``ragstream profiles ...``: the category profiles stored in PostgreSQL.

    ragstream profiles list [--json]
    ragstream profiles set CATEGORY [--strategy S] [--ocr-languages eng,deu]
                           [--tables/--no-tables] [--images/--no-images]
                           [--convert/--no-convert] [--vlm/--no-vlm]
                           [--filetypes pdf,docx,...] [--max-size-mb N]
                           [--timeout-s N] [--max-pages-per-task N]
                           [--allow-partial/--no-allow-partial] [--chunking fit|characters]
    ragstream profiles delete CATEGORY

``set`` changes only the options given; a new category starts from the ``default``
row.  Workers pick changes up within ``adapters.profiles_store.PROFILE_TTL_S``
seconds (no restart, no deploy).  The database is ``RAGSTREAM_PG_DSN``.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from stages.profiles import CHUNKINGS, STRATEGIES

profiles_app = typer.Typer(help="Category profiles (PostgreSQL table pipeline_profiles).",
                           no_args_is_help=True)


def _csv(value: Optional[str]) -> Optional[list[str]]:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


async def _with_store(fn):
    from adapters.migrations import upgrade_head
    from adapters.profiles_store import ProfileStore
    from streams.settings import get_settings

    await upgrade_head(get_settings().pg_dsn)
    async with ProfileStore(get_settings().pg_dsn) as store:
        await store.seed_defaults()
        return await fn(store)


@profiles_app.command("list")
def list_command(as_json: bool = typer.Option(False, "--json", help="one JSON object per line")) -> None:
    """Print every stored profile (a table, or JSON lines with ``--json``)."""
    profiles = asyncio.run(_with_store(lambda s: s.list()))
    if as_json:
        for p in profiles:
            typer.echo(json.dumps(p.to_dict()))
        return
    table = Table("category", "strategy", "ocr", "tables", "images", "convert", "vlm",
                  "max MB", "timeout s", "pages/task", "partial", "chunking", "types")
    for p in profiles:
        types = sorted(p.filetypes)
        table.add_row(p.name, p.strategy, ",".join(p.ocr_languages), _yn(p.extract_tables),
                      _yn(p.extract_images), _yn(p.convert_office_to_pdf), _yn(p.use_vlm),
                      f"{p.max_size_bytes / 2**20:g}", f"{p.timeout_s:g}", str(p.max_pages_per_task),
                      _yn(p.allow_partial), p.chunking,
                      f"{len(types)}: " + ",".join(types[:6]) + ("…" if len(types) > 6 else ""))
    Console(width=200).print(table)


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


@profiles_app.command("set")
def set_command(
    category: str = typer.Argument(..., help="category name (a new one starts from 'default')"),
    strategy: Optional[str] = typer.Option(None, help=f"one of {', '.join(STRATEGIES)}"),
    ocr_languages: Optional[str] = typer.Option(None, help="comma-separated tesseract codes"),
    tables: Optional[bool] = typer.Option(None, "--tables/--no-tables", help="extract tables"),
    images: Optional[bool] = typer.Option(None, "--images/--no-images", help="extract PDF images"),
    convert: Optional[bool] = typer.Option(None, "--convert/--no-convert",
                                           help="Office files through LibreOffice → PDF"),
    vlm: Optional[bool] = typer.Option(None, "--vlm/--no-vlm", help="VLM summaries of tables/images"),
    filetypes: Optional[str] = typer.Option(None, help="comma-separated accepted types (by content)"),
    max_size_mb: Optional[float] = typer.Option(None, help="largest accepted file, MiB"),
    timeout_s: Optional[float] = typer.Option(None, help="per conversion / partition call, seconds"),
    max_pages_per_task: Optional[int] = typer.Option(None, help="page-range size for large PDFs; other long documents are split into parts of that many pages' worth of text (3,000 characters a page)"),
    allow_partial: Optional[bool] = typer.Option(
        None, "--allow-partial/--no-allow-partial",
        help="a part that fails for good leaves the document COMPLETED and partial (default) or fails it"),
    chunking: Optional[str] = typer.Option(
        None, help=f"one of {', '.join(CHUNKINGS)}: chunks the embedder reads whole (fit), or by title at "
                   "3,000 characters of which it reads the first 256 word pieces (characters)"),
) -> None:
    """Create or change CATEGORY's profile; prints the stored row as JSON (exit 2 on a bad value)."""
    from stages.profiles import Profile

    changes = {k: v for k, v in {
        "strategy": strategy, "ocr_languages": _csv(ocr_languages), "extract_tables": tables,
        "extract_images": images, "convert_office_to_pdf": convert, "use_vlm": vlm,
        "filetypes": _csv(filetypes),
        "max_size_bytes": int(max_size_mb * 2**20) if max_size_mb is not None else None,
        "timeout_s": timeout_s, "max_pages_per_task": max_pages_per_task,
        "allow_partial": allow_partial, "chunking": chunking}.items() if v is not None}
    for key in ("max_size_bytes", "timeout_s", "max_pages_per_task"):
        if key in changes and changes[key] <= 0:
            typer.echo(f"error: {key} must be positive", err=True)
            raise typer.Exit(code=2)
    if "ocr_languages" in changes and not changes["ocr_languages"]:
        typer.echo("error: ocr_languages needs at least one language", err=True)
        raise typer.Exit(code=2)

    async def apply(store) -> Profile:
        base = await store.get(category) or await store.get("default") or Profile()
        profile = replace(base, name=category, **changes)  # __post_init__ validates
        await store.put(profile)
        return await store.get(category)

    try:
        stored = asyncio.run(_with_store(apply))
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    typer.echo(json.dumps(stored.to_dict()))


@profiles_app.command("delete")
def delete_command(category: str = typer.Argument(...)) -> None:
    """Remove CATEGORY's row (its uploads then use 'default'); exit 1 when it did not exist."""
    if not asyncio.run(_with_store(lambda s: s.delete(category))):
        typer.echo(f"error: no profile {category!r}", err=True)
        raise typer.Exit(code=1)
    typer.echo(f"deleted {category}")
