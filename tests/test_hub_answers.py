"""The Hub's answers are untrusted input: each JSON answer the bundler reads (a user's profile,
paths-info and tree listings, a revision's commit, the token's account, commit lists,
discussions) is validated before use. One that is not what the Hub documents (a list where an
object is due, null where a list is, text that is no JSON, JSON cut short, a field of another
type) is retried as a temporary fault and, when it persists, ends the command with exit 75 in
the bundler's words, never quoting what the Hub sent. End to end against the test Hub, whose
fault injection answers a chosen body (`Fault.answer`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx2
import pytest
from conftest import LAB, SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec
from helpers import run_cli, run_cli_process
from hubserver import Fault, HubServer
from huggingface_hub import CommitOperationAdd, HfApi
from test_card_refresh import card
from test_review import World, make_world, propose, review
from test_sign import make_key
from test_signers import signed, signers
from test_upload import make_bundles, publish, upload

from bundler.core.exitcodes import TEMPORARY
from bundler.hub.client.session import READ_ATTEMPTS

MARKER = "HOSTILE-7f3a"
"""Text in every malformed answer: it must never reach a report, a warning or an error."""
MALFORMED_PROFILES = {
    "a list": [{"orgs": [{"name": LAB}]}, MARKER],
    "null orgs": {"user": "submitter", "orgs": None, "fullname": MARKER},
    "not JSON": f"<html>{MARKER} proxy error</html>",
    "JSON cut short": '{"user": "submitter", "orgs": [{"name": "' + MARKER,
    "a name of another type": {"user": MARKER, "orgs": [{"name": 5}]},
    "an organization that is a string": {"user": "submitter", "orgs": [MARKER]},
}
ALWAYS = 100
"""Times a fault fires: more than every retry of every request a command makes."""


def quiet(*texts: str) -> None:
    """Nothing the Hub sent, and no Python exception, in what the command said."""
    for text in texts:
        assert MARKER not in text and "Traceback" not in text
        assert "TypeError" not in text and "JSONDecodeError" not in text
        assert "ValidationError" not in text and "internal error" not in text


def malformed_line(stderr: str, doing: str) -> None:
    assert f"{doing}: the Hub's answer was not the JSON it documents" in " ".join(stderr.split())


def test_the_test_hub_answers_a_chosen_body_without_acting(hub: HubServer, repo_id: str) -> None:
    """The fault itself: a 200 whose body is what the test chose, as JSON, and no state
    changed (a commit so answered is not made)."""
    hub.create_repo(repo_id)
    commits = len(hub.commits(repo_id))
    hub.inject("POST", r"/commit/main$", Fault.answer(f"{MARKER}["), times=1)
    hub.inject("GET", r"^/api/whoami-v2$", Fault.answer([1, None]), times=1)
    api = HfApi(token=WRITE_TOKEN)
    with pytest.raises(ValueError, match="Expecting value"):
        api.create_commit(
            repo_id, [CommitOperationAdd("a.txt", b"a")], commit_message="x", repo_type="dataset"
        )
    assert len(hub.commits(repo_id)) == commits
    assert api.whoami() == [1, None]  # the client hands the JSON on as it came
    assert api.whoami()["name"] == "leaderboard-bot"  # the fault is spent


# ------------------------------------------------------------------ a user's profile


@pytest.fixture
def lab_signed(hub: HubServer, repo_id: str, tmp_path: Path) -> tuple[World, int]:
    """A leaderboard whose allowed signers name the organization LAB, and a pull request of
    submitter's (a member the profile lists) signed with LAB's key."""
    if shutil.which("ssh-keygen") is None:
        pytest.skip("needs OpenSSH")
    world = make_world(hub, repo_id, tmp_path)
    lab = make_key(tmp_path, "lab")
    assert signers(world, "add", LAB, "--key", lab.with_suffix(".pub"))[0] == 0
    return world, propose(world, SUBMITTER_TOKEN, signed(world, "member", lab))


PROFILE = r"^/api/users/submitter/overview$"


@pytest.mark.parametrize("answer", MALFORMED_PROFILES.values(), ids=MALFORMED_PROFILES.keys())
def test_review_takes_a_malformed_profile_for_a_temporary_fault_and_quotes_none_of_it(
    hub: HubServer, lab_signed: tuple[World, int], answer: object
) -> None:
    world, num = lab_signed
    hub.inject("GET", PROFILE, Fault.answer(answer), times=ALWAYS)
    before = len(hub.requests())
    code, report, stderr = review(world, "--pr", num)
    assert code == TEMPORARY, stderr
    (_pr,) = report["pull_requests"]
    quiet(json.dumps(report), stderr)
    assert "the Hub's answer was not the JSON it documents" in json.dumps(report)
    asked = [r for r in hub.requests()[before:] if r.path == "/api/users/submitter/overview"]
    assert len(asked) == READ_ATTEMPTS  # retried, as any temporary fault


def test_review_gets_past_one_malformed_profile_by_asking_again(
    hub: HubServer, lab_signed: tuple[World, int]
) -> None:
    world, num = lab_signed
    hub.inject("GET", PROFILE, Fault.answer(MALFORMED_PROFILES["null orgs"]), times=1)
    _code, report, stderr = review(world, "--pr", num)
    (pr,) = report["pull_requests"]
    signature = {check["name"]: check for check in pr["bundles"][0]["checks"]}["signature"]
    assert signature["status"] == "passed", stderr
    assert f"signed by {LAB}, which submitter is a member of" in signature["detail"]
    quiet(json.dumps(report), stderr)


@pytest.mark.parametrize("answer", MALFORMED_PROFILES.values(), ids=MALFORMED_PROFILES.keys())
def test_audit_takes_a_malformed_profile_for_a_temporary_fault(
    hub: HubServer, lab_signed: tuple[World, int], answer: object
) -> None:
    world, num = lab_signed
    _, merged, stderr = review(world, "--pr", num, "--merge", token=WRITE_TOKEN)
    assert merged["pull_requests"][0]["merge"] == "merged", stderr
    hub.inject("GET", PROFILE, Fault.answer(answer), times=ALWAYS)
    audited = run_cli_process("audit", "--repo", world.repo_id, env={"HF_TOKEN": ""})
    assert audited.returncode == TEMPORARY, audited.stderr
    quiet(audited.stdout, audited.stderr)
    malformed_line(audited.stderr, "reading the organizations of submitter")
    hub.clear_faults()
    again = run_cli("audit", "--repo", world.repo_id, "--json", env={"HF_TOKEN": ""})
    assert again.returncode == 0, again.stderr


# ------------------------------------------------------------------ the other answers we parse


MALFORMED_LISTINGS = {
    "an object": {"path": MARKER},
    "null": None,
    "not JSON": f"{MARKER} <",
    "JSON cut short": '[{"type": "file", "path": "' + MARKER,
    "a size that is text": [{"type": "file", "path": "README.md", "oid": "0" * 40, "size": MARKER}],
    "a file without its type": [{"path": "README.md", "oid": MARKER, "size": 3}],
}


@pytest.fixture
def board(hub: HubServer, repo_id: str, tmp_path: Path) -> str:
    publish(make_bundles(tmp_path, [RunSpec(task="alpha", rows=2)]), repo_id)
    return repo_id


@pytest.mark.parametrize("answer", MALFORMED_LISTINGS.values(), ids=MALFORMED_LISTINGS.keys())
@pytest.mark.parametrize(
    ("method", "path", "doing"),
    [
        ("POST", r"/paths-info/", "reading file information"),
        ("GET", r"/tree/[0-9a-f]{40}/leaderboard$", "listing leaderboard/"),
    ],
    ids=["paths-info", "tree"],
)
def test_card_takes_a_malformed_listing_for_a_temporary_fault(
    hub: HubServer, board: str, answer: object, method: str, path: str, doing: str
) -> None:
    hub.inject(method, path, Fault.answer(answer), times=ALWAYS)
    code, result, stderr = card(board, "--dry-run")
    assert code == TEMPORARY, stderr
    quiet(json.dumps(result), stderr)
    malformed_line(stderr, doing)


def test_a_malformed_revision_answer_is_a_temporary_fault(hub: HubServer, board: str) -> None:
    hub.inject("GET", r"/revision/main$", Fault.answer({"sha": 12345, "id": MARKER}), times=ALWAYS)
    code, result, stderr = card(board, "--dry-run")
    assert code == TEMPORARY, stderr
    quiet(json.dumps(result), stderr)
    malformed_line(stderr, "reading revision 'main'")


@pytest.mark.parametrize(
    "answer", [[MARKER], {"name": 7, "type": MARKER}, f"{MARKER}{{"], ids=["list", "type", "text"]
)
def test_a_malformed_account_answer_is_a_temporary_fault(
    hub: HubServer, board: str, tmp_path: Path, answer: object
) -> None:
    hub.inject("GET", r"^/api/whoami-v2$", Fault.answer(answer), times=ALWAYS)
    code, result, stderr = card(board)
    assert code == TEMPORARY, stderr
    quiet(json.dumps(result), stderr)
    malformed_line(stderr, "checking the token")


@pytest.mark.parametrize(
    "answer",
    [
        {"commits": MARKER},
        [{"id": "0" * 40, "title": MARKER, "authors": [{"user": 5}], "date": "2026-01-01"}],
        f"[{MARKER}",
    ],
    ids=["object", "author-type", "cut-short"],
)
def test_audit_takes_a_malformed_commit_list_for_a_temporary_fault(
    hub: HubServer, lab_signed: tuple[World, int], answer: object
) -> None:
    world, num = lab_signed  # audit asks who committed a signed bundle
    _, merged, stderr = review(world, "--pr", num, "--merge", token=WRITE_TOKEN)
    assert merged["pull_requests"][0]["merge"] == "merged", stderr
    hub.inject("GET", r"/commits/", Fault.answer(answer), times=ALWAYS)
    audited = run_cli("audit", "--repo", world.repo_id, "--json", env={"HF_TOKEN": ""})
    assert audited.returncode == TEMPORARY, audited.stderr
    quiet(audited.stdout, audited.stderr)
    assert "the Hub's answer was not the JSON it documents" in audited.stderr


@pytest.mark.parametrize(
    "answer",
    [{"discussions": None, "count": 1}, {"discussions": [MARKER], "count": 1}, f"{MARKER}"],
    ids=["null", "string", "text"],
)
def test_review_takes_a_malformed_discussion_list_for_a_temporary_fault(
    hub: HubServer, repo_id: str, tmp_path: Path, answer: object
) -> None:
    world = make_world(hub, repo_id, tmp_path)
    hub.inject("GET", r"/discussions$", Fault.answer(answer), times=ALWAYS)
    result = run_cli("review", "--repo", world.repo_id, "--json", env={"HF_TOKEN": ""})
    assert result.returncode == TEMPORARY, result.stderr
    quiet(result.stdout, result.stderr)
    malformed_line(result.stderr, "listing pull requests")


def test_a_malformed_commit_answer_is_re_planned_and_never_quoted(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """The commit may have landed (the answer says nothing), so it is planned again on the
    head as it is, as after a lost response; when every answer is malformed, exit 75."""
    bundles = make_bundles(tmp_path, [RunSpec(task="alpha", rows=2)])
    hub.inject("POST", rf"^/api/datasets/{repo_id}/commit/main$", Fault.answer([MARKER]), times=1)
    code, report, stderr = upload(bundles, "--repo", repo_id)
    assert code == 0, stderr
    assert len(report["commits"]) == 1 and [b["outcome"] for b in report["bundles"]] == [
        "published"
    ]
    quiet(json.dumps(report), stderr)
    more = make_bundles(tmp_path / "more", [RunSpec(task="alpha", model="more", rows=2)])
    hub.inject("POST", rf"^/api/datasets/{repo_id}/commit/main$", Fault.answer("{"), times=ALWAYS)
    code, report, stderr = upload(more, "--repo", repo_id)
    assert code == TEMPORARY, stderr
    quiet(json.dumps(report), stderr)
    assert "the Hub's answer was not the JSON it documents" in report["error"]


def details_answer(hub: HubServer, repo_id: str, num: int) -> dict[str, object]:
    """A pull request's details as the test Hub answers them, to be made malformed."""
    url = f"{hub.url}/api/datasets/{repo_id}/discussions/{num}"
    answer = httpx2.get(url, headers={"Authorization": f"Bearer {WRITE_TOKEN}"}).json()
    assert isinstance(answer, dict)
    return answer


