"""Review's checks as pure functions of values: listings as the Hub would give them, real
bundles read from disk, and no server at all."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from factory import RunSpec, write_tree

from bundler.core.checks import CheckResult
from bundler.core.errors import HubError
from bundler.core.progress import NoProgress
from bundler.hub.client.remote import RemoteFile, git_blob_id
from bundler.hub.publish.plan import LocalBundle
from bundler.hub.publish.upload import gather_local
from bundler.hub.repo.paths import (
    TASKS_FILE,
    bundle_of_path,
    repo_archive,
    repo_folder,
    repo_paths,
    repo_sidecar,
    unsharded_paths,
)
from bundler.hub.review.changes import PullRequestChanges
from bundler.hub.review.judge import (
    BundleReview,
    GatheredBundle,
    GatheredPullRequest,
    PullRequestFacts,
    conflict_check,
    exception_check,
    judge_pull_request,
    layout_check,
    proposed_bundles,
    replacement_check,
)
from bundler.hub.tasks.definitions import TaskDefinition, TaskDefinitions
from bundler.local.collect import CollectOptions, collect
from bundler.local.layout import BundleId, LayoutError
from bundler.local.submitter import Submitter
from bundler.local.verify import BundleReading, read_bundle

ADA = BundleId("ada_0123abcd", "maze", "unpinned")
ADA_FOLDER = repo_folder(ADA)
BOB = BundleId("bob_4567cdef", "maze", "unpinned")
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


def changed_paths(before: dict[str, RemoteFile], after: dict[str, RemoteFile]) -> set[str]:
    """Paths added, removed or modified between two listings: what a PR changes."""
    return {
        path
        for path in before.keys() | after.keys()
        if (before[path].blob_id if path in before else None)
        != (after[path].blob_id if path in after else None)
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


def published(bundle: LocalBundle) -> dict[str, RemoteFile]:
    """The PR's listing of `bundle`: its archive and sidecar."""
    archive, sidecar = repo_archive(bundle.key), repo_sidecar(bundle.key)
    return {
        archive: RemoteFile(archive, bundle.size, "a" * 40, bundle.sidecar.archive.sha256),
        sidecar: RemoteFile(sidecar, 1, git_blob_id(bundle.sidecar_data), None),
    }


def by_name(checks: list[CheckResult]) -> dict[str, tuple[str, str]]:
    return {check.name: (check.status, check.detail) for check in checks}


# ------------------------------------------------------------------------------ layout


def test_a_pr_that_changes_the_readme_fails_layout_but_its_bundle_is_still_reviewed() -> None:
    base = files(ADA, extra={"README.md": "card"})
    head = files(ADA, BOB, extra={"README.md": "a card of my own"})
    changed = changed_paths(base, head)
    check = layout_check(changed, head)
    assert (check.status, check.detail) == ("failed", "changes files no bundle owns: README.md")
    assert proposed_bundles(changed, head) == [BOB]


def test_a_pr_that_removes_a_bundle_fails_layout() -> None:
    base = files(ADA, BOB)
    head = files(ADA)
    check = layout_check(changed_paths(base, head), head)
    assert check.status == "failed"
    assert check.detail == f"removes bundle(s): {BOB}"


def test_a_pr_that_rewrites_the_sidecar_of_a_bundle_it_leaves_alone_fails_layout() -> None:
    base = files(ADA)
    head = files(ADA, BOB) | files(ADA, version="2")
    head[repo_archive(ADA)] = base[repo_archive(ADA)]  # the archive as it was, its sidecar not
    check = layout_check(changed_paths(base, head), head)
    assert check.status == "failed"
    assert "the other file of a bundle it changes" in check.detail
    assert repo_archive(ADA) in check.detail and repo_sidecar(ADA) not in check.detail


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({TASKS_FILE: "mine"}, "changes the maintainers' task definitions"),
        ({"leaderboard/bundles.parquet": "x"}, "changes the leaderboard's tables"),
        ({"leaderboard/tasks/maze.parquet": "x"}, "changes the leaderboard's tables"),
        ({"rows/ada_0123abcd/maze@unpinned.jsonl": "x"}, "changes files no bundle owns"),
        ({".gitattributes": "*"}, "changes files no bundle owns"),
        ({f"{ADA_FOLDER}/notes.txt": "x"}, "no bundle's file"),
        ({f"{ADA_FOLDER}/{'m' * 250}@unpinned.tar.zst": "x"}, "no bundle's file"),
        ({f"{ADA_FOLDER}/maze@unpinned.tar.zst.json": "x"}, "no bundle's file"),
        ({f"{ADA_FOLDER}/ma\u202eze@unpinned.json": "x"}, "no bundle's file"),
        ({unsharded_paths(ADA)[1]: "x"}, "no bundle's file"),  # where layout 2 kept it
    ],
)
def test_a_pr_touching_anything_but_its_bundles_files_fails_layout(
    extra: dict[str, str], words: str
) -> None:
    base = files(ADA)
    head = files(ADA, BOB, extra=extra)
    check = layout_check(changed_paths(base, head), head)
    assert check.status == "failed" and words in check.detail, check.detail


