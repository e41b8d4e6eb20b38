"""The command line's words for the library's errors: one table from each named error
(bundler.core.errors) to the `error:` line and the `hint:` line a person reads, which are also
the `--json` error object's `error` and `hint`.

Why one table: the library raises errors as data (a class, a stable `kind`, typed fields) and
never names a flag, since it does not know how it was called. How the command line spells what
the person can do (`--repo`, `--create-pr`, `bundler card`) is the command line's to say, once,
here, as huggingface_hub's `hf` does in `cli/_errors.py`. An error the table does not name reads
as the library worded it (its words name no flag, and need none), with its `remedy` worded
from REMEDIES.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bundler.core.causes import CARD_KIND, CONFLICT_KIND
from bundler.core.errors import (
    MAINTAINER_TOKEN,
    SUBMITTER_TOKEN,
    BadCredentials,
    BundlerError,
    BundlesLockedError,
    InvalidHeader,
    NoRunSelectedError,
    NoWriteAccess,
    PullRequestRevision,
    RateLimitOutlasts,
    ReadOnlyToken,
    Remedy,
    RepositoryNotEmpty,
    RepositoryNotFound,
    ReviewNotAllowed,
    RevisionNotFound,
    UnusableSetting,
    WriteTokenRequired,
    WrongRepoType,
)
from bundler.core.trusted import ExchangeFailed, PublisherElsewhere

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

    from bundler.core.checks import CheckResult
    from bundler.hub.publish.plan import UploadReport
    from bundler.hub.review.acceptance import AcceptanceNote
    from bundler.hub.review.round import ReviewReport
    from bundler.local.collect import CollectReport
    from bundler.local.downgrade import Downgrade
    from bundler.local.export import ExportReport
    from bundler.sync import SyncReport

Words = tuple[str, str | None]
"""The `error:` line's message and the `hint:` line (None: no hint)."""

FLAGS = {
    "repo_id": "--repo",
    "bundle_ids": "--bundle",
    "model_repo": "--model-repo",
    "setup": "--setup",
    "tasks": "--task",
    "models": "--model",
    "comment": "--comment",
    "merge": "--merge",
}
"""The option that gives each library parameter (or review action) its value."""

REMEDIES: dict[Remedy, str] = {
    "bundle-partial": "pass --allow-partial to bundle it, marked partial",
    "publish-partial": "pass --allow-partial to publish it marked partial",
    "export-partial": "--allow-partial exports it anyway",
    "check-expected-rows": "check the --expect row count for this task",
    "replace": "pass --replace to overwrite it",
    "create-pr": "pass --create-pr to propose the bundles as a pull request instead",
    "ask-owners": "ask the repository's owners for access",
    "accept-warnings": "only warnings: `--accept CHECK` merges past those accepted",
    "name-submitter": "collect with --submitter-name",
    "define-task": "a maintainer defines it: bundler tasks define",
    "name-output-root": "pass the folder the harness wrote, e.g. `bundler collect ./output`",
    "verify-folder": "name one archive; `bundler verify FOLDER` checks every bundle below a folder",
    "derive-tables": "run `bundler card --full` with a write token to derive the tables again",
    "upgrade-layout": "run `bundler card` with a write token to upgrade it, then review again",
    "start-leaderboard": "a new leaderboard is started with `bundler init --repo OWNER/NAME`",
    "sign-bundle": "sign it with a key the leaderboard allows: `bundler sign --key KEY`, or "
    "--sign-key to collect or sync",
}
"""What the person can do next (bundler.core.errors.Remedy), in the command line's words."""
LOCKED_HINT = "run again later, or pass --wait SECONDS to wait for it"
MAX_WAIT_HINT = (
    "run the same command again then, or allow longer waits (--max-wait, BUNDLER_MAX_WAIT)"
)
REFRESH_CARD = "fix the problem, then run `bundler card`"
"""What to do about a dataset card an upload left out."""
KIND_HINTS = {
    BundlesLockedError.kind: LOCKED_HINT,
    RateLimitOutlasts.kind: MAX_WAIT_HINT,
    CONFLICT_KIND: f"{REMEDIES['replace']}, if it is the right result",
    CARD_KIND: REFRESH_CARD,
}
"""The hints that depend on an error's kind alone, by which a report that keeps the kind of the
error that ended it (upload's, collect's) is worded."""


def _no_write_access(error: NoWriteAccess) -> Words:
    if error.doing is None:  # whoami's verdict, before anything was sent: one line
        suffix = ", add --create-pr to propose the bundles" if error.remedy == "create-pr" else ""
        return f"no write access to {error.repo}{suffix}", None
    return error.message, REMEDIES[error.remedy] if error.remedy else error.hint


