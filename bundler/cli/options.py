"""The options and arguments several commands share, declared once (typer's Annotated aliases)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from bundler.core.errors import UsageError
from bundler.core.limits import INT64_MAX, MAX_LEVEL

JsonOption = Annotated[
    bool, typer.Option("--json", help="Write a machine-readable report to stdout.")
]
DebugOption = Annotated[
    bool, typer.Option("--debug", help="Show a full traceback when something goes wrong.")
]


TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        metavar="TOKEN",
        help="Hugging Face token; else huggingface_hub's: a CI job's token exchanged with the "
        "Hub (HF_OIDC_RESOURCE, Trusted Publishers), else HF_TOKEN, else the stored `hf auth "
        "login`. Never shown.",
    ),
]
RepoOption = Annotated[
    str,
    typer.Option(
        "--repo",
        metavar="OWNER/NAME",
        help="The dataset repository, OWNER/NAME.",
        show_default=False,
    ),
]
WaitOption = Annotated[
    float,
    typer.Option(
        "--wait",
        metavar="SECONDS",
        min=0,
        help="If another bundler run is using the bundles folder, wait this long for it "
        "before giving up with exit code 75.",
    ),
]
MaxWaitOption = Annotated[
    float | None,
    typer.Option(
        "--max-wait",
        metavar="SECONDS",
        min=0,
        help="Wait this long at most for a Hub rate-limit window to reset (default "
        "BUNDLER_MAX_WAIT, else 300); a longer one ends with exit code 75, saying when.",
    ),
]


OutputRootArgument = Annotated[
    Path,
    typer.Argument(
        metavar="OUTPUT_ROOT", help="The harness's output root, holding <task>_predictions/."
    ),
]
BundlesDirOption = Annotated[
    Path,
    typer.Option("--output", "-o", metavar="BUNDLES_DIR", help="Where bundles are written."),
]
TaskOption = Annotated[
    list[str] | None,
    typer.Option("--task", metavar="TASK", help="Only this task (repeatable)."),
]
ModelOption = Annotated[
    list[str] | None,
    typer.Option(
        "--model", metavar="NAME", help="Only this player_name or model_name (repeatable)."
    ),
]
SubmitterNameOption = Annotated[
    str | None,
    typer.Option(envvar="BUNDLER_SUBMITTER_NAME", metavar="NAME", help="Who submits."),
]
SubmitterContactOption = Annotated[
    str | None,
    typer.Option(envvar="BUNDLER_SUBMITTER_CONTACT", metavar="CONTACT", help="How to reach them."),
]
SubmitterAffiliationOption = Annotated[
    str | None,
    typer.Option(envvar="BUNDLER_SUBMITTER_AFFILIATION", metavar="NAME", help="Their affiliation."),
]
ExpectOption = Annotated[
    list[str] | None,
    typer.Option(
        "--expect",
        metavar="TASK=ROWS",
        help="The dataset's row count for TASK, so coverage can be judged (repeatable).",
    ),
]


def parse_expectations(pairs: list[str]) -> dict[str, int]:
    """`--expect TASK=ROWS` pairs into the mapping CollectOptions.expected_rows takes: the
    pairs are the command line's syntax, so their words are the command line's too."""
    expected: dict[str, int] = {}
    for pair in pairs:
        task, separator, rows = pair.partition("=")
        digits = rows.isascii() and rows.isdigit()  # not "²", which isdigit() also accepts
        if not separator or not task or not digits or not 1 <= int(rows) <= INT64_MAX:
            raise UsageError(f"--expect {pair!r}: expected TASK=ROWS with ROWS a positive integer")
        if expected.get(task, int(rows)) != int(rows):
            raise UsageError(f"--expect gives two row counts for task {task!r}")
        expected[task] = int(rows)
    return expected


ResolveRowsOption = Annotated[
    bool,
    typer.Option(
        "--resolve-rows",
        help="Look up each pinned dataset split's row count on the Hub (its card's "
        "dataset_info) and judge coverage against it; --expect wins where given.",
    ),
]
LevelOption = Annotated[
    int, typer.Option(min=1, max=MAX_LEVEL, metavar="N", help="zstd compression level.")
]
FullOption = Annotated[
    bool,
    typer.Option(
        "--full",
        help="Read every run again, trusting no cache (an unchanged run is otherwise skipped "
        "unread when its files' size, mtime, ctime and inode are as when it was bundled).",
    ),
]


RevisionOption = Annotated[
    str,
    typer.Option(
        metavar="BRANCH",
        help="The branch to publish to (or to open the pull request on).",
    ),
]
CreatePrOption = Annotated[
    bool,
    typer.Option(
        "--create-pr",
        help="Propose the bundles in your pull request: needs a write token of your own "
        "account, no write access to the repository. Without it, publishing needs a write "
        "token of an account in the organization that owns the repository. Re-running adds "
        "commits to your open bundler pull request; it never touches the card.",
    ),
]
ReplaceOption = Annotated[
    bool,
    typer.Option(
        "--replace",
        help="Overwrite a bundle the repository holds with different content (a resumed run "
        "that only extends it needs no --replace).",
    ),
]
SignKeyOption = Annotated[
    Path | None,
    typer.Option(
        "--sign-key",
        metavar="KEY",
        help="Sign each bundle with this OpenSSH key (see `bundler sign`): an unencrypted "
        "private key signs in process; an encrypted one, or a .pub whose key is in ssh-agent, "
        "through ssh-keygen.",
    ),
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Show the plan; change nothing on the Hub.")
]
MessageOption = Annotated[
    str | None,
    typer.Option(
        "--message",
        "-m",
        metavar="TEXT",
        help="Commit summary (with --create-pr: the pull request's title).",
    ),
]


CONFIG_EXAMPLE = """[collect]
expect = { expert-vqa = 1200 }
resolve_rows = true
submitter = { name = "Ada", contact = "@ada" }

[sync]
repo = "my-org/gptnt-statics"
expect = { expert-vqa = 1200 }
resolve_rows = true"""
"""An example bundler.toml (bundler.cli.config), shown in --help and the README."""
CONFIG_EXAMPLE_HELP = "\n".join(
    "    " + line.replace("[", "\\[") for line in CONFIG_EXAMPLE.splitlines() if line
)
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        metavar="FILE",
        help="Read option defaults from this TOML file (default: ./bundler.toml when it "
        "exists): one table per command, e.g. \\[collect] expect = { TASK = ROWS }. Options "
        "given here win; an unknown key or a wrong type is refused (exit 2).",
        show_default=False,
    ),
]


CONFIG_NAME = "bundler.toml"
"""The config file read from the working folder when --config is not given."""


def config_path(argv: Sequence[str]) -> tuple[Path | None, bool]:
    """Where the config file is, without reading it (so that a command without one loads
    nothing of it): the config file the command line names (`--config FILE`, `--config=FILE`), else
    ./bundler.toml when it exists; and whether it was named (a named file must exist)."""
    for number, word in enumerate(argv):
        if word == "--":
            break
        if word == "--config" and number + 1 < len(argv):
            return Path(argv[number + 1]), True
        if word.startswith("--config="):
            return Path(word.partition("=")[2]), True
    default = Path(CONFIG_NAME)
    return (default, False) if default.is_file() else (None, False)
