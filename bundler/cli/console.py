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
    # emoji off: a name such as ":fire:" from the inputs must read as written, not as 🔥.
    console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = LOG_WIDTH
    return console


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
