"""What `bundler review` reads to find what a pull request changes: the Hub's own diff of it,
checked against the trees of its head and of its target branch, never the commit history. So
a review costs the same requests whatever the length of main's history, a round of pull
requests reads main once, and where the diff and the trees disagree the review says so (and
still reviews every bundle either names)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import OTHER_SUBMITTER_TOKEN, SUBMITTER_TOKEN, WRITE_TOKEN
from helpers import run_cli
from hubserver import Fault, HubServer
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from test_review import World, checks, local, make_world, propose, review

from bundler.core.checks import passed
from bundler.hub.client.remote import LastCommit, RemoteFile
from bundler.hub.repo.paths import bundle_ids_in, repo_archive, repo_paths, repo_sidecar
from bundler.hub.review.changes import DiffedFile, compare_changes, diff_check, parse_diff

HISTORIES = (50, 5_000)


@pytest.fixture
def world(hub: HubServer, repo_id: str, tmp_path: Path) -> World:
    return make_world(hub, repo_id, tmp_path)


def requests_about(hub: HubServer, repo_id: str) -> int:
    counts = hub.request_counts(repo_id)
    return counts["api"] + counts["file"]


def with_history(hub: HubServer, repo_id: str, tmp_path: Path, commits: int) -> World:
    """A World whose main has `commits` commits."""
    world = make_world(hub, repo_id, tmp_path)
    hub.seed_commits(repo_id, commits - len(hub.commits(repo_id)))
    assert len(hub.commits(repo_id)) == commits
    return world


def history_reads(hub: HubServer, repo_id: str) -> list[str]:
    return [r.path for r in hub.requests(repo_id) if "/commits/" in r.path]


# ------------------------------------------------------------------------------ cost


def test_a_review_costs_the_same_at_50_and_at_5000_commits_on_main(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    costs = {}
    for commits in HISTORIES:
        world = with_history(hub, f"{repo_id}-{commits}", tmp_path / str(commits), commits)
        num = propose(world, SUBMITTER_TOKEN, world.bundles("new", [world.spec(model="new")]))
        hub.reset_requests()
        code, report, stderr = review(world, "--pr", str(num))
        assert code == 0, stderr
        (pr,) = report["pull_requests"]
        assert [bundle["classification"] for bundle in pr["bundles"]] == ["new"]
        assert checks(pr)["diff"]["status"] == "passed"
        assert history_reads(hub, world.repo_id) == []
        costs[commits] = requests_about(hub, world.repo_id)
    assert abs(costs[HISTORIES[0]] - costs[HISTORIES[1]]) <= 3, costs
    assert costs[HISTORIES[1]] <= 20, costs  # 219 at 5,000 commits when review read history


def test_a_round_of_pull_requests_reads_main_once(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    world = with_history(hub, repo_id, tmp_path, 2_000)
    for index in range(5):
        token = SUBMITTER_TOKEN if index % 2 else OTHER_SUBMITTER_TOKEN
        propose(world, token, world.bundles(f"pr{index}", [world.spec(model=f"model-{index}")]))
    tip = hub.commits(repo_id)[0].oid
    hub.reset_requests()
    code, report, stderr = review(world)
    assert code == 0, stderr
    assert [pr["clean"] for pr in report["pull_requests"]] == [True] * 5
    paths = [unquote(r.path) for r in hub.requests(repo_id)]
    assert paths.count(f"/api/datasets/{repo_id}/revision/main") == 1
    at_tip = Counter(path for path in paths if f"/tree/{tip}" in path)
    assert at_tip and set(at_tip.values()) == {1}, at_tip  # each folder of main listed once
    assert history_reads(hub, repo_id) == []
    assert requests_about(hub, repo_id) <= 80  # 484 when review read the history


# ------------------------------------------------------------- the diff and the trees


def test_a_diff_that_names_nothing_is_a_finding_and_the_bundle_is_still_reviewed(
    world: World,
) -> None:
    hub, repo_id = world.hub, world.repo_id
    mine = world.bundles("mine", [world.spec(model="mine")])
    num = propose(world, SUBMITTER_TOKEN, mine)
    hub.move_pull_request_base(repo_id, num, f"refs/pr/{num}")  # the Hub's diff: empty
    main_before = hub.commits(repo_id)[0].oid
    code, report, stderr = review(world, "--merge", token=WRITE_TOKEN)
    assert code == 1, stderr
    (pr,) = report["pull_requests"]
    diff = checks(pr)["diff"]
    assert diff["status"] == "failed"
    (key,) = [bundle.key for bundle in local(mine)]
    not_named = "commits of the PR changed, the diff does not name: "
    assert f"{not_named}{repo_sidecar(key)}, {repo_archive(key)}" in diff["detail"]
    layout = checks(pr)["layout"]
    assert (layout["status"], layout["detail"]) == ("passed", "only the files of its 1 bundle(s)")
    (bundle,) = pr["bundles"]
    assert bundle["classification"] == "new" and bundle["clean"] is True
    assert pr["merge"] == "refused" and hub.commits(repo_id)[0].oid == main_before


def test_a_diff_naming_files_the_pr_never_changed_is_a_finding(world: World) -> None:
    hub, repo_id = world.hub, world.repo_id
    (on_main,) = bundle_ids_in(hub.list_files(repo_id))[0]
    mine = world.bundles("mine", [world.spec(model="mine")])
    num = propose(world, SUBMITTER_TOKEN, mine)
    first = hub.commits(repo_id)[-1].oid  # the initial commit: .gitattributes alone
    hub.move_pull_request_base(repo_id, num, first)
    code, report, stderr = review(world)
    assert code == 1, stderr
    (pr,) = report["pull_requests"]
    diff = checks(pr)["diff"]
    assert diff["status"] == "failed"
    assert "the diff names, as no commit of the PR changed: README.md" in diff["detail"]
    assert all(path in diff["detail"] for path in repo_paths(on_main))  # main's own bundle
    (key,) = [bundle.key for bundle in local(mine)]
    assert not any(path in diff["detail"] for path in repo_paths(key))


def test_details_read_before_a_push_are_read_again(world: World) -> None:
    hub, repo_id = world.hub, world.repo_id
    num = propose(world, SUBMITTER_TOKEN, world.bundles("mine", [world.spec(model="mine")]))
    # Someone pushes to the PR just as its head is read, after its details were.
    hub.inject("GET", rf"/revision/refs%2Fpr%2F{num}$", Fault.RACE)
    hub.reset_requests()
    code, report, stderr = review(world, "--pr", str(num))
    assert code == 1, stderr
    (pr,) = report["pull_requests"]
    assert checks(pr)["diff"]["status"] == "passed"  # the diff of the head reviewed
    assert checks(pr)["layout"]["detail"] == "changes files no bundle owns: .race/1"
    details = [r for r in hub.requests(repo_id) if r.path.endswith(f"/discussions/{num}")]
    assert len(details) == 2


def test_a_replacement_and_a_removal_are_told_from_what_main_did_since(world: World) -> None:
    """The diff says what the PR changed; what main changed since (the tables, the card, a
    bundle merged meanwhile) differs between the trees too, and is no disagreement."""
    hub, repo_id = world.hub, world.repo_id
    (on_main,) = [p for p in hub.list_files(repo_id) if p.endswith(".tar.zst")]
    sidecar = on_main.removesuffix(".tar.zst") + ".json"
    gone = [CommitOperationDelete(on_main), CommitOperationDelete(sidecar)]
    info = HfApi(token=SUBMITTER_TOKEN).create_commit(
        repo_id, gone, commit_message="Remove", repo_type="dataset", create_pr=True
    )
    later = world.bundles("later", [world.spec(model="later")])
    upload = run_cli("upload", later, "--repo", repo_id, env={"HF_TOKEN": WRITE_TOKEN})
    assert upload.returncode == 0, upload.stderr
    code, report, stderr = review(world, "--pr", str(info.pr_num))
    assert code == 1, stderr
    (pr,) = report["pull_requests"]
    assert checks(pr)["diff"]["status"] == "passed", checks(pr)["diff"]
    assert (
        checks(pr)["diff"]["detail"]
        == "the Hub's diff names the 2 file(s) the PR's commits changed"
    )
    assert checks(pr)["layout"]["detail"].startswith("removes bundle(s): gpt-5-2_")


# ------------------------------------------------------------------ the diff, read


def test_the_hubs_diff_is_read_back_file_by_file(world: World) -> None:
    hub, repo_id = world.hub, world.repo_id
    api = HfApi(token=SUBMITTER_TOKEN)
    operations = [
        CommitOperationAdd("notes/a b.txt", b"spaced\n"),
        CommitOperationAdd('notes/caf\u00e9 "q".txt', b"quoted\n"),
        CommitOperationAdd("notes/big.tar.zst", b"\x00archive"),
        CommitOperationAdd("README.md", b"---\n---\n# mine\n"),
        CommitOperationDelete(".gitattributes"),
    ]
    info = api.create_commit(
        repo_id, operations, commit_message="Many kinds", repo_type="dataset", create_pr=True
    )
    details = api.get_discussion_details(repo_id, info.pr_num or 0, repo_type="dataset")
    assert details.diff is not None
    read = parse_diff(details.diff)
    head = {p: hub.file_bytes(repo_id, p, revision=f"refs/pr/{info.pr_num}") for p in read.files}
    assert read.unreadable == ()
    assert sorted(read.files) == sorted(
        [".gitattributes", "README.md", "notes/a b.txt", "notes/big.tar.zst", 'notes/café "q".txt']
    )
    assert read.files[".gitattributes"].after is None and head[".gitattributes"] is None
    assert read.files["notes/a b.txt"].before is None
    readme = read.files["README.md"]
    assert readme.before is not None and readme.after is not None and readme.before != readme.after
    listed = api.get_paths_info(
        repo_id, sorted(read.files), repo_type="dataset", revision=f"refs/pr/{info.pr_num}"
    )
    assert {entry.path: read.files[entry.path].after for entry in listed} == {
        entry.path: entry.blob_id
        for entry in listed  # type: ignore[union-attr]
    }


def test_renames_copies_and_abbreviated_ids_are_read() -> None:
    text = (
        "diff --git a/old.json b/new.json\n"
        "similarity index 100%\n"
        "rename from old.json\n"
        "rename to new.json\n"
        "diff --git a/src.txt b/copy.txt\n"
        "similarity index 90%\n"
        "copy from src.txt\n"
        "copy to copy.txt\n"
        "index 1111111..2222222 100644\n"
        "--- a/src.txt\n"
        "+++ b/copy.txt\n"
        "@@ -1 +1 @@\n"
        "-diff --git a/not/a/header b/not/a/header\n"
        "+x\n"
        "diff --git a/mode.sh b/mode.sh\n"
        "old mode 100644\n"
        "new mode 100755\n"
        "diff --git nonsense\n"
    )
    read = parse_diff(text)
    assert read.files == {
        "old.json": DiffedFile("old.json", None, None, ids=False),
        "new.json": DiffedFile("new.json", None, None, ids=False),
        "copy.txt": DiffedFile("copy.txt", None, "2222222"),
        "mode.sh": DiffedFile("mode.sh", None, None, ids=False),
    }
    assert read.unreadable == ("diff --git nonsense",)
    assert parse_diff("") == parse_diff("\n") and parse_diff("").files == {}


def test_each_disagreement_is_named_by_the_diff_check() -> None:
    head, earlier, main_commit = "h" * 40, "c" * 40, "m" * 40
    when = datetime(2026, 1, 1, tzinfo=UTC)

    def listed(path: str, blob: str, by: str) -> RemoteFile:
        return RemoteFile(path, 1, blob, None, LastCommit(by, when))

    diff = parse_diff(
        "diff --git a/bundles/x.json b/bundles/x.json\n"
        "new file mode 100644\n"
        f"index {'0' * 40}..{'1' * 40}\n"
    )
    head_files = {"bundles/x.json": listed("bundles/x.json", "2" * 40, head)}
    misnamed = compare_changes(diff, head_files, set(head_files), [earlier, head], head)
    stale = compare_changes(diff, {}, set(), [earlier], head)
    assert (misnamed.misnamed, misnamed.changed) == (("bundles/x.json",), {"bundles/x.json"})
    assert diff_check(misnamed).detail == (
        "the Hub's diff and the PR's trees disagree: the diff names, as the head does not hold"
        " them: bundles/x.json"
    )
    assert "the Hub's details end at commit cccccccccccc, not the head" in diff_check(stale).detail
    # A Hub listing no commit of the PR: the diff is held to the head's blobs alone.
    agreed = {"bundles/x.json": listed("bundles/x.json", "1" * 40, main_commit)}
    alone = compare_changes(diff, agreed, set(agreed), [], head)
    assert diff_check(alone) == passed("diff", "the head holds the 1 file(s) the Hub's diff names")
    # No diff at all: what the PR's commits changed is what it is judged by.
    ours = {"bundles/x.json": listed("bundles/x.json", "1" * 40, head)}
    undiffed = compare_changes(None, ours, set(ours), [head], head)
    assert undiffed.changed == frozenset({"bundles/x.json"})
    assert diff_check(undiffed).status == "warned"
