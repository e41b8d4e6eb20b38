"""Every command's report says what it means (issue 35): a journey through every command, in
its human and its --json form, each output run through tests/saysitmeans.py (no field printed
without its value, no empty string in --json). Audit is run on a board with a forged field, a
ghost row and a bundle left off, so that its findings (with and without a field) are shown;
card upgrades a board of layout 2 and names the layout it writes."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import SUBMITTER_TOKEN, WRITE_TOKEN
from factory import RunSpec, gptnt_capabilities, write_tree
from helpers import _command, run_cli, subcommands
from hubserver import HubServer
from saysitmeans import check_human, check_json, empty_fields, empty_strings
from test_audit import forged_score, table, with_rows
from test_card_refresh import commit_by_hand
from test_eval_results import EVAL_YAML
from test_layout_upgrade import layout_2_files
from test_sign import make_key
from test_upload import make_bundles

from bundler.hub.leaderboard.tables import LAYOUT_VERSION
from bundler.hub.repo.paths import table_part

FIXTURES = Path(__file__).parent / "fixtures" / "gptnt"


def command_names() -> set[str]:
    """Every command of the typer app, a group's as `group command`."""
    return {
        f"{name} {sub}" if hasattr(command, "commands") else name
        for name, command in subcommands(_command()).items()
        for sub in (subcommands(command) if hasattr(command, "commands") else [""])
    }


def command_name(argv: list[str]) -> str:
    groups = {
        name for name, command in subcommands(_command()).items() if hasattr(command, "commands")
    }
    return " ".join(argv[:2]) if argv[0] in groups else argv[0]


class User:
    """A person with a folder and a token, running each command twice: as a person reads it,
    then with --json, both checked."""

    def __init__(self, home: Path, token: str) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.home, self.token = home, token
        self.ran: list[str] = []

    def both(self, *args: object, codes: tuple[int, ...] = (0,)) -> Any:
        """The command as a person reads it, then its --json report (returned)."""
        human = self.human(*args, codes=codes)
        assert human.returncode in codes, human.stderr
        return self.json(*args, codes=codes)

    def human(
        self, *args: object, codes: tuple[int, ...] = (0,)
    ) -> subprocess.CompletedProcess[str]:
        result = run_cli(*args, env={"HF_TOKEN": self.token}, cwd=self.home)
        assert result.returncode in codes, (args, result.stderr)
        check_human(result)
        self.ran.append(command_name([str(arg) for arg in args]))
        return result

    def json(self, *args: object, codes: tuple[int, ...] = (0,)) -> Any:
        result = run_cli(*args, "--json", env={"HF_TOKEN": self.token}, cwd=self.home)
        assert result.returncode in codes, (args, result.stderr)
        return check_json(result)


def test_the_check_finds_what_the_issue_saw() -> None:
    """The two reports issue 35 quoted, and what is fine."""
    assert empty_fields("    finding field-differs, field , published , derived , detail x")
    assert empty_fields("submitter: \nrows: 3")
    assert empty_fields("(signer: , rows 3)")
    assert not empty_fields("3 finding(s):\nerror: a.toml: [sync] repo: expected OWNER/NAME")
    assert empty_strings({"a": [{"b": ""}], "c": " "}) == ["$.a[0].b", "$.c"]
    assert empty_strings({"a": None, "b": 0, "c": "x"}) == []