def test_an_archive_without_its_sidecar_fails_layout() -> None:
    base = files(ADA)
    head = files(ADA, BOB)
    del head[repo_sidecar(BOB)]
    check = layout_check(changed_paths(base, head), head)
    assert check.status == "failed" and repo_sidecar(BOB) in check.detail


def test_more_bundles_than_the_cap_fail_layout() -> None:
    many = [BundleId(f"p{i}_0123abcd", "maze", "unpinned") for i in range(5)]
    head = files(*many)
    assert layout_check(changed_paths({}, head), head, max_bundles=5).status == "passed"
    check = layout_check(changed_paths({}, head), head, max_bundles=4)
    assert check.status == "failed" and "proposes 5 bundles, more than the 4" in check.detail


def test_a_pr_of_thousands_of_odd_paths_is_named_briefly() -> None:
    head = {f"junk/{i}": RemoteFile(f"junk/{i}", 1, "b" * 40, None) for i in range(5000)}
    check = layout_check(changed_paths({}, head), head)
    assert check.status == "failed" and "and 4990 more" in check.detail
    assert len(check.detail) < 1000


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
    check = layout_check(changed_paths(base, head), head)
    assert (check.status, check.detail) == (status, detail)


def test_conflicts_are_the_hubs_and_the_paths_both_branches_changed_differently() -> None:
    base, head, main = files(ADA), files(ADA, version="2"), files(ADA, version="3")
    both = changed_paths(base, head) & changed_paths(base, main)
    assert conflict_check(None, both, head, main).status == "failed"
    assert conflict_check(None, both, head, head).status == "passed"  # main took the same
    assert conflict_check(True, set(), head, main).detail == "the Hub reports conflicting files"
    hub = conflict_check(["README.md"], set(), head, main)
    assert hub.detail == "conflicts with the target branch on README.md"


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
        branch_sha256="b" * 64,
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


def adding(bundle: LocalBundle, definitions: TaskDefinitions | None = None) -> GatheredPullRequest:
    """A PR that adds `bundle` (read again from disk) to a branch that has none, as the
    gathering gives it."""
    head_files = published(bundle)
    gathered = GatheredBundle(bundle.key, read_bundle(bundle.archive), (5, None))
    changes = PullRequestChanges(
        changed=frozenset(head_files), before=dict.fromkeys(head_files), named=len(head_files)
    )
    return GatheredPullRequest(
        FACTS,
        "h" * 40,
        head_files,
        {},
        changes,
        (gathered,),
        definitions=definitions or TaskDefinitions(),
    )


def defined(bundle: LocalBundle, **changes: object) -> TaskDefinitions:
    """Definitions naming exactly what `bundle` ran on, with `changes`."""
    statics = bundle.sidecar.statics
    fields = {
        "hf_repo_id": statics.hf_repo_id,
        "split": statics.dataset_split or "test",
        "metric": "exact_match.accuracy",
    }
    return TaskDefinitions(tasks={"maze": TaskDefinition(**(fields | changes))})  # type: ignore[arg-type]


def test_a_pr_adding_one_verified_bundle_of_a_defined_task_is_clean(tmp_path: Path) -> None:
    bundle = local_bundle(tmp_path)
    pr = judge_pull_request(adding(bundle, defined(bundle)), 0.05)
    assert pr.clean, by_name(pr.checks) | by_name(pr.bundles[0].checks)
    assert [bundle.classification for bundle in pr.bundles] == ["new"]
    assert pr.model_dump()["title"] == "Add a result" and "conflicting_files" not in pr.model_dump()


def test_a_task_without_a_definition_is_warned(tmp_path: Path) -> None:
    pr = judge_pull_request(adding(local_bundle(tmp_path)), 0.05)
    status, detail = by_name(pr.bundles[0].checks)["task"]
    assert status == "warned" and "task maze has no definition" in detail
    assert not pr.clean


