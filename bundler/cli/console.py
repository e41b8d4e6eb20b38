"""The consoles a command writes to: people on stderr (rich), machines on stdout (JSON, Markdown).

Also the escaping every input value passes through before rich shows it. A module of its own,
below both the renderers and the progress bar, which each need it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from bundler.core import exitcodes
from bundler.core.jsontext import valid_unicode

if TYPE_CHECKING:
    from pydantic import BaseModel


def plain(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every character Python deems unprintable (control characters such as ESC,
    format characters such as bidi overrides, lone surrogates, line breaks unless kept) shown
    as its escape, e.g. `\\x1b`: names, warnings and paths come from strangers, and a raw
    escape sequence could rewrite what a reviewer sees on the terminal."""
    if text.isprintable():
        return text
    return "".join(
        char if char.isprintable() or (keep_newlines and char == "\n") else repr(char)[1:-1]
        for char in text
    )


def shown(value: object, *, keep_newlines: bool = False) -> str:
    """Any value from the inputs, ready for rich markup: unprintable characters escaped
    (`plain`) and markup brackets escaped. Every renderer passes input text through this."""
    return escape(plain(str(value), keep_newlines=keep_newlines))


LOG_WIDTH = 160
"""Width for tables when stderr is a log, not a terminal: rich would assume 80 columns and
break bundle ids in the middle; a log line may be long."""


def stderr_console() -> Console:
    end_quietly_on_closed_pipe()
    # emoji off: a name such as ":fire:" from the inputs must read as written, not as 🔥.
    console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = LOG_WIDTH
    return console


def end_quietly_on_closed_pipe() -> None:
    """rich ends a process whose output pipe was closed with exit 1 (Console.on_broken_pipe);
    the bundler's is 0: `bundler verify ./bundles | head` is not a failure. Every standard
    stream writing into the closed pipe then points at /dev/null, so the interpreter's final
    flush says nothing either: with `2>&1 | head` that is stderr as well as stdout, and a
    buffered stream left on the pipe made the process end with Python's exit 120.

    Set on rich's Console when a command makes its first console (here, or typer's for --help,
    bundler.cli.app), not when the command starts: a command that writes nothing through rich
    (`bundler --version`) does not load it."""
    Console.on_broken_pipe = _on_broken_pipe  # type: ignore[method-assign,assignment]


def _on_broken_pipe(console: Console) -> None:
    if console.quiet:
        return
    closed = _same_file(console.file)
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        if closed is not None and _same_file(stream) == closed:
            os.dup2(devnull, stream.fileno())
    raise SystemExit(exitcodes.OK)


def _same_file(stream: Any) -> tuple[int, int] | None:
    """What `stream` writes into (device and inode), to tell the streams on one pipe."""
    try:
        info = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


def emit_text(text: str) -> None:
    """A document (Markdown) on stdout, for a person to read or a pipe to take."""
    sys.stdout.write(text)
    sys.stdout.flush()


ERROR_DOCUMENT = "error"
"""The `kind` of the JSON error object, which a command writes instead of its report."""


def command_name() -> str:
    """The command being run, as typed after `bundler` ("upload", "tasks list"): the `kind`
    of its JSON report, so that a reader of a saved report knows what made it."""
    from typer._click.globals import get_current_context

    words = []
    context = get_current_context(silent=True)
    while context is not None and context.parent is not None:
        words.append(context.info_name or "")
        context = context.parent
    return " ".join(reversed(words))


def emit_report(fields: dict[str, Any], exit_code: int) -> None:
    """A command's --json report: `kind` (the command), the report's fields, `exit_code`."""
    emit_json({"kind": command_name()} | fields | {"exit_code": exit_code})


def emit_error(message: str | None, hint: str | None, exit_code: int, error_kind: str) -> None:
    """The JSON error object of a command that ended on an error, in the names the reports
    that carry an error use (`error`, `hint`, `error_kind`)."""
    emit_json(
        {
            "kind": ERROR_DOCUMENT,
            "error": message,
            "hint": hint,
            "error_kind": error_kind,
            "exit_code": exit_code,
        }
    )


def emit_json(value: BaseModel | dict[str, Any]) -> None:
    """One JSON document on stdout, nothing else there, so it can be piped into jq. It is
    ASCII: every other character is a JSON escape, so no control character reaches a terminal
    raw; and valid Unicode (`valid_unicode`), so that no strict parser refuses it."""
    data = value if isinstance(value, dict) else value.model_dump(mode="json")
    sys.stdout.write(json.dumps(valid_unicode(data), indent=2, ensure_ascii=True) + "\n")
    sys.stdout.flush()
