"""Rendering results for people (rich, on stderr) and machines (JSON, on stdout).

Nothing here decides anything: every function takes a result computed by the library and shows
it, so the same result reads the same in a terminal, a CI log and a JSON consumer.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rich.console import Console

from bundler.cli.console import emit_report, plain, shown
from bundler.core.errors import TemporaryError
from bundler.core.progress import NoProgress, ProgressSink

if TYPE_CHECKING:
    from bundler.core.checks import CheckResult
    from bundler.hub.maintain.card_refresh import CardRefresh
    from bundler.hub.publish.plan import BundlePlan
    from bundler.hub.publish.upload import UploadReport
    from bundler.hub.repo.download import DownloadReport
    from bundler.hub.review.round import ReviewReport
    from bundler.local.collect import CollectReport
    from bundler.local.diff import BundleDiff
    from bundler.local.export import ExportReport
    from bundler.local.inspection import BundleInspection
    from bundler.local.sign import SignReport
    from bundler.local.verify import VerifyReport
    from bundler.sync import SyncReport

FILTERED_OUT = "not selected by filters"
"""The reason collect gives a run that --task or --model left out (bundler.local.collect)."""
STATUS_STYLE = {"passed": "green", "warned": "yellow", "failed": "bold red"}


class _Report(Protocol):
    @property
    def exit_code(self) -> int: ...

    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


R = TypeVar("R", bound=_Report)


def finish(report: R, render: Callable[[R, Console], None], console: Console, as_json: bool) -> int:
    """Show a library report to the person (stderr) and, with --json, to the machine (stdout)."""
    render(report, console)
    if as_json:
        emit_report(report.model_dump(mode="json"), report.exit_code)
    return report.exit_code


def progress_on(console: Console) -> AbstractContextManager[ProgressSink]:
    """Where a long command reports its progress: a bar drawn on the console when it is a
    terminal, nothing otherwise (a CI log), and then rich's progress machinery is not even
    imported, which is a measurable part of a short command's start-up."""
    if not console.is_terminal:
        return nullcontext(NoProgress())
    from bundler.cli.progressbar import ProgressBar

    return ProgressBar(console)


TABLE_MAX_BUNDLES = 40
"""More bundles than this are summarised in counts rather than tabled: a table of hundreds of
rows is no reading for a person (and took rich a second to lay out); --json lists them all."""


NO_VALUE = "-"  # a table's cell where its row has no such value (left out of the narrow form)


def print_id_table(
    console: Console,
    title: str,
    headers: tuple[str, ...],
    rows: Sequence[tuple[str, ...]],
    *,
    right: tuple[str, ...] = (),
) -> None:
    """A table whose first column is bundle ids, which never wrap or are cut: the id column is
    as wide as its longest id (no_wrap), and the other columns fold. When even their headers
    no longer fit beside the ids (a narrow terminal, a long player name), each row is printed
    as its id on a line of its own, then the other values, indented, instead."""
    from rich.table import Column, Table

    widest = max((len(row[0]) for row in rows), default=len(headers[0]))
    widest = max(widest, len(headers[0]))
    needed = widest + sum(min(len(header), 8) for header in headers[1:]) + 3 * len(headers) + 1
    if needed > console.width:
        console.print(title)
        for row in rows:
            named = zip(headers[1:], row[1:], strict=True)  # no value: no bare name
            shown = [f"{header} {value}" for header, value in named if value not in ("", NO_VALUE)]
            console.print(f"  {row[0]}\n    " + ", ".join(shown))
        return
    table = Table(
        Column(headers[0], no_wrap=True, min_width=widest),
        *(
            Column(header, overflow="fold", justify="right" if header in right else "left")
            for header in headers[1:]
        ),
        title=title,
        title_justify="left",
    )
    for row in rows:
        table.add_row(*row)
    console.print(table)


