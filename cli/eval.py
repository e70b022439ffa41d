"""``ragstream eval ...``: quality measurements printed as figures.

    ragstream eval tables PDF TRUTH.csv   cell accuracy of recovered tables

``eval tables`` partitions the file with the same stage functions the agents run
(normalize, then partition with the chosen profile/strategy), scores every Table
element against the ground-truth CSV (``stages.table_eval``: merged cells sit in
their top-left grid position, whitespace normalised, exact match), keeps the best
table, prints each mismatching cell and ends with the line
``cell_accuracy=<fraction>``.  A file that cannot be parsed prints
``error: <reason>`` on stderr and exits 1.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import typer

from stages.profiles import STRATEGIES

eval_app = typer.Typer(help="Quality evaluations (figures printed).", no_args_is_help=True)


@eval_app.command("tables")
def eval_tables_command(
    pdf: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True,
                               help="document holding the table (PDF, or an image)"),
    truth: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True,
                                 help="ground-truth CSV (merged cells: text in the top-left position)"),
    strategy: str = typer.Option("auto", help=f"PDF strategy: {', '.join(STRATEGIES)}"),
    category: str = typer.Option("default", help="profile (category) to use"),
) -> None:
    """Print per-cell diffs of the best-matching recovered table; last line ``cell_accuracy=<fraction>``.

    Inputs: ``pdf`` (any partitionable file), ``truth`` (CSV).  Output (stdout): a
    header line, one ``r<row>c<col>: expected '...' got '...'`` line per mismatch
    (0-based), a summary, then ``cell_accuracy=<fraction>`` with 4 decimals (0 when no
    table was recovered).  Exit status 1 with ``error: <reason>`` on stderr when the
    file cannot be parsed, 2 for a bad option.
    """
    from stages.errors import DocumentError
    from stages.normalize import normalize_file
    from stages.partition import partition_file
    from stages.profiles import get_profile
    from stages.table_eval import best_table, read_truth_csv

    if strategy not in STRATEGIES:
        typer.echo(f"error: unknown strategy {strategy!r} (choose from {', '.join(STRATEGIES)})", err=True)
        raise typer.Exit(code=2)
    profile = get_profile(category).with_strategy(strategy)
    grid = read_truth_csv(truth)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="ragstream-eval-") as tmp:
            norm = normalize_file(pdf, Path(tmp), profile)
            elements = partition_file(norm.path, norm.filetype, profile, filename=pdf.name)
    except DocumentError as exc:
        typer.echo(f"error: {exc.reason}", err=True)
        raise typer.Exit(code=1) from None
    seconds = time.perf_counter() - start
    tables = [e for e in elements if e["type"] == "Table"]
    index, score = best_table(elements, grid)
    typer.echo(f"{pdf.name}: {len(tables)} table(s) recovered in {seconds:.2f} s; "
               f"truth grid {score.truth_shape[0]}x{score.truth_shape[1]}"
               + (f", best table #{index + 1} grid {score.shape[0]}x{score.shape[1]} "
                  f"(page {tables[index]['metadata'].get('page_number')})" if index is not None else ""))
    for r, c, want, got in score.diffs:
        typer.echo(f"r{r}c{c}: expected {want!r} got {got!r}")
    typer.echo(f"{score.correct}/{score.total} cells exact")
    typer.echo(f"cell_accuracy={score.accuracy:.4f}")


if __name__ == "__main__":  # python -m cli.eval PDF TRUTH.csv
    typer.run(eval_tables_command)
