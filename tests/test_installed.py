"""The package as users install it: the built wheel in a clean environment with its runtime
dependencies only, at the newest and at the oldest versions that pyproject allows.

The test environment holds much that a user's does not (pandas through `datasets`, duckdb,
the test extras), and those change how the runtime dependencies behave: with pandas installed,
pyarrow loads `pyarrow.compute` by itself, so a module that forgot to import it worked in every
test and crashed on every fresh install. Here nothing of the test environment reaches the
bundler: the wheel is built with `python -m build`, checked with `twine check`, installed by uv
into a new virtual environment, and every role's journey runs as subprocesses of that
environment's `bundler` console script against the test Hub server.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import typer
from conftest import SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec, gptnt_capabilities, make_row, write_tree
from helpers import subcommands
from hubserver import HubServer, client_env
from huggingface_hub import HfApi
from oidc_provider import GitHubOidc
from test_allowed_signers import weak_rsa_key
from test_card_refresh import commit_by_hand
from test_eval_results import EVAL_YAML, entries_of
from test_sign import make_key
from typer.core import TyperGroup

from bundler.cli.app import app
from bundler.hub.repo.paths import ALLOWED_SIGNERS, TASKS_FILE, bundle_of_path

ROOT = Path(__file__).parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "gptnt"
DIRECT_DEPENDENCIES = (
    "pydantic",
    "huggingface-hub",
    "zstandard",
    "typer",
    "rich",
    "jinja2",
    "pyyaml",
    "filelock",
    "pyarrow",
)

pytestmark = [pytest.mark.installed, pytest.mark.xdist_group("installed")]
"""One worker runs them all: the wheel and its two venvs are session fixtures, built once
there. (pytest-xdist: --dist loadfile keeps a module on one worker; --dist loadgroup would by
this mark.)"""


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """The sdist and the wheel, checked as the package index will check them: built from a
    copy of the checkout's tracked files, as `python -m build` builds them for a release, or
    (BUNDLER_TEST_WHEEL, in the release workflow) the very files about to be published."""
    given = os.environ.get("BUNDLER_TEST_WHEEL")
    out = Path(given) if given else build(tmp_path_factory)
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", wheel, sdist],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return Dist(wheel, sdist)


def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    source = tmp_path_factory.mktemp("source") / "statics-bundler"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (entry.decode() for entry in tracked)):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", out, source],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    return out


def source_files() -> set[str]:
    """Every file of the package as the source tree holds it, named where an install puts
    it: bundler/ as it is, the top-level templates/ as bundler/templates/ (pyproject.toml's
    package-dir). Python's caches aside, a file here that an install lacks is a bug."""
    found: set[str] = set()
    for folder, installed_as in (("bundler", "bundler"), ("templates", "bundler/templates")):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                found.add(f"{installed_as}/{path.relative_to(ROOT / folder).as_posix()}")
    return found


def compared(what: str, held: set[str], source: set[str]) -> list[str]:
    """What `what` lacks of the source tree's files, and holds beyond them, one line each."""
    return [f"{what} lacks {name}" for name in sorted(source - held)] + [
        f"{what} holds {name}, which the source tree does not" for name in sorted(held - source)
    ]


def test_the_wheel_and_the_sdist_hold_every_module_and_template(dist: Dist) -> None:
    """The packages are found, not listed (setup.py): a hand-written list once left out
    `bundler.hub.audit`, and every installed `bundler audit` crashed while every test of the
    source tree passed. Both files, every module and template, named when missing."""
    source = source_files()
    assert {"bundler/hub/audit/run.py", "bundler/templates/dataset_card.md.j2"} <= source
    with zipfile.ZipFile(dist.wheel) as wheel:
        in_wheel = {
            name
            for name in wheel.namelist()
            if not name.endswith("/") and not name.partition("/")[0].endswith(".dist-info")
        }
    with tarfile.open(dist.sdist) as sdist:
        # statics_bundler-VERSION/bundler/..., statics_bundler-VERSION/templates/...
        paths = [member.name.partition("/")[2] for member in sdist.getmembers() if member.isfile()]
    in_sdist = {
        f"bundler/{path}" if path.startswith("templates/") else path
        for path in paths
        if path.startswith(("bundler/", "templates/"))
    }
    problems = compared("the wheel", in_wheel, source) + compared("the sdist", in_sdist, source)
    assert not problems, "\n".join(problems)
    print(f"wheel: {dist.wheel.stat().st_size:,} bytes, {len(in_wheel)} files")
    print(f"sdist: {dist.sdist.stat().st_size:,} bytes")