def render_collect(report: CollectReport, console: Console) -> None:

    for warning in report.warnings:
        console.print(f"[yellow]warning[/] {shown(warning)}")
    if len(report.bundles) > TABLE_MAX_BUNDLES:
        _summarise_bundles(report, console)
    elif report.bundles:
        rows = []
        for bundle in report.bundles:
            coverage_style = "green" if bundle.coverage == "complete" else "yellow"
            rows.append(
                (
                    shown(bundle.bundle_id),
                    bundle.outcome,
                    f"[{coverage_style}]{bundle.coverage}[/]",
                    str(bundle.predictions),
                    human_size(bundle.size),
                )
            )
        print_id_table(
            console,
            f"Bundles in {shown(report.bundles_dir)}",
            ("bundle", "status", "coverage", "predictions", "size"),
            rows,
            right=("predictions", "size"),
        )
        for bundle in report.bundles:
            for warning in bundle.warnings:
                console.print(f"[yellow]warning[/] {shown(bundle.bundle_id)}: {shown(warning)}")
    for bundle in report.bundles:
        if bundle.kept is not None:
            console.print(f"[bold yellow]kept[/] {shown(bundle.bundle_id)}: {shown(bundle.kept)}")
    filtered = [item for item in report.skipped if item.reason == FILTERED_OUT]
    for item in report.skipped:
        if item.reason != FILTERED_OUT:
            console.print(f"[dim]skipped {shown(item.path)}: {shown(item.reason)}[/]")
    if filtered:  # counted, not listed: a filter is there to leave most runs out
        console.print(f"[dim]{len(filtered)} run(s) left out by the filters (--json lists them)[/]")
    for path in report.removed_temporaries:
        console.print(f"[dim]removed {shown(path)}: left by an interrupted collect[/]")
    for refusal in report.refused:
        console.print(f"[bold red]refused[/] {shown(refusal.error)}")
    written = len(report.bundles)
    console.print(
        f"{written} bundle(s) ready, {len(report.refused)} input(s) refused, "
        f"{len(report.skipped)} skipped"
    )
    if report.signing is not None:
        render_sign(report.signing, console)


def _summarise_bundles(report: CollectReport, console: Console) -> None:
    """Counts by status and coverage, and each distinct warning once with how many bundles
    it concerns and the first of them."""
    statuses = Counter(bundle.outcome for bundle in report.bundles)
    coverages = Counter(bundle.coverage for bundle in report.bundles)
    size = sum(bundle.size for bundle in report.bundles)
    console.print(
        f"{len(report.bundles)} bundles in {shown(report.bundles_dir)} ({human_size(size)}): "
        + ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
        + "; coverage "
        + ", ".join(f"{count} {coverage}" for coverage, count in sorted(coverages.items()))
        + " (--json lists every bundle)"
    )
    concerned: dict[str, list[str]] = {}
    for bundle in report.bundles:
        for warning in bundle.warnings:
            concerned.setdefault(warning, []).append(bundle.bundle_id)
    for warning, bundle_ids in concerned.items():
        more = f" and {len(bundle_ids) - 1} more" if len(bundle_ids) > 1 else ""
        console.print(f"[yellow]warning[/] {shown(bundle_ids[0])}{more}: {shown(warning)}")


def render_checks(checks: list[CheckResult], console: Console, indent: str = "  ") -> None:
    for check in checks:
        style = STATUS_STYLE[check.status]
        hint = f" [dim]({shown(check.hint)})[/]" if check.hint else ""
        console.print(
            f"{indent}[{style}]{check.status:>6}[/] {check.name}: {shown(check.detail)}{hint}"
        )


def render_verify(report: VerifyReport, console: Console) -> None:
    for bundle in report.bundles:
        verdict = "[green]OK[/]" if bundle.ok else "[bold red]FAILED[/]"
        console.print(f"{verdict} {shown(bundle.archive)}")
        render_checks(
            [check for check in bundle.checks if not bundle.ok or check.status != "passed"],
            console,
        )
        if bundle.signer is not None:
            console.print(f"  signed by key {bundle.signer}", highlight=False)
    bad = sum(not bundle.ok for bundle in report.bundles)
    console.print(f"{len(report.bundles) - bad} of {len(report.bundles)} bundle(s) verified")


