"""`bundler status` end to end (issue 37, item 5): a submitter proposes bundles with `upload
--create-pr`, a maintainer reviews them with `review --comment`, and the submitter reads where
each pull request stands, against the local Hub server. A review-shaped comment posted by the
submitter themselves (anyone with a write token may comment) is set aside, never shown as the
review."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec, write_tree
from helpers import one_line_error, run_cli
from huggingface_hub import HfApi
from test_review import World, make_world

from bundler.core.checks import passed
from bundler.hub.review.judge import PullRequestReview
from bundler.hub.review.posted import posted_line, read_posted

DIGEST = "<!-- bundler-review sha256:" + "0" * 64 + " -->"


def status(repo_id: str, *args: object, token: str | None, code: int = 0) -> dict[str, Any]:
    """`bundler status` as a person reads it, then its --json report."""
    env = {"HF_TOKEN": token or ""}
    human = run_cli("status", "--repo", repo_id, *args, env=env)
    assert human.returncode == code, human.stderr
    result = run_cli("status", "--repo", repo_id, *args, "--json", env=env)
    assert result.returncode == code, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    report["human"] = human.stderr
    return report


def upload(world: World, bundles: Path) -> int:
    result = run_cli(
        "upload", bundles, "--repo", world.repo_id, "--create-pr", "--json",
        env={"HF_TOKEN": SUBMITTER_TOKEN},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    num: int = json.loads(result.stdout)["pull_request_num"]
    return num


def review(world: World, *args: str) -> None:
    result = run_cli(
        "review", "--repo", world.repo_id, *args, "--json", env={"HF_TOKEN": WRITE_TOKEN}
    )
    assert result.returncode in (0, 1), result.stderr


def forged_clean_review(num: int, head: str) -> str:
    """What a submitter could post to make their pull request look reviewed clean."""
    pr = PullRequestReview(
        num=num, title="t", author="a", status="open", url="u", base_branch="main", head=head
    )
    pr.checks.append(passed("state", "open against main"))
    return f"## statics-bundler review of PR #{num}: clean\n\n{posted_line(pr)}\n{DIGEST}\n"


def test_a_submitter_reads_their_review(hub: Any, repo_id: str, tmp_path: Path) -> None:
    world = make_world(hub, repo_id, tmp_path)
    num = upload(world, world.bundles("first", [world.spec(model="m-one", rows=4)]))

    # Proposed, not reviewed yet: wait.
    waiting = status(repo_id, token=SUBMITTER_TOKEN)
    assert waiting["user"] == "submitter"
    (pr,) = waiting["pull_requests"]
    assert pr["num"] == num and pr["next_step"] == "wait-for-review" and pr["review"] is None
    (bundle,) = pr["bundles"]
    assert bundle["verb"] == "adds" and bundle["verdict"] == "not-reviewed"
    assert "m-one" in bundle["bundle_id"] and "wait for a maintainer's review" in waiting["human"]

    # The submitter posts a review of their own: set aside, named, never the review.
    head = pr["head"]
    HfApi(token=SUBMITTER_TOKEN).comment_discussion(
        repo_id, num, forged_clean_review(num, head), repo_type="dataset"
    )
    forged = status(repo_id, token=SUBMITTER_TOKEN)
    (pr,) = forged["pull_requests"]
    assert pr["review"] is None and pr["next_step"] == "wait-for-review"
    assert [aside["author"] for aside in pr["set_aside"]] == ["submitter"]
    assert "set aside a review-shaped comment by submitter" in forged["human"]

    # The maintainer's review: clean, of the present head; a merge is what comes next.
    review(world, "--comment")
    clean = status(repo_id, token=SUBMITTER_TOKEN)
    (pr,) = clean["pull_requests"]
    assert pr["review"]["reviewer"] == "leaderboard-bot" and pr["review"]["current"]
    assert pr["review"]["clean"] and pr["next_step"] == "wait-for-merge"
    assert [b["verdict"] for b in pr["bundles"]] == ["clean"]
    assert {c["name"] for c in pr["bundles"][0]["checks"]} >= {"verification", "exceptions"}
    assert pr["set_aside"] and "reviewed clean" in clean["human"]

    # A second upload to the same pull request: a run whose exceptions and row count review
    # fails. The review of the older head says nothing of it: wait again.
    num_again = upload(world, world.bundles("second", [world.spec(model="m-two", rows=10)]))
    assert num_again == num
    stale = status(repo_id, token=SUBMITTER_TOKEN)
    (pr,) = stale["pull_requests"]
    assert not pr["review"]["current"] and pr["next_step"] == "wait-for-review"
    assert "an older head" in stale["human"]
    assert sorted(b["bundle_id"].split("_")[0] for b in pr["bundles"]) == ["m-one", "m-two"]

    # Reviewed again: what failed is named, and the submitter must act (exit 1).
    review(world, "--comment")
    failing = status(repo_id, token=SUBMITTER_TOKEN, code=1)
    (pr,) = failing["pull_requests"]
    assert pr["review"]["current"] and not pr["review"]["clean"] and pr["next_step"] == "fix"
    verdicts = {b["bundle_id"].split("_")[0]: b["verdict"] for b in pr["bundles"]}
    assert verdicts == {"m-one": "clean", "m-two": "failed"}
    assert any("m-two" in line and ": exceptions: " in line for line in pr["to_fix"])
    assert "fix what failed and upload again with --create-pr" in failing["human"]
    assert failing["exit_code"] == 1

    # Anyone may look at one named pull request, without a token.
    named = status(repo_id, "--pr", num, token=None, code=1)
    assert named["user"] is None and named["pull_requests"][0]["next_step"] == "fix"


def test_a_merged_pull_request_reads_merged(hub: Any, repo_id: str, tmp_path: Path) -> None:
    """Review merges by a commit of its own and closes the pull request: the branch holding
    its bundles as the pull request does is what says merged."""
    world = make_world(hub, repo_id, tmp_path)
    num = upload(world, world.bundles("first", [world.spec(model="m-one", rows=4)]))
    review(world, "--comment", "--merge")
    merged = status(repo_id, "--pr", num, token=SUBMITTER_TOKEN)
    (pr,) = merged["pull_requests"]
    assert pr["status"] == "closed" and pr["next_step"] == "merged"
    assert "merged: its bundles are on the branch" in merged["human"]
    none_open = status(repo_id, token=SUBMITTER_TOKEN)
    assert none_open["pull_requests"] == []
    assert "no open bundler pull request of submitter" in none_open["human"]


def test_warnings_alone_are_a_maintainer_s_to_decide(
    hub: Any, repo_id: str, tmp_path: Path
) -> None:
    """A bundle that names no submitter is only warned: waiting on a maintainer, exit 0."""
    world = make_world(hub, repo_id, tmp_path)
    upload(world, world.bundles("anonymous", [world.spec(model="m-one", rows=4)], submitter=None))
    review(world, "--comment")
    deciding = status(repo_id, token=SUBMITTER_TOKEN)
    (pr,) = deciding["pull_requests"]
    assert pr["next_step"] == "decide" and pr["to_fix"] == []
    assert [line.split(": ")[1] for line in pr["to_decide"]] == ["submitter"]
    assert "a maintainer decides whether to accept them" in " ".join(deciding["human"].split())


def test_whose_pull_requests_needs_a_token(hub: Any, repo_id: str) -> None:
    result = run_cli("status", "--repo", repo_id, env={"HF_TOKEN": ""})
    assert result.returncode == 2
    assert "no token says whose pull requests to show" in one_line_error(result.stderr)
    assert "give a token of the account that opened them" in result.stderr
    missing = run_cli("status", "--repo", repo_id, "--pr", "7", env={"HF_TOKEN": ""})
    assert missing.returncode == 2 and "no pull request #7" in one_line_error(missing.stderr)


def test_only_the_line_above_the_digest_is_read() -> None:
    """The report quotes strangers' text, which may hold the marker too: only a whole line
    right above the digest line counts, and only one of the right shape."""
    pr = PullRequestReview(
        num=3, title="t", author="a", status="open", url="u", base_branch="main", head="h"
    )
    line = posted_line(pr)
    assert read_posted(f"report\n\n{line}\n{DIGEST}\n") is not None
    assert read_posted(f"report `{line}`\n{DIGEST}\n") is None
    assert read_posted(f"{line}\nreport\n{DIGEST}\n") is None
    assert read_posted(f"report\n{line}\n") is None
    wrong = line.replace('"num": 3', '"num": "three"')
    assert wrong != line and read_posted(f"report\n{wrong}\n{DIGEST}\n") is None
    pr.checks.append(passed("harness", "x --> <b>@you</b>"))  # a stranger's words
    tricky = posted_line(pr)
    assert "-->" not in tricky[:-3] and "@" not in tricky
    found = read_posted(f"report\n{tricky}\n{DIGEST}\n")
    assert found is not None and found.checks[0].detail == "x --> <b>@you</b>"


def test_collect_says_when_a_run_fails_more_than_review_accepts(tmp_path: Path) -> None:
    """2 of 23 predictions raised (8.7%): above the 5% review accepts by default, which collect
    says of that run's bundle, with the rate (it reads no repository's limit)."""
    write_tree(tmp_path / "output", [RunSpec(model="m-raises", rows=23)])
    result = run_cli(
        "collect", tmp_path / "output", "-o", tmp_path / "bundles", "--expect", "expert-vqa=23"
    )
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "m-raises" in said and "exception rate 8.7% (2 of 23 predictions) is above" in said
    assert "the 5.0% review accepts by default" in said
