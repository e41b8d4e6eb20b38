"""How an error that ended a command reads: one line (and a hint), or the JSON error object
under --json, and its exit code; secrets scrubbed, a stop signal read as interrupted."""

from __future__ import annotations

import shlex
import traceback
from collections.abc import Callable
from typing import TypeVar

import typer

from bundler.cli.console import emit_json, plain, shown, stderr_console
from bundler.cli.signals import exit_if_stopped, stop_signals_caught
from bundler.cli.tokens import scrubbed
from bundler.core import exitcodes
from bundler.core.errors import BundlerError, NoRunSelectedError

T = TypeVar("T")


def described(error: Exception, secrets: tuple[str, ...]) -> tuple[int, str | None, str | None]:
    """The exit code, message and hint for an error that ended a command."""
    if isinstance(error, BundlerError):
        return error.exit_code, scrubbed(worded(error), secrets), scrubbed(error.hint, secrets)
    from pydantic import ValidationError

    if isinstance(error, ValidationError):  # options the command line let through
        from bundler.local.validation import describe_validation_error

        message = f"invalid option: {describe_validation_error(error)}"
        return exitcodes.UNUSABLE, scrubbed(message, secrets), "see --help"
    # a bug: say so plainly, with the way to learn more
    message = f"internal error: {type(error).__name__}: {error}"
    hint = "re-run with --debug for the traceback, and report it"
    return exitcodes.UNUSABLE, scrubbed(message, secrets), hint


def run_command(
    action: Callable[[], T], *, json_output: bool, debug: bool, secrets: tuple[str, ...] = ()
) -> T:
    """Run library code; turn an error into one readable line (or a JSON object) and an exit
    code. `secrets` are scrubbed from anything shown, as a last line of defence."""
    console = stderr_console()
    with stop_signals_caught():
        try:
            return action()
        except BaseException as error:
            exit_if_stopped(console, error)
            if not isinstance(error, Exception) or isinstance(error, BrokenPipeError):
                raise  # SystemExit and the like end the process as they meant to; a closed
                # pipe ends it quietly (BundlerGroup.main)
            code, message, hint = described(error, secrets)
            trace = traceback.format_exc()
    if debug:
        lines = (scrubbed(trace, secrets) or "").splitlines()
        console.print("\n".join(plain(line) for line in lines), markup=False)
    if json_output:
        emit_json({"error": message, "hint": hint, "exit_code": code})
    console.print(f"[bold red]error[/]: {shown(message or '')}", highlight=False)
    if hint:
        console.print(f"  hint: {plain(hint)}", markup=False)
    raise typer.Exit(code)


_FILTER_FLAGS = {"tasks": "--task", "models": "--model"}


def worded(error: BundlerError) -> str:
    """The error's message, in the command line's terms where the library gave data."""
    if isinstance(error, NoRunSelectedError):
        given = " ".join(
            f"{_FILTER_FLAGS[field]} {shlex.quote(value)}"
            for field, values in error.unmatched.items()
            for value in values
        )
        return f"{given} matched no run"
    return error.message
