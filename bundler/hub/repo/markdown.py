"""Strangers' text inside the Markdown the bundler posts on the Hub (review reports, pull
request descriptions), made inert: every `{{ }}` of those templates is escaped unless a filter
made it safe on purpose, so a model name, a warning or a submitter cannot add HTML, links,
headings or @-mentions to a page a maintainer reads.

A value between backticks is the opposite case: a code span shows every character as it is, so
escaping there would put backslashes into what a person copies. The `code` filter
(`code_span`), the only way a template puts a value in backticks, writes it literally instead,
and refuses what no code span can hold. The dataset card's template has the same filters.

jinja2 and markupsafe load only when a template is rendered: an upload that proposes nothing
never pays for them.
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Callable
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


_REFUSED_IN_CODE = re.compile("[\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029]")
"""What no code span can hold as it is: a line break (CommonMark turns it into a space) and the
other control characters (a terminal acts on them), and Unicode's line and paragraph
separators."""


def code_span(value: object, *, cell: bool = False) -> str:
    """`value` as a Markdown code span whose text is exactly `value`, so that what a person
    copies from the rendered page is what they paste. Nothing inside is escaped: CommonMark
    shows a backslash in a code span as it is. The fence is one backtick longer than the
    longest run of backticks in `value`, and a space pads each side where CommonMark would
    otherwise take the value's own edge (a backtick, or a space on both sides) for part of the
    fence. In a table `cell` each `|` is written `\\|`, the table's own escape (GFM), which
    the cell gives back as `|` before the span is read; outside a table `\\|` would show.

    A value no code span can hold refuses, naming it, rather than being changed: an empty one,
    or one with a line break or another control character (`_REFUSED_IN_CODE`)."""
    text = str(value)
    if not text:
        raise ValueError("a code span cannot be empty")
    refused = _REFUSED_IN_CODE.search(text)
    if refused is not None:
        raise ValueError(
            f"a code span holds one line of text: {text!r} has {refused.group()!r} in it"
        )
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    edges = text.startswith("`") or text.endswith("`")
    spaced = text.startswith(" ") and text.endswith(" ") and text.strip(" ") != ""
    pad = " " if edges or spaced else ""
    if cell:
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_code(value: object, cell: bool = False) -> Markup:
    """The `code` filter: the only way a template puts a value between backticks
    (`code_span`), marked safe so that the escaping of `_finalize` leaves it alone;
    `{{ value | code(cell=True) }}` in a table row."""
    from markupsafe import Markup

    return Markup(code_span(value, cell=cell))


def markdown_value(value: object, cell: bool = False) -> Markup:
    """The `value` filter: a compared value as JSON in a code span (`null` for a field that is
    null). JSON escapes line breaks and C0 controls; the characters it leaves as they are and no
    code span holds (`_REFUSED_IN_CODE`) are written as JSON's `\\uXXXX` too, which reads back
    as the same value."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = _REFUSED_IN_CODE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
    return markdown_code(text, cell)


def markdown_name(value: str, cell: bool = False) -> Markup:
    """The `name` filter: a name from a bundle (a metric, a claim field of run_meta.json) as a
    code span, or as its JSON string (`value`) when no code span can hold it, so that a
    stranger's key with a line break is shown, not refused."""
    if not value or _REFUSED_IN_CODE.search(value):
        return markdown_value(value, cell)
    return markdown_code(value, cell)


def markdown_filters() -> dict[str, Callable[..., Markup]]:
    """The filters every Markdown template of the bundler has: `code`, `value` and `name`."""
    return {"code": markdown_code, "value": markdown_value, "name": markdown_name}


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
    environment.filters.update(markdown_filters())
    return environment.from_string(template_text(name))


def trusted(text: str) -> Markup:
    """Text the bundler made itself from validated parts (an HTML comment carrying JSON whose
    `<` and `>` are escaped), shown as it is."""
    from markupsafe import Markup

    return Markup(text)