def _read_only(error: ReadOnlyToken) -> Words:
    needed = (
        f"opening a pull request needs {SUBMITTER_TOKEN} (or a fine-grained token allowed to "
        "open pull requests there)"
        if error.pull_request
        else f"publishing needs {MAINTAINER_TOKEN}, or --create-pr with {SUBMITTER_TOKEN}"
    )
    return f"{error.repo}: this token is read-only; {needed}", None


def _pull_request_revision(error: PullRequestRevision) -> Words:
    if error.target == "card":
        message = (
            f"--revision {error.revision}: the card lives on a branch, never in a pull request"
        )
        return message, error.hint
    return (
        f"--revision {error.revision}: bundles are published to a branch, or proposed with "
        "--create-pr, never committed into a pull request's ref",
        "pass --create-pr (with the branch the pull request targets as --revision): it adds to "
        "your open bundler pull request",
    )


def _no_run_selected(error: NoRunSelectedError) -> Words:
    given = " ".join(
        f"{FLAGS[field]} {shlex.quote(value)}"
        for field, values in error.unmatched.items()
        for value in values
    )
    return f"{given} matched no run", error.hint


def _write_token_required(error: WriteTokenRequired) -> Words:
    problem = "no token was given" if error.reason == "missing" else "this token is read-only"
    asked = " and ".join(FLAGS[action] for action in error.actions)
    return (
        f"{asked} need{'s' if len(error.actions) == 1 else ''} a write token: {problem}",
        "pass --token or set HF_TOKEN to a write token; reviewing alone needs none",
    )


def _exchange_failed(error: ExchangeFailed) -> Words:
    if error.cause == "no-id-token":
        return error.message, (
            "give the workflow's job `permissions: id-token: write` (as `bundler template "
            "nightly-sync` does), or set HF_OIDC_ID_TOKEN to the id token your CI mints"
        )
    return error.message, (
        f"add this workflow as a Trusted Publisher of {error.resource} on the Hub (the "
        "repository's Settings, Trusted Publishers: this repository and workflow file), or "
        "fix HF_OIDC_RESOURCE (datasets/OWNER/NAME for a leaderboard)"
    )


def _review_not_allowed(error: ReviewNotAllowed) -> Words:
    needs = (
        f"a token allowed to comment on {error.repo}"
        if error.action == "comment"
        else f"write access to {error.repo}"
    )
    return f"{FLAGS[error.action]} needs {needs}: {error.problem}", error.hint


ERROR_WORDS: dict[type[BundlerError], Callable[[Any], Words]] = {
    BadCredentials: lambda e: (e.message, "pass --token, set HF_TOKEN, or run `hf auth login`"),
    InvalidHeader: lambda e: (
        e.message,
        "check the token (--token, HF_TOKEN) for spaces or line breaks",
    ),
    RevisionNotFound: lambda e: (
        e.message,
        "check --revision (a branch, a tag, refs/pr/N or a commit sha)",
    ),
    RepositoryNotFound: lambda e: (
        e.message,
        "check --repo (a typo?) and that the token can see it; a new leaderboard is started "
        f"with `bundler init --repo {e.repo}`",
    ),
    NoWriteAccess: _no_write_access,
    ReadOnlyToken: _read_only,
    WrongRepoType: lambda e: (
        e.message,
        "bundles are published to a dataset repository; choose another --repo",
    ),
    ReviewNotAllowed: _review_not_allowed,
    WriteTokenRequired: _write_token_required,
    ExchangeFailed: _exchange_failed,
    PublisherElsewhere: lambda e: (
        e.message,
        f"set HF_OIDC_RESOURCE to datasets/{e.repo} (its Trusted Publisher on the Hub), or "
        "check --repo",
    ),
    RateLimitOutlasts: lambda e: (e.message, MAX_WAIT_HINT),
    BundlesLockedError: lambda e: (e.message, LOCKED_HINT),
    UnusableSetting: lambda e: (f"{FLAGS[e.setting]} {e.value!r}: {e.problem}", e.hint),
    PullRequestRevision: _pull_request_revision,
    NoRunSelectedError: _no_run_selected,
    RepositoryNotEmpty: lambda e: (
        e.message,
        f"to keep them and add the board's section to README.md: bundler init --repo {e.repo} "
        "--adopt"
        if e.adoptable
        else "move or remove them first: init writes over no file it did not write",
    ),
}
"""Each named error whose words on the command line differ from the library's: its message and
hint there. A subclass not named here is worded as its nearest base that is."""


def validation_words(detail: ErrorDetails) -> str | None:
    """The command line's words for a value pydantic refused, where the library's name none: a
    submitter that is not UTF-8 text comes from an option or the environment."""
    from bundler.local.submitter import NOT_UTF8  # pydantic's error: pydantic is loaded

    if detail["type"] == NOT_UTF8:
        field = str(detail.get("ctx", {}).get("field", ""))
        return (
            f"not UTF-8 text; give --submitter-{field} or BUNDLER_SUBMITTER_{field.upper()} "
            "in UTF-8"
        )
    return None


