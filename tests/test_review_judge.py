"""Review's checks as pure functions of values: listings as the Hub would give them, real
bundles read from disk, and no server at all."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from factory import RunSpec, make_row, write_tree

from bundler.core.checks import CheckResult
from bundler.core.progress import NoProgress
from bundler.hub.layout import repo_archive, repo_paths, repo_row, repo_sidecar
from bundler.hub.plan import LocalBundle
from bundler.hub.remote import RemoteFile, git_blob_id
from bundler.hub.review_judge import (
    BundleReview,
    GatheredBundle,
    GatheredPullRequest,
    PublicationWindow,
    PullRequestFacts,
    changed_paths,
    conflict_check,
    exception_check,
    judge_pull_request,
    layout_check,
    proposed_bundles,
    published_at_check,
    replacement_check,
)
from bundler.hub.rows import build_row, row_files
from bundler.hub.upload import gather_local
from bundler.local.collect import CollectOptions, collect
from bundler.local.layout import BundleId
from bundler.local.submitter import Submitter
from bundler.local.verify import BundleReading, read_bundle

ADA = BundleId("ada_0123abcd", "maze", "unpinned")
BOB = BundleId("bob_4567cdef", "maze", "unpinned")
HEAD = datetime(2026, 6, 16, 10, 0, tzinfo=UTC)
BASE = datetime(2026, 6, 16, 8, 0, tzinfo=UTC)
WINDOW = PublicationWindow(earliest=BASE, latest=HEAD)
FACTS = PullRequestFacts(
    num=3, title="Add a result", author="ada", status="open", url="u", base_branch="main"
)


def files(
    *bundles: BundleId, version: str = "1", extra: dict[str, str] | None = None
) -> dict[str, RemoteFile]:
    """A listing holding every file of `bundles` (their content named by `version`), and the
    `extra` paths with the given content."""
    paths = {path: version for bundle in bundles for path in repo_paths(bundle)} | (extra or {})
    return {
        path: RemoteFile(path, 1, git_blob_id(f"{path}:{content}".encode()), None)
        for path, content in paths.items()
    }


def local_bundle(root: Path, rows: int = 5, submitter: str | None = "Ada") -> LocalBundle:
    """A verified bundle on disk, as collect writes it (every 11th prediction from the 6th
    raises, so rows=6 gives one exception)."""
    spec = RunSpec(task="maze", rows=rows)
    write_tree(root / "output", [spec])
    options = CollectOptions(expected_rows={"maze": rows}, submitter=Submitter(name=submitter))
    assert not collect(root / "output", root / "bundles", options).refused
    found, _ = gather_local(root / "bundles", allow_partial=False, progress=NoProgress())
    return found[0]


def published(bundle: LocalBundle, published_at: str) -> tuple[dict[str, RemoteFile], bytes]:
    """The PR's listing of `bundle` with its rows dated `published_at`, and its row's bytes."""
    row = build_row(bundle.sidecar, bundle.metrics_text, published_at)
    contents = row_files(row)
    listing = {
        path: RemoteFile(path, len(data), git_blob_id(data), None)
        for path, data in contents.items()
    }
    archive, sidecar = repo_archive(bundle.key), repo_sidecar(bundle.key)
    listing[archive] = RemoteFile(archive, bundle.size, "a" * 40, bundle.sidecar.archive.sha256)
    listing[sidecar] = RemoteFile(sidecar, 1, git_blob_id(bundle.sidecar_data), None)
    return listing, contents[repo_row(bundle.key)]


def by_name(checks: list[CheckResult]) -> dict[str, tuple[str, str]]:
    return {check.name: (check.status, check.detail) for check in checks}


# ------------------------------------------------------------------------------ layout


def test_a_pr_that_changes_the_readme_fails_layout_but_its_bundle_is_still_reviewed() -> None:
    base = files(ADA, extra={"README.md": "card"})
    head = files(ADA, BOB, extra={"README.md": "a card of my own"})
    changed = changed_paths(base, head)
    check = layout_check(changed, base, head)
    assert (check.status, check.detail) == ("failed", "changes files no bundle owns: README.md")
    assert proposed_bundles(changed, head) == [BOB]


def test_a_pr_that_removes_a_bundle_fails_layout() -> None:
    base = files(ADA, BOB)
    head = files(ADA)
    check = layout_check(changed_paths(base, head), base, head)
    assert check.status == "failed"
    assert check.detail == f"removes bundle(s): {BOB}"


def test_a_pr_that_rewrites_the_rows_of_a_bundle_it_leaves_alone_fails_layout() -> None:
    base = files(ADA)
    head = files(ADA, BOB) | files(ADA, version="2")
    head[repo_archive(ADA)] = base[repo_archive(ADA)]  # the archive as it was, its rows not
    check = layout_check(changed_paths(base, head), base, head)
    assert check.status == "failed"
    assert "whose archive it does not change" in check.detail
    assert repo_archive(ADA) not in check.detail and repo_sidecar(ADA) in check.detail


@pytest.mark.parametrize(
    ("head", "status", "detail"),
    [
        (files(ADA, BOB), "passed", "only the files of its 1 bundle(s)"),
        (files(ADA, version="2"), "passed", "only the files of its 1 bundle(s)"),
        (files(ADA), "warned", "the PR adds or changes no bundle"),
    ],
)
def test_a_pr_of_bundles_alone_passes_layout(
    head: dict[str, RemoteFile], status: str, detail: str
) -> None:
    base = files(ADA)
    check = layout_check(changed_paths(base, head), base, head)
    assert (check.status, check.detail) == (status, detail)


def test_conflicts_are_the_hubs_and_the_paths_both_branches_changed_differently() -> None:
    base, head, main = files(ADA), files(ADA, version="2"), files(ADA, version="3")
    both = changed_paths(base, head) & changed_paths(base, main)
    assert conflict_check(None, both, head, main).status == "failed"
    assert conflict_check(None, both, head, head).status == "passed"  # main took the same
    assert conflict_check(True, set(), head, main).detail == "the Hub reports conflicting files"
    hub = conflict_check(["README.md"], set(), head, main)
    assert hub.detail == "conflicts with the target branch on README.md"


# ------------------------------------------------------------------------ published-at


@pytest.mark.parametrize(
    ("published_at", "status"),
    [
        ("2026-06-16T09:00:00Z", "passed"),
        ("2026-06-16T10:04:59Z", "passed"),  # the head commit, within the clocks' skew
        ("2026-06-16T10:05:01Z", "failed"),  # after the head commit: never upload's stamp
        ("2026-06-16T07:55:00Z", "passed"),
        ("2026-06-16T07:54:59Z", "warned"),  # before the base: backdated, or a long upload
    ],
)
def test_published_at_must_fall_within_the_prs_commits(published_at: str, status: str) -> None:
    check = published_at_check(make_row(published_at=published_at), WINDOW)
    assert check.status == status


def test_without_a_base_only_a_date_after_the_head_is_judged() -> None:
    window = PublicationWindow(earliest=None, latest=HEAD)
    assert (
        published_at_check(make_row(published_at="2000-01-01T00:00:00Z"), window).status == "passed"
    )


# --------------------------------------------------------------------- policy on claims


def test_the_exception_rate_is_held_to_the_limit(tmp_path: Path) -> None:
    claim = read_bundle(local_bundle(tmp_path, rows=6).archive).claim
    assert claim is not None and claim.predictions.exceptions == 1
    above = exception_check(claim, 0.05)
    assert (above.status, above.detail) == (
        "failed",
        "1 of 6 predictions raised (16.7%), above 5.0%",
    )
    assert exception_check(claim, 0.2).status == "passed"


@pytest.mark.parametrize(
    ("failure", "compared"),
    [
        (None, "not compared: the copy on the target branch fails verification"),
        ("the archive is unreadable", "not compared: the archive is unreadable"),
    ],
)
def test_a_replacement_is_always_left_to_a_maintainer(failure: str | None, compared: str) -> None:
    review = BundleReview(
        bundle_id=str(ADA),
        classification="replacement",
        sha256="a" * 64,
        main_sha256="b" * 64,
        submitter="Ada",
    )
    main = BundleReading(path=Path("main.tar.zst"))  # read, but no claim could be
    gathered = GatheredBundle(ADA, main, main=main, diff_failure=failure)
    check = replacement_check(review, gathered)
    assert check.status == "warned" and review.diff is None
    assert check.detail == (
        "replaces the copy on the target branch (sha256 bbbbbbbbbbbb → aaaaaaaaaaaa,"
        f" submitter no one named → Ada): {compared}"
    )


# --------------------------------------------------------------------- a whole PR judged


def adding(bundle: LocalBundle, published_at: str) -> GatheredPullRequest:
    """A PR that adds `bundle` (read again from disk) with rows dated `published_at`, to a
    branch that has none, as the gathering gives it."""
    head_files, row = published(bundle, published_at)
    gathered = GatheredBundle(bundle.key, read_bundle(bundle.archive), row, (5, None))
    return GatheredPullRequest(FACTS, "h" * 40, "b" * 40, WINDOW, head_files, {}, {}, (gathered,))


def test_a_pr_adding_one_verified_bundle_with_its_own_rows_is_clean(tmp_path: Path) -> None:
    pr = judge_pull_request(adding(local_bundle(tmp_path), "2026-06-16T09:30:00Z"), 0.05)
    assert pr.clean, by_name(pr.checks) | by_name(pr.bundles[0].checks)
    assert [bundle.classification for bundle in pr.bundles] == ["new"]
    assert pr.model_dump()["title"] == "Add a result" and "conflicting_files" not in pr.model_dump()


def test_a_bundle_that_does_not_verify_is_judged_on_nothing_else(tmp_path: Path) -> None:
    bundle = local_bundle(tmp_path)
    head_files, _ = published(bundle, "2026-06-16T09:30:00Z")
    unread = GatheredBundle(bundle.key, BundleReading(path=bundle.archive))
    gathered = GatheredPullRequest(FACTS, "h" * 40, None, WINDOW, head_files, {}, {}, (unread,))
    pr = judge_pull_request(gathered, max_exception_rate=0.05)
    assert by_name(pr.bundles[0].checks) == {
        "verification": ("failed", "the bundle could not be read")
    }
    assert by_name(pr.checks)["state"][0] == "warned"  # no base on the target branch
    assert not pr.clean


def test_rows_dated_after_the_head_commit_make_the_pr_unclean(tmp_path: Path) -> None:
    gathered = adding(local_bundle(tmp_path), "2026-06-17T00:00:00Z")
    checks = by_name(judge_pull_request(gathered, 0.05).bundles[0].checks)
    assert checks["row"][0] == "passed" and checks["published-at"][0] == "failed"
