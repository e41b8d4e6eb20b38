"""docs/json-reports.md, derived from the report models: each command's --json report, its
fields, their types and what they mean (each field's docstring or description). The test
(tests/test_json_reports.py) fails when the file and the models disagree; to bring the file up
to date: `python tests/json_reports.py`."""

from __future__ import annotations

import ast
import datetime
import inspect
import json
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

DOC = Path(__file__).parent.parent / "docs" / "json-reports.md"


def reports() -> dict[str, type[BaseModel]]:
    """Each command (as typed after `bundler`, its report's `kind`) and its report's model."""
    from bundler.cli.template_command import TemplateReport
    from bundler.hub.audit.findings import AuditReport
    from bundler.hub.evalresults.plan import EvalResultsReport
    from bundler.hub.maintain.board_start import StartReport
    from bundler.hub.maintain.card_refresh import CardRefresh
    from bundler.hub.maintain.signers_require import RequireReport
    from bundler.hub.maintain.task_define import DefineReport
    from bundler.hub.publish.plan import UploadReport
    from bundler.hub.publish.status import StatusReport
    from bundler.hub.repo.download import DownloadReport
    from bundler.hub.review.round import ReviewReport
    from bundler.hub.tasks.definitions import TaskListing
    from bundler.hub.tasks.signers import SignersReport
    from bundler.local.collect import CollectReport
    from bundler.local.diff import BundleDiff
    from bundler.local.export import ExportReport
    from bundler.local.inspection import BundleInspection
    from bundler.local.sign import SignReport
    from bundler.local.verify import VerifyReport
    from bundler.sync import SyncReport

    return {
        "init": StartReport,
        "collect": CollectReport,
        "verify": VerifyReport,
        "sign": SignReport,
        "inspect": BundleInspection,
        "upload": UploadReport,
        "card": CardRefresh,
        "download": DownloadReport,
        "sync": SyncReport,
        "diff": BundleDiff,
        "export-gptnt": ExportReport,
        "review": ReviewReport,
        "status": StatusReport,
        "audit": AuditReport,
        "eval-results": EvalResultsReport,
        "template": TemplateReport,
        "tasks define": DefineReport,
        "tasks list": TaskListing,
        "signers add": SignersReport,
        "signers remove": SignersReport,
        "signers retire": SignersReport,
        "signers list": SignersReport,
        "signers require": RequireReport,
    }


COMMON = ("kind", "exit_code")
"""The fields every report has, documented once at the top."""

HEAD = """\
# JSON reports

Generated from the report models by `python tests/json_reports.py`; `tests/test_json_reports.py`
fails when this file and the models disagree.

With `--json`, a command writes one JSON document on stdout (ASCII: every other character is a
`\\u` escape, and a byte of a name that is not UTF-8 shows as `\\xNN`) and its human report on
stderr. Every document is an object with:

- `kind` (string): the command that made it, as typed after `bundler` (`"upload"`,
  `"tasks list"`), or `"error"` for the error object below. A saved report (`sync --report`)
  says what it is.
- `exit_code` (integer): the command's exit code (0 ok, 1 a person must look, 2 unusable input,
  75 retry later).

A command that ends on an error writes, instead of its report, the error object: `kind`
`"error"`, `error` (the one line shown), `hint` (string or null), `error_kind` (the error's
stable kind: `"usage"`, `"repository-not-found"`, `"internal"`...) and `exit_code`. Reports that
record an error and go on (`upload`, `collect`, `sync`) use the same three names.

Stability: a field keeps its name and meaning within a release series; a rename or removal is
listed in CHANGELOG.md under "Changed" (old -> new). Fields may be added at any time: a reader
should ignore the ones it does not know. One name means one thing across commands (`bundle_id`,
`archive`, `bundles_dir`, `repo_id`, `revision`: the branch, `outcome`: what the command did with
an item, `detail`, `remedy`, `branch_sha256`: the sha256 of the copy the target branch holds).
"""


