"""What each command costs the Hub as the leaderboard grows: requests counted by the local Hub
server (which pages tree listings as the Hub does), at N = 30 and N = 3,000 bundles already in
the repository. A command whose cost grew with N would meet the Hub's rate limits (per 5
minutes: 1,000 API calls and 5,000 file requests for a free account, 500 and 3,000 anonymous)
long before a leaderboard reaches 100,000 bundles."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SUBMITTER_TOKEN, WRITE_TOKEN
from helpers import run_cli, run_cli_process, run_python
from hubserver import HubServer, RequestRecord
from scalelib import bundles_of, publish_directly, run_specs
from test_upload import table_rows

from bundler.hub.repo.paths import part_number

SIZES = (30, 3_000)

pytestmark = pytest.mark.xdist_group("budgets")
"""One worker runs them all: the leaderboards are a module fixture (N = 3,000 takes half a
minute to build), built once there. (pytest-xdist: --dist loadfile keeps a module on one
worker; --dist loadgroup would by this mark.)"""


@dataclass(frozen=True)
class Leaderboard:
    repo_id: str
    bundles: Path
    """Every bundle the repository holds, as a local bundles folder."""


@pytest.fixture(scope="module")
def leaderboards(
    hub: HubServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[int, Leaderboard]]:
    """A repository per size, published as the bundler lays it out."""
    boards: dict[int, Leaderboard] = {}
    for size in SIZES:
        root = tmp_path_factory.mktemp(f"n{size}")
        bundles = bundles_of(root, run_specs(size))
        repo_id = f"gptnt/budget-{size}"
        publish_directly(hub, repo_id, bundles)
        boards[size] = Leaderboard(repo_id, bundles)
    yield boards


def counted(
    hub: HubServer, repo_id: str, *args: object, codes: tuple[int, ...] = (0,)
) -> tuple[dict[str, int], object]:
    """Run a bundler command and count the requests it made about `repo_id`."""
    hub.reset_requests()
    result = run_cli(*args, "--json", env={"HF_TOKEN": WRITE_TOKEN})
    assert result.returncode in codes, result.stderr
    return hub.request_counts(repo_id), json.loads(result.stdout)


def total(counts: dict[str, int]) -> int:
    return counts["api"] + counts["file"]


def test_an_upload_of_one_new_bundle_costs_the_same_at_any_size(
    hub: HubServer, leaderboards: dict[int, Leaderboard], tmp_path: Path
) -> None:
    costs = {}
    for size, board in leaderboards.items():
        new = bundles_of(tmp_path / f"new{size}", run_specs(1, start=size))
        counts, report = counted(hub, board.repo_id, "upload", new, "--repo", board.repo_id)
        assert [b["outcome"] for b in report["bundles"]] == ["published"]  # type: ignore[index]
        assert counts["file"] <= 5, counts
        costs[size] = total(counts)
    assert abs(costs[SIZES[0]] - costs[SIZES[1]]) <= 3, costs


def test_an_upload_of_one_new_bundle_sends_as_much_at_any_size(
    hub: HubServer, leaderboards: dict[int, Leaderboard], tmp_path: Path
) -> None:
    """The all-tasks table is in parts of PART_ROWS rows, and a task's table holds its best
    TASK_TABLE_ROWS: a new bundle's commit rewrites the last part, its task's table, the card
    and the record, so what an upload sends does not grow with the board (with one table of
    every bundle it was 30 times as much at 3,000 bundles as at 30)."""
    sent, parts = {}, {}
    for size, board in leaderboards.items():
        new = bundles_of(tmp_path / f"sent{size}", run_specs(1, start=size + 700))
        counted(hub, board.repo_id, "upload", new, "--repo", board.repo_id)
        sent[size] = sum(hub.request_bytes(board.repo_id).values())
        (commit, *_) = hub.commits(board.repo_id)
        parts[size] = [path for path in commit.files_changed if part_number(path) is not None]
    held = [p for p in hub.list_files(leaderboards[SIZES[1]].repo_id) if part_number(p) is not None]
    assert len(held) > 1 and len(parts[SIZES[1]]) == 1 == len(parts[SIZES[0]]), parts
    assert parts[SIZES[1]] == [held[-1]]  # the last part, where new rows go
    assert sent[SIZES[1]] <= 2 * sent[SIZES[0]], sent


def test_an_upload_with_nothing_new_costs_at_most_four_requests(
    hub: HubServer, leaderboards: dict[int, Leaderboard]
) -> None:
    """The branch's head (with the repository's existence), the expanded entries of the tables,
    one listing of the tables' folder, and the bundles' files (or the table's parts, kept
    locally, where they cost fewer requests); the token's account besides (not the
    repository's: not counted here). `hf upload` of the same folder makes 4."""
    for board in leaderboards.values():
        counts, report = counted(
            hub, board.repo_id, "upload", board.bundles, "--repo", board.repo_id
        )
        outcomes = {b["outcome"] for b in report["bundles"]}  # type: ignore[index]
        assert outcomes == {"already-there"} and report["commits"] == []  # type: ignore[index]
        assert total(counts) <= 4, counts


