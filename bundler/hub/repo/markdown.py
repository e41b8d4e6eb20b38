"""Strangers' text inside the Markdown the bundler posts on the Hub (review reports, pull
request descriptions), made inert: every `{{ }}` of those templates is escaped unless a filter
made it safe on purpose, so a model name, a warning or a submitter cannot add HTML, links,
headings or @-mentions to a page a maintainer reads.

jinja2 and markupsafe load only when a template is rendered: an upload that proposes nothing
never pays for them.
"""

from __future__ import annotations

import functools
import html
import json
import re
from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2
    from markupsafe import Markup

_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")


def _one_line(value: object) -> str:
    """One line without control characters (a report is also printed to terminals)."""
    shown = "".join(ch if ch.isprintable() else " " for ch in str(value))
    return " ".join(shown.split())


def markdown_text(value: str) -> str:
    """A stranger's text as inert Markdown: one line, punctuation escaped, no HTML, no
    @-mentions."""
    text = _MARKDOWN_PUNCTUATION.sub(r"\\\1", _one_line(value))
    return html.escape(text, quote=False).replace("@", "&#64;")


def markdown_code(value: object) -> Markup:
    """A code span holding any text literally (and safe in a table cell)."""
    from markupsafe import Markup

    text = _one_line(value).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return Markup(f"{fence}{pad}{text}{pad}{fence}")


def markdown_value(value: object) -> Markup:
    """A compared value as JSON in a code span (`null` for a field that is null)."""
    return markdown_code(json.dumps(value, ensure_ascii=False, sort_keys=True))


def _finalize(value: object) -> object:
    """Every `{{ }}` goes through here: text is escaped unless it was made safe on purpose."""
    from markupsafe import Markup

    if isinstance(value, Markup):
        return value
    if isinstance(value, str):
        return markdown_text(value)
    return "" if value is None else value


def template_text(name: str) -> str:
    """A template shipped in `templates/` (the dataset card's, the pull request's, review's)."""
    return files("bundler.templates").joinpath(name).read_text(encoding="utf-8")


@functools.cache
def markdown_template(name: str, *, trim_blocks: bool = False) -> jinja2.Template:
    """The template `name` compiled once per process with the escaping above, the `code` and
    `value` filters, and undefined names refused; `trim_blocks` also drops the line break
    after a block tag and the spaces before one (jinja2's trim_blocks and lstrip_blocks)."""
    import jinja2

    environment = jinja2.Environment(
        autoescape=False,
        finalize=_finalize,
        undefined=jinja2.StrictUndefined,
        trim_blocks=trim_blocks,
        lstrip_blocks=trim_blocks,
    )
    environment.filters["code"] = markdown_code
    environment.filters["value"] = markdown_value
    return environment.from_string(template_text(name))


def trusted(text: str) -> Markup:
    """Text the bundler made itself from validated parts (an HTML comment carrying JSON whose
    `<` and `>` are escaped), shown as it is."""
    from markupsafe import Markup

    return Markup(text)