def render_inspection(inspection: BundleInspection, console: Console) -> None:
    from rich.table import Table  # imported by the renderers that draw tables, only

    verification = inspection.verification
    claim = inspection.claim or inspection.sidecar_claim
    verdict = "[green]intact[/]" if verification.ok else "[bold red]FAILED verification[/]"
    console.print(f"[bold]{shown(claim.bundle_id if claim else verification.archive)}[/] {verdict}")
    if claim is None:
        render_checks(verification.checks, console)
        return
    if inspection.claim is None:
        console.print(
            "[bold yellow]the archive's own claim could not be read; its sidecar claims "
            "(not backed by the archive):[/]"
        )
    statics = claim.statics
    pin = (
        f"[green]pinned[/] {shown(str(statics.resolved_revision))}"
        if statics.is_pinned
        else "[bold yellow]UNPINNED[/] (the dataset rows cannot be pinned down)"
    )
    provenance = claim.provenance
    git_sha = str(provenance.get("git_sha"))
    dirty = " [bold yellow]DIRTY TREE[/]" if git_sha.endswith("-dirty") else ""
    coverage = claim.coverage
    expected = f" of {coverage.expected_rows}" if coverage.expected_rows is not None else ""
    coverage_style = "green" if coverage.status == "complete" else "bold yellow"
    counts = claim.predictions
    usage = ", ".join(f"{key} {value:,}" for key, value in counts.usage.items()) or "none"
    submitter = ", ".join(v for v in claim.submitter.model_dump().values() if v) or "none"
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("target", shown(claim.target))
    facts.add_row("dataset", shown(f"{statics.hf_repo_id} (split {statics.dataset_split})"))
    facts.add_row("revision", f"requested {shown(str(statics.requested_revision))}, {pin}")
    facts.add_row("model", shown(claim.model_name))
    facts.add_row("player", shown(f"{claim.player_name} ({claim.player_type})"))
    facts.add_row("fingerprint", shown(claim.capability_fingerprint))
    facts.add_row("run date", shown(claim.run_date))
    facts.add_row("harness", shown(f"gptnt {provenance.get('gptnt_version')} @ {git_sha}") + dirty)
    facts.add_row(
        "coverage",
        f"[{coverage_style}]{coverage.status}[/]: {coverage.rows_present}{expected} rows",
    )
    facts.add_row(
        "predictions",
        f"{counts.count}, errors {counts.errors} ({_rate(inspection.error_rate)}), "
        f"exceptions {counts.exceptions} ({_rate(inspection.exception_rate)})",
    )
    facts.add_row("usage", shown(usage))
    facts.add_row("submitter", shown(submitter))
    facts.add_row("bundler", shown(claim.bundler_version))
    facts.add_row("signed by", f"key {verification.signer}" if verification.signer else "nobody")
    console.print(facts)
    if inspection.metrics:
        table = Table(title="metrics", title_justify="left")
        table.add_column("name")
        table.add_column("value", justify="right")
        for metric in inspection.metrics:
            table.add_row(shown(metric.name), shown(metric.json_value))
        console.print(table)
    for warning in claim.warnings:
        console.print(f"[yellow]warning[/] {shown(warning)}")
    if not verification.ok:
        render_checks(verification.failures(), console)


SIGN_OUTCOME_STYLE = {
    "signed": "green",
    "replaced": "green",
    "already-signed": "dim",
    "refused": "bold red",
}


def render_sign(report: SignReport, console: Console) -> None:
    for bundle in report.bundles:
        style = SIGN_OUTCOME_STYLE[bundle.outcome]
        console.print(f"[{style}]{bundle.outcome}[/] {shown(bundle.bundle_id or bundle.archive)}")
        if bundle.detail:
            console.print(f"  {shown(bundle.detail)}", highlight=False)
    signers = sorted(
        {b.signer for b in report.bundles if b.outcome != "refused" and b.signer is not None}
    )
    by = f" by key {', '.join(signers)}" if signers else ""
    done = sum(bundle.outcome != "refused" for bundle in report.bundles)
    console.print(f"{done} of {len(report.bundles)} bundle(s) signed{by}", highlight=False)