def test_an_upload_into_a_new_repository_asks_only_what_its_commits_need(
    hub: HubServer, tmp_path: Path
) -> None:
    """50 bundles (100 files, beside the tables, record and card) into a new repository: more
    than the Hub's recommended files a commit, so two commits. The token's account and the
    branch's head (with the repository's existence, and no card: no `cardData`); the top
    folder, listed for the Hub's limits, and listed first, as the branch has no card
    (bundler.hub.leaderboard.firstlisting): it holds none of the paths the read asks about, so
    no paths-info is asked (the one before asked about every one of them and found none, which
    the listing says as well); one preupload and one LFS batch for the first commit's files
    and the second's bundles and tables (bundler.hub.publish.ahead: the Hub keeps `*.parquet`
    in LFS, hubserver.store.upload_mode); the card checked (validate-yaml) and each commit
    made; the second asks again only about its record and card, which are known once the first
    has landed, and uploads nothing. The limits check asks nothing the branch's read told it
    already, nor anything of our own first commit before the second
    (bundler.hub.client.known). `hf upload` of the same folder makes 4 (create, preupload, LFS
    batch, commit): 10 is hf's + 6."""
    repo_id = "gptnt/budget-new"
    hub.create_repo(repo_id)
    new = bundles_of(tmp_path / "new", run_specs(50))
    hub.reset_requests()
    result = run_cli("upload", new, "--repo", repo_id, "--json", env={"HF_TOKEN": WRITE_TOKEN})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {b["outcome"] for b in report["bundles"]} == {"published"}
    assert len(report["commits"]) == 2
    asked = [asked_of(record, repo_id) for record in hub.request_log if record.kind != "storage"]
    assert asked == [
        "GET /api/whoami-v2",
        "GET revision",
        "GET tree",
        "POST preupload",
        "POST lfs-batch",
        "POST /api/validate-yaml",
        "POST commit",
        "POST /api/validate-yaml",
        "POST preupload",
        "POST commit",
    ], asked


def asked_of(record: RequestRecord, repo_id: str) -> str:
    """A request, named by its method and what it asks of `repo_id` (`commit`, `preupload`,
    `lfs-batch`), or by its path when it concerns no repository (whoami, validate-yaml)."""
    if record.repo_id != repo_id:
        return f"{record.method} {record.path}"
    rest = record.path.split(repo_id, 1)[1]
    return (
        f"{record.method} {'lfs-batch' if rest.endswith('/objects/batch') else rest.split('/')[1]}"
    )


@pytest.mark.parametrize("command", ["upload", "card"])
def test_a_nightly_with_nothing_new_reads_the_same_api_bytes_at_any_size(
    hub: HubServer, leaderboards: dict[int, Leaderboard], command: str
) -> None:
    """Not only the requests: their answers stay the same size too. Only the tables (file
    requests) hold a row per bundle; a repository's info asked in full would list every file
    (`siblings`), 80 bytes a file. The listing of the tables' folder names each part of the
    all-tasks table (one per PART_ROWS rows), 256 bytes at most with its LFS details."""
    sizes, parts = {}, {}
    for size, board in leaderboards.items():
        args = [board.bundles] if command == "upload" else []
        counts, _ = counted(hub, board.repo_id, command, *args, "--repo", board.repo_id)
        sizes[size] = hub.response_bytes(board.repo_id)["api"]
        parts[size] = sum(part_number(p) is not None for p in hub.list_files(board.repo_id))
        assert counts["api"] >= 2, counts
    small, large = sizes[SIZES[0]], sizes[SIZES[1]]
    assert large <= small * 1.05 + 256 * (parts[SIZES[1]] - parts[SIZES[0]]), (sizes, parts)


