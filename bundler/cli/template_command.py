"""`bundler template NAME`: print a template the bundler ships (bundler.templates), such as
the nightly GitHub Actions workflow, so an installed bundler gives it without a clone. With
`--output FILE` it writes the file itself, making the folders it needs (a shell redirection
into `.github/workflows/` fails in a repository that has no such folder yet)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bundler.cli.console import emit_report, stderr_console
from bundler.cli.errors import run_command
from bundler.cli.options import DebugOption, JsonOption
from bundler.core import exitcodes
from bundler.core.errors import UsageError
from bundler.core.model import Model

TEMPLATES = {"nightly-sync": "nightly-sync.yml", "leaderboard-audit": "leaderboard-audit.yml"}
"""The templates a user copies, by the name this command takes."""


class TemplateReport(Model):
    """What `template --json` says: the template and where it was written."""

    name: str
    output: str | None
    """The file written (--output), or None when the text went to stdout only as `text`."""
    text: str


def template_command(
    name: Annotated[
        str,
        typer.Argument(metavar="NAME", help=f"The template: {', '.join(TEMPLATES)}."),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the template to FILE, making its folders, e.g. "
            ".github/workflows/nightly-sync.yml (an existing file is replaced).",
        ),
    ] = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Print a template the bundler ships to stdout, or write it with --output, e.g. `bundler
    template nightly-sync -o .github/workflows/nightly-sync.yml` (the nightly `bundler sync`
    workflow; `leaderboard-audit`: an audit spread over a matrix of runners, then merged).
    With --json the template's text is the `text` field of the JSON object."""

    def action() -> int:
        from importlib.resources import files

        if name not in TEMPLATES:
            raise UsageError(f"no template {name!r}", hint=f"known: {', '.join(TEMPLATES)}")
        text = files("bundler.templates").joinpath(TEMPLATES[name]).read_text(encoding="utf-8")
        if output is not None:
            from bundler.local.fileio import write_atomically, write_error

            try:
                output.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise write_error(output.parent, error) from None
            write_atomically(output, text.encode("utf-8"))
            stderr_console().print(f"wrote {output}", highlight=False, markup=False)
        if json_output:
            written = None if output is None else str(output)
            report = TemplateReport(name=name, output=written, text=text)
            emit_report(report.model_dump(mode="json"), exitcodes.OK)
        elif output is None:
            typer.echo(text, nl=False)
        return exitcodes.OK

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))