def words_for(error: BundlerError) -> Words:
    """The message and hint the command line shows for `error` (see ERROR_WORDS)."""
    for cls in type(error).__mro__:
        entry = ERROR_WORDS.get(cls)
        if entry is not None:
            return entry(error)
    return error.message, REMEDIES[error.remedy] if error.remedy else error.hint


# Reports: what the library gave as data in a report (a remedy, the kind of the error that ended
# the work), worded in place before the report is shown or printed as JSON.


def _with_remedy(detail: str | None, remedy: Remedy | None) -> str | None:
    if remedy is None:
        return detail
    return f"{detail}; {REMEDIES[remedy]}" if detail else REMEDIES[remedy]


def upload_in_words(report: UploadReport) -> UploadReport:
    """An upload's report in the command line's words: what to do about each bundle held back
    or in conflict, about the error that ended it, and about a dataset card left out."""
    for plan in report.bundles:
        plan.detail = _with_remedy(plan.detail, plan.remedy)
    report.hint = KIND_HINTS.get(report.error_kind or "", report.hint)
    refused = report.card_refused
    if refused is not None:
        worded = f"{refused}: {REFRESH_CARD}"
        report.warnings = [worded if warning == refused else warning for warning in report.warnings]
        report.card_refused = worded
    return report


def collect_in_words(report: CollectReport) -> CollectReport:
    """A collect's report in the command line's words: what would bundle a refused run, the
    flags that keep a bundle's claim, the hint of the error that stopped it."""
    for refused in report.refused:
        if refused.remedy is not None:
            refused.error = f"{refused.error} ({REMEDIES[refused.remedy]})"
    for bundle in report.bundles:
        if bundle.downgrade is not None:
            bundle.kept = kept_words(bundle.downgrade)
    report.hint = KIND_HINTS.get(report.error_kind or "", report.hint)
    return report


def kept_words(downgrade: Downgrade) -> str:
    """Why collect kept a bundle, and the flags of the first run that would keep its claim."""
    flags = [
        *(
            [f"--expect {shlex.quote(f'{downgrade.task}={downgrade.expected_rows}')}"]
            if downgrade.expected_rows is not None
            else []
        ),
        *(["--resolve-rows"] if downgrade.row_count_lookup else []),
        *(
            f"--submitter-{field} {shlex.quote(value)}"
            for field, value in downgrade.submitter.items()
        ),
    ]
    how = (
        f"give the first run's flags ({' '.join(flags)}) "
        if flags
        else "give the first run's flags "
    )
    return (
        f"kept the existing bundle: {downgrade.losing}; {how}"
        "or set them in bundler.toml, or give --replace to replace it anyway"
    )


def sync_in_words(report: SyncReport) -> SyncReport:
    """A sync's report in the command line's words: the error that stopped it as the command
    would have said it, and its collect's and upload's reports."""
    error = report.stopping_error
    if error is not None:
        report.error, report.hint = words_for(error)
    else:
        report.hint = KIND_HINTS.get(report.error_kind or "", report.hint)
    for bundle in report.bundles:
        bundle.detail = _with_remedy(bundle.detail, bundle.remedy)
    if report.collect is not None:
        collect_in_words(report.collect)
    if report.upload is not None:
        upload_in_words(report.upload)
    return report


def export_in_words(report: ExportReport) -> ExportReport:
    """An export's report in the command line's words: what would export a refused bundle."""
    for bundle in report.bundles:
        for refusal in bundle.refusals:
            if refusal.remedy is not None:
                refusal.detail = f"{refusal.detail} ({REMEDIES[refusal.remedy]})"
    return report


def review_in_words(report: ReviewReport) -> ReviewReport:
    """A review's report in the command line's words: what to do about a check's warning, how
    a warning in the way is accepted, what would let a refused merge through. (The posted
    report's template words the same data in the same words.)"""
    for pr in report.pull_requests:
        pr.checks = [_check_in_words(check) for check in pr.checks]
        for bundle in pr.bundles:
            bundle.checks = [_check_in_words(check) for check in bundle.checks]
        if pr.acceptance_notes:
            pr.acceptance = [acceptance_words(note) for note in pr.acceptance_notes]
        if pr.merge_remedy is not None:
            pr.merge_detail = f"{pr.merge_detail} ({REMEDIES[pr.merge_remedy]})"
    return report


def _check_in_words(check: CheckResult) -> CheckResult:
    if check.remedy is None or check.hint is not None:
        return check
    return check.model_copy(update={"hint": REMEDIES[check.remedy]})


def acceptance_words(note: AcceptanceNote) -> str:
    """A note on acceptance, saying how a warning in the way is accepted."""
    if note.status != "in-the-way":
        return note.line
    return (
        f"warning {note.check} stands in the way: a maintainer who accepts it merges with "
        f"`bundler review --merge --accept {note.check}`"
    )