def test_a_nightly_with_nothing_new_downloads_the_table_only_when_it_changed(
    hub: HubServer, leaderboards: dict[int, Leaderboard], tmp_path: Path
) -> None:
    """The table holds a row per bundle; the copy kept under HF_HOME stands in for it while
    it holds the very bytes the branch lists, and only then."""
    board = leaderboards[SIZES[1]]
    home = tmp_path / "home"

    def nightly() -> tuple[int, int]:
        hub.reset_requests()
        result = run_cli_process(  # HF_HOME is read when the Hub client is imported
            "upload",
            board.bundles,
            "--repo",
            board.repo_id,
            "--json",
            env={"HF_TOKEN": WRITE_TOKEN, "HF_HOME": str(home)},
        )
        assert result.returncode == 0, result.stderr
        outcomes = {b["outcome"] for b in json.loads(result.stdout)["bundles"]}
        assert outcomes == {"already-there"}
        return hub.request_counts(board.repo_id)["file"], hub.response_bytes(board.repo_id)["file"]

    parts = [p for p in hub.list_files(board.repo_id) if part_number(p) is not None]
    files, size = nightly()
    assert len(parts) > 1 and files == len(parts) + 1  # the first one reads the table's parts
    assert size > 3_000 * 50  # and the record
    assert nightly() == (0, 0)
    copy = sorted((home / "statics-bundler" / "tables").rglob("*.parquet"))[0]
    copy.write_bytes(copy.read_bytes()[:-1] + b"\0")  # a copy that is not the part is no copy
    files, again = nightly()
    assert files == 1 and again < size / 2  # that part alone: the other copies hold
    assert nightly() == (0, 0)
    other = bundles_of(tmp_path / "other", run_specs(1, start=90_000))
    published = run_cli("upload", other, "--repo", board.repo_id, env={"HF_TOKEN": WRITE_TOKEN})
    assert published.returncode == 0, published.stderr  # another machine's commit: a new part
    files, changed = nightly()
    assert files == 2 and changed < size / 2  # the part it changed and the record
    assert nightly() == (0, 0)
    mine = bundles_of(tmp_path / "mine", run_specs(1, start=90_001))
    env = {"HF_TOKEN": WRITE_TOKEN, "HF_HOME": str(home)}
    published = run_cli_process("upload", mine, "--repo", board.repo_id, env=env)
    assert published.returncode == 0, published.stderr
    assert nightly() == (0, 0)  # its own commit kept the table it wrote


def test_a_card_with_nothing_to_do_costs_at_most_five_requests(
    hub: HubServer, leaderboards: dict[int, Leaderboard]
) -> None:
    """The branch's head, the expanded entries of the tables, one listing of the tables'
    folder, and what of the tables changed since this machine last read them."""
    for board in leaderboards.values():
        counts, report = counted(hub, board.repo_id, "card", "--repo", board.repo_id)
        assert report["changed"] is False  # type: ignore[index]
        assert total(counts) <= 5, counts


def test_downloading_one_bundle_costs_at_most_six_requests(
    hub: HubServer, leaderboards: dict[int, Leaderboard], tmp_path: Path
) -> None:
    for size, board in leaderboards.items():
        wanted = str(
            next(iter(sorted(board.bundles.rglob("*.tar.zst")))).relative_to(board.bundles)
        )
        bundle_id = wanted.removesuffix(".tar.zst")
        out = tmp_path / f"one{size}"
        counts, report = counted(
            hub,
            board.repo_id,
            "download",
            "--repo",
            board.repo_id,
            "--bundle",
            bundle_id,
            "-o",
            out,
        )
        assert [b["outcome"] for b in report["bundles"]] == ["downloaded"]  # type: ignore[index]
        assert total(counts) <= 6, counts


def test_a_full_download_costs_two_file_requests_a_bundle_plus_the_listing(
    hub: HubServer, leaderboards: dict[int, Leaderboard], tmp_path: Path
) -> None:
    board = leaderboards[SIZES[0]]
    held = len([path for path in hub.list_files(board.repo_id) if path.endswith(".tar.zst")])
    counts, report = counted(
        hub, board.repo_id, "download", "--repo", board.repo_id, "-o", tmp_path
    )
    bundles = report["bundles"]  # type: ignore[index]
    assert len(bundles) == held and {b["outcome"] for b in bundles} == {"downloaded"}
    assert counts["file"] == 2 * held, counts
    assert counts["api"] <= 3, counts  # the head, and the listing (one page under 1,000 files)
    # a second download into the same folder fetches nothing
    counts, report = counted(
        hub, board.repo_id, "download", "--repo", board.repo_id, "-o", tmp_path
    )
    assert {b["outcome"] for b in report["bundles"]} == {"already-there"}  # type: ignore[index]
    assert counts["file"] == 0, counts


