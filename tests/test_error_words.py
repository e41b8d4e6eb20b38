"""Errors as data, words in the command line: every error the library raises on purpose is a
class with a stable kind (bundler.core.errors), and the command line words it, flags and all,
in one table (bundler.cli.error_words)."""

from __future__ import annotations

import ast
import importlib
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError

from bundler.cli.commands import COMMANDS
from bundler.cli.errors import described
from bundler.core import errors


def subclasses(cls: type[errors.BundlerError]) -> list[type[errors.BundlerError]]:
    return [cls, *(sub for direct in cls.__subclasses__() for sub in subclasses(direct))]


for elsewhere in ("bundler.local.export", "bundler.hub.client.limits"):  # error classes defined
    importlib.import_module(elsewhere)  # beside the code that raises them
ERROR_CLASSES = sorted(
    {cls for cls in subclasses(errors.BundlerError) if cls.__module__.startswith("bundler.")},
    key=lambda cls: cls.__name__,
)


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


def test_a_report_carries_data_and_the_command_line_words_it() -> None:
    """The library's report says what can be done (a remedy, the kind of the error that ended
    the work); the command line words it, and the JSON carries both."""
    from bundler.cli.error_words import sync_in_words, upload_in_words
    from bundler.hub.publish.plan import BundlePlan, UploadReport
    from bundler.sync import SyncReport

    held = BundlePlan(
        bundle_id="p_1/t@r",
        action="held-back",
        outcome="held-back",
        detail="partial coverage (3 of 10 rows): held back until its run is complete",
        remedy="publish-partial",
    )
    card = "the dataset card was not committed (README.md: too big); the bundles were, without it"
    report = UploadReport(
        repo_id="o/n",
        revision="main",
        dry_run=False,
        bundles=[held, BundlePlan(bundle_id="p_2/t@r", action="new")],
        warnings=["waited 3 s", card],
        card_refused=card,
        error="the Hub's api rate limit resets in 900 s, longer than the 300 s this command waits",
        hint="run the same command again then, or allow longer waits (BUNDLER_MAX_WAIT)",
        error_kind="rate-limit-outlasts-wait",
    )
    library = json.dumps(report.model_dump(mode="json"))
    assert "--" not in library and "bundler card" not in library
    data = upload_in_words(report).model_dump(mode="json")
    assert data["bundles"][0]["detail"].endswith(
        "held back until its run is complete; pass --allow-partial to publish it marked partial"
    )
    assert data["bundles"][0]["remedy"] == "publish-partial"
    assert "remedy" not in data["bundles"][1]  # only where there is one
    assert "(--max-wait, BUNDLER_MAX_WAIT)" in data["hint"]
    assert data["card_refused"].endswith(": fix the problem, then run `bundler card`")
    assert data["warnings"] == ["waited 3 s", data["card_refused"]]

    stopped = SyncReport(
        output_root="out", bundles_dir="b", repo_id="o/n", revision="main", dry_run=False,
        started_at=datetime.now(UTC),
    )  # fmt: skip
    stopped.stopped_by(errors.UnusableSetting("repo_id", "x", "expected OWNER/NAME"))
    assert stopped.error == "repo_id 'x': expected OWNER/NAME"
    assert stopped.error_kind == "unusable-setting"
    assert sync_in_words(stopped).error == "--repo 'x': expected OWNER/NAME"


def test_the_posted_review_words_remedies_as_the_command_line_does() -> None:
    """The review posted on a PR is for the people who run the command line: its template
    words each remedy and each warning in the way exactly as bundler.cli.error_words does (the
    posted text is escaped as inert Markdown)."""
    from bundler.cli.error_words import REMEDIES, acceptance_words, review_in_words
    from bundler.core.checks import failed, warned
    from bundler.hub.repo.markdown import markdown_text
    from bundler.hub.review.judge import BundleReview, PullRequestReview
    from bundler.hub.review.round import ReviewReport, render_markdown

    remedied = [
        warned("submitter", "no submitter name", remedy="name-submitter"),
        warned("task", "task t has no definition", remedy="define-task"),
        failed("coverage", "partial"),
    ]
    bundle = BundleReview(
        bundle_id="p_1/t@r", classification="new", sha256="s", branch_sha256=None, checks=remedied
    )
    pr = PullRequestReview(
        num=3, title="T", author="a", status="open", url="u", base_branch="main",
        head="h" * 40, base="b" * 40, bundles=[bundle],
    )  # fmt: skip
    pr.accept([], by="@maintainer")
    report = ReviewReport(repo_id="o/n", max_exception_rate=0.1, pull_requests=[pr])
    markdown = render_markdown(report, pr)
    for remedy in ("name-submitter", "define-task"):
        assert f"({markdown_text(REMEDIES[remedy])})" in markdown
    in_the_way = [note for note in pr.acceptance_notes if note.status == "in-the-way"]
    assert len(in_the_way) == 2
    for note in in_the_way:  # the command as a code span, as it pastes, with its repo and PR
        words, command, _ = acceptance_words(note).split("`")
        command = command.replace("review", f"review --repo {report.repo_id} --pr {pr.num}", 1)
        assert f"- {markdown_text(words)} `{command}`\n" in markdown
        assert "--accept" not in note.line  # the library's own words name no flag
    data = review_in_words(report).model_dump(mode="json")["pull_requests"][0]
    hints = [check["hint"] for check in data["bundles"][0]["checks"]]
    assert hints == [REMEDIES["name-submitter"], REMEDIES["define-task"], None]
    assert data["acceptance"][0].endswith("`bundler review --merge --accept submitter`")


