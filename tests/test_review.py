"""`bundler review` end to end: submitters open pull requests with their own tokens through
the real client, and a maintainer reviews, comments and merges with the installed CLI, all
against the local Hub server. Hostile pull requests are forged as an attacker would: bundles
consistently re-hashed, names no file system holds, an attacker's dataset, another split of the
pinned one, the task definitions themselves, a push between review and merge."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from conftest import OTHER_SUBMITTER_TOKEN, READ_TOKEN, SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec, write_tree
from helpers import (
    forge,
    one_line_error,
    published_leaderboard,
    refresh_manifest,
    run_cli,
    sidecar_path,
    with_data,
)
from hubserver import Fault, HubServer
from huggingface_hub import CommitOperationAdd, HfApi
from pydantic import SecretStr
from test_upload import publish

from bundler.core.progress import NoProgress
from bundler.core.waiting import RETRY_WAITS
from bundler.hub.publish.plan import LocalBundle
from bundler.hub.publish.upload import gather_local
from bundler.hub.repo.markdown import markdown_code, markdown_text
from bundler.hub.repo.paths import (
    TASKS_FILE,
    bundle_of_path,
    repo_archive,
    repo_folder,
    repo_paths,
    repo_sidecar,
)
from bundler.hub.review import act as review_act
from bundler.hub.review.act import report_digest
from bundler.hub.review.round import ReviewOptions
from bundler.hub.review.round import review as review_in_process
from bundler.local.collect import CollectOptions, collect
from bundler.local.layout import BundleId
from bundler.local.submitter import Submitter

SPLIT_ROWS = {"test": 4, "validation": 6, "dev": 3}
TASK = "expert-vqa"


@dataclass
class World:
    """A leaderboard repository with one bundle on main, and a pinned dataset whose card gives
    each split's row count (what `collect --resolve-rows` and `review` read)."""

    hub: HubServer
    repo_id: str
    dataset: str
    sha: str
    tmp: Path

    def spec(self, **fields: Any) -> RunSpec:
        pinned = {"hf_repo_id": self.dataset, "resolved_revision": self.sha, "rows": 4}
        return RunSpec(**(pinned | fields))

    def bundles(
        self,
        name: str,
        specs: list[RunSpec],
        *,
        submitter: str | None = "Ada Lovelace",
        expected: dict[str, int] | None = None,
        allow_partial: bool = False,
    ) -> Path:
        root = self.tmp / name
        write_tree(root / "output", specs, how_do_you=False)
        options = CollectOptions(
            expected_rows=expected if expected is not None else {s.task: s.rows for s in specs},
            submitter=Submitter(name=submitter),
            allow_partial=allow_partial,
        )
        report = collect(root / "output", root / "bundles", options)
        assert not report.refused, report.refused
        return root / "bundles"


@pytest.fixture
def world(hub: HubServer, repo_id: str, tmp_path: Path) -> World:
    return make_world(hub, repo_id, tmp_path)


def make_world(hub: HubServer, repo_id: str, tmp_path: Path) -> World:
    """A World of its own: the pinned dataset, one bundle on main, its task defined."""
    dataset = f"GPTNT/statics-{uuid.uuid4().hex[:8]}"
    splits = "".join(
        f"  - name: {name}\n    num_examples: {rows}\n" for name, rows in SPLIT_ROWS.items()
    )
    card = f"---\ndataset_info:\n  splits:\n{splits}---\n# statics\n"
    hub.create_repo(dataset, files={"README.md": card.encode()})
    world = World(hub, repo_id, dataset, hub.commits(dataset)[0].oid, tmp_path)
    hub.create_repo(repo_id)  # a name of its own, or the fixture's repository made again
    publish(world.bundles("main", [world.spec(model="gpt-5.2", rows=4)]), repo_id)
    define(world, TASK, dataset, "test")
    return world


def define(world: World, task: str, dataset: str, split: str, *more: str) -> None:
    """The maintainers define `task` (ranked by exact_match.accuracy) with the command."""
    defined = run_cli(
        "tasks", "define", task, "--repo", world.repo_id, "--dataset", dataset,
        "--split", split, "--metric", "exact_match.accuracy", *more,
        env={"HF_TOKEN": WRITE_TOKEN},
    )  # fmt: skip
    assert defined.returncode == 0, defined.stderr


def local(bundles: Path) -> list[LocalBundle]:
    """The folder's bundles as upload gathers them."""
    found, refused = gather_local(bundles, allow_partial=True, progress=NoProgress())
    assert not refused, refused
    return found


def propose(
    world: World,
    token: str,
    bundles: Path,
    *,
    title: str = "Add my bundles",
    extra: dict[str, bytes] | None = None,
    tamper: Callable[[LocalBundle], dict[str, bytes]] | None = None,
) -> int:
    """Open a PR with exactly the files each bundle owns (archive, sidecar), as a submitter's
    upload does, plus `extra` files; `tamper` may replace some of a bundle's files."""
    operations = []
    for bundle in local(bundles):
        files: dict[str, bytes | Path] = dict(bundle.repo_files())
        files.update(tamper(bundle) if tamper else {})
        operations += [CommitOperationAdd(path, data) for path, data in files.items()]
    operations += [CommitOperationAdd(path, data) for path, data in (extra or {}).items()]
    info = HfApi(token=token).create_commit(
        world.repo_id, operations, commit_message=title, repo_type="dataset", create_pr=True
    )
    assert info.pr_num is not None
    return info.pr_num