def test_a_bulk_upload_costs_what_its_new_bundles_do_not_what_is_there(
    hub: HubServer, leaderboards: dict[int, Leaderboard], tmp_path: Path
) -> None:
    costs = {}
    for size, board in leaderboards.items():
        new = bundles_of(tmp_path / f"bulk{size}", run_specs(80, start=size + 10))
        counts, report = counted(hub, board.repo_id, "upload", new, "--repo", board.repo_id)
        assert {b["outcome"] for b in report["bundles"]} == {"published"}  # type: ignore[index]
        costs[size] = total(counts)
        players = {archive.parent.name for archive in new.rglob("*.tar.zst")}
    # Each new player's folder goes into its shard, which the limits check lists once when it
    # is there already (bundler.hub.client.limits): at 3,000 bundles most shards are, at 30
    # few. What the new bundles cost, whatever the repository holds.
    assert abs(costs[SIZES[0]] - costs[SIZES[1]]) <= 3 + len(players), costs


def test_a_review_of_a_pull_request_adding_one_bundle_costs_the_same_at_any_size(
    hub: HubServer, leaderboards: dict[int, Leaderboard], tmp_path: Path
) -> None:
    """Review reads only what the pull request touches: no listing of the whole repository."""
    costs = {}
    for size, board in leaderboards.items():
        new = bundles_of(tmp_path / f"pr{size}", run_specs(1, start=size + 500))
        proposed = run_cli(
            "upload",
            new,
            "--repo",
            board.repo_id,
            "--create-pr",
            "--json",
            env={"HF_TOKEN": SUBMITTER_TOKEN},
        )
        assert proposed.returncode == 0, proposed.stderr
        num = json.loads(proposed.stdout)["pull_request_num"]
        counts, report = counted(
            hub, board.repo_id, "review", "--repo", board.repo_id, "--pr", num, codes=(0, 1)
        )
        (pr,) = report["pull_requests"]  # type: ignore[index]
        assert [b["classification"] for b in pr["bundles"]] == ["new"]
        costs[size] = total(counts)
    assert abs(costs[SIZES[0]] - costs[SIZES[1]]) <= 3, costs


LOAD = """
import json, sys
import datasets
datasets.disable_progress_bars()
kwargs = {"name": sys.argv[2]} if len(sys.argv) > 2 else {}
table = datasets.load_dataset(sys.argv[1], split="train", **kwargs)
print(json.dumps({"rows": table.num_rows}))
"""


@pytest.mark.parametrize("config", [None, "task03"])
def test_loading_the_leaderboard_costs_the_same_file_requests_at_any_size(
    hub: HubServer, leaderboards: dict[int, Leaderboard], tmp_path: Path, config: str | None
) -> None:
    """A task's config is one file at any size; the all-tasks config one more file per part
    of PART_ROWS rows, which `datasets` asks for twice (its metadata, then its bytes)."""
    files, parts = {}, {}
    for size, board in leaderboards.items():
        cache = tmp_path / f"cache{size}"
        hub.reset_requests()
        args = [board.repo_id, *([config] if config else [])]
        result = run_python(
            LOAD, *args, env={"HF_DATASETS_CACHE": str(cache), "HF_HUB_CACHE": str(cache / "hub")}
        )
        assert result.returncode == 0, result.stderr[-2000:]
        rows = table_rows(hub, board.repo_id)
        expected = [row for row in rows if config is None or row["task_name"] == config]
        assert json.loads(result.stdout.splitlines()[-1])["rows"] == len(expected) >= 3
        files[size] = hub.request_counts(board.repo_id)["file"]
        parts[size] = sum(part_number(p) is not None for p in hub.list_files(board.repo_id))
        shutil.rmtree(cache, ignore_errors=True)
    more = 2 * (parts[SIZES[1]] - parts[SIZES[0]]) if config is None else 0
    assert abs(files[SIZES[0]] + more - files[SIZES[1]]) <= 2, files
