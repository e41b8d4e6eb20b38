"""`bundler upload --create-pr` with several submitters: one open pull request per submitter,
re-runs add commits to it, nothing already on main is proposed again, no pull request touches
the card (so they all merge cleanly), and replacements are flagged where a reviewer looks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import READ_TOKEN, SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec
from helpers import run_cli
from hubserver import Fault, HubServer
from huggingface_hub import HfApi
from test_upload import define_expert_vqa, make_bundles, upload

from bundler.hub.publish.plan import PR_BUNDLES_PER_COMMIT
from bundler.hub.publish.pr_description import read_pr_state
from bundler.hub.repo.paths import README, repo_paths
from bundler.local.layout import BundleId

ALICE = WRITE_TOKEN  # user "leaderboard-bot"
BOB = SUBMITTER_TOKEN  # user "submitter", a write token without write access to gptnt/


def bundle_paths(bundles: Path) -> set[str]:
    """Every repository path the bundles in a local folder own."""
    return {
        path
        for archive in bundles.rglob("*.tar.zst")
        for path in repo_paths(
            BundleId.parse(f"{archive.parent.name}/{archive.name.removesuffix('.tar.zst')}")
        )
    }


def pr_only_commits(hub: HubServer, repo_id: str, num: int) -> list[tuple[str, ...]]:
    """Files changed by each commit of a pull request that is not on main."""
    on_main = {commit.oid for commit in hub.commits(repo_id)}
    return [
        commit.files_changed
        for commit in hub.commits(repo_id, revision=f"refs/pr/{num}")
        if commit.oid not in on_main
    ]


def merge(repo_id: str, num: int) -> None:
    HfApi(token=WRITE_TOKEN).merge_pull_request(repo_id, num, repo_type="dataset")


def test_each_submitter_has_one_pr_that_reruns_extend_and_that_merge_cleanly(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    main_only = make_bundles(tmp_path / "main", [RunSpec(task="alpha", rows=2)])
    assert upload(main_only, "--repo", repo_id)[0] == 0

    # Alice proposes alpha (already on main) and beta: only beta goes into her PR.
    alice = tmp_path / "alice"
    shutil.copytree(main_only, alice)
    beta = make_bundles(tmp_path / "b", [RunSpec(task="beta", rows=2)])
    shutil.copytree(beta, alice, dirs_exist_ok=True)
    code, report, stderr = upload(alice, "--repo", repo_id, "--create-pr", token=ALICE)
    assert code == 0, stderr
    assert report["pull_request_num"] == 1
    by_task = {b["bundle_id"].split("/")[1].split("@")[0]: b for b in report["bundles"]}
    assert by_task["alpha"]["outcome"] == "already-there"
    assert by_task["alpha"]["detail"] == "already on main"
    assert by_task["beta"]["outcome"] == "proposed"
    assert f"proposed in PR #1: {report['pull_request_url']}" in stderr
    assert "@ main" not in stderr and "published" not in stderr

    # Bob's bundles go into his own PR, not Alice's.
    bob = make_bundles(tmp_path / "bob", [RunSpec(task="gamma", model="claude", rows=2)])
    code, report, stderr = upload(bob, "--repo", repo_id, "--create-pr", token=BOB)
    assert code == 0, stderr
    assert report["pull_request_num"] == 2

    # Alice adds delta to her folder and re-runs: one more commit on PR #1, nothing re-proposed.
    delta = make_bundles(tmp_path / "d", [RunSpec(task="delta", rows=2)])
    shutil.copytree(delta, alice, dirs_exist_ok=True)
    code, report, stderr = upload(alice, "--repo", repo_id, "--create-pr", token=ALICE)
    assert code == 0, stderr
    assert report["pull_request_num"] == 1 and len(report["commits"]) == 1
    by_task = {b["bundle_id"].split("/")[1].split("@")[0]: b for b in report["bundles"]}
    assert by_task["alpha"]["outcome"] == "already-there"
    assert by_task["beta"]["detail"] == "already proposed in pull request #1"
    assert by_task["delta"]["outcome"] == "proposed"

    prs = hub.pull_requests(repo_id)
    assert [(pr.num, pr.author, pr.status) for pr in prs] == [
        (1, "leaderboard-bot", "open"),
        (2, "submitter", "open"),
    ]
    assert prs[0].title == "Add 2 GPTNT statics bundle(s) from leaderboard-bot [bundler]"
    assert "beta" in prs[0].description and "delta" in prs[0].description
    assert "alpha" not in prs[0].description

    # Every PR commit touches only the paths its own bundles own: never README.md.
    alice_paths, bob_paths = bundle_paths(alice), bundle_paths(bob)
    alice_commits = pr_only_commits(hub, repo_id, 1)
    assert len(alice_commits) == 2
    for files in alice_commits:
        assert README not in files and set(files) <= alice_paths
    for files in pr_only_commits(hub, repo_id, 2):
        assert README not in files and set(files) <= bob_paths
    assert not any("alpha" in path for files in alice_commits for path in files)

    # Both merge, in either order, without conflicting with each other or with main.
    merge(repo_id, 2)
    merge(repo_id, 1)
    main = hub.list_files(repo_id)
    assert bundle_paths(alice) | bundle_paths(bob) <= set(main)


def test_nothing_new_makes_no_commit_and_no_pr(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    bundles = make_bundles(tmp_path, [RunSpec(rows=2)])
    assert upload(bundles, "--repo", repo_id)[0] == 0
    code, report, stderr = upload(bundles, "--repo", repo_id, "--create-pr", token=BOB)
    assert code == 0, stderr
    assert report["commits"] == [] and report["pull_request_num"] is None
    assert hub.pull_requests(repo_id) == []


def test_replacement_is_flagged_in_title_and_description(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    ada = make_bundles(tmp_path / "ada", [RunSpec(rows=3)], submitter={"name": "Ada"})
    assert upload(ada, "--repo", repo_id)[0] == 0
    old_sha = next(iter(_sidecars(ada).values()))
    rescored = make_bundles(
        tmp_path / "bob",
        [RunSpec(rows=3, metrics={"exact": {"acc": 0.99}})],
        submitter={"name": "Bob"},
    )
    new_sha = next(iter(_sidecars(rescored).values()))

    code, report, stderr = upload(rescored, "--repo", repo_id, "--create-pr", token=BOB)
    assert code == 1
    assert report["bundles"][0]["action"] == "conflict" and "--replace" in stderr
    assert hub.pull_requests(repo_id) == []  # nothing proposed, no pull request opened

    code, report, stderr = upload(
        rescored, "--repo", repo_id, "--create-pr", "--replace", "-m", "Re-scored run", token=BOB
    )
    assert code == 0, stderr
    (bundle,) = report["bundles"]
    assert bundle["action"] == "replace" and bundle["outcome"] == "proposed"
    assert bundle["branch_sha256"] == old_sha
    (pr,) = hub.pull_requests(repo_id)
    assert pr.title.startswith("Re-scored run")
    assert "REPLACES 1 bundle(s)" in pr.title and pr.title.endswith("[bundler]")
    assert hub.commits(repo_id, revision="refs/pr/1")[0].summary == pr.title
    description = pr.description
    assert "replaces 1 bundle(s) already published" in description
    assert old_sha in description and new_sha in description
    assert "| submitter | Ada | Bob |" in description
    assert "`submitter.name`: Ada → Bob" in description
    assert "proposes to replace 1 GPTNT statics bundle(s)" in description
    assert "| adds |" not in description and "| **replaces** |" in description


def test_replacement_added_to_an_open_pr_rewrites_its_title_and_description(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    ada = make_bundles(tmp_path / "ada", [RunSpec(task="alpha", rows=3)])
    assert upload(ada, "--repo", repo_id)[0] == 0
    folder = make_bundles(tmp_path / "bob", [RunSpec(task="beta", rows=2)])
    assert upload(folder, "--repo", repo_id, "--create-pr", token=BOB)[0] == 0
    (pr,) = hub.pull_requests(repo_id)
    assert "REPLACES" not in pr.title and "beta" in pr.description

    changed = make_bundles(
        tmp_path / "changed", [RunSpec(task="alpha", rows=3, metrics={"x": {"y": 1}})]
    )
    shutil.copytree(changed, folder, dirs_exist_ok=True)
    code, report, stderr = upload(folder, "--repo", repo_id, "--create-pr", "--replace", token=BOB)
    assert code == 0, stderr
    assert report["pull_request_num"] == 1 and report["warnings"] == []
    (pr,) = hub.pull_requests(repo_id)
    assert pr.title == (
        "Add 1 and replace 1 GPTNT statics bundle(s) (REPLACES 1 bundle(s) on the base branch) "
        "from submitter [bundler]"
    )
    assert "beta" in pr.description  # what the PR proposed before is still described
    assert "alpha@a1b2c3d4` replaces the bundle on the base branch" in pr.description


def test_dry_run_with_create_pr_plans_against_the_open_pr(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    hub.create_repo(repo_id)  # the maintainers' repository: a submitter may not create it
    first = make_bundles(tmp_path / "a", [RunSpec(task="alpha", rows=2)])
    code, report, stderr = upload(first, "--repo", repo_id, "--create-pr", "--dry-run", token=BOB)
    assert code == 0 and report["opens_pull_request"] is True  # says it would open one
    assert report["pull_request_num"] is None and hub.pull_requests(repo_id) == []
    assert f"{repo_id}, a new pull request on main (dry run" in " ".join(stderr.split())
    assert upload(first, "--repo", repo_id, "--create-pr", token=BOB)[0] == 0
    shutil.copytree(
        make_bundles(tmp_path / "b", [RunSpec(task="beta", rows=2)]), first, dirs_exist_ok=True
    )
    log = len(hub.request_log)
    code, report, _ = upload(first, "--repo", repo_id, "--create-pr", "--dry-run", token=BOB)
    assert code == 0
    assert sorted(b["action"] for b in report["bundles"]) == ["new", "unchanged"]
    assert report["pull_request_num"] == 1 and report["opens_pull_request"] is False
    assert not [r for r in hub.request_log[log:] if r.method in ("PUT",) or "/commit/" in r.path]


def test_a_submitters_dry_run_refuses_what_review_would_refuse_against_the_definitions(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A pull request's bundles are judged against the base branch's task definitions as
    review will judge them: the dry run says which would be refused, and the real upload
    proposes only the others."""
    first = make_bundles(tmp_path / "a", [RunSpec(rows=2)])
    assert upload(first, "--repo", repo_id)[0] == 0
    define_expert_vqa(repo_id)
    specs = [RunSpec(model="dev", rows=2, dataset_split="dev"), RunSpec(model="fine", rows=2)]
    bundles = make_bundles(tmp_path / "b", specs)
    for dry in (["--dry-run"], []):
        code, report, stderr = upload(bundles, "--repo", repo_id, "--create-pr", *dry, token=BOB)
        assert code == 1, stderr
        outcomes = {b["bundle_id"].split("_")[0]: b for b in report["bundles"]}
        assert outcomes["dev"]["outcome"] == "refused"
        assert "split dev, not test" in outcomes["dev"]["detail"]
        assert outcomes["fine"]["action"] == "new"
    (pr,) = hub.pull_requests(repo_id)
    files = hub.list_files(repo_id, revision=pr.ref)
    assert [p for p in files if "/fine_" in p] and not [p for p in files if "/dev_" in p]