@pytest.mark.parametrize("defined_as", ["Maze", "MAZE"])
def test_a_twin_of_a_defined_task_fails_task_naming_it(tmp_path: Path, defined_as: str) -> None:
    """Equal to a defined task's name under case folding and NFKC: one task to a person, and
    two tables no case-insensitive file system holds. A failure, never the warning an
    undefined task gets."""
    bundle = local_bundle(tmp_path)
    (definition,) = defined(bundle).tasks.values()
    twins = TaskDefinitions(tasks={defined_as: definition})
    pr = judge_pull_request(adding(bundle, twins), 0.05)
    status, detail = by_name(pr.bundles[0].checks)["task"]
    assert status == "failed" and f"twin of the defined task {defined_as}" in detail, detail
    assert twins.twin_of("maze") == defined_as and twins.twin_of(defined_as) is None


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"hf_repo_id": "GPTNT/the-real-one"}, "not GPTNT/the-real-one"),
        ({"split": "validation"}, "split test, not validation"),
        ({"revisions": ["f" * 40]}, "is not one of the 1 accepted"),
    ],
)
def test_a_bundle_contradicting_its_tasks_definition_fails_task(
    tmp_path: Path, changes: dict[str, object], words: str
) -> None:
    bundle = local_bundle(tmp_path)
    pr = judge_pull_request(adding(bundle, defined(bundle, **changes)), 0.05)
    status, detail = by_name(pr.bundles[0].checks)["task"]
    assert status == "failed" and words in detail, detail
    assert not pr.clean


def test_a_bundle_listed_larger_than_the_format_allows_is_judged_undownloaded(
    tmp_path: Path,
) -> None:
    bundle = local_bundle(tmp_path)
    gathered = adding(bundle)
    refused = GatheredBundle(bundle.key, BundleReading(path=bundle.archive), refused="too big")
    pr = judge_pull_request(replace(gathered, bundles=(refused,)), 0.05)
    assert by_name(pr.bundles[0].checks) == {"size": ("failed", "too big")}


def test_a_bundle_that_does_not_verify_is_judged_on_nothing_else(tmp_path: Path) -> None:
    bundle = local_bundle(tmp_path)
    head_files = published(bundle)
    unread = GatheredBundle(bundle.key, BundleReading(path=bundle.archive))
    changes = PullRequestChanges(changed=frozenset(head_files), given=False)
    gathered = GatheredPullRequest(FACTS, "h" * 40, head_files, {}, changes, (unread,))
    pr = judge_pull_request(gathered, max_exception_rate=0.05)
    assert by_name(pr.bundles[0].checks) == {
        "verification": ("failed", "the bundle could not be read")
    }
    assert by_name(pr.checks)["diff"][0] == "warned"  # the Hub gave no diff
    assert not pr.clean


# ------------------------------------------------------------------ task definitions


def test_task_definitions_read_back_and_refuse_what_they_do_not_define() -> None:
    definition = TaskDefinition(
        hf_repo_id="GPTNT/expert-VQA", split="test", metric="em.acc", revisions=["a" * 40]
    )
    defined = TaskDefinitions(tasks={"maze": definition})
    data = defined.to_bytes()
    assert data.isascii() and TaskDefinitions.parse(data) == defined
    for bad in (
        b'{"version": 1, "tasks": {"maze": {"hf_repo_id": "a/b", "split": "t", "metric": "m",'
        b' "direction": "sideways"}}}',
        b'{"version": 1, "tasks": {"maze": {"hf_repo_id": "a/b", "split": "t", "metric": "m",'
        b' "revisions": ["main"]}}}',
        b'{"version": 1, "tasks": {"../x": {"hf_repo_id": "a/b", "split": "t", "metric": "m"}}}',
        b'{"version": 1, "tasks": {}, "extra": 1}',
        b"not json",
    ):
        with pytest.raises(HubError, match=r"leaderboard/tasks\.json is not valid"):
            TaskDefinitions.parse(bad)


def test_a_bundle_id_no_file_system_can_hold_is_no_bundle_id() -> None:
    with pytest.raises(LayoutError, match="a file system takes 255"):
        BundleId.parse(f"ada_0123abcd/{'m' * 250}@unpinned")
    assert bundle_of_path(f"{ADA_FOLDER}/{'m' * 238}@unpinned.tar.zst") is not None
    assert bundle_of_path(f"{ADA_FOLDER}/{'m' * 250}@unpinned.tar.zst") is None
    assert bundle_of_path(f"{ADA_FOLDER}/maze@unpinned.tar.zst") == BundleId(
        "ada_0123abcd", "maze", "unpinned"
    )
    assert bundle_of_path(f"{ADA_FOLDER}/sub/maze@unpinned.json") is None
