"""The config file (bundler.toml, or --config FILE): option defaults per command, flags win,
unknown keys and wrong types refused with one line naming the key (the real CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factory import RunSpec, write_tree
from helpers import run_cli

CONFIG = """[collect]
output = "nightly-bundles"
expect = { expert-vqa = 4 }
submitter = { name = "Ada", contact = "@ada", affiliation = "Engines" }
level = 5
"""


def tree(tmp_path: Path) -> Path:
    write_tree(tmp_path / "out", [RunSpec(model="gpt-5.2", rows=4)])
    return tmp_path / "out"


def sidecar(bundles: Path) -> dict[str, object]:
    (path,) = bundles.rglob("*.json")
    data: dict[str, object] = json.loads(path.read_text())
    return data


def test_bundler_toml_in_the_working_folder_gives_the_defaults(tmp_path: Path) -> None:
    tree(tmp_path)
    (tmp_path / "bundler.toml").write_text(CONFIG)
    result = run_cli("collect", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    claim = sidecar(tmp_path / "nightly-bundles")
    assert claim["coverage"] == {"status": "complete", "expected_rows": 4, "rows_present": 4}
    assert claim["submitter"] == {"name": "Ada", "contact": "@ada", "affiliation": "Engines"}
    assert claim["inputs"]["level"] == 5  # type: ignore[index]


def test_collect_takes_what_it_shares_with_sync_unless_its_own_table_says(
    tmp_path: Path,
) -> None:
    """A nightly job's folder holds `[sync]` alone: `bundler collect` there bundles as the
    nightly does (its own output folder, expected rows, submitter), and `[collect]` wins."""
    tree(tmp_path)
    nightly = CONFIG.replace("[collect]", "[sync]") + 'repo = "org/board"\n'
    (tmp_path / "bundler.toml").write_text(nightly)
    result = run_cli("collect", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    claim = sidecar(tmp_path / "nightly-bundles")
    assert claim["coverage"] == {"status": "complete", "expected_rows": 4, "rows_present": 4}
    assert claim["submitter"] == {"name": "Ada", "contact": "@ada", "affiliation": "Engines"}
    (tmp_path / "bundler.toml").write_text(nightly + '[collect]\noutput = "mine"\nlevel = 2\n')
    result = run_cli("collect", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sidecar(tmp_path / "mine")["inputs"]["level"] == 2  # type: ignore[index]


def test_flags_override_the_config_file(tmp_path: Path) -> None:
    tree(tmp_path)
    config = tmp_path / "elsewhere.toml"
    config.write_text(CONFIG)
    given = ("--submitter-name", "Bob", "--level", "2", "-o", tmp_path / "b")
    result = run_cli("collect", "out", "--config", config, *given, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    claim = sidecar(tmp_path / "b")
    assert claim["submitter"]["name"] == "Bob"  # type: ignore[index]
    assert claim["submitter"]["contact"] == "@ada"  # type: ignore[index]
    assert claim["inputs"]["level"] == 2  # type: ignore[index]
    before = run_cli("--config", config, "collect", "out", "-o", tmp_path / "c", cwd=tmp_path)
    assert before.returncode == 0, before.stderr  # before the command, too


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[collect]\nexpct = { a = 1 }\n", "[collect] expct: unknown key"),
        ("[collect]\nlevel = 'high'\n", "[collect] level:"),
        ("[collect]\nexpect = { a = 'many' }\n", "[collect] expect.a:"),
        ("[collect]\nsubmitter = { nam = 'x' }\n", "[collect] submitter.nam: unknown key"),
        ("[colect]\nlevel = 3\n", "[colect]: unknown table"),
        ("[collect\n", "not a TOML file"),
    ],
)
def test_an_unusable_config_is_one_line_naming_the_key(
    tmp_path: Path, text: str, named: str
) -> None:
    tree(tmp_path)
    (tmp_path / "bundler.toml").write_text(text)
    result = run_cli("collect", "out", cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: bundler.toml: ") and named in line
    assert not (tmp_path / "bundles").exists()


def test_a_named_config_file_must_exist(tmp_path: Path) -> None:
    tree(tmp_path)
    result = run_cli("collect", "out", "--config", "nosuch.toml", "--json", cwd=tmp_path)
    assert result.returncode == 2
    assert "nosuch.toml" in json.loads(result.stdout)["error"]


def test_help_shows_a_config_example() -> None:
    top = run_cli("--help", env={"COLUMNS": "100"})
    assert "bundler.toml" in top.stdout and "[collect]" in top.stdout
    assert "expect = { expert-vqa = 1200 }" in top.stdout
    collect = run_cli("collect", "--help", env={"COLUMNS": "100"})
    assert "--config" in collect.stdout and "[collect]" in collect.stdout
