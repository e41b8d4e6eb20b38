"""`bundler init`: a leaderboard started in one command, ready for every role's next one."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from conftest import SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec
from helpers import run_cli
from hubserver import HubServer
from test_card_refresh import commit_by_hand
from test_upload import make_bundles, table_rows, upload

from bundler.hub.leaderboard.card import ALL_TASKS_CONFIG
from bundler.hub.leaderboard.card_section import BEGIN, END
from bundler.hub.repo.paths import README, RECORD, TASKS_FILE, table_part


def init(repo_id: str, *args: str, token: str = WRITE_TOKEN) -> tuple[int, dict, str]:
    result = run_cli("init", "--repo", repo_id, *args, "--json", env={"HF_TOKEN": token})
    assert "Traceback" not in result.stderr
    return result.returncode, json.loads(result.stdout or "{}"), result.stderr


def test_init_starts_an_empty_board_that_every_command_takes(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    repo_id += "-new"  # one nobody created
    code, report, stderr = init(repo_id, "--private")
    assert code == 0, stderr
    assert report["created"] is True and report["commit"] == hub.commits(repo_id)[0].oid
    anonymous = run_cli("tasks", "list", "--repo", repo_id, env={"HF_TOKEN": ""})
    assert anonymous.returncode == 2  # private: not even listed to a stranger
    files = set(hub.list_files(repo_id))
    assert {README, table_part(0), TASKS_FILE, RECORD} <= files
    assert table_rows(hub, repo_id) == []
    tasks = json.loads(hub.file_bytes(repo_id, TASKS_FILE) or b"")
    assert tasks == {"tasks": {}, "version": 1, "require_signature": False}
    for role in ("maintainer", "nightly job", "submitter", "reviewer"):
        assert f"  {role}: bundler " in stderr
    assert f"bundler tasks define TASK --repo {repo_id}" in stderr
    # how the nightly job goes without a stored token (Trusted Publishers)
    steps = f"on the Hub, datasets/{repo_id}, Settings, Trusted Publishers, add GitHub Actions"
    assert steps in stderr and f"HF_OIDC_RESOURCE is then datasets/{repo_id}" in stderr
    # the board is one the other commands take as it is
    card = run_cli("card", "--repo", repo_id, "--check", env={"HF_TOKEN": WRITE_TOKEN})
    assert card.returncode == 0, card.stderr
    listed = run_cli("tasks", "list", "--repo", repo_id, "--json", env={"HF_TOKEN": WRITE_TOKEN})
    assert listed.returncode == 0 and json.loads(listed.stdout)["tasks"] == {}
    bundles = make_bundles(tmp_path, [RunSpec(rows=2)])
    assert upload(bundles, "--repo", repo_id)[0] == 0
    assert len(table_rows(hub, repo_id)) == 1


def test_init_again_changes_nothing_and_gives_an_empty_repository_its_board(
    hub: HubServer, repo_id: str
) -> None:
    # the fixture's repository, as `hf repos create` leaves one: without a board
    code, report, stderr = init(repo_id)
    assert code == 0, stderr
    assert report["created"] is False and report["commit"] is not None
    commits = len(hub.commits(repo_id))
    code, report, stderr = init(repo_id)
    assert code == 0 and report["commit"] is None, stderr
    assert "already holds a leaderboard" in stderr and len(hub.commits(repo_id)) == commits


def test_init_needs_a_token_that_may_write_there(hub: HubServer, repo_id: str) -> None:
    code, _, stderr = init(repo_id, token=SUBMITTER_TOKEN)  # no write access to gptnt/
    assert code == 2, stderr
    assert len(stderr.strip().splitlines()) <= 2 and repo_id in stderr
    assert RECORD not in hub.list_files(repo_id)


OWNERS_CARD = (
    "---\nlicense: cc-by-4.0\npretty_name: Ada's puzzles\ntags:\n- puzzles\n---\n\n"
    "# Ada's puzzles\n\nHand-written: how the puzzles were made, and their licence.\n"
)
OWNERS_FILES = {
    README: OWNERS_CARD.encode(),
    "LICENSE": b"Creative Commons Attribution 4.0\n",
    "data/train.csv": b"a,b\n1,2\n",
}


def test_init_refuses_a_repository_that_holds_files_and_names_them(
    hub: HubServer, repo_id: str
) -> None:
    commit_by_hand(repo_id, OWNERS_FILES)
    commits = len(hub.commits(repo_id))
    code, report, stderr = init(repo_id)
    assert code == 1, stderr
    assert "LICENSE, README.md, data/" in stderr and "--adopt" in stderr
    assert report["error_kind"] == "repository-not-empty"
    assert len(hub.commits(repo_id)) == commits
    assert all(hub.file_bytes(repo_id, path) == data for path, data in OWNERS_FILES.items())


def test_init_adopt_keeps_every_file_and_puts_the_board_beside_the_card(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    commit_by_hand(repo_id, OWNERS_FILES)
    code, report, stderr = init(repo_id, "--adopt")
    assert code == 0, stderr
    assert report["adopted"] == ["LICENSE", "README.md", "data/"]
    for path in ("LICENSE", "data/train.csv"):
        assert hub.file_bytes(repo_id, path) == OWNERS_FILES[path]
    card = (hub.file_bytes(repo_id, README) or b"").decode()
    header, body = card.split("\n---\n", 1)
    meta = yaml.safe_load(header.removeprefix("---\n"))
    assert meta["license"] == "cc-by-4.0" and meta["pretty_name"] == "Ada's puzzles"
    assert meta["tags"][0] == "puzzles" and len(meta["tags"]) > 1
    assert meta["configs"][0]["config_name"] == ALL_TASKS_CONFIG
    owners_text = OWNERS_CARD.split("---\n", 2)[2]
    assert body.startswith(owners_text) and body.index(BEGIN) > len(owners_text)
    assert body.rstrip().endswith(END) and "submission bundles" in body
    # the board's commits fill its section and keep the rest of the card
    assert (
        run_cli("card", "--repo", repo_id, "--check", env={"HF_TOKEN": WRITE_TOKEN}).returncode == 0
    )
    edited = card.replace("Hand-written:", "Edited by hand:")
    commit_by_hand(repo_id, {README: edited.encode()})
    bundles = make_bundles(tmp_path, [RunSpec(rows=2)])
    assert upload(bundles, "--repo", repo_id)[0] == 0
    after = (hub.file_bytes(repo_id, README) or b"").decode()
    owners_part = after.split(BEGIN)[0]
    assert owners_part.endswith(edited.split("\n---\n", 1)[1].split(BEGIN)[0])
    assert "license: cc-by-4.0" in owners_part and "**1** submission bundle" in after
    refreshed = run_cli("card", "--repo", repo_id, env={"HF_TOKEN": WRITE_TOKEN})
    assert refreshed.returncode == 0, refreshed.stderr
    assert (hub.file_bytes(repo_id, README) or b"").decode() == after


def test_init_adopt_writes_over_no_file_of_the_owners(hub: HubServer, repo_id: str) -> None:
    commit_by_hand(repo_id, {table_part(0): b"not a table of ours"})
    code, _, stderr = init(repo_id, "--adopt")
    assert code == 1, stderr
    assert table_part(0) in stderr and "writes over no file" in stderr
    assert hub.file_bytes(repo_id, table_part(0)) == b"not a table of ours"


def test_a_card_whose_owner_took_the_board_section_out_keeps_their_text(
    hub: HubServer, repo_id: str
) -> None:
    commit_by_hand(repo_id, OWNERS_FILES)
    assert init(repo_id, "--adopt")[0] == 0
    rewritten = OWNERS_CARD + "\nThe board used to be here.\n"
    commit_by_hand(repo_id, {README: rewritten.encode()})
    refreshed = run_cli("card", "--repo", repo_id, env={"HF_TOKEN": WRITE_TOKEN})
    assert refreshed.returncode == 0, refreshed.stderr
    card = (hub.file_bytes(repo_id, README) or b"").decode()
    assert "The board used to be here.\n\n" + BEGIN in card and card.rstrip().endswith(END)
    assert card.split("\n---\n", 1)[1].startswith(OWNERS_CARD.split("\n---\n", 1)[1])