@pytest.mark.timeout(600)
def test_every_command_says_what_it_means(hub: HubServer, repo_id: str, tmp_path: Path) -> None:
    maintainer = User(tmp_path / "maintainer", WRITE_TOKEN)
    submitter = User(tmp_path / "submitter", SUBMITTER_TOKEN)
    dataset = f"GPTNT/expert-VQA-{repo_id[-10:]}"
    card = "---\ndataset_info:\n  splits:\n  - name: test\n    num_examples: 3\n---\n"
    hub.create_repo(dataset, files={"README.md": card.encode(), "eval.yaml": EVAL_YAML.encode()})
    pin = {"hf_repo_id": dataset, "resolved_revision": hub.commits(dataset)[0].oid, "rows": 3}

    maintainer.both("init", "--repo", repo_id)
    maintainer.both(
        "tasks", "define", "expert-vqa", "--repo", repo_id, "--dataset", dataset,
        "--split", "test", "--metric", "exact_match.accuracy",
    )  # fmt: skip
    maintainer.both("tasks", "list", "--repo", repo_id)
    maintainer.both("template", "nightly-sync")
    maintainer.both("template", "leaderboard-audit")

    # The nightly job: sync, twice (published, then already there).
    write_tree(maintainer.home / "output", [RunSpec(model=m, **pin) for m in ("qwen3", "llama4")])
    maintainer.both(
        "sync", "output", "--repo", repo_id, "--expect", "expert-vqa=3",
        "--submitter-name", "nightly",
    )  # fmt: skip

    # A submitter signs, checks, and proposes a run of their own.
    key = make_key(submitter.home, "ada")
    write_tree(
        submitter.home / "output",
        [RunSpec(player_name="gpt-5-2", exact_capabilities=gptnt_capabilities("gpt-5-2"), **pin)],
    )
    submitter.both(
        "collect", "output", "-o", "bundles", "--expect", "expert-vqa=3",
        "--submitter-name", "Ada Lovelace", "--submitter-contact", "@ada", "--sign-key", key,
    )  # fmt: skip
    submitter.both("sign", "bundles", "--key", key)
    submitter.both("verify", "bundles")
    (archive,) = sorted((submitter.home / "bundles").rglob("*.tar.zst"))
    submitter.both("inspect", archive)
    submitter.both(
        "export-gptnt", "bundles", "-o", "submissions", "--player-config",
        FIXTURES / "gpt-5-2.yaml",
    )  # fmt: skip
    maintainer.both(
        "signers", "add", "submitter", "--key", key.with_suffix(".pub"), "--repo", repo_id
    )
    maintainer.both("signers", "list", "--repo", repo_id)
    submitter.json("upload", "bundles", "--repo", repo_id, "--create-pr", "--dry-run")
    submitter.human("upload", "bundles", "--repo", repo_id, "--create-pr", "--dry-run")
    submitter.human("upload", "bundles", "--repo", repo_id, "--create-pr")
    submitter.both("status", "--repo", repo_id)  # waiting for a review
    maintainer.json("review", "--repo", repo_id)
    maintainer.human("review", "--repo", repo_id, "--comment")
    reviewed = submitter.both("status", "--repo", repo_id)  # its verdicts, then the merge
    num = reviewed["pull_requests"][0]["num"]
    maintainer.human("review", "--repo", repo_id, "--comment", "--merge")
    submitter.both("status", "--repo", repo_id, "--pr", num)  # merged
    maintainer.both("card", "--repo", repo_id)
    maintainer.both("card", "--repo", repo_id, "--check")
    maintainer.both("download", "--repo", repo_id, "-o", "board")
    ours = sorted((maintainer.home / "board").rglob("*.tar.zst"))
    maintainer.both("verify", "bundles")  # the nightly's, unsigned, without a submitter contact
    maintainer.both("inspect", sorted((maintainer.home / "bundles").rglob("*.tar.zst"))[0])
    maintainer.both("diff", ours[0], ours[1], codes=(1,))
    maintainer.both("audit", "--repo", repo_id)
    model = f"gptnt/qwen3-{repo_id[-10:]}"  # the nightly's model, named for its setup
    hub.create_repo(model, repo_type="model")
    setup = next(
        r["bundle_id"].split("/")[0]
        for r in table(hub, repo_id).to_pylist()
        if r["model_name"] == "qwen3"
    )
    maintainer.both(
        "eval-results", "--repo", repo_id, "--model-repo", model, "--setup", setup, "--dry-run"
    )
    maintainer.both("signers", "retire", "submitter", "--repo", repo_id)
    maintainer.human("signers", "remove", "submitter", "--repo", repo_id)
    maintainer.json("signers", "remove", "submitter", "--repo", repo_id, codes=(1,))  # gone
    # Signatures required while no signer is listed (a warning): the nightly's unsigned run is
    # refused, named; then the rule is cleared again.
    maintainer.both("signers", "require", "--repo", repo_id)
    write_tree(maintainer.home / "output", [RunSpec(model="mistral", **pin)], how_do_you=False)
    maintainer.both(
        "sync", "output", "--repo", repo_id, "--expect", "expert-vqa=3",
        "--submitter-name", "nightly", codes=(1,),
    )  # fmt: skip
    maintainer.both("signers", "require", "--off", "--repo", repo_id)

    # A board forged in the web page: a field changed, a ghost row, a bundle left off.
    original = table(hub, repo_id)
    rows = original.to_pylist()
    ghost = dict(rows[1], bundle_id="ghost_00000000/expert-vqa@unpinned", player_name="ghost")
    forged = [forged_score(rows[0], 0.99), ghost, *rows[2:]]
    commit_by_hand(repo_id, {table_part(0): with_rows(original, forged)})
    findings = maintainer.both("audit", "--repo", repo_id, codes=(1,))
    # The same audit spread over two shards, merged with one report missing, then both.
    for index in (1, 2):
        shard = maintainer.both("audit", "--repo", repo_id, "--shard", f"{index}/2", codes=(0, 1))
        (maintainer.home / f"shard-{index}.json").write_text(json.dumps(shard))
    maintainer.both("audit", "--merge", "shard-1.json", codes=(1,))
    merged = maintainer.both("audit", "--merge", "shard-1.json", "shard-2.json", codes=(1,))
    assert merged["findings"] == findings["findings"]
    assert {finding["kind"] for finding in findings["findings"]} >= {
        "field-differs", "unsupported-row", "missing-from-board",
    }  # fmt: skip
    narrow = run_cli("audit", "--repo", repo_id, env={"COLUMNS": "60"})
    assert narrow.returncode == 1
    check_human(narrow)
    # one bundle a line, as narrow: no field printed without its value
    assert re.search(r"file \S+, finding unsupported-row, detail \S", narrow.stderr)
    assert command_names() - set(maintainer.ran) - set(submitter.ran) == set()


def test_an_upgrade_names_the_layout_it_writes(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    """A board of layout 2, upgraded by card (a dry run first) and by an upload: the layout
    named is the one written (LAYOUT_VERSION), and every report passes the check."""
    hub.create_repo(repo_id, files=layout_2_files())
    maintainer = User(tmp_path, WRITE_TOKEN)
    planned = maintainer.human("card", "--repo", repo_id, "--dry-run")
    assert f"upgraded to layout {LAYOUT_VERSION}: " in planned.stdout + planned.stderr
    done = maintainer.human("card", "--repo", repo_id)
    assert f"upgraded to layout {LAYOUT_VERSION}: regenerated" in done.stdout + done.stderr
    assert f"layout {LAYOUT_VERSION}" in hub.commits(repo_id)[0].summary
    other = f"{repo_id}-up"
    hub.create_repo(other, files=layout_2_files())
    make_bundles(tmp_path, [RunSpec(task="wires", rows=2)])
    uploaded = maintainer.human("upload", "bundles", "--repo", other)
    assert "layout 2" not in uploaded.stdout + uploaded.stderr
