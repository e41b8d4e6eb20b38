"""Errors as data, words in the command line: every error the library raises on purpose is a
class with a stable kind (bundler.core.errors), and the command line words it, flags and all,
in one table (bundler.cli.error_words)."""

from __future__ import annotations

import inspect
import re

from pydantic import BaseModel, ValidationError

from bundler.cli.errors import described
from bundler.core import errors

ERROR_CLASSES = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.BundlerError) and cls.__module__ == errors.__name__
]


def test_every_error_class_has_a_kind_of_its_own() -> None:
    """A `--json` reader acts on `kind`: one per class, never inherited, never shared."""
    kinds = [cls.__dict__.get("kind") for cls in ERROR_CLASSES]
    assert None not in kinds, [cls.__name__ for cls in ERROR_CLASSES if "kind" not in cls.__dict__]
    assert len(set(kinds)) == len(kinds)
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", str(kind)) for kind in kinds), kinds


def test_every_error_class_says_why_it_exists() -> None:
    assert [cls.__name__ for cls in ERROR_CLASSES if not cls.__doc__] == []


def test_an_error_that_is_no_bundler_error_has_a_kind_too() -> None:
    """An option pydantic refused is a usage error; anything else is a bug, said plainly."""

    class Options(BaseModel):
        level: int

    try:
        Options(level="high")  # type: ignore[arg-type]
    except ValidationError as error:
        assert described(error, ()).kind == "usage"
    bug = described(RuntimeError("boom"), ())
    assert (bug.kind, bug.exit_code) == ("internal", 2)
    assert bug.message == "internal error: RuntimeError: boom"