@pytest.mark.parametrize(
    "spoil",
    ["author", "num", "events", "comment", "commit", "target"],
)
def test_review_takes_malformed_pull_request_details_for_a_temporary_fault(
    hub: HubServer, repo_id: str, tmp_path: Path, spoil: str
) -> None:
    world = make_world(hub, repo_id, tmp_path)
    num = propose(world, SUBMITTER_TOKEN, world.bundles("p", [world.spec(model="p")]))
    answer = details_answer(hub, world.repo_id, num)
    events = answer["events"]
    assert isinstance(events, list)
    if spoil == "author":
        answer["author"] = {"name": 5}
    elif spoil == "num":
        answer["num"] = MARKER
    elif spoil == "events":
        answer["events"] = MARKER
    elif spoil == "target":
        answer["changes"] = {"base": ["refs/heads/main", MARKER]}
    else:
        kind = {"comment": "comment", "commit": "commit"}[spoil]
        event = next(event for event in events if event["type"] == kind)
        event["data"] = {**event["data"], "oid": [MARKER], "latest": {"raw": 5}}
    hub.inject("GET", rf"/discussions/{num}$", Fault.answer(answer), times=ALWAYS)
    code, report, stderr = review(world, "--pr", num)
    assert code == TEMPORARY, stderr
    quiet(json.dumps(report), stderr)
    malformed_line(stderr, f"reading PR #{num}")


def test_a_malformed_answer_to_a_review_comment_is_a_temporary_fault(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Posting is no read to retry (the comment may be there): the PR's review ends in 75, in
    the bundler's words; the next run finds its comment or posts it."""
    world = make_world(hub, repo_id, tmp_path)
    num = propose(world, SUBMITTER_TOKEN, world.bundles("p", [world.spec(model="p")]))
    hub.inject("POST", rf"/discussions/{num}/comment$", Fault.answer({"newMessage": MARKER}))
    code, report, stderr = review(world, "--pr", num, "--comment", token=WRITE_TOKEN)
    assert code == TEMPORARY, stderr
    quiet(json.dumps(report), stderr)
    assert f"commenting on PR #{num}: the Hub's answer was not the JSON" in json.dumps(report)
    code, report, stderr = review(world, "--pr", num, "--comment", token=WRITE_TOKEN)
    assert report["pull_requests"][0]["comment"] == "posted", stderr