def _sidecars(bundles: Path) -> dict[str, str]:
    return {
        path.name: json.loads(path.read_text())["archive"]["sha256"]
        for path in bundles.rglob("*.json")
    }


def test_card_command_repairs_the_card_after_web_merges(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    first = make_bundles(tmp_path / "a", [RunSpec(task="alpha", rows=2)])
    assert upload(first, "--repo", repo_id)[0] == 0
    proposal = make_bundles(tmp_path / "b", [RunSpec(task="beta", rows=2)])
    assert upload(proposal, "--repo", repo_id, "--create-pr", token=BOB)[0] == 0
    merge(repo_id, 1)  # as in the web interface: the card still says 1 bundle
    assert b"**1** submission bundle(s)" in (hub.file_bytes(repo_id, README) or b"")

    result = run_cli("card", "--repo", repo_id, "--json", env={"HF_TOKEN": ALICE})
    assert result.returncode == 0, result.stderr
    assert b"**2** submission bundle(s)" in (hub.file_bytes(repo_id, README) or b"")
    assert "regenerated the tables and card" in result.stderr


def test_a_pull_requests_ref_as_revision_is_refused_before_anything_is_sent(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A commit to a branch carries the dataset card; one into a pull request's ref would put
    the card into the pull request, which review then refuses to merge."""
    bundles = make_bundles(tmp_path, [RunSpec(rows=2)])
    hub.create_repo(repo_id)
    assert upload(bundles, "--repo", repo_id, "--create-pr")[0] == 0
    bundles = make_bundles(tmp_path / "more", [RunSpec(task="maze", rows=2)])
    before = len(hub.request_log)
    code, payload, stderr = upload(bundles, "--repo", repo_id, "--revision", "refs/pr/1")
    assert code == 2
    assert "--revision refs/pr/1" in stderr and "--create-pr" in stderr
    assert "--create-pr" in payload["hint"]
    assert len(hub.request_log) == before
    assert "README.md" not in hub.list_files(repo_id, revision="refs/pr/1")


def test_a_strangers_text_in_the_pull_request_description_is_inert(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Submitter names, claim values and warnings come from bundles; in a description a
    maintainer reads they must not become HTML, links, headings or @-mentions."""
    hostile = "<b>Eve</b> [click](https://evil.example) @admin"
    ada = make_bundles(tmp_path / "ada", [RunSpec(rows=3)], submitter={"name": "Ada"})
    assert upload(ada, "--repo", repo_id)[0] == 0
    eve = make_bundles(
        tmp_path / "eve",
        [RunSpec(rows=3, metrics={"exact": {"acc": 0.99}}, git_sha=f"{hostile} -dirty")],
        submitter={"name": hostile},
    )
    code, _, stderr = upload(eve, "--repo", repo_id, "--create-pr", "--replace", token=BOB)
    assert code == 0, stderr
    (pr,) = hub.pull_requests(repo_id)
    description = pr.description
    assert description.count("&lt;b&gt;Eve&lt;/b&gt;") >= 3  # submitter, difference, warning
    shown, _, _ = description.partition("<!-- bundler-pr-state")
    assert "@admin" not in description
    for live in ("<b>", "](https://"):
        assert live not in shown
    assert "\\[click\\]\\(https://evil\\.example\\) &#64;admin" in description
    assert "| submitter | Ada |" in description
    assert read_pr_state(description)[0].submitter == hostile  # the state keeps the raw text


def test_a_submitters_write_token_opens_its_pull_request_with_the_right_title_and_description(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A submitter (a write token without write access to the repository) opens its pull
    request and, as its author, may rename it and edit its description (the Hub lets a PR's
    author do both). One commit: the title it opened with is already right, and the
    description is edited once, to give the review command the number the Hub gave the pull
    request: two requests (reading the description's comment id, then the edit), nothing
    warned. More bundles than one commit holds: the title and the description are updated to
    count them all, without a warning."""
    hub.create_repo(repo_id)
    few = make_bundles(tmp_path / "few", [RunSpec(task="alpha", rows=2)])
    before = len(hub.request_log)
    code, report, stderr = upload(few, "--repo", repo_id, "--create-pr", token=SUBMITTER_TOKEN)
    assert code == 0, stderr
    assert report["warnings"] == []
    after_opening = [
        (r.method, r.path.rsplit("/discussions/", 1)[1])
        for r in hub.request_log[before:]
        if "/discussions/" in r.path
    ]
    comment_id = after_opening[-1][1].split("/")[2]
    assert after_opening == [("GET", "1"), ("POST", f"1/comment/{comment_id}/edit")]
    (pr,) = hub.pull_requests(repo_id)
    assert pr.title.startswith("Add 1 GPTNT") and "This pull request from" in pr.description
    command = f"bundler download --repo {repo_id} --revision refs/pr/{pr.num} -o review"
    assert f"To review: `{command}`\n" in pr.description

    many = make_bundles(
        tmp_path / "many",
        [RunSpec(task=f"task{number:02}", rows=1) for number in range(PR_BUNDLES_PER_COMMIT + 2)],
    )
    code, report, stderr = upload(many, "--repo", repo_id, "--create-pr", token=SUBMITTER_TOKEN)
    assert code == 0, stderr
    assert len(report["commits"]) == 2
    (pr,) = hub.pull_requests(repo_id)
    assert pr.title.startswith(f"Add {PR_BUNDLES_PER_COMMIT + 3} GPTNT")
    assert report["warnings"] == []
    assert "task00" in pr.description and f"task{PR_BUNDLES_PER_COMMIT + 1:02}" in pr.description


def test_a_read_token_opens_no_pull_request(hub: HubServer, repo_id: str, tmp_path: Path) -> None:
    """A read token "can only be used to provide read access" (Hub docs security-tokens): the
    bundler says so before anything is sent, nothing lands, and the token never shows."""
    hub.create_repo(repo_id)
    bundles = make_bundles(tmp_path / "few", [RunSpec(task="alpha", rows=2)])
    main_before = hub.commits(repo_id)[0].oid
    code, report, stderr = upload(bundles, "--repo", repo_id, "--create-pr", token=READ_TOKEN)
    assert code == 2 and "read" in stderr
    assert hub.pull_requests(repo_id) == []
    assert hub.commits(repo_id)[0].oid == main_before
    assert READ_TOKEN not in stderr + json.dumps(report)


def test_a_new_pull_request_whose_number_cannot_be_written_in_says_so(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """The bundles are proposed all the same; the warning says what the description lacks."""
    hub.create_repo(repo_id)
    few = make_bundles(tmp_path / "few", [RunSpec(task="alpha", rows=2)])
    hub.inject("POST", r"/discussions/\d+/comment/[0-9a-f]+/edit$", Fault.status(403), times=5)
    code, report, stderr = upload(few, "--repo", repo_id, "--create-pr", token=SUBMITTER_TOKEN)
    hub.clear_faults()
    (pr,) = hub.pull_requests(repo_id)
    assert code == 0 and "Traceback" not in stderr, (code, stderr)
    assert [b["outcome"] for b in report["bundles"]] == ["proposed"]
    (warning,) = report["warnings"]
    assert warning.startswith(
        f"pull request #{pr.num}: its description could not be updated, so its review command "
        f"says refs/pr/N for refs/pr/{pr.num} ("
    ), warning
    assert f"--repo {repo_id} --revision refs/pr/N -o review`" in pr.description
