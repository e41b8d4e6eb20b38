"""What an upload that exits 1 says at the top of its report (bundler.core.causes): the bundles
refused or in conflict, the dataset card left out, the bundles on the branch left off its
board, each counted and named, with what to do about the first."""

from __future__ import annotations

from bundler.core.causes import (
    CARD_KIND,
    CONFLICT_KIND,
    FAILED_KIND,
    LEFT_OFF_KIND,
    REFUSED_KIND,
    Cause,
    counted,
    named,
    summary,
)
from bundler.hub.publish.plan import UploadReport

NO_HINT = "the bundles it names were not published: fix what it says, then upload them again"
"""The hint of an error that ended an upload without one of its own."""


def upload_causes(report: UploadReport) -> list[Cause]:
    """Why the upload asks a person to look, most pressing first."""
    causes = []
    conflicts = [b.bundle_id for b in report.bundles if b.action == "conflict"]
    if conflicts:
        what = f"{counted(len(conflicts), 'bundle')} in conflict with the copy on the branch"
        hint = "each is another result under a published name: replace the copy only if it is"
        causes.append(Cause(f"{what}: {named(conflicts)}", hint, CONFLICT_KIND))
    refused = [b for b in report.bundles if b.outcome == "refused" and b.action != "conflict"]
    if refused:
        first = refused[0]
        what = f"{counted(len(refused), 'bundle')} refused, the first {first.bundle_id}"
        hint = "fix what each bundle's detail names, then upload again"
        causes.append(Cause(f"{what}: {first.detail}", hint, REFUSED_KIND))
    failed = [b for b in report.bundles if b.outcome == "failed" and not b.temporary]
    if failed and report.error is None:
        what = f"{counted(len(failed), 'bundle')} failed: {named([b.bundle_id for b in failed])}"
        causes.append(Cause(what, NO_HINT, FAILED_KIND))
    if report.card_refused is not None:
        hint = "fix the problem, then regenerate the card: the bundles are published"
        causes.append(
            Cause(f"the dataset card was left out: {report.card_refused}", hint, CARD_KIND)
        )
    if report.left_off_board:
        left = report.left_off_board
        what = f"{counted(len(left), 'bundle')} on the branch left off its board: {left[0]}"
        hint = "fix or remove them on the branch: every upload names them until then"
        causes.append(Cause(what, hint, LEFT_OFF_KIND))
    return causes


def say_what_happened(report: UploadReport) -> UploadReport:
    """`report` with `error`, `hint` and `error_kind` set when it exits 1 and no error ended
    it, and with a hint where the error that ended it brought none."""
    if report.exit_code != 1:
        return report
    if report.error is not None:
        report.hint = report.hint or NO_HINT
        return report
    said = summary(upload_causes(report))
    if said is not None:
        report.say(said)
    return report
