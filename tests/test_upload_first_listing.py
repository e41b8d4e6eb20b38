"""An upload to a branch without a card lists the top folder first
(bundler.hub.leaderboard.firstlisting): what the branch's read and the Hub's limits check learn
is the same as when the paths are asked about, and each request is made once."""

from __future__ import annotations

from pathlib import Path

from conftest import WRITE_TOKEN
from factory import RunSpec
from hubserver import HubServer
from test_budgets import asked_of
from test_upload import make_bundles, publish, table_rows
from test_upload_limits import outcomes

from bundler.hub.client.exists import dataset_exists
from bundler.hub.client.limits import HubLimits
from bundler.hub.client.session import HubSession
from bundler.hub.leaderboard.branch import read_branch
from bundler.hub.publish.upload import UploadOptions
from bundler.hub.publish.upload import upload as upload_library
from bundler.hub.repo.paths import BUNDLES_DIR, README, TABLES_DIR

SPECS = [RunSpec(task=f"task{i}", model="m", rows=1) for i in range(3)]


def reads(hub: HubServer, repo_id: str) -> list[str]:
    """The requests about `repo_id` that read (no commit, preupload or LFS batch)."""
    asked = [asked_of(r, repo_id) for r in hub.request_log if r.kind != "storage"]
    return [a for a in asked if a.split()[1] in ("revision", "tree", "paths-info")]


def test_a_top_folder_at_the_hubs_limit_is_listed_once_and_the_limit_holds(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """9,997 files and `.gitattributes` at the top: the commit's README.md, `bundles/` and
    `leaderboard/` would make 10,001 entries, past the Hub's 10,000. The listing made first (ten
    pages of 1,000) is what the limits check counts: no folder is listed twice, no path asked."""
    hub.create_repo(repo_id, files={f"stray{n:05d}.txt": b"" for n in range(9_997)})
    hub.reset_requests()
    report = upload_library(
        make_bundles(tmp_path, SPECS), UploadOptions(repo_id=repo_id, token=WRITE_TOKEN)
    )
    assert report.exit_code == 1
    assert report.error == (
        "the repository's top folder: this commit would leave 10,001 entries in the folder, "
        "more than the 10,000 the Hub allows a folder; it would refuse the commit"
    )
    assert len(outcomes(report)["refused"]) == 3
    assert reads(hub, repo_id) == ["GET revision"] + ["GET tree"] * 10


def test_a_top_folder_with_room_is_counted_from_the_first_listing(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Files at the top but no card: the limits check counts the listing made first (two
    strays, `.gitattributes` and the three new names: 6 entries, at a limit of 6 exactly), and
    the board is published beside the strays, which stay."""
    hub.create_repo(repo_id, files={"notes.txt": b"mine\n", "data/x.csv": b"a,b\n"})
    hub.reset_requests()
    bundles = make_bundles(tmp_path, SPECS)
    report = publish(bundles, repo_id, limits=HubLimits(6, 100_000))
    assert reads(hub, repo_id) == ["GET revision", "GET tree"]
    assert len(outcomes(report)["published"]) == 3
    assert len(table_rows(hub, repo_id)) == 3
    files = hub.list_files(repo_id)
    assert {"notes.txt", "data/x.csv", README} <= set(files)
    assert hub.file_bytes(repo_id, "notes.txt") == b"mine\n"
    hub.create_repo(other := f"{repo_id}-full", files={"notes.txt": b"", "data/x.csv": b""})
    refused = upload_library(
        bundles, UploadOptions(repo_id=other, token=WRITE_TOKEN, limits=HubLimits(5, 100_000))
    )
    assert refused.exit_code == 1 and "leave 6 entries" in (refused.error or "")


def test_a_board_whose_card_was_removed_is_read_as_it_is(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A branch with `bundles/` and `leaderboard/` but no README.md: the listing first finds
    both, so their paths are asked as before; the bundles already there are known as such, the
    new one published, the card written again."""
    first = make_bundles(tmp_path / "first", SPECS)
    publish(first, repo_id)
    kept = {p: hub.file_bytes(repo_id, p) for p in hub.list_files(repo_id) if p != README}
    hub.create_repo(carded := f"{repo_id}-nocard", files={p: d for p, d in kept.items() if d})
    more = make_bundles(tmp_path / "more", [*SPECS, RunSpec(task="task9", model="m", rows=1)])
    hub.reset_requests()
    report = publish(more, carded)
    assert reads(hub, carded)[:3] == ["GET revision", "GET tree", "POST paths-info"]
    found = outcomes(report)
    assert (len(found["already-there"]), len(found["published"])) == (3, 1)
    assert len(table_rows(hub, carded)) == 4
    assert README in hub.list_files(carded)


def test_a_card_without_card_data_is_read_with_the_listing_first_and_found(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A README.md whose header the Hub cannot parse is answered without `cardData`: the read
    lists the top folder first, finds the card there and asks about it; what it learns is what
    the paths-info alone would have told, and the limits check asks nothing more (the top
    folder's count is the listing's)."""
    publish(make_bundles(tmp_path, SPECS), repo_id)
    plain = HubSession(repo_id, token=WRITE_TOKEN)
    assert dataset_exists(plain, "main")
    assert plain.no_card == set()  # the board's card has metadata
    expected = read_branch(plain, "main")
    broken = b"---\nkey: [unclosed\n---\n# A card\n"
    files = {p: hub.file_bytes(repo_id, p) for p in hub.list_files(repo_id)}
    hub.create_repo(other := f"{repo_id}-broken", files={**files, README: broken})
    session = HubSession(other, token=WRITE_TOKEN)
    assert dataset_exists(session, "main")
    hub.reset_requests()
    state = read_branch(session, "main")
    assert state.head in session.no_card
    assert reads(hub, other)[:2] == ["GET tree", "POST paths-info"]
    assert state.held[README].size == len(broken)
    assert state.held.keys() == expected.held.keys()
    assert state.leaderboard.files() == expected.leaderboard.files()
    assert not state.no_bundles and state.legacy == []
    hub.reset_requests()
    top = [README, BUNDLES_DIR, TABLES_DIR, "new.txt"]
    assert session.existing(top, state.head) == {README, BUNDLES_DIR, TABLES_DIR}
    assert session.entry_count("", state.head) == 4  # .gitattributes beside them
    assert reads(hub, other) == []