# No flag in the library ---------------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parent.parent / "bundler"
LIBRARY = [
    *sorted((PACKAGE / "core").rglob("*.py")),
    *sorted((PACKAGE / "local").rglob("*.py")),
    *sorted((PACKAGE / "hub").rglob("*.py")),
    PACKAGE / "sync.py",
    PACKAGE / "__init__.py",
]
"""Everything below the command line: it does not know how it was called, so none of its words
may name a flag or a command line (bundler.cli.error_words words them)."""
FLAG = re.compile(r"(?<![\w-])--[a-z]")
COMMAND_LINE = re.compile(
    r"\bbundler (?:" + "|".join(re.escape(entry.name) for entry in COMMANDS) + r"|tasks)\b"
)
BUNDLE_FORMAT = {
    ("local/runs.py", "UNKNOWN_COVERAGE_WARNING"),
    ("local/runs.py", "PARTIAL_RUN_WARNING"),
}
"""Strings of the bundle format, written into every manifest and compared byte for byte by
verify (bundler.local.runs): rewording them would fail every bundle published with them."""
OTHER_FORMATS = {("hub/review/changes.py", "GIT_FILE_HEADER")}
"""Strings of another program's format that the library reads (git's diff): no words to a
person, whatever dashes they hold."""


def user_facing_strings(source: str, where: str) -> Iterator[tuple[int, str]]:
    """Every string of a module (`where`, below bundler/) that can reach a person: not a
    docstring (nor any other bare string statement), not a bundle-format constant. An f-string
    is read whole, each value standing as `x`, so `f"--{name}"` is seen as the flag it makes."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and (where, target.id) in BUNDLE_FORMAT | OTHER_FORMATS
            for target in node.targets
        ):
            skipped.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skipped.update(id(part) for part in node.values)
            yield (
                node.lineno,
                "".join(
                    str(part.value) if isinstance(part, ast.Constant) else "x"
                    for part in node.values
                ),
            )
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skipped
        ):
            yield node.lineno, node.value


def naming_the_command_line(source: str, where: str) -> list[str]:
    return [
        f"{where}:{line}: {text!r}"
        for line, text in user_facing_strings(source, where)
        if FLAG.search(text) or COMMAND_LINE.search(text)
    ]


def test_no_string_of_the_library_names_a_flag_or_a_command_line() -> None:
    """Messages, hints, report details and warnings of the library name what can be done as
    data (a remedy, an error's fields); the command line words it. Docstrings may still explain
    the command line's behaviour."""
    found = [
        hit
        for path in LIBRARY
        for hit in naming_the_command_line(
            path.read_text(encoding="utf-8"), path.relative_to(PACKAGE).as_posix()
        )
    ]
    assert found == []


def test_the_check_sees_a_flag_in_any_string_that_reaches_a_person() -> None:
    source = (
        '"""Docstrings may say --replace."""\n'
        "LIMIT = 3\n"
        '"""As may a constant\'s: `bundler card` regenerates it."""\n'
        "def f(name):\n"
        '    """Or a function\'s: --allow-partial."""\n'
        '    hint = "pass --create-pr"\n'
        '    flag = f"--submitter-{name}"\n'
        '    other = f"run bundler verify {name}"\n'
        '    fine = f"bundler {name}; bundler.toml; a - b; x--y; HF_TOKEN"\n'
        "    return hint, flag, other, fine\n"
    )
    assert naming_the_command_line(source, "hub/stray.py") == [
        "hub/stray.py:6: 'pass --create-pr'",
        "hub/stray.py:7: '--submitter-x'",
        "hub/stray.py:8: 'run bundler verify x'",
    ]
    warning = 'PARTIAL_RUN_WARNING = "partial run (a --limit-instances run?)"\n'
    assert naming_the_command_line(warning, "local/runs.py") == []
    assert naming_the_command_line(warning, "local/other.py") != []