GLOSSARY = {
    "repo_id": "the dataset repository, OWNER/NAME",
    "revision": "the branch (or the revision given)",
    "dry_run": "nothing was changed (--dry-run)",
    "bundle_id": "`<player>_<fp8>/<task>@<rev8>`",
    "bundles": "one entry per bundle",
    "archive": "the bundle archive's path (`.tar.zst`)",
    "sidecar": "the sidecar's path (`.json` beside the archive)",
    "bundles_dir": "the local bundles folder",
    "output_root": "the harness's output root (holding `<task>_predictions/`)",
    "output_dir": "the folder written into",
    "sha256": "the archive's sha256",
    "size": "the archive's size in bytes",
    "outcome": "what the command did with it",
    "detail": "why, in words",
    "hint": "what to do about it",
    "remedy": "what would let it through, as data (the hint's idea)",
    "error": "the error that stopped the command or an item, in words",
    "error_kind": "the error's stable kind (see the error object)",
    "error_temporary": "the error may pass: retry later",
    "warnings": "what a person should know, each in words",
    "commit": "the commit made, or null when nothing changed",
    "commits": "the commits made",
    "changed": "something was changed",
    "pull_request_num": "the pull request's number",
    "pull_request_url": "the pull request's web address",
    "checks": "each check's result",
    "name": "its name",
    "status": "passed, warned or failed (a check); the pull request's state (a review)",
    "coverage": "complete, partial or unknown",
    "predictions": "the predictions (their count, or how they changed)",
    "submitter": "who submitted the bundle",
    "task": "the task's name",
    "a": "on side A (the first bundle, or the target branch's copy)",
    "b": "on side B (the second bundle, or the pull request's copy)",
    "path": "the input's path",
    "refused": "what was refused",
    "skipped": "what was skipped, and why",
    "signer": "the key that signed the bundle, when one did",
    "player_name": "the player's name, as GPTNT names it",
    "url": "the pull request's web address",
    "num": "the pull request's number",
    "title": "the pull request's title",
    "author": "who opened the pull request",
    "base_branch": "the branch the pull request targets",
    "head": "the pull request's head commit",
    "action": "what upload makes of the bundle against the branch (README: upload)",
    "classification": "what the bundle is against the target branch",
    "count": "how many",
    "metrics": "the metrics (flattened `scorer.key` names)",
    "verdict": "the difference in words",
}
"""What a field means when its model does not say: one meaning per name, across commands."""


def attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring (the string under its annotation), from the model's source."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, [*body[1:], None], strict=True):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def type_words(annotation: Any, found: list[type[BaseModel]]) -> str:
    """A field's JSON type in words; the models it holds are added to `found`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None) or annotation is None:
        return "null"
    if origin is typing.Annotated:
        return type_words(args[0], found)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_words(arg, found) for arg in args)
    if origin is typing.Literal:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in args)
    if origin in (list, tuple, set, frozenset):
        return f"list of {type_words(args[0], found)}" if args else "list"
    if origin is dict:
        return f"object of {type_words(args[1], found)}" if args else "object"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation not in found:
            found.append(annotation)
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object"}
    if annotation in names:
        return names[annotation]
    if annotation is datetime.datetime:
        return "string (ISO 8601 date-time)"
    return "any"


def returned(computed: Any) -> Any:
    """A computed field's type: its property's return annotation, evaluated (pydantic leaves
    it a string until the model is built)."""
    return typing.get_type_hints(computed.wrapped_property.fget)["return"]


def fields_table(
    model: type[BaseModel], found: list[type[BaseModel]], skip: tuple[str, ...]
) -> str:
    docs = attribute_docs(model)
    lines = ["| field | type | meaning |", "|---|---|---|"]
    rows = [
        (name, field.annotation, field.description or docs.get(name) or GLOSSARY.get(name, ""))
        for name, field in model.model_fields.items()
        if not field.exclude and name not in skip
    ]
    rows += [
        (name, returned(computed), computed.description or GLOSSARY.get(name, ""))
        for name, computed in model.model_computed_fields.items()
    ]
    for name, annotation, meaning in rows:
        meaning = meaning.replace("|", "\\|")
        lines.append(f"| `{name}` | {type_words(annotation, found)} | {meaning} |")
    return "\n".join(lines)


def rendered() -> str:
    """docs/json-reports.md as the models say it."""
    found: list[type[BaseModel]] = []
    parts = [HEAD, "## Reports\n"]
    by_model: dict[type[BaseModel], list[str]] = {}
    for command, model in reports().items():
        by_model.setdefault(model, []).append(command)
    for model, commands in by_model.items():
        names = ", ".join(f"`{command}`" for command in commands)
        parts.append(f"### {names}\n\n`{model.__name__}`, besides `kind` and `exit_code`:\n")
        parts.append(fields_table(model, found, COMMON) + "\n")
    parts.append("## Objects\n\nThe objects the reports hold, each once.\n")
    for model in found:  # grows while it is walked: each object's own objects follow
        parts.append(f"### {model.__name__}\n\n" + fields_table(model, found, ()) + "\n")
    return "\n".join(parts)


if __name__ == "__main__":
    DOC.write_text(rendered(), encoding="utf-8")
    print(f"wrote {DOC}")
