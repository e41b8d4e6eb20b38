"""How an error that ended a command reads: one line (and a hint), or the JSON error object
under --json (`kind` "error", `error`, `hint`, `error_kind`, `exit_code`), and its exit code;
secrets scrubbed, a stop signal read as interrupted. The words are bundler.cli.error_words's."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import NamedTuple, TypeVar

import typer

from bundler.cli.console import emit_error, plain, shown, stderr_console
from bundler.cli.error_words import validation_words, words_for
from bundler.cli.signals import exit_if_stopped, stop_signals_caught
from bundler.cli.tokens import scrubbed
from bundler.core import exitcodes
from bundler.core.errors import BundlerError

T = TypeVar("T")

USAGE_KIND = "usage"
"""The `error_kind` of a command line (or an option's value) that cannot be used: as
UsageError's."""
INTERNAL_KIND = "internal"
"""The `error_kind` of an error the bundler did not raise on purpose: a bug."""


class Described(NamedTuple):
    """What the person and a `--json` reader are told of the error that ended a command."""

    exit_code: int
    message: str | None
    hint: str | None
    kind: str


def described(error: Exception, secrets: tuple[str, ...]) -> Described:
    """The exit code, message, hint and kind for an error that ended a command."""
    if isinstance(error, BundlerError):
        message, hint = words_for(error)
        return Described(
            error.exit_code, scrubbed(message, secrets), scrubbed(hint, secrets), error.kind
        )
    from pydantic import ValidationError

    if isinstance(error, ValidationError):  # options the command line let through
        from bundler.local.validation import describe_validation_error

        message = f"invalid option: {describe_validation_error(error, validation_words)}"
        return Described(exitcodes.UNUSABLE, scrubbed(message, secrets), "see --help", USAGE_KIND)
    # a bug: say so plainly, with the way to learn more
    message = f"internal error: {type(error).__name__}: {error}"
    hint = "re-run with --debug for the traceback, and report it"
    return Described(exitcodes.UNUSABLE, scrubbed(message, secrets), hint, INTERNAL_KIND)


def run_command(
    action: Callable[[], T], *, json_output: bool, debug: bool, secrets: tuple[str, ...] = ()
) -> T:
    """Run library code; turn an error into one readable line (or a JSON object) and an exit
    code. `secrets` are scrubbed from anything shown, as a last line of defence."""
    console = stderr_console()
    with stop_signals_caught():
        try:
            done = action()
        except BaseException as error:
            from bundler.local.fileio import remove_unowned

            remove_unowned()  # before saying that nothing partial was left behind
            exit_if_stopped(console, error)
            if not isinstance(error, Exception) or isinstance(error, BrokenPipeError):
                raise  # SystemExit and the like end the process as they meant to; a closed
                # pipe ends it quietly (BundlerGroup.main)
            code, message, hint, kind = described(error, secrets)
            trace = traceback.format_exc()
        else:
            exit_if_stopped(console)
            return done
    if debug:
        lines = (scrubbed(trace, secrets) or "").splitlines()
        console.print("\n".join(plain(line) for line in lines), markup=False)
    if json_output:
        emit_error(message, hint, code, kind)
    console.print(f"[bold red]error[/]: {shown(message or '')}", highlight=False)
    if hint:
        console.print(f"  hint: {plain(hint)}", markup=False)
    raise typer.Exit(code)
