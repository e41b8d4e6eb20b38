"""Readable at 80 columns: every command's human output, rendered as a CI log renders it
(COLUMNS=80), shows each bundle id whole on one line: never wrapped, folded or cut. Every
command's --help at 80 columns shows every word whole, no sentence broken where its source
line ended; the reports at 100 columns wrap and never cut what matters."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import WRITE_TOKEN
from factory import RunSpec, write_tree
from helpers import run_cli, subcommands

LONG = "Qwen/Qwen3.5-27B-Instruct-2507-FP8-reasoning"
WIDE = {"COLUMNS": "80"}


def ids_whole(output: str, ids: list[str]) -> None:
    lines = output.splitlines()
    tables = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert all(len(line) <= 80 for line in tables), output  # a log line may be longer
    for bundle_id in ids:
        assert any(bundle_id in line for line in lines), f"{bundle_id} broken in:\n{output}"


def collected(tmp_path: Path) -> tuple[Path, list[str], list[Path]]:
    root, bundles = tmp_path / "out", tmp_path / "bundles"
    specs = [RunSpec(model=LONG, rows=3), RunSpec(model="gpt-5.2", rows=3, task="maze-solve")]
    write_tree(root, specs)
    result = run_cli("collect", root, "-o", bundles, "--allow-partial", "--json", env=WIDE)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    ids = [bundle["bundle_id"] for bundle in report["bundles"]]
    human = run_cli("collect", root, "-o", bundles, "--allow-partial", env=WIDE)
    ids_whole(human.stderr, ids)
    return bundles, ids, [Path(bundle["archive"]) for bundle in report["bundles"]]


def test_local_commands_keep_ids_whole_at_80_columns(tmp_path: Path) -> None:
    bundles, ids, archives = collected(tmp_path)
    assert max(len(bundle_id) for bundle_id in ids) > 50
    long_archive = next(a for a, i in zip(archives, ids, strict=True) if i.startswith("qwen"))
    long_id = next(i for i in ids if i.startswith("qwen"))
    ids_whole(run_cli("verify", bundles, env=WIDE).stderr, [])
    ids_whole(run_cli("inspect", long_archive, env=WIDE).stderr, [long_id])
    ids_whole(run_cli("diff", long_archive, long_archive, env=WIDE).stderr, [long_id])


def test_upload_keeps_ids_whole_at_80_columns(tmp_path: Path, repo_id: str) -> None:
    bundles, ids, _ = collected(tmp_path)
    result = run_cli(
        "upload",
        bundles,
        "--repo",
        repo_id,
        "--allow-partial",
        env={**WIDE, "HF_TOKEN": WRITE_TOKEN},
    )
    assert result.returncode == 0, result.stderr
    ids_whole(result.stderr, ids)


def test_progress_shows_totals_and_units() -> None:
    from io import StringIO

    from rich.console import Console

    from bundler.cli.progressbar import ProgressBar

    console = Console(file=StringIO(), width=80, force_terminal=True)
    with ProgressBar(console) as bar:
        bar.begin("verifying x", 7, unit="predictions")
        bar.advance(3)
        column = bar._progress.columns[2]
        task = bar._progress.tasks[0]
        assert column.render(task).plain == "3/7 predictions"  # type: ignore[attr-defined]


def test_sync_download_and_export_keep_ids_whole_at_80_columns(
    tmp_path: Path, repo_id: str
) -> None:
    root = tmp_path / "out"
    write_tree(root, [RunSpec(model=LONG, rows=3)])
    env = {**WIDE, "HF_TOKEN": WRITE_TOKEN}
    sync = run_cli(
        "sync", root, "-o", tmp_path / "b", "--repo", repo_id, "--allow-partial", env=env
    )
    assert sync.returncode == 0, sync.stderr
    (archive,) = (tmp_path / "b").rglob("*.tar.zst")
    bundle_id = f"{archive.parent.name}/{archive.name.removesuffix('.tar.zst')}"
    ids_whole(sync.stderr, [bundle_id])
    download = run_cli("download", "--repo", repo_id, "-o", tmp_path / "d", env=env)
    assert download.returncode == 0, download.stderr
    ids_whole(download.stderr, [bundle_id])
    config = Path(__file__).parent / "fixtures" / "gptnt" / "gpt-5-2.yaml"
    export = run_cli(
        "export-gptnt", tmp_path / "b", "-o", tmp_path / "e", "--player-config", config, env=WIDE
    )
    ids_whole(export.stderr, [bundle_id])  # skipped: another player, named whole


def rendered_upload(outcomes: dict[str, int]) -> str:
    from io import StringIO

    from rich.console import Console

    from bundler.cli.render import render_upload
    from bundler.hub.publish.plan import BundlePlan, UploadReport

    bundles = [
        BundlePlan(
            bundle_id=f"model-{outcome}-{number}_1054f537/maze@unpinned",
            action="refused" if outcome == "refused" else "new",
            outcome=outcome,  # type: ignore[arg-type]
            detail="failed verification (sha256)" if outcome == "refused" else None,
        )
        for outcome, count in outcomes.items()
        for number in range(count)
    ]
    console = Console(file=StringIO(), width=200, force_terminal=False)
    render_upload(
        UploadReport(repo_id="gptnt/lb", revision="main", dry_run=False, bundles=bundles), console
    )
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_an_upload_of_thousands_of_unchanged_bundles_tables_only_what_changed() -> None:
    shown = rendered_upload({"already-there": 2_000, "published": 2, "refused": 1})
    assert "model-already-there-" not in shown  # the nightly's unchanged bundles: counted only
    for bundle_id in ("model-published-0_", "model-published-1_", "model-refused-0_"):
        assert bundle_id in shown
    assert "failed verification (sha256)" in shown
    assert "2000 bundle(s) not tabled" in shown
    assert "2 published to main, 2000 already there, 0 held back, 1 refused or failed" in shown


def test_an_upload_of_many_new_bundles_still_tables_each_refused_one() -> None:
    shown = rendered_upload({"published": 300, "refused": 3})
    assert "model-published-" not in shown
    assert all(f"model-refused-{number}_" in shown for number in range(3))
    assert "300 bundle(s) not tabled" in shown


def test_an_upload_of_a_few_bundles_tables_every_one() -> None:
    shown = rendered_upload({"already-there": 30, "published": 2})
    assert all(f"model-already-there-{number}_" in shown for number in range(30))
    assert "not tabled" not in shown


# ------------------------------------------------------------------------- --help at 80


def commands() -> Iterator[tuple[list[str], Any]]:
    """Every command and group of the `bundler` app, as click builds it: its words, itself."""
    from typer.main import get_command

    from bundler.cli.app import app

    def walk(command: Any, words: list[str]) -> Iterator[tuple[list[str], Any]]:
        yield words, command
        for name, sub in (subcommands(command) if hasattr(command, "commands") else {}).items():
            yield from walk(sub, [*words, name])

    yield from walk(get_command(app), [])


COMMAND_WORDS = [words for words, _ in commands()]


def source_words(command: Any) -> set[str]:
    """The words --help must show whole: the command's help, each parameter's names,
    metavar, help and environment variable."""
    from typer.core import TyperOption

    texts = [command.help or ""]
    for param in command.params:
        texts += [*param.opts] if isinstance(param, TyperOption) else []
        texts += [param.metavar or "", param.help or ""]
        if isinstance(param.envvar, str) and param.show_envvar:
            texts.append(f"{param.envvar}]")  # as in `[env var: HF_TOKEN]`
    return {word.replace("\\[", "[") for text in texts for word in text.split()}


def help_at_80(words: list[str]) -> str:
    result = run_cli(*words, "--help", env={"COLUMNS": "80", "TERM": "dumb"})
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("words", COMMAND_WORDS, ids=lambda words: " ".join(words) or "bundler")
def test_help_at_80_columns_shows_every_word_whole(words: list[str]) -> None:
    command = dict((tuple(w), c) for w, c in commands())[tuple(words)]
    shown = help_at_80(words)
    assert "…" not in shown, shown
    assert all(len(line) <= 80 for line in shown.splitlines()), shown
    seen = set(shown.replace("│", " ").split())
    cut = sorted(word for word in source_words(command) if word not in seen)
    assert not cut, f"cut or missing at 80 columns: {cut}\n{shown}"


def test_help_never_breaks_a_sentence_where_its_source_line_ended() -> None:
    """Typer keeps a help text's line breaks: each paragraph must be one line (an indented
    one, an example, excepted), or --help breaks the sentence there at any width."""
    broken = []
    for words, command in commands():
        paragraphs = (command.help or "").split("\n\n")
        texts = [part for part in paragraphs if not part.startswith(" ")]
        texts += [param.help or "" for param in command.params]
        broken += [(" ".join(words), text) for text in texts if "\n" in text]
    assert not broken, broken


# ------------------------------------------------------------------------- reports at 100

CONFLICT = (
    "conflict: the Hub holds other content under this id (it differs in run_date 2025-01-01 -> "
    "2025-02-02, metrics.module.total 0.475 -> 0.5, predictions.count 10 -> 12, "
    "coverage.rows_present 10 -> 12, submitter.name 'Ada' -> 'Grace')"
)
FIELDS = ["run_date", "metrics.module.total", "predictions.count", "coverage.rows_present"]


def whole_at_100(shown: str, words: list[str]) -> None:
    """Wrapped, never cut: no ellipsis (but a short sha256's, `04a303155512…`, which is
    meant), no table line past 100, each word whole on a line."""
    assert "…" not in re.sub(r"\b[0-9a-f]{12}…", "", shown), shown
    lines = shown.splitlines()
    assert all(len(line) <= 100 for line in lines if line[:1] in "┏┃┡│└"), shown
    for word in words:
        assert any(word in line for line in lines), f"{word} broken in:\n{shown}"


def test_an_upload_plan_at_100_columns_wraps_its_details_and_cuts_no_field_name() -> None:
    from io import StringIO

    from rich.console import Console

    from bundler.cli.render import render_upload
    from bundler.hub.publish.plan import BundlePlan, UploadReport

    ids = [f"{LONG.replace('/', '-').replace('.', '-').lower()}_1054f537/expert-vqa@a1b2c3d4"]
    ids += [f"gpt-5-2_0c086a6{number}/maze-solve@unpinned" for number in range(3)]
    bundles = [
        BundlePlan(bundle_id=i, action="conflict", outcome="refused", detail=CONFLICT) for i in ids
    ]
    console = Console(file=StringIO(), width=100, force_terminal=False)
    render_upload(
        UploadReport(repo_id="gptnt/lb", revision="main", dry_run=False, bundles=bundles), console
    )
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    whole_at_100(shown, [*ids, *FIELDS])
    assert len(shown.splitlines()) < 8 * len(ids), shown  # a few lines a bundle, not a tall cell


def test_local_reports_at_100_columns_wrap_and_cut_nothing(tmp_path: Path) -> None:
    bundles, ids, archives = collected(tmp_path)
    at_100 = {"COLUMNS": "100"}
    whole_at_100(run_cli("verify", bundles, env=at_100).stderr, [])
    for archive, bundle_id in zip(archives, ids, strict=True):
        whole_at_100(run_cli("inspect", archive, env=at_100).stderr, [bundle_id])
    diff = run_cli("diff", archives[0], archives[1], env=at_100).stderr
    whole_at_100(diff, [*ids, "model_name"])