def _rate(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


OUTCOME_STYLE = {
    "published": "green",
    "proposed": "green",
    "held-back": "yellow",
    "already-there": "dim",
    "planned": "cyan",
    "downloaded": "green",
    "refused": "bold red",
    "exported": "green",
    "unchanged": "dim",
    "failed": "bold red",
    "rejected": "bold red",
    "missing": "bold red",
}


def render_upload(report: UploadReport, console: Console) -> None:

    mode = " (dry run: nothing was changed)" if report.dry_run else ""
    where = f"{shown(report.repo_id)} @ {shown(report.revision)}"
    if (number := report.pull_request_num) is not None or report.opens_pull_request:
        pull_request = "a new pull request" if number is None else f"pull request #{number}"
        where = f"{shown(report.repo_id)}, {pull_request} on {shown(report.revision)}"
    tabled, untabled = _upload_rows_to_table(report.bundles)
    rows = [
        (
            shown(bundle.bundle_id),
            bundle.action,
            f"[{OUTCOME_STYLE.get(bundle.outcome, '')}]{bundle.outcome}[/]",
            shown(bundle.detail or ""),
        )
        for bundle in tabled
    ]
    title = f"{where}{mode}"
    if untabled:
        title += f" ({untabled} bundle(s) not tabled, counted below; --json lists every bundle)"
    if rows or not untabled:
        print_id_table(console, title, ("bundle", "action", "outcome", "detail"), rows)
    else:
        console.print(title)
    for bundle in report.bundles:
        if bundle.outcome == "held-back":
            detail = shown(bundle.detail or "")
            console.print(f"[yellow]warning[/] held back {shown(bundle.bundle_id)}: {detail}")
    for warning in [*report.left_off_board, *report.charts_not_drawn, *report.warnings]:
        console.print(f"[yellow]warning[/] {shown(warning)}")
    for commit in report.commits:
        console.print(f"commit {commit}")
    proposed = sum(bundle.outcome == "proposed" for bundle in report.bundles)
    if report.pull_request_url:
        url = shown(report.pull_request_url)
        if proposed:
            console.print(f"proposed in PR #{report.pull_request_num}: {url}")
        else:
            console.print(f"your open pull request #{report.pull_request_num}: {url}")
    if report.error:
        console.print(f"[bold red]error[/]: {shown(report.error)}")
        if report.hint:
            console.print(f"  hint: {plain(report.hint)}", markup=False)
    published = sum(bundle.outcome == "published" for bundle in report.bundles)
    there = sum(bundle.outcome == "already-there" for bundle in report.bundles)
    held = sum(bundle.outcome == "held-back" for bundle in report.bundles)
    bad = sum(bundle.outcome in ("refused", "failed") for bundle in report.bundles)
    done = (
        f"{proposed} proposed in PR #{report.pull_request_num}"
        if report.pull_request_num is not None
        else f"{published} published to {shown(report.revision)}"
    )
    console.print(
        f"{done}, {there} already there, {held} held back, {bad} refused or failed, "
        f"{len(report.commits)} commit(s)"
    )
    if report.exit_code == TemporaryError.exit_code:
        console.print("temporary failure: run the same command again later; it resumes")


def _upload_rows_to_table(bundles: list[BundlePlan]) -> tuple[list[BundlePlan], int]:
    """The bundles an upload's table shows, and how many it leaves to the counts: all of them
    up to TABLE_MAX_BUNDLES; beyond, those not already there (a nightly run's thousands of
    unchanged bundles are no reading), and when even those are too many, the refused and
    failed ones, which a person must see one by one."""
    if len(bundles) <= TABLE_MAX_BUNDLES:
        return bundles, 0
    notable = [bundle for bundle in bundles if bundle.outcome != "already-there"]
    if len(notable) > TABLE_MAX_BUNDLES:
        notable = [bundle for bundle in notable if bundle.outcome in ("refused", "failed")]
    return notable, len(bundles) - len(notable)


def render_card(refresh: CardRefresh, console: Console) -> None:
    from bundler.hub.leaderboard.tables import LAYOUT_VERSION  # loaded by the refresh already

    where = f"{shown(refresh.repo_id)} @ {shown(refresh.revision)}"
    for problem in [*refresh.unreadable_rows, *refresh.charts_not_drawn]:
        console.print(f"[yellow]warning[/] {shown(problem)}")
    what = f"upgraded to layout {LAYOUT_VERSION}: " if refresh.upgraded else ""
    if not refresh.changed:
        console.print(
            f"the tables and card of {where} are up to date ({refresh.bundle_count} bundles)"
        )
    elif refresh.commit is None:
        console.print(
            f"the tables or card of {where} are stale; {what}{len(refresh.changed_files)} "
            f"file(s) would be written ({refresh.bundle_count} bundles; dry run: nothing was "
            "changed)"
        )
    else:
        console.print(
            f"{what}regenerated the tables and card of {where} ({refresh.bundle_count} "
            f"bundles, {len(refresh.changed_files)} file(s)): commit {refresh.commit}"
        )


def render_download(report: DownloadReport, console: Console) -> None:
    for warning in report.warnings:
        console.print(f"[yellow]warning[/] {shown(warning)}")
    for bundle in report.bundles:
        style = OUTCOME_STYLE.get(bundle.outcome, "")
        detail = f": {shown(bundle.detail)}" if bundle.detail else ""
        console.print(f"[{style}]{bundle.outcome:>10}[/] {shown(bundle.bundle_id)}{detail}")
    good = sum(bundle.outcome == "downloaded" for bundle in report.bundles)
    console.print(
        f"{good} of {len(report.bundles)} bundle(s) downloaded and verified into "
        f"{shown(report.bundles_dir)} (commit {shown(report.commit[:12])})"
    )


def _shown_value(value: Any) -> str:
    return shown(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def render_diff(diff: BundleDiff, console: Console) -> None:
    from rich.table import Table  # imported by the renderers that draw tables, only

    for label, side in (("A", diff.a), ("B", diff.b)):
        console.print(
            f"[bold]{label}[/] {shown(side.archive)}  {shown(side.bundle_id)}  "
            f"sha256 {side.sha256[:12]}…"
        )
    if diff.claims or diff.files:
        table = Table(title="claims", title_justify="left")
        for column in ("field", "A", "B"):
            table.add_column(column, overflow="fold")
        for difference in [*diff.claims, *diff.files]:
            table.add_row(
                shown(difference.field), _shown_value(difference.a), _shown_value(difference.b)
            )
        console.print(table)
    if diff.metrics:
        table = Table(title="metrics", title_justify="left")
        table.add_column("metric", overflow="fold")
        for column in ("A", "B", "delta"):
            table.add_column(column, justify="right", overflow="fold")
        for metric in diff.metrics:
            table.add_row(
                shown(metric.name),
                "[dim]absent[/]" if metric.change == "added" else _shown_value(metric.a),
                "[dim]absent[/]" if metric.change == "removed" else _shown_value(metric.b),
                f"{metric.delta:+.6g}" if metric.delta is not None else metric.change,
            )
        console.print(table)
    changes = diff.predictions
    console.print(
        f"predictions: {changes.added} added, {changes.removed} removed, "
        f"{changes.changed} changed, {changes.unchanged} unchanged"
    )
    for kind, indices, total in (
        ("added", changes.first_added, changes.added),
        ("removed", changes.first_removed, changes.removed),
        ("changed", changes.first_changed, changes.changed),
    ):
        if indices:
            more = f" … ({total} in all)" if total > len(indices) else ""
            console.print(f"  {kind}: {', '.join(map(str, indices))}{more}")
    if diff.samples:
        table = Table(title="changed predictions", title_justify="left", show_lines=True)
        table.add_column("index", justify="right")
        table.add_column("field")
        table.add_column("A", overflow="fold", ratio=1)
        table.add_column("B", overflow="fold", ratio=1)
        for sample in diff.samples:
            cut = " [dim](cut)[/]" if sample.truncated else ""
            table.add_row(
                str(sample.index),
                sample.field,
                shown(sample.a, keep_newlines=True) + cut,
                shown(sample.b, keep_newlines=True) + cut,
            )
        console.print(table)
    style = "green" if diff.identical else ("yellow" if diff.only_run_date else "bold")
    console.print(f"[{style}]{shown(diff.verdict)}[/]")


def render_export(report: ExportReport, console: Console) -> None:
    for bundle in report.bundles:
        name = shown(bundle.bundle_id or bundle.archive)
        style = OUTCOME_STYLE.get(bundle.outcome, "")
        if bundle.outcome == "refused":
            console.print(
                f"[{style}]{bundle.outcome:>9}[/] {shown(bundle.archive)}: {shown(bundle.reason)}"
            )
            if any(refusal.kind == "submitter" for refusal in bundle.refusals):
                console.print(
                    "  hint: set the submitter when collecting, or give --submitter-name and "
                    "--submitter-contact",
                    markup=False,
                )
        elif bundle.outcome == "skipped":
            console.print(f"[dim]  skipped: {shown(bundle.skipped or '')}: {name}[/]")
        else:
            console.print(f"[{style}]{bundle.outcome:>9}[/] {name} -> {shown(bundle.folder or '')}")
        for warning in bundle.warnings:
            console.print(f"  [yellow]warning[/] {name}: {shown(warning)}")
    counts = {
        outcome: sum(bundle.outcome == outcome for bundle in report.bundles)
        for outcome in ("exported", "unchanged", "refused", "skipped")
    }
    skipped = f", {counts['skipped']} skipped" if counts["skipped"] else ""
    console.print(
        f"{counts['exported']} exported, {counts['unchanged']} unchanged, "
        f"{counts['refused']} refused{skipped}, into {shown(report.output_dir)} "
        f"(player {shown(report.player_name)})"
    )


def render_sync(report: SyncReport, console: Console) -> None:
    """Both steps as their own commands show them, then one summary line for the log."""
    if report.collect is not None:
        render_collect(report.collect, console)
    if report.upload is not None:
        render_upload(report.upload, console)
    if report.upload_skipped:
        console.print(f"upload skipped: {shown(report.upload_skipped)}")
    if report.error and (report.upload is None or report.upload.error != report.error):
        console.print(f"[bold red]error[/]: {shown(report.error)}")
        if report.hint:
            console.print(f"  hint: {plain(report.hint)}", markup=False)
    if report.report_path_error:
        console.print(f"[bold red]error[/]: {shown(report.report_path_error)}")
    counts = report.counts
    took = (report.finished_at or report.started_at) - report.started_at
    number = report.upload.pull_request_num if report.upload is not None else None
    outcome = (  # a pull request publishes nothing: say what was proposed, and where
        f"{counts.proposed} bundle(s) proposed in PR #{number}"
        if number is not None
        else f"{counts.published} bundle(s) published, {counts.proposed} proposed"
    )
    console.print(
        f"sync: {counts.runs_bundled} run(s) bundled, {counts.runs_refused} refused; "
        f"{outcome}, "
        f"{counts.already_there} already there, {counts.held_back} held back, "
        f"{counts.refused + counts.failed} refused or failed; {counts.commits} commit(s); "
        f"{took.total_seconds():.1f} s; exit code {report.exit_code}"
    )


MERGE_STYLE = {"merged": "green", "refused": "bold red", "failed": "bold red"}


def render_review(report: ReviewReport, console: Console) -> None:
    """A short summary; the full report is the Markdown (stdout, or the PR comment)."""
    for pr in report.pull_requests:
        verdict = "[green]clean[/]" if pr.clean else "[bold red]needs a maintainer[/]"
        kinds = [bundle.classification for bundle in pr.bundles]
        counted = ", ".join(
            f"{kinds.count(kind)} {kind}"
            for kind in ("new", "replacement", "unchanged")
            if kind in kinds
        )
        console.print(
            f"PR #{pr.num} '{shown(pr.title)}' by {shown(pr.author)}: {verdict}"
            f" ({counted or 'no bundle'})"
        )
        render_checks([check for check in pr.checks if check.status != "passed"], console)
        for bundle in pr.bundles:
            problems = [check for check in bundle.checks if check.status != "passed"]
            if problems:
                console.print(f"  {shown(bundle.bundle_id)} ({bundle.classification}):")
                render_checks(problems, console, indent="    ")
        if pr.comment != "not-asked":
            console.print(f"  comment: {pr.comment}")
        if pr.merge != "not-asked":
            detail = f": {shown(pr.merge_detail)}" if pr.merge_detail else ""
            console.print(f"  merge: [{MERGE_STYLE[pr.merge]}]{pr.merge}[/]{detail}")
    clean = sum(pr.clean for pr in report.pull_requests)
    console.print(f"{clean} of {len(report.pull_requests)} pull request(s) clean")