def review(
    world: World, *args: object, token: str | None = None, tmpdir: Path | None = None
) -> tuple[int, dict[str, Any], str]:
    env = {"HF_TOKEN": token or ""}
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    result = run_cli("review", "--repo", world.repo_id, *args, "--json", env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout), result.stderr


def by_num(report: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {pr["num"]: pr for pr in report["pull_requests"]}


def checks(item: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in item["checks"]}


def comments(world: World, num: int) -> list[str]:
    details = HfApi(token=WRITE_TOKEN).get_discussion_details(
        world.repo_id, num, repo_type="dataset"
    )
    return [event.content for event in details.events if event.type == "comment"]  # type: ignore[attr-defined]


def player_of(path: str) -> str | None:
    """The player slug of the bundle whose file `path` is; None for any other path."""
    bundle = bundle_of_path(path)
    return None if bundle is None else bundle.player_dir.rpartition("_")[0]


def downloaded_paths(world: World) -> set[str]:
    """The bundle files downloaded from the leaderboard repository."""
    return {path for path in _downloaded(world) if path.startswith("bundles/")}


def _downloaded(world: World) -> set[str]:
    return {
        unquote(r.path.split("/resolve/", 1)[1].split("/", 1)[1])
        for r in world.hub.request_log
        if r.method == "GET" and f"{world.repo_id}/resolve/" in r.path
    }


# -------------------------------------------------------------------------------- tests


def test_two_submitters_reviewed_commented_once_and_the_clean_one_merged(world: World) -> None:
    hub, repo_id = world.hub, world.repo_id
    first = world.bundles("first", [world.spec(model="claude-opus", rows=4)])
    second = world.bundles(
        "second",
        [world.spec(model="qwen-3", rows=4, git_sha="0123456789abcdef-dirty")],
        submitter="Grace <script>alert(1)</script> @maintainer",
    )
    hostile = "Add [bundles](http://evil.example) | <img src=x onerror=alert(1)> @maintainer\x1b[2J"
    assert propose(world, SUBMITTER_TOKEN, first, title="Add claude-opus") == 1
    assert propose(world, OTHER_SUBMITTER_TOKEN, second, title=hostile) == 2
    main_before = hub.commits(repo_id)[0].oid
    hub.request_log.clear()

    # Reading needs no token at all.
    code, report, stderr = review(world)
    assert code == 1, stderr
    prs = by_num(report)
    assert prs[1]["clean"] is True and prs[1]["author"] == "submitter"
    assert prs[2]["clean"] is False and prs[2]["author"] == "second-submitter"
    (added,) = prs[1]["bundles"]
    assert added["classification"] == "new" and added["bundle_id"].startswith("claude-opus_")
    assert {check["status"] for check in added["checks"]} == {"passed"}
    (dirty,) = prs[2]["bundles"]
    assert checks(dirty)["harness"]["status"] == "warned"
    assert "uncommitted changes" in checks(dirty)["harness"]["detail"]
    # Only the two proposed bundles were fetched; the one on main was not.
    fetched = downloaded_paths(world)
    assert {player_of(path) for path in fetched} == {"claude-opus", "qwen-3"}
    assert "PR #1 'Add claude-opus' by submitter: clean (1 new)" in stderr
    shown = hostile.replace("\x1b", "\\x1b")  # an escape sequence is shown, not obeyed
    assert f"PR #2 '{shown}' by second-submitter: needs a maintainer" in stderr
    assert "\x1b" not in stderr and "1 of 2 pull request(s) clean" in stderr

    # The Markdown report (stdout without --json) escapes what strangers wrote.
    markdown = run_cli("review", "--repo", repo_id, "--pr", "2", env={"HF_TOKEN": ""}).stdout
    assert "## statics-bundler review of PR #2: needs a maintainer" in markdown
    for raw in ("<img", "<script>", "@maintainer", "](http://evil", "| <", "\x1b"):
        assert raw not in markdown
    assert "&lt;img" in markdown and "&#64;maintainer" in markdown

    # --comment posts each report once; an unchanged PR gets nothing new.
    code, report, stderr = review(world, "--comment", token=WRITE_TOKEN)
    assert [pr["comment"] for pr in report["pull_requests"]] == ["posted", "posted"]
    assert len(comments(world, 1)) == 2 and len(comments(world, 2)) == 2
    assert f"sha256:{by_num(report)[1]['digest']}" in comments(world, 1)[-1]
    code, report, stderr = review(world, "--comment", token=WRITE_TOKEN)
    assert [pr["comment"] for pr in report["pull_requests"]] == ["already-posted"] * 2
    assert len(comments(world, 1)) == 2 and len(comments(world, 2)) == 2
    assert hub.commits(repo_id)[0].oid == main_before  # reviewing changes nothing on main

    # --merge merges the clean PR only: one commit of its reviewed files, the tables and card.
    code, report, stderr = review(world, "--merge", token=WRITE_TOKEN)
    assert code == 1, stderr
    prs = by_num(report)
    assert (prs[1]["merge"], prs[2]["merge"]) == ("merged", "refused")
    assert prs[2]["merge_detail"].startswith("not every check passed")
    records = {pr.num: pr for pr in hub.pull_requests(repo_id)}
    assert (records[1].status, records[2].status) == ("closed", "open")
    merge_commit = hub.commits(repo_id)[0]
    assert prs[1]["merge_commit"] == merge_commit.oid
    changed = set(merge_commit.files_changed)
    assert {path.split("/")[0] for path in changed} == {"bundles", "leaderboard", "README.md"}
    assert {path for path in changed if path.startswith("bundles/")} == {
        path for path in hub.list_files(repo_id) if player_of(path) == "claude-opus"
    }
    assert merge_commit.oid[:12] in comments(world, 1)[-1]  # the closing comment links it
    table = published_leaderboard(hub, repo_id)
    assert len(table) == 2
    (merged_row,) = [row for row in table.rows() if row.bundle_id.startswith("claude-opus_")]
    assert merged_row.published_at  # stamped at the merge
    card = hub.file_bytes(repo_id, "README.md") or b""
    assert b"**2** submission bundle(s)" in card
    assert any(player_of(path) == "claude-opus" for path in hub.list_files(repo_id))
    assert not any(player_of(path) == "qwen-3" for path in hub.list_files(repo_id))


def test_policy_checks_flag_each_problem(world: World) -> None:
    flagged = world.bundles(
        "flagged",
        [
            world.spec(task="unpinned", model="m-unpinned", rows=4, resolved_revision=None),
            world.spec(task="partial", model="m-partial", rows=2),
            world.spec(task="short", model="m-short", rows=2),
            world.spec(task="raised", model="m-raised", rows=6, dataset_split="validation"),
            world.spec(task="unknown", model="m-unknown", rows=4),
        ],
        expected={"unpinned": 4, "partial": 4, "short": 2, "raised": 6},
        allow_partial=True,
    )
    anonymous = world.bundles("anonymous", [world.spec(model="m-anonymous")], submitter=None)
    propose(world, SUBMITTER_TOKEN, flagged)
    propose(world, OTHER_SUBMITTER_TOKEN, anonymous)
    code, report, _ = review(world)
    assert code == 1
    found = {
        bundle["bundle_id"].split("_")[0]: checks(bundle)
        for pr in report["pull_requests"]
        for bundle in pr["bundles"]
    }
    assert found["m-unpinned"]["pin"]["status"] == "warned"
    assert "unpinned" in found["m-unpinned"]["dataset-rows"]["detail"]
    assert found["m-partial"]["coverage"]["detail"] == "partial: 2 of 4 rows"
    assert found["m-partial"]["dataset-rows"]["status"] == "warned"
    # `--expect short=2` made a 2-row run "complete"; the dataset split has 4 rows.
    assert found["m-short"]["coverage"]["status"] == "passed"
    short = found["m-short"]["dataset-rows"]
    assert short["status"] == "failed" and short["detail"].endswith("split test has 4")
    assert found["m-raised"]["dataset-rows"]["status"] == "passed"
    assert found["m-raised"]["exceptions"]["status"] == "failed"
    assert "1 of 6 predictions raised (16.7%)" in found["m-raised"]["exceptions"]["detail"]
    assert found["m-unknown"]["coverage"]["status"] == "warned"
    assert found["m-anonymous"]["submitter"] == {
        "name": "submitter",
        "status": "warned",
        "detail": "no submitter name",
        "hint": "collect with --submitter-name",
        "remedy": "name-submitter",
    }
    _, relaxed, _ = review(world, "--max-exception-rate", "0.2")
    raised = next(
        b for pr in relaxed["pull_requests"] for b in pr["bundles"] if "m-raised" in b["bundle_id"]
    )
    assert checks(raised)["exceptions"]["status"] == "passed"


def _usage_forgery(bundle: LocalBundle) -> dict[str, bytes]:
    """A prediction's usage changed, the manifest and the sidecar re-hashed to match."""

    def change(members: list[Any]) -> list[Any]:
        index = next(i for i, m in enumerate(members) if m.name.startswith("predictions/"))
        record = json.loads(members[index].data)
        record["usage"]["input_tokens"] += 1
        members[index] = with_data(members[index], json.dumps(record).encode())
        return refresh_manifest(members)

    forge(bundle.archive, change)
    return {repo_sidecar(bundle.key): sidecar_path(bundle.archive).read_bytes()}


def _corruption(bundle: LocalBundle) -> dict[str, bytes]:
    data = bytearray(bundle.archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    return {repo_archive(bundle.key): bytes(data)}


@pytest.mark.parametrize(
    ("tamper", "check", "words"),
    [
        (_usage_forgery, "verification", "predictions"),
        (_corruption, "verification", "archive-digest"),
    ],
    ids=["re-hashed-sidecar", "corrupted-archive"],
)
def test_tampered_bundle_is_reported_and_never_merged(
    world: World,
    tmp_path: Path,
    tamper: Callable[[LocalBundle], dict[str, bytes]],
    check: str,
    words: str,
) -> None:
    bundles = world.bundles("tampered", [world.spec(model="forger")])
    propose(world, SUBMITTER_TOKEN, bundles, tamper=tamper)
    main_before = world.hub.commits(world.repo_id)[0].oid
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    code, report, stderr = review(world, "--merge", token=WRITE_TOKEN, tmpdir=scratch)
    assert code == 1, stderr
    (pr,) = report["pull_requests"]
    (bundle,) = pr["bundles"]
    assert checks(bundle)[check]["status"] == "failed"
    assert words in checks(bundle)[check]["detail"]
    assert pr["merge"] == "refused"
    assert world.hub.commits(world.repo_id)[0].oid == main_before
    assert world.hub.pull_requests(world.repo_id)[0].status == "open"
    assert list(scratch.iterdir()) == []  # nothing fetched is left behind


def test_pr_touching_the_card_or_other_files_is_flagged(world: World) -> None:
    bundles = world.bundles("readme", [world.spec(model="card-writer")])
    propose(world, SUBMITTER_TOKEN, bundles, extra={"README.md": b"# mine\n", "notes.txt": b"hi"})
    world.hub.request_log.clear()
    code, report, _ = review(world, "--merge", token=WRITE_TOKEN)
    assert code == 1
    (pr,) = report["pull_requests"]
    layout = checks(pr)["layout"]
    assert layout["status"] == "failed"
    assert "README.md, notes.txt" in layout["detail"]
    assert pr["bundles"] == [] and downloaded_paths(world) == set()  # judged undownloaded
    assert pr["merge"] == "refused"
    assert world.hub.file_bytes(world.repo_id, "notes.txt") is None


def test_conflicting_pr_is_refused_and_a_replacement_shows_its_diff(world: World) -> None:
    hub, repo_id = world.hub, world.repo_id
    mine = world.bundles("mine", [world.spec(model="twin", rows=4)], submitter="Ada")
    theirs = world.bundles(
        "theirs",
        [world.spec(model="twin", rows=4, metrics={"exact_match": {"accuracy": 0.9}})],
        submitter="Grace",
    )
    assert propose(world, SUBMITTER_TOKEN, mine) == 1
    assert propose(world, OTHER_SUBMITTER_TOKEN, theirs) == 2
    code, report, stderr = review(world, "--merge", token=WRITE_TOKEN)
    assert code == 1, stderr
    prs = by_num(report)
    assert prs[1]["merge"] == "merged"
    # Reviewed after #1 was merged: the same bundle, other content, changed on both sides.
    conflicts = checks(prs[2])["conflicts"]
    assert conflicts["status"] == "failed"
    assert all(path in conflicts["detail"] for path in repo_paths(local(mine)[0].key))
    (replaced,) = prs[2]["bundles"]
    assert replaced["classification"] == "replacement"
    replacement = checks(replaced)["replacement"]
    assert replacement["status"] == "warned" and "submitter Ada → Grace" in replacement["detail"]
    fields = {change["field"] for change in replaced["diff"]["claims"]}
    assert "submitter.name" in fields
    (delta,) = [m for m in replaced["diff"]["metrics"] if m["name"] == "exact_match.accuracy"]
    assert delta["delta"] == pytest.approx(0.9 - 0.62)
    assert prs[2]["merge"] == "refused"
    assert hub.pull_requests(repo_id)[1].status == "open"
    on_main = hub.file_bytes(repo_id, repo_archive(local(mine)[0].key))
    assert on_main == local(mine)[0].archive.read_bytes()
    markdown = run_cli("review", "--repo", repo_id, "--pr", "2", env={"HF_TOKEN": ""}).stdout
    assert "Compared with the copy on `main`" in markdown
    assert "| metric `exact_match.accuracy` | `0.62` | `0.9` (+0.28) |" in markdown


def test_bundle_already_on_main_is_unchanged(world: World) -> None:
    bundles = world.bundles("same", [world.spec(model="both-ways")])
    propose(world, SUBMITTER_TOKEN, bundles)
    # The maintainer publishes the very same bundle to main meanwhile: same archive, same
    # sidecar (no row in a PR any more), so nothing conflicts.
    upload = run_cli("upload", bundles, "--repo", world.repo_id, env={"HF_TOKEN": WRITE_TOKEN})
    assert upload.returncode == 0, upload.stderr
    code, report, stderr = review(world)
    (pr,) = report["pull_requests"]
    assert pr["bundles"][0]["classification"] == "unchanged"
    assert checks(pr)["conflicts"]["status"] == "passed"
    assert code == 0 and pr["clean"] is True, stderr


def test_pr_rewriting_the_sidecar_of_a_bundle_it_does_not_change_is_refused(world: World) -> None:
    hub, repo_id = world.hub, world.repo_id
    (sidecar,) = [
        p for p in hub.list_files(repo_id) if p.startswith("bundles/") and p.endswith(".json")
    ]
    on_main = hub.file_bytes(repo_id, sidecar) or b""
    mine = world.bundles("mallory", [world.spec(model="mallory")], submitter="Mallory")
    assert propose(world, OTHER_SUBMITTER_TOKEN, mine) == 1
    # Mallory then pushes to her PR another sidecar for Ada's bundle on main (its archive left
    # as it is): the tables are derived from sidecars.
    forged = on_main.replace(b"Ada Lovelace", b"Mallory")
    HfApi(token=OTHER_SUBMITTER_TOKEN).create_commit(
        repo_id,
        [CommitOperationAdd(sidecar, forged)],
        commit_message="tweak",
        repo_type="dataset",
        revision="refs/pr/1",
    )
    main_before = hub.commits(repo_id)[0].oid
    code, report, stderr = review(world, "--merge", token=WRITE_TOKEN)
    assert code == 1, stderr
    (pr,) = report["pull_requests"]
    layout = checks(pr)["layout"]
    assert layout["status"] == "failed"
    assert sidecar.removesuffix(".json") + ".tar.zst" in layout["detail"]
    assert pr["bundles"] == []  # judged on its listing: nothing downloaded
    assert pr["merge"] == "refused"
    assert hub.commits(repo_id)[0].oid == main_before
    assert hub.file_bytes(repo_id, sidecar) == on_main


def test_pr_that_moves_during_review_is_not_merged(world: World) -> None:
    propose(world, SUBMITTER_TOKEN, world.bundles("moving", [world.spec(model="mover")]))
    main_before = world.hub.commits(world.repo_id)[0].oid
    # The submitter pushes to the PR after it was reviewed, just before the merge.
    world.hub.inject("GET", r"/revision/refs%2Fpr%2F1$", Fault.RACE, after=1)
    code, report, _ = review(world, "--merge", token=WRITE_TOKEN)
    assert code == 1
    (pr,) = report["pull_requests"]
    assert pr["clean"] is True
    assert (pr["merge"], pr["merge_detail"]) == (
        "refused",
        "the PR changed while it was reviewed",
    )
    assert world.hub.commits(world.repo_id)[0].oid == main_before


def test_a_failure_on_one_pr_does_not_stop_the_rest(world: World) -> None:
    hub, repo_id = world.hub, world.repo_id
    propose(world, SUBMITTER_TOKEN, world.bundles("unlucky", [world.spec(model="unlucky")]))
    propose(world, OTHER_SUBMITTER_TOKEN, world.bundles("refused", [world.spec(model="refused")]))
    propose(world, OTHER_SUBMITTER_TOKEN, world.bundles("lucky", [world.spec(model="lucky")]))
    unlucky_head = hub.pull_requests(repo_id)[0].head_oid
    hub.inject("HEAD", rf"/resolve/{unlucky_head}/bundles/", Fault.status(400))
    hub.inject("GET", rf"/resolve/{unlucky_head}/bundles/", Fault.status(400))
    hub.inject("POST", r"/discussions/2/comment$", Fault.status(403))  # a refused comment
    code, report, stderr = review(world, "--merge", "--comment", token=WRITE_TOKEN)
    assert code == 1, stderr
    first, second, third = report["pull_requests"]
    assert (first["reviewed"], first["clean"], first["merge"]) == (False, False, "not-asked")
    assert checks(first)["review"]["detail"].startswith("could not be reviewed:")
    assert len(comments(world, 1)) == 1  # nothing posted on the PR that was not reviewed
    assert (second["reviewed"], second["merge"]) == (False, "not-asked")
    assert "commenting on PR #2" in checks(second)["review"]["detail"]
    assert hub.pull_requests(repo_id)[1].status == "open"
    assert (third["reviewed"], third["merge"], third["comment"]) == (True, "merged", "posted")
    assert hub.pull_requests(repo_id)[2].status == "closed"


def test_a_bug_on_one_pr_is_that_prs_alone(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    propose(world, SUBMITTER_TOKEN, world.bundles("buggy", [world.spec(model="buggy")]))
    propose(world, OTHER_SUBMITTER_TOKEN, world.bundles("fine", [world.spec(model="fine")]))
    real = review_act._reviewed_files
    calls = iter([MemoryError("no room"), None])

    def flaky(gathered: Any) -> Any:
        error = next(calls)
        if error is not None:
            raise error
        return real(gathered)

    monkeypatch.setattr(review_act, "_reviewed_files", flaky)
    options = ReviewOptions(repo_id=world.repo_id, merge=True, token=SecretStr(WRITE_TOKEN))
    report = review_in_process(options)
    first, second = report.pull_requests
    assert not first.reviewed and "MemoryError: no room" in first.checks[-1].detail
    assert (second.reviewed, second.merge) == (True, "merged")
    assert report.exit_code == 1


def test_a_hub_down_for_the_whole_review_asks_for_a_retry(world: World) -> None:
    propose(world, SUBMITTER_TOKEN, world.bundles("later", [world.spec(model="later")]))
    # Every attempt at reading the PR's head fails (the bundler retries 4 times).
    world.hub.inject("GET", r"/revision/refs%2Fpr%2F1$", Fault.status(503), times=4)
    code, report, stderr = review(world)
    assert code == 75, stderr  # EX_TEMPFAIL: the same command will get past it later
    (pr,) = report["pull_requests"]
    assert pr["reviewed"] is False and "HTTP 503" in checks(pr)["review"]["detail"]
    assert list(RETRY_WAITS.waited) == [0.5, 1.0, 2.0]  # backed off, each wait twice the last


@pytest.mark.parametrize("flag", ["--merge", "--comment"])
@pytest.mark.parametrize(
    ("token", "problem"), [(None, "no token was given"), (READ_TOKEN, "this token is read-only")]
)
def test_comment_and_merge_need_a_write_token(
    world: World, flag: str, token: str | None, problem: str
) -> None:
    propose(world, SUBMITTER_TOKEN, world.bundles("pr", [world.spec(model="waiting")]))
    main_before = world.hub.commits(world.repo_id)[0].oid
    result = run_cli("review", "--repo", world.repo_id, flag, env={"HF_TOKEN": token or ""})
    assert result.returncode == 2
    assert one_line_error(result.stderr) == f"error: {flag} needs a write token: {problem}"
    assert result.stdout == ""
    assert world.hub.commits(world.repo_id)[0].oid == main_before
    assert len(comments(world, 1)) == 1  # only the PR's own description
    if token is not None:
        assert READ_TOKEN not in result.stderr + result.stdout


def test_unknown_pr_and_repository_are_unusable(world: World) -> None:
    result = run_cli("review", "--repo", world.repo_id, "--pr", "7", env={"HF_TOKEN": ""})
    assert result.returncode == 2
    assert one_line_error(result.stderr).endswith(f"{world.repo_id} has no pull request #7")
    missing = run_cli("review", "--repo", "gptnt/no-such-repo", env={"HF_TOKEN": ""})
    assert missing.returncode == 2
    assert "gptnt/no-such-repo was not found" in one_line_error(missing.stderr)
    none_open = run_cli("review", "--repo", world.repo_id, "--json", env={"HF_TOKEN": ""})
    assert none_open.returncode == 0
    assert json.loads(none_open.stdout)["pull_requests"] == []


def test_markdown_escaping_leaves_strangers_text_inert() -> None:
    text = markdown_text("a\n\n# Title <b>x</b> [l](u) *e* `c` | p @who &amp;\x1b")
    assert "\n" not in text
    assert text == (
        "a \\# Title &lt;b&gt;x&lt;/b&gt; \\[l\\]\\(u\\) \\*e\\* \\`c\\` \\| p &#64;who &amp;amp;"
    )
    assert markdown_code("id") == "`id`"
    assert markdown_code("a`b|c") == "``a`b|c``"  # a code span shows its text as it is
    assert markdown_code("a`b|c", cell=True) == "``a`b\\|c``"  # the table's own escape
    assert markdown_code("`x`") == "`` `x` ``"
    with pytest.raises(ValueError, match="one line"):
        markdown_code("a\x1b[2J\n b")  # refused, never silently changed


# ------------------------------------------------------------------------ hostile PRs


def test_names_no_file_system_holds_fail_layout_before_any_download(
    world: World, tmp_path: Path
) -> None:
    bundles = world.bundles("long", [world.spec(model="long-names")])
    folder = repo_folder(BundleId("evil_0123abcd", TASK, "unpinned"))
    long_name = f"{folder}/{'x' * 250}@unpinned.tar.zst"
    odd = f"{folder}/ma\u202eze@unpinned.json"
    propose(world, SUBMITTER_TOKEN, bundles, extra={long_name: b"x" * 10, odd: b"{}"})
    world.hub.request_log.clear()
    code, report, stderr = review(world, "--merge", token=WRITE_TOKEN)
    assert code == 1, stderr
    (pr,) = report["pull_requests"]
    layout = checks(pr)["layout"]
    assert layout["status"] == "failed" and "no bundle's file" in layout["detail"]
    assert long_name in layout["detail"]
    assert pr["reviewed"] is True and pr["bundles"] == [] and pr["merge"] == "refused"
    assert downloaded_paths(world) == set()
    # download of that PR neither crashes nor writes the name it cannot hold.
    fetched = run_cli(
        "download", "--repo", world.repo_id, "--revision", "refs/pr/1", "-o", tmp_path / "out",
        env={"HF_TOKEN": ""},
    )  # fmt: skip
    assert "Traceback" not in fetched.stderr and fetched.returncode in (0, 1), fetched.stderr
    assert "not a bundle layout" in fetched.stderr
    written = [p.name for p in (tmp_path / "out").rglob("*")]
    assert not any(len(name) > 255 for name in written)


def test_more_bundles_than_the_cap_are_judged_without_download(world: World) -> None:
    specs = [world.spec(model=f"many-{i}") for i in range(3)]
    propose(world, SUBMITTER_TOKEN, world.bundles("many", specs))
    world.hub.request_log.clear()
    code, report, _ = review(world, "--max-bundles", "2")
    (pr,) = report["pull_requests"]
    assert code == 1
    assert "proposes 3 bundles, more than the 2 allowed" in checks(pr)["layout"]["detail"]
    assert pr["bundles"] == [] and downloaded_paths(world) == set()


def test_an_archive_larger_than_its_sidecar_says_is_not_downloaded(world: World) -> None:
    bundles = world.bundles("sized", [world.spec(model="sized")])

    def lie(bundle: LocalBundle) -> dict[str, bytes]:
        sidecar = json.loads(bundle.sidecar_data)
        sidecar["archive"]["size"] = 100  # the real archive is larger
        return {repo_sidecar(bundle.key): json.dumps(sidecar).encode()}

    propose(world, SUBMITTER_TOKEN, bundles, tamper=lie)
    world.hub.request_log.clear()
    code, report, _ = review(world)
    (pr,) = report["pull_requests"]
    (bundle,) = pr["bundles"]
    assert code == 1 and checks(bundle)["size"]["status"] == "failed"
    assert "its sidecar says 100" in checks(bundle)["size"]["detail"]
    assert {p.endswith(".json") for p in downloaded_paths(world)} == {True}  # only the sidecar


def test_a_bundle_naming_another_dataset_fails_task_and_gets_no_token(world: World) -> None:
    hub = world.hub
    # A private dataset of the maintainers' organisation, with a card giving its row counts:
    # only the maintainer's token can read it.
    private = f"gptnt/private-{uuid.uuid4().hex[:8]}"
    card = "---\ndataset_info:\n  splits:\n  - name: test\n    num_examples: 4\n---\n"
    hub.create_repo(private, private=True, files={"README.md": card.encode()})
    sha = hub.commits(private)[0].oid
    specs = [
        world.spec(model="elsewhere", hf_repo_id=private, resolved_revision=sha),
        world.spec(task="undefined", model="elsewhere", hf_repo_id=private, resolved_revision=sha),
    ]
    propose(
        world,
        SUBMITTER_TOKEN,
        world.bundles("elsewhere", specs, expected={TASK: 4, "undefined": 4}),
    )
    hub.request_log.clear()
    code, report, _ = review(world, "--merge", token=WRITE_TOKEN)
    (pr,) = report["pull_requests"]
    found = {
        bundle["bundle_id"].split("@")[0].split("/")[1]: checks(bundle) for bundle in pr["bundles"]
    }
    assert code == 1 and pr["merge"] == "refused"
    task = found[TASK]["task"]
    assert (
        task["status"] == "failed" and f"dataset {private}, not {world.dataset}" in task["detail"]
    )
    undefined = found["undefined"]
    assert undefined["task"]["status"] == "warned"
    # Looked up without the maintainer's token: the private dataset's count stays unknown.
    assert undefined["dataset-rows"]["status"] == "warned"
    assert "row count not resolved" in undefined["dataset-rows"]["detail"]
    # Once the maintainers define that task on their dataset, its count is read with the token.
    define(world, "undefined", private, "test")
    _, report, _ = review(world, token=WRITE_TOKEN)
    (pr,) = report["pull_requests"]
    (defined,) = [b for b in pr["bundles"] if "/undefined@" in b["bundle_id"]]
    assert checks(defined)["task"]["status"] == "passed"
    assert checks(defined)["dataset-rows"]["detail"].startswith("all 4 rows of")


def test_a_complete_run_on_a_dev_split_of_the_pinned_dataset_fails_task(world: World) -> None:
    bundles = world.bundles("dev", [world.spec(model="dev-split", rows=3, dataset_split="dev")])
    propose(world, SUBMITTER_TOKEN, bundles)
    code, report, _ = review(world, "--merge", token=WRITE_TOKEN)
    (pr,) = report["pull_requests"]
    (bundle,) = pr["bundles"]
    assert code == 1 and pr["merge"] == "refused"
    assert bundle["coverage"] == "complete"  # 3 of 3: the dev split is whole
    task = checks(bundle)["task"]
    assert task["status"] == "failed" and "split dev, not test" in task["detail"]


def test_a_pr_rewriting_the_task_definitions_fails_layout(world: World) -> None:
    on_main = world.hub.file_bytes(world.repo_id, TASKS_FILE)
    assert on_main is not None and b'"split": "test"' in on_main
    bundles = world.bundles(
        "redefine", [world.spec(model="redefiner", rows=3, dataset_split="dev")]
    )
    forged = on_main.replace(b'"split": "test"', b'"split": "dev"')
    propose(world, SUBMITTER_TOKEN, bundles, extra={TASKS_FILE: forged})
    code, report, _ = review(world, "--merge", token=WRITE_TOKEN)
    (pr,) = report["pull_requests"]
    assert code == 1 and pr["merge"] == "refused" and pr["bundles"] == []
    assert "task definitions" in checks(pr)["layout"]["detail"]
    assert world.hub.file_bytes(world.repo_id, TASKS_FILE) == on_main


def test_what_is_merged_is_what_was_reviewed(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The submitter pushes another archive (consistently re-hashed) to the PR after the merge
    checked its head, before the merge commit: the commit carries the reviewed bytes."""
    hub, repo_id = world.hub, world.repo_id
    bundles = world.bundles("honest", [world.spec(model="switcher")])
    (bundle,) = local(bundles)
    reviewed = bundle.archive.read_bytes()
    propose(world, SUBMITTER_TOKEN, bundles)
    forged = world.bundles(
        "forged", [world.spec(model="switcher", metrics={"exact_match": {"accuracy": 1.0}})]
    )
    (other,) = local(forged)
    assert other.key == bundle.key and other.archive.read_bytes() != reviewed
    real = review_act.read_branch

    def pushed_first(*args: Any, **kwargs: Any) -> Any:
        HfApi(token=SUBMITTER_TOKEN).create_commit(
            repo_id,
            [CommitOperationAdd(p, d) for p, d in other.repo_files().items()],
            commit_message="switch",
            repo_type="dataset",
            revision="refs/pr/1",
        )
        return real(*args, **kwargs)

    monkeypatch.setattr(review_act, "read_branch", pushed_first)
    options = ReviewOptions(repo_id=repo_id, merge=True, token=SecretStr(WRITE_TOKEN))
    (pr,) = review_in_process(options).pull_requests
    assert pr.merge == "merged", pr.merge_detail
    assert hub.file_bytes(repo_id, repo_archive(bundle.key)) == reviewed
    assert hub.file_bytes(repo_id, repo_sidecar(bundle.key)) == bundle.sidecar_data


def test_a_concurrent_commit_to_main_makes_the_merge_plan_again(world: World) -> None:
    hub, repo_id = world.hub, world.repo_id
    propose(world, SUBMITTER_TOKEN, world.bundles("raced", [world.spec(model="raced")]))
    hub.inject("POST", rf"{repo_id}/commit/main$", Fault.RACE)
    code, report, stderr = review(world, "--merge", token=WRITE_TOKEN)
    (pr,) = report["pull_requests"]
    assert code == 0 and pr["merge"] == "merged", stderr
    assert ".race/1" in hub.list_files(repo_id)  # someone else's commit, kept
    table = published_leaderboard(hub, repo_id)
    assert any(row.bundle_id.startswith("raced_") for row in table.rows())
    assert hub.commits(repo_id)[0].oid == pr["merge_commit"]


def test_only_the_last_line_of_a_comment_is_its_digest() -> None:
    real, spoof = "b" * 64, "a" * 64
    marker = f"<!-- bundler-review sha256:{spoof} -->"
    # A metric name holding a marker, shown in a code span of the report.
    report = f"| metric {markdown_code(marker)} | `1` |\n\n<!-- bundler-review sha256:{real} -->\n"
    assert report_digest(report) == real
    assert report_digest(f"a metric {markdown_code(marker)}") is None
    assert report_digest(f"text\n{marker} and more") is None


def test_a_maintainer_merges_past_the_warnings_they_accept_never_past_a_failure(
    world: World,
) -> None:
    anonymous = world.bundles("anonymous", [world.spec(model="m-anonymous")], submitter=None)
    num = propose(world, SUBMITTER_TOKEN, anonymous)
    code, report, _ = review(world, "--pr", num, "--merge", token=WRITE_TOKEN)
    (pr,) = report["pull_requests"]
    assert code == 1 and pr["merge"] == "refused"
    assert "--accept CHECK" in pr["merge_detail"]
    assert any("--merge --accept submitter" in line for line in pr["acceptance"])
    # a failure can never be accepted, whatever --accept names
    tampered = propose(world, OTHER_SUBMITTER_TOKEN, world.bundles("t", [world.spec(model="m-t")]),
                       tamper=_corruption)  # fmt: skip
    code, report, _ = review(
        world, "--pr", tampered, "--merge", "--accept", "verification", token=WRITE_TOKEN
    )
    assert report["pull_requests"][0]["merge"] == "refused"
    assert any("cannot be accepted" in line for line in report["pull_requests"][0]["acceptance"])

    code, report, _ = review(
        world, "--pr", num, "--merge", "--accept", "submitter", "--comment", token=WRITE_TOKEN
    )
    (pr,) = report["pull_requests"]
    assert code == 0 and pr["merge"] == "merged", pr
    accepted = "accepted by leaderboard-bot: warning submitter: no submitter name"
    assert accepted in pr["acceptance"]
    (posted,) = [text for text in comments(world, num) if "Accepting warnings" in text]
    assert "accepted by leaderboard" in posted  # the report, escaped as Markdown text
    assert "m-anonymous" in " ".join(world.hub.list_files(world.repo_id))


def test_a_re_review_finding_the_same_posts_nothing_whatever_the_flags(world: World) -> None:
    """The digest is of the findings alone: a review that also tried --merge (its report then
    says how to accept the warnings in the way) and one that did not find the same."""
    anonymous = world.bundles("anonymous", [world.spec(model="m-anonymous")], submitter=None)
    num = propose(world, SUBMITTER_TOKEN, anonymous)
    code, report, _ = review(world, "--pr", num, "--comment", "--merge", token=WRITE_TOKEN)
    (pr,) = report["pull_requests"]
    assert code == 1 and (pr["comment"], pr["merge"]) == ("posted", "refused")
    posted = len(comments(world, num))
    for flags in (("--comment",), ("--comment", "--merge"), ("--comment",)):
        code, report, _ = review(world, "--pr", num, *flags, token=WRITE_TOKEN)
        assert code == 1 and report["pull_requests"][0]["comment"] == "already-posted", flags
    assert len(comments(world, num)) == posted


def test_accept_needs_merge(world: World) -> None:
    code, _, stderr = review(world, "--accept", "submitter", token=WRITE_TOKEN)
    assert code == 2 and "--merge" in stderr