def requirements(wheel: Path) -> list[str]:
    """The wheel's runtime requirements, as its metadata states them."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(name).decode())
    return [r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r]


@dataclass(frozen=True)
class Installed:
    """A virtual environment holding the wheel and its runtime dependencies, nothing else."""

    resolution: str
    bin: Path
    versions: dict[str, str]

    def env(self, hub: HubServer, home: Path, token: str | None = None) -> dict[str, str]:
        """A user's environment: this venv first on PATH, the test Hub as HF_ENDPOINT, a home
        of its own, and nothing of the test process (no PYTHONPATH, no VIRTUAL_ENV)."""
        return {
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "LANG": "C.UTF-8",
            **client_env(hub, token=token, hf_home=str(home / "hf-home")),
        }


@pytest.fixture(scope="session", params=["highest", "lowest-direct"], ids=["newest", "oldest"])
def installed(
    request: pytest.FixtureRequest, dist: Dist, tmp_path_factory: pytest.TempPathFactory
) -> Installed:
    """The wheel installed by uv at the newest versions, or at the lowest that pyproject allows
    for every direct dependency (`--resolution lowest-direct`, with the wheel's requirements
    named on the command line so that they count as direct)."""
    resolution = str(request.param)
    venv = tmp_path_factory.mktemp(f"venv-{request.param}")
    uv = [sys.executable, "-m", "uv"]
    subprocess.run([*uv, "venv", "-q", "--python", sys.executable, venv], check=True)
    python = venv / "bin" / "python"
    install = [*uv, "pip", "install", "-q", "--python", python, "--resolution", resolution]
    done = subprocess.run(
        [*install, dist.wheel, *requirements(dist.wheel)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    listed = subprocess.run(
        [*uv, "pip", "list", "--python", python, "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    versions = {entry["name"].lower(): entry["version"] for entry in json.loads(listed.stdout)}
    return Installed(resolution, venv / "bin", versions)


def test_the_environment_holds_the_runtime_dependencies_only(installed: Installed) -> None:
    names = set(installed.versions)
    assert "statics-bundler" in names
    assert not names & {"pytest", "datasets", "duckdb", "pandas", "hypothesis", "mypy", "ruff"}
    assert all(name in names for name in DIRECT_DEPENDENCIES)
    if installed.resolution == "lowest-direct":
        # each direct dependency at its lower bound (rich: huggingface_hub and typer need 13.8)
        assert installed.versions["pydantic"] == "2.6.0"
        assert installed.versions["pyarrow"] == "15.0.0"
        assert installed.versions["zstandard"] == "0.22.0"
    print(f"{installed.resolution}: {json.dumps(installed.versions, sort_keys=True)}")


_TABLES_ALONE = """
import json, sys
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.leaderboard.tables import AllTasksTable, task_table_bytes
rows = [TableRow.model_validate(row) for row in json.loads(sys.argv[1])]
board = AllTasksTable.empty().updated(rows[:2]).updated(rows[1:], removed=[rows[0].bundle_id])
task = rows[-1].task_name
table = task_table_bytes(TaskBoard.of(task, board.rows(task)))
again = AllTasksTable.read(board.files())
print(json.dumps({"ids": [row.bundle_id for row in again.rows()], "table_bytes": len(table)}))
# as the console script ends once pyarrow is loaded (bundler.cli.app): Arrow's own teardown can
# abort the process at exit (apache/arrow#34314), which is not what this script tests
sys.stdout.flush()
import os; os._exit(0)
"""


def test_the_tables_work_where_nothing_else_loads_pyarrow_compute(
    installed: Installed, hub: HubServer, tmp_path: Path
) -> None:
    """The Arrow calls of the leaderboard tables, in the user's environment: there nothing
    loads `pyarrow.compute` on the bundler's behalf."""
    rows = [make_row(model, metrics={"em": {"acc": 0.5}}) for model in ("gpt", "qwen", "claude")]
    argument = json.dumps([row.model_dump(mode="json") for row in rows])
    result = subprocess.run(
        [installed.bin / "python", "-c", _TABLES_ALONE, argument],
        capture_output=True,
        text=True,
        env=installed.env(hub, tmp_path),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["ids"] == sorted(row.bundle_id for row in rows[1:])
    assert outcome["table_bytes"] > 0


def app_commands(group: TyperGroup | None = None, prefix: str = "") -> set[str]:
    """Every command of the `bundler` typer app, subcommands named with their group
    (`tasks define`): what the installed journey must run, each at least once."""
    group = group or typer.main.get_group(app)
    found: set[str] = set()
    for name, command in subcommands(group).items():
        if isinstance(command, TyperGroup):
            found |= app_commands(command, f"{prefix}{name} ")
        else:
            found.add(f"{prefix}{name}")
    return found


def command_of(args: list[str]) -> str:
    """The command a `bundler` command line runs (`upload`, `tasks define`): its leading
    words that name commands, the group's own options (and their values) skipped."""
    node: Any = typer.main.get_group(app)
    words: list[str] = []
    rest = iter(args)
    for arg in rest:
        if not isinstance(node, TyperGroup):
            break
        if arg.startswith("-"):
            option = next((p for p in node.params if arg in getattr(p, "opts", ())), None)
            if option is not None and not option.is_flag:
                next(rest, None)  # `--config FILE`: its value is no command
            continue
        node = subcommands(node).get(arg)
        if node is None:
            break
        words.append(arg)
    return " ".join(words)


class User:
    """One person (or job) at a terminal of the clean environment, in a folder of their own.
    Every `bundler` command they run is added to `ran`: the journey that shares it must run
    every command (`app_commands`)."""

    def __init__(
        self,
        installed: Installed,
        hub: HubServer,
        home: Path,
        token: str | None,
        ran: set[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.installed = installed
        self.hub = hub
        self.home = home
        self.token = token
        self.ran = set() if ran is None else ran
        self.extra_env = env or {}
        """What their environment holds besides (a CI job's id-token endpoint, say)."""
        home.mkdir(parents=True, exist_ok=True)

    def run(self, *args: object) -> subprocess.CompletedProcess[str]:
        command = [str(arg) for arg in args]
        if command[0] == "bundler":
            self.ran.add(command_of(command[1:]))
        result = subprocess.run(
            [str(self.installed.bin / command[0]), *command[1:]],
            capture_output=True,
            text=True,
            env=self.installed.env(self.hub, self.home, self.token) | self.extra_env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            timeout=300,
            check=False,
        )
        output = result.stdout + result.stderr
        for secret in (WRITE_TOKEN, SUBMITTER_TOKEN, *self.hub.exchanged_tokens()):
            assert secret not in output
        assert "Traceback" not in output, output[-3000:]
        assert "internal error" not in output.lower(), output[-3000:]
        assert "Warning" not in result.stderr, result.stderr  # nothing not theirs to act on
        return result

    def bundler(self, *args: object, code: int = 0) -> dict[str, Any]:
        """Run `bundler ARGS --json`; assert its exit code; its JSON report."""
        result = self.run("bundler", *args, "--json")
        assert result.returncode == code, (args, result.stderr[-3000:], result.stdout[-3000:])
        report: dict[str, Any] = json.loads(result.stdout)
        assert report["exit_code"] == code, report
        return report


def archives(hub: HubServer, repo_id: str, revision: str = "main") -> list[str]:
    return [p for p in hub.list_files(repo_id, revision=revision) if p.endswith(".tar.zst")]


def comments(repo_id: str, num: int) -> list[str]:
    """What the pull request's discussion holds, as the Hub's API gives it."""
    details = HfApi(token=WRITE_TOKEN).get_discussion_details(repo_id, num, repo_type="dataset")
    return [event.content for event in details.events if event.type == "comment"]  # type: ignore[attr-defined]


def test_every_command_is_listed() -> None:
    """The list the journey is held to walks the subcommands too."""
    commands = app_commands()
    assert {"init", "audit", "template", "tasks define", "signers remove"} <= commands
    assert "tasks" not in commands and "signers" not in commands
    assert command_of(["--config", "b.toml", "tasks", "define", "x", "--repo", "r"]) == (
        "tasks define"
    )


@pytest.fixture
def github(hub: HubServer) -> Iterator[GitHubOidc]:
    with GitHubOidc(hub).serving() as endpoint:
        yield endpoint


def test_every_command_in_every_role_s_journey_through_the_console_script(
    installed: Installed, hub: HubServer, repo_id: str, tmp_path: Path, github: GitHubOidc
) -> None:
    """Each command as its user runs it, each step checked by its exit code, by what the Hub
    then holds, and (User.run) by an output free of tracebacks and internal errors; at the
    end, every command of the app must have been run. The nightly job stores no token: its
    workflow is the repository's Trusted Publisher (a GitHub Actions job's id token)."""
    ran: set[str] = set()
    maintainer = User(installed, hub, tmp_path / "maintainer", WRITE_TOKEN, ran)
    publisher = {"HF_OIDC_RESOURCE": f"datasets/{repo_id}"}
    hub.add_trusted_publisher(publisher["HF_OIDC_RESOURCE"], {"workflow": "nightly-sync"})
    nightly = User(installed, hub, tmp_path / "nightly", None, ran, github.env() | publisher)
    submitter = User(installed, hub, tmp_path / "submitter", SUBMITTER_TOKEN, ran)
    stranger = User(installed, hub, tmp_path / "stranger", None, ran)

    def head() -> str:
        return hub.commits(repo_id)[0].oid

    # The evaluated dataset is on the Hub, its card saying how many rows its split has.
    dataset = f"GPTNT/expert-VQA-{repo_id[-10:]}"
    card = "---\ndataset_info:\n  splits:\n  - name: test\n    num_examples: 3\n---\n"
    hub.create_repo(dataset, files={"README.md": card.encode(), "eval.yaml": EVAL_YAML.encode()})
    pin = {"hf_repo_id": dataset, "resolved_revision": hub.commits(dataset)[0].oid, "rows": 3}

    # The maintainer starts a leaderboard (in the repository `hf repos create` made), defines
    # its task, and allows the submitter's key and their own to sign bundles.
    started = maintainer.bundler("init", "--repo", repo_id)
    assert started["created"] is False and started["commit"] == head()
    maintainer.bundler(
        "tasks", "define", "expert-vqa", "--repo", repo_id, "--dataset", dataset,
        "--split", "test", "--metric", "exact_match.accuracy",
    )  # fmt: skip
    definitions = json.loads(hub.file_bytes(repo_id, TASKS_FILE) or b"{}")
    assert "exact_match.accuracy" in json.dumps(definitions)
    listed = maintainer.bundler("tasks", "list", "--repo", repo_id)
    assert listed["tasks"]["expert-vqa"]["metric"] == "exact_match.accuracy"
    submitter_key = make_key(submitter.home, "id_ed25519")
    maintainer_key = make_key(maintainer.home, "id_ed25519")
    for name, key in (("submitter", submitter_key), ("leaderboard-bot", maintainer_key)):
        added = maintainer.bundler(
            "signers", "add", name, "--key", key.with_suffix(".pub"), "--repo", repo_id
        )
        assert added["changed"] and added["commit"] == head()
    allowed = (hub.file_bytes(repo_id, ALLOWED_SIGNERS) or b"").decode()
    assert submitter_key.with_suffix(".pub").read_text().split()[1] in allowed
    # anyone may see who signs for a public leaderboard
    shown_signers = stranger.bundler("signers", "list", "--repo", repo_id)
    assert sorted(p for s in shown_signers["signers"] for p in s["principals"]) == [
        "leaderboard-bot",
        "submitter",
    ]

    # The nightly job publishes what the harness wrote, then finds nothing new.
    runs = [RunSpec(model=model, **pin) for model in ("qwen3", "llama4")]
    write_tree(nightly.home / "output", runs)
    nightly_sync = (
        "sync", "output", "--repo", repo_id, "--expect", "expert-vqa=3",
        "--submitter-name", "nightly",
    )  # fmt: skip
    first = nightly.bundler(*nightly_sync)
    assert first["counts"]["published"] == 2 and len(archives(hub, repo_id)) == 2
    assert hub.commits(repo_id)[0].author == "[OIDC]"  # the exchanged token's, on the Hub
    commits = len(hub.commits(repo_id))
    again = nightly.bundler(*nightly_sync)
    assert again["counts"]["published"] == 0 and again["counts"]["already_there"] == 2
    assert len(hub.commits(repo_id)) == commits

    # The maintainer bundles a baseline, signs it and publishes it themselves.
    write_tree(maintainer.home / "output", [RunSpec(model="baseline", **pin)])
    maintainer.bundler(
        "collect", "output", "--expect", "expert-vqa=3", "--submitter-name", "GPTNT maintainers"
    )
    signed = maintainer.bundler("sign", "bundles", "--key", maintainer_key)
    assert [bundle["outcome"] for bundle in signed["bundles"]] == ["signed"]
    uploaded = maintainer.bundler("upload", "bundles", "--repo", repo_id)
    assert [bundle["outcome"] for bundle in uploaded["bundles"]] == ["published"]
    assert len(archives(hub, repo_id)) == 3 and uploaded["commits"] == [head()]

    # A submitter bundles and signs, checks, inspects, plans and proposes a run of their own.
    gptnt_run = RunSpec(
        player_name="gpt-5-2",
        exact_capabilities=gptnt_capabilities("gpt-5-2"),
        **pin,
    )
    write_tree(submitter.home / "output", [gptnt_run])
    collected = submitter.bundler(
        "collect", "output", "-o", "bundles", "--expect", "expert-vqa=3",
        "--submitter-name", "Ada Lovelace", "--submitter-contact", "@ada",
        "--sign-key", submitter_key,
    )  # fmt: skip
    assert len(collected["bundles"]) == 1
    assert [b["outcome"] for b in collected["signing"]["bundles"]] == ["signed"]
    verified = submitter.bundler("verify", "bundles")
    assert verified["bundles"][0]["signer"] == collected["signing"]["bundles"][0]["signer"]
    (local,) = sorted((submitter.home / "bundles").rglob("*.tar.zst"))
    inspected = submitter.bundler("inspect", local)
    assert inspected["claim"]["player_name"] == "gpt-5-2"
    assert inspected["verification"]["signer"] == verified["bundles"][0]["signer"]
    submitter.bundler("upload", "bundles", "--repo", repo_id, "--create-pr", "--dry-run")
    assert hub.pull_requests(repo_id) == []
    proposal = submitter.bundler("upload", "bundles", "--repo", repo_id, "--create-pr")
    (proposed,) = hub.pull_requests(repo_id)
    assert proposed.status == "open" and proposed.author == "submitter"
    assert proposal["pull_request_num"] == proposed.num
    (mine,) = [p for p in archives(hub, repo_id, proposed.ref) if "/gpt-5-2_" in p]
    assert hub.file_bytes(repo_id, mine, revision=proposed.ref) == local.read_bytes()
    # The submitter asks where it stands: proposed, waiting for a review.
    waiting = submitter.bundler("status", "--repo", repo_id)
    (standing,) = waiting["pull_requests"]
    assert standing["num"] == proposed.num and standing["next_step"] == "wait-for-review"

    # The maintainer looks at the pull request's bundle, then reviews and merges it.
    before_review = head()
    fetched_pr = maintainer.bundler(
        "download", "--repo", repo_id, "--pr", proposed.num, "-o", "review"
    )
    assert len(fetched_pr["bundles"]) == 1
    (pr_copy,) = (maintainer.home / "review").rglob("*.tar.zst")
    assert pr_copy.read_bytes() == local.read_bytes()
    reviewed = maintainer.bundler("review", "--repo", repo_id, "--comment", "--merge")
    assert [pr["merge"] for pr in reviewed["pull_requests"]] == ["merged"]
    (closed,) = hub.pull_requests(repo_id)  # its files are on main, committed by review
    assert closed.status == "closed" and head() != before_review
    (bundle_review,) = reviewed["pull_requests"][0]["bundles"]
    (signature,) = [c for c in bundle_review["checks"] if c["name"] == "signature"]
    assert signature["status"] == "passed" and "signed by submitter" in signature["detail"]
    posted = comments(repo_id, closed.num)
    assert any(f"review of PR #{closed.num}: clean" in text for text in posted), posted
    merged = submitter.bundler("status", "--repo", repo_id, "--pr", closed.num)
    assert merged["pull_requests"][0]["next_step"] == "merged"
    assert merged["pull_requests"][0]["review"]["reviewer"] == "leaderboard-bot"
    assert hub.file_bytes(repo_id, mine) == local.read_bytes()
    assert len(archives(hub, repo_id)) == 4
    table = pq.read_table(
        io.BytesIO(hub.file_bytes(repo_id, "leaderboard/bundles/part-00000.parquet") or b"")
    )
    assert sorted(table.column("submitter_name").to_pylist()) == [
        "Ada Lovelace",
        "GPTNT maintainers",
        "nightly",
        "nightly",
    ]

    # The card is up to date (CI's check), so refreshing it commits nothing.
    after_review = head()
    checked = maintainer.bundler("card", "--repo", repo_id, "--check")
    assert checked["changed"] is False
    refreshed = maintainer.bundler("card", "--repo", repo_id)
    assert refreshed["commit"] is None and head() == after_review
    readme = (hub.file_bytes(repo_id, "README.md") or b"").decode()
    assert "**4** submission bundle(s)" in readme and dataset in readme
    assert f"pip install statics-bundler=={installed.versions['statics-bundler']} " in readme

    # The maintainer downloads the board and compares two of its bundles.
    downloaded = maintainer.bundler("download", "--repo", repo_id, "-o", "board")
    assert len(downloaded["bundles"]) == 4
    mine_id = bundle_of_path(mine)  # what the test expects, from the source's own layout
    assert mine_id is not None
    fetched = mine_id.local_archive(maintainer.home / "board")
    assert fetched.read_bytes() == local.read_bytes()
    nightly_archive = next(
        p for p in (maintainer.home / "board").rglob("*.tar.zst") if "qwen3" in p.parent.name
    )
    differs = maintainer.run("bundler", "diff", nightly_archive, fetched, "--json")
    assert differs.returncode == 1, differs.stderr  # two runs: they differ, and it says how
    assert json.loads(differs.stdout)["identical"] is False

    # The submitter also exports their bundle for GPTNT's own submission flow.
    exported = submitter.bundler(
        "export-gptnt", "bundles", "-o", "submissions",
        "--player-config", FIXTURES / "gpt-5-2.yaml",
    )  # fmt: skip
    assert [bundle["outcome"] for bundle in exported["bundles"]] == ["exported"]
    (folder,) = (submitter.home / "submissions").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["metrics.json", "submission.yaml"]

    # The maintainer writes the nightly workflow from the shipped template.
    workflow = maintainer.home / ".github" / "workflows" / "nightly-sync.yml"
    written = maintainer.bundler("template", "nightly-sync", "-o", workflow)
    assert written["output"] == str(workflow)
    assert workflow.read_bytes() == (ROOT / "templates" / "nightly-sync.yml").read_bytes()
    # ... and the audit's across runners (the wheel ships every template).
    spread = maintainer.home / ".github" / "workflows" / "leaderboard-audit.yml"
    maintainer.bundler("template", "leaderboard-audit", "-o", spread)
    assert spread.read_bytes() == (ROOT / "templates" / "leaderboard-audit.yml").read_bytes()

    # A stranger, with no token, re-checks the board from its bundles: clean.
    audited = stranger.bundler("audit", "--repo", repo_id)
    assert audited["findings"] == [] and audited["bundles_on_branch"] == 4
    assert sorted(bundle["verdict"] for bundle in audited["audited"]) == ["verified"] * 4
    assert head() == after_review
    # ... and plans the baseline's score for its model's own page, the model named for its setup
    # (a provider's model name is no repository): a dry run opens no pull request.
    model = f"gptnt/baseline-{repo_id[-10:]}"
    hub.create_repo(model, repo_type="model")
    setup = next(p.split("/")[2] for p in archives(hub, repo_id) if "/baseline_" in p)
    planned = stranger.bundler(
        "eval-results", "--repo", repo_id, "--model-repo", model, "--setup", setup, "--dry-run"
    )
    (entry,) = entries_of(planned["proposals"][0]["files"][0]["text"])
    assert entry.dataset_id == dataset and "signed by leaderboard-bot" in (entry.notes or "")
    assert hub.pull_requests(model, repo_type="model") == []
    # ... and spread over two runners, each a shard of that commit, their reports merged
    for index in (1, 2):
        shard = stranger.bundler(
            "audit", "--repo", repo_id, "--revision", head(), "--shard", f"{index}/2"
        )
        (stranger.home / f"shard-{index}.json").write_text(json.dumps(shard))
    merged = stranger.bundler("audit", "--merge", "shard-1.json", "shard-2.json")
    assert merged["findings"] == [] and merged["merge"]["merged"] == [1, 2]
    verdicts = [(b["bundle_id"], b["verdict"]) for b in merged["audited"]]
    assert verdicts == sorted((b["bundle_id"], b["verdict"]) for b in audited["audited"])

    # The submitter's key is retired (its line kept, valid until now), then withdrawn.
    retired = maintainer.bundler("signers", "retire", "submitter", "--repo", repo_id)
    assert retired["changed"] and retired["commit"] == head()
    assert (
        'submitter namespaces="statics-bundler",valid-before="'
        in (hub.file_bytes(repo_id, ALLOWED_SIGNERS) or b"").decode()
    )
    # what the key signed before it retired still stands: history is not rewritten
    still = stranger.bundler("audit", "--repo", repo_id)
    assert still["findings"] == [] and "submitter" in str(still["audited"])
    removed = maintainer.bundler("signers", "remove", "submitter", "--repo", repo_id)
    assert removed["changed"] and removed["commit"] == head()
    allowed = (hub.file_bytes(repo_id, ALLOWED_SIGNERS) or b"").decode()
    assert "submitter" not in allowed and "leaderboard-bot" in allowed

    # The maintainer requires signed bundles: the nightly's next run, unsigned, is refused and
    # named, and the bundles already on the board stay.
    required = maintainer.bundler("signers", "require", "--repo", repo_id)
    assert required["require_signature"] is True and required["commit"] == head()
    assert json.loads(hub.file_bytes(repo_id, TASKS_FILE) or b"{}")["require_signature"] is True
    write_tree(nightly.home / "output", [RunSpec(model="mistral", **pin)], how_do_you=False)
    refused = nightly.bundler(*nightly_sync, code=1)
    (late,) = [bundle for bundle in refused["bundles"] if bundle["outcome"] == "refused"]
    assert "/" in late["bundle_id"] and late["bundle_id"].startswith("mistral_")
    assert "unsigned" in late["detail"] and len(archives(hub, repo_id)) == 4

    never = sorted(app_commands() - ran)
    assert not never, f"the installed journey never ran: {', '.join(never)}"
    print(f"{installed.resolution}: ran {len(ran)} commands: {', '.join(sorted(ran))}")


def test_the_first_upload_into_a_new_leaderboard(
    installed: Installed, hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """The very first commit of a leaderboard in a repository `hf repos create` made (the
    fixture's): no table to read yet, so nothing but the bundler's own imports stands behind
    its Arrow calls."""
    maintainer = User(installed, hub, tmp_path, WRITE_TOKEN)
    write_tree(tmp_path / "output", [RunSpec(rows=3), RunSpec(model="qwen3", rows=3)])
    maintainer.bundler("collect", "output", "--expect", "expert-vqa=3")
    uploaded = maintainer.bundler("upload", "bundles", "--repo", repo_id)
    assert [bundle["outcome"] for bundle in uploaded["bundles"]] == ["published"] * 2
    table = hub.file_bytes(repo_id, "leaderboard/bundles/part-00000.parquet") or b""
    assert pq.read_table(io.BytesIO(table)).num_rows == 2


def test_a_large_run_takes_the_threaded_paths_as_installed(
    installed: Installed, hub: HubServer, tmp_path: Path
) -> None:
    """A run large enough for collect's worker threads (its body compressed by zstd's workers,
    the frame ended beside the manifest) and for verify's read-ahead thread (an archive of
    more than 2 MB), at the newest and oldest versions allowed: it verifies, and the same
    archive with one byte changed in its middle is refused (exit 1), without a traceback."""
    from benchlib import TASK, write_own_run

    person = User(installed, hub, tmp_path, None)
    write_own_run(tmp_path / "output", 3000)
    collected = person.bundler("collect", "output", "--expect", f"{TASK}=3000")
    (bundle,) = collected["bundles"]
    archive = tmp_path / bundle["archive"]
    assert archive.stat().st_size > 2 << 20, "too small for verify to read it ahead"
    verified = person.bundler("verify", "bundles")
    assert [c["status"] for c in verified["bundles"][0]["checks"]].count("failed") == 0
    tampered = tmp_path / "tampered" / archive.parent.name  # a copy, to be changed
    shutil.copytree(archive.parent, tampered)
    copy = tampered / archive.name
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0xFF
    copy.write_bytes(bytes(data))
    refused = person.bundler("verify", "tampered", code=1)
    assert "failed" in [c["status"] for c in refused["bundles"][0]["checks"]]


def test_what_a_maintainer_finds_is_kept_and_a_key_openssh_refuses_is_refused(
    installed: Installed, hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """Issue 36, as installed: `init` on a repository with the owner's card and licence
    refuses, then with --adopt keeps them; `signers add` refuses a 768-bit RSA key."""
    maintainer = User(installed, hub, tmp_path, WRITE_TOKEN)
    card = b"---\nlicense: mit\n---\n\n# Mine\n\nMy text.\n"
    commit_by_hand(repo_id, {"README.md": card, "LICENSE": b"MIT\n"})
    refused = maintainer.bundler("init", "--repo", repo_id, code=1)
    assert refused["error_kind"] == "repository-not-empty"
    assert maintainer.bundler("init", "--repo", repo_id, "--adopt")["adopted"] == [
        "LICENSE",
        "README.md",
    ]
    kept = (hub.file_bytes(repo_id, "README.md") or b"").decode()
    assert "license: mit" in kept and "My text." in kept and hub.file_bytes(repo_id, "LICENSE")
    weak = weak_rsa_key(tmp_path, "weak")
    added = maintainer.bundler(
        "signers", "add", "ada", "--repo", repo_id, "--key", weak.with_suffix(".pub"), code=2
    )
    assert "768 bits" in added["error"]
