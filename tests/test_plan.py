"""Upload's plan as a pure function of values: real bundles on disk, a repository described by
the values the Hub would give, and no server at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from factory import RunSpec, write_tree

from bundler.core.progress import NoProgress
from bundler.hub.client.remote import RemoteFile, git_blob_id
from bundler.hub.publish.differences import extension_claims_problem
from bundler.hub.publish.plan import (
    FILES_PER_BUNDLE,
    MAX_FILES_PER_COMMIT,
    PR_BUNDLES_PER_COMMIT,
    SHARED_FILES,
    BundlePlan,
    HubEvidence,
    LocalBundle,
    RepositoryView,
    UploadOptions,
    batches,
    commit_message,
    decide,
    extension_predictions_problem,
    replan,
    triage,
)
from bundler.hub.publish.upload import gather_local
from bundler.hub.repo.paths import repo_archive, repo_paths, repo_sidecar
from bundler.local.collect import CollectOptions, collect

NOW = "2026-12-01T10:00:00Z"
EARLIER = "2026-11-01T10:00:00Z"
OPTIONS = UploadOptions(repo_id="gptnt/leaderboard")


def bundles_of(root: Path, *specs: RunSpec, expect: int | None = None) -> list[LocalBundle]:
    """The verified bundles of these runs, as upload gathers them; `expect` rows per task."""
    output, folder = root / "output", root / "bundles"
    write_tree(output, list(specs))
    expected = {spec.task: expect or spec.rows for spec in specs}
    report = collect(output, folder, CollectOptions(expected_rows=expected, allow_partial=True))
    assert not report.refused, report.refused
    found, set_aside = gather_local(folder, allow_partial=True, progress=NoProgress())
    assert not set_aside
    return sorted(found, key=lambda bundle: bundle.bundle_id)


@pytest.fixture
def bundle(tmp_path: Path) -> LocalBundle:
    return bundles_of(tmp_path, RunSpec(task="maze", rows=3))[0]


def archive_entry(bundle: LocalBundle, sha256: str | None = None) -> RemoteFile:
    path = repo_archive(bundle.key)
    return RemoteFile(path, bundle.size, "0" * 40, sha256 or bundle.sidecar.archive.sha256)


def published(bundle: LocalBundle) -> dict[str, RemoteFile]:
    """The files a branch holds once `bundle` is published there."""
    files = {path: RemoteFile(path, 1, "1" * 40, None) for path in repo_paths(bundle.key)}
    files[repo_archive(bundle.key)] = archive_entry(bundle)
    sidecar = repo_sidecar(bundle.key)
    files[sidecar] = RemoteFile(sidecar, 1, git_blob_id(bundle.sidecar_data), None)
    return files


def test_a_bundle_the_branch_lacks_is_new_with_a_row_stamped_now(bundle: LocalBundle) -> None:
    view = RepositoryView(base="main", base_head="a" * 40)
    decision = decide(bundle, view, HubEvidence(), OPTIONS, NOW)
    assert (decision.plan.action, decision.plan.outcome) == ("new", "planned")
    assert decision.row is not None and decision.row.published_at == NOW
    assert decision.proposal is not None and decision.proposal.verb == "adds"
    assert decision.expected is None


def test_a_bundle_published_with_its_companions_is_unchanged(bundle: LocalBundle) -> None:
    view = RepositoryView("main", "a" * 40, published(bundle))
    assert triage(bundle, view, create_pr=False) == "on-base"
    decision = decide(bundle, view, HubEvidence(), OPTIONS, NOW)
    assert (decision.plan.action, decision.plan.outcome) == ("unchanged", "already-there")
    assert decision.row is None


def test_an_archive_without_its_sidecar_is_repaired_keeping_its_first_publication(
    bundle: LocalBundle,
) -> None:
    files = published(bundle)
    del files[repo_sidecar(bundle.key)]
    view = RepositoryView("main", "a" * 40, files, published={bundle.bundle_id: EARLIER})
    assert triage(bundle, view, create_pr=False) == "repair"
    decision = decide(bundle, view, HubEvidence(), OPTIONS, NOW)
    assert decision.plan.action == "repair"
    assert decision.row is not None and decision.row.published_at == EARLIER
    # A pull request proposes nothing of a bundle the branch already holds.
    assert triage(bundle, view, create_pr=True) == "on-base"


def test_a_bundle_already_in_the_pull_request_is_not_proposed_again(bundle: LocalBundle) -> None:
    pr_files = {repo_archive(bundle.key): archive_entry(bundle)}
    view = RepositoryView("main", "a" * 40, {}, pr_num=7, pr_files=pr_files)
    options = OPTIONS.model_copy(update={"create_pr": True})
    decision = decide(bundle, view, HubEvidence(), options, NOW)
    assert decision.plan.action == "unchanged"
    assert decision.plan.detail == "already proposed in pull request #7"


def test_other_content_under_the_id_extends_replaces_or_conflicts(tmp_path: Path) -> None:
    old, new = (
        bundles_of(tmp_path / name, RunSpec(task="maze", rows=rows), expect=5)[0]
        for name, rows in (("old", 3), ("new", 5))
    )
    view = RepositoryView("main", "a" * 40, {repo_archive(new.key): archive_entry(old)})
    assert triage(new, view, create_pr=False) == "changed"
    assert extension_claims_problem(old.sidecar, new.sidecar) is None
    extends = decide(new, view, HubEvidence(old_sidecar=old.sidecar), OPTIONS, NOW)
    assert extends.plan.action == "extends"
    assert extends.plan.detail == "extends the bundle on main (3 -> 5 rows)"
    assert extends.plan.branch_sha256 == old.sidecar.archive.sha256
    assert extends.proposal is not None and extends.proposal.verb == "extends"

    problem = "it differs in run_date"
    conflict = decide(
        new, view, HubEvidence(old_sidecar=old.sidecar, extension_problem=problem), OPTIONS, NOW
    )
    assert (conflict.plan.action, conflict.plan.outcome) == ("conflict", "refused")
    assert problem in (conflict.plan.detail or "") and conflict.row is None
    replacing = OPTIONS.model_copy(update={"replace": True})
    replaced = decide(
        new, view, HubEvidence(old_sidecar=old.sidecar, extension_problem=problem), replacing, NOW
    )
    assert replaced.plan.action == "replace" and replaced.row is not None

    unreadable = decide(new, view, HubEvidence(), OPTIONS, NOW)
    assert "its sidecar on the Hub is unreadable" in (unreadable.plan.detail or "")
    # Fewer rows than the Hub's copy never extend it.
    fewer = extension_claims_problem(new.sidecar, old.sidecar) or ""
    assert fewer.startswith("it has 3 rows, the Hub's copy 5")


def test_an_extension_must_keep_every_prediction_of_the_hubs_copy() -> None:
    old = {"predictions/prediction_0.json": "a", "metrics.json": "m"}
    assert extension_predictions_problem(old, {"predictions/prediction_0.json": "a"}) is None
    problem = extension_predictions_problem(old, {"predictions/prediction_0.json": "b"})
    assert problem == (
        "1 prediction(s) of the Hub's copy are missing or different in it, "
        "first predictions/prediction_0.json"
    )


def test_the_plan_cuts_commits_and_words_them(tmp_path: Path) -> None:
    found = bundles_of(
        tmp_path, *(RunSpec(task=f"task{n:02}", rows=1) for n in range(PR_BUNDLES_PER_COMMIT + 2))
    )
    # a pull request's commit: two files a bundle, within MAX_FILES_PER_COMMIT
    assert [len(b) for b in batches(found, to_branch=False)] == [PR_BUNDLES_PER_COMMIT, 2]
    # a branch's: the all-tasks table, the card, and a table per task touched (here, each)
    per_branch_commit = (MAX_FILES_PER_COMMIT - SHARED_FILES) // (FILES_PER_BUNDLE + 1)
    cut = batches(found, to_branch=True)
    assert [len(b) for b in cut] == [per_branch_commit, len(found) - per_branch_commit]
    # bundles of one task share its table
    same_task = [bundle for bundle in found if bundle.key.task == "task00"] * 60
    assert [len(b) for b in batches(same_task, to_branch=True)] == [48, 12]
    cut = batches(found, to_branch=False)
    plans = {
        bundle.bundle_id: BundlePlan(bundle_id=bundle.bundle_id, action="new") for bundle in cut[1]
    }
    summary, description = commit_message(cut[1], plans, None)
    assert summary == f"Add 2 statics bundle(s): {cut[1][0].bundle_id}, {cut[1][1].bundle_id}"
    assert description.splitlines()[2] == f"- adds {cut[1][0].bundle_id} (complete)"
    assert commit_message(cut[1], plans, "nightly")[0] == "nightly"


def test_replanning_finds_what_landed_and_refuses_what_changed_meanwhile(tmp_path: Path) -> None:
    landed, changed, pending = bundles_of(
        tmp_path, *(RunSpec(task=task, rows=1) for task in ("a", "b", "c"))
    )
    plans = {
        bundle.bundle_id: BundlePlan(bundle_id=bundle.bundle_id, action="new")
        for bundle in (landed, changed, pending)
    }
    remote = {
        **published(landed),
        repo_archive(changed.key): archive_entry(changed, sha256="f" * 64),
    }
    expected: dict[str, str | None] = {bundle_id: None for bundle_id in plans}
    judged = replan([landed, changed, pending], remote, plans, expected, replace=False)
    assert judged.found == [landed] and judged.todo == [pending]
    assert plans[changed.bundle_id].outcome == "refused"
    again = {bundle_id: BundlePlan(bundle_id=bundle_id, action="new") for bundle_id in plans}
    assert replan([changed], remote, again, expected, replace=True).todo == [changed]
