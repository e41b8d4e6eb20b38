"""A check that a report says what it means (issue 35): every field a human report prints has a
value, or the field is not printed; no string in a --json report is empty (a value that is not
known is null, or left out). Used on every command's output by tests/test_reports_say.py, and
by any test that wants it.

What counts as an empty field in human output: a name and a colon with nothing after it on the
line, or before the next separator (`field: ,`, `field: ;`, `field:  )`), and a name followed
by a space and a comma (`field , published , derived`, a value printed as nothing between its
name and the next). A line that ends in a bare colon with no space (`3 finding(s):`) introduces
what follows, and is not a field."""

from __future__ import annotations

import re
import subprocess
from typing import Any

from helpers import strict_json

EMPTY_FIELD = re.compile(r"[\w)\]]:[ \t]+(?=[,;)]|$)|[\w)\]]:(?=[,;)])|\w[ \t]+,", re.MULTILINE)
"""`name: ` at a line's end or before a separator, `name:,`, `name ,`."""


def empty_fields(text: str) -> list[str]:
    """The lines of human output that print a field with no value."""
    return [line for line in text.splitlines() if EMPTY_FIELD.search(line)]


def empty_strings(value: Any, where: str = "$") -> list[str]:
    """The JSON paths of every empty (or blank) string in a parsed --json report."""
    if isinstance(value, str):
        return [where] if not value.strip() else []
    if isinstance(value, dict):
        return [
            found for key, item in value.items() for found in empty_strings(item, f"{where}.{key}")
        ]
    if isinstance(value, list):
        return [
            found
            for number, item in enumerate(value)
            for found in empty_strings(item, f"{where}[{number}]")
        ]
    return []


def check_human(result: subprocess.CompletedProcess[str]) -> None:
    """Neither stream of a human run prints a field without its value, or a traceback."""
    for stream in (result.stdout, result.stderr):
        assert "Traceback" not in stream, stream
        assert not empty_fields(stream), (result.args, empty_fields(stream), stream)


def check_json(result: subprocess.CompletedProcess[str]) -> Any:
    """A --json run's stdout is one strict JSON value with no empty string; its stderr (the
    progress and notes a person reads) passes check_human. Returns the parsed report."""
    assert "Traceback" not in result.stderr, result.stderr
    assert not empty_fields(result.stderr), (result.args, empty_fields(result.stderr))
    report = strict_json(result.stdout)
    assert not empty_strings(report), (result.args, empty_strings(report), result.stdout)
    return report
