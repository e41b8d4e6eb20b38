"""`bundler template NAME`: print a template the bundler ships (bundler.templates), such as
the nightly GitHub Actions workflow, so an installed bundler gives it without a clone."""

from __future__ import annotations

from typing import Annotated

import typer

from bundler.cli.console import stderr_console
from bundler.core import exitcodes

TEMPLATES = {"nightly-sync": "nightly-sync.yml"}
"""The templates a user copies, by the name this command takes."""


def template_command(
    name: Annotated[
        str,
        typer.Argument(metavar="NAME", help=f"The template: {', '.join(TEMPLATES)}."),
    ],
) -> None:
    """Print a template the bundler ships to stdout, e.g. `bundler template nightly-sync >
    .github/workflows/nightly-sync.yml` (the nightly `bundler sync` workflow)."""
    from importlib.resources import files

    if name not in TEMPLATES:
        stderr_console().print(
            f"[bold red]error[/]: no template {name!r} (known: {', '.join(TEMPLATES)})",
            highlight=False,
        )
        raise typer.Exit(exitcodes.UNUSABLE)
    text = files("bundler.templates").joinpath(TEMPLATES[name]).read_text(encoding="utf-8")
    typer.echo(text, nl=False)
    raise typer.Exit(exitcodes.OK)
