"""Every command of `bundler`: its name, the function that runs it, and its one-line help.

The typer app (bundler.cli.app) registers commands from these tables lazily: a command's
module is imported only when that command runs or shows its --help, so a command pays for its
own imports and no other's, and `bundler --help` lists every command from the one-line help
here without importing any. Adding a command is one line in its group's table. Each command's
own --help is its function's docstring; the line here is what the group's listing shows.
"""

from __future__ import annotations

from typing import NamedTuple


class LazyCommand(NamedTuple):
    name: str
    """As typed after the group's name: `collect`, `tasks define`'s `define`."""
    function: str
    """Where the command's function is, `module:function` (a module of bundler.cli), imported
    when the command runs."""
    summary: str
    """Its one-line help, shown in the group's listing."""


COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand(
        "init",
        "init_command:init_command",
        "Start a leaderboard: create the repository and commit an empty board.",
    ),
    LazyCommand(
        "collect",
        "local_commands:collect_command",
        "Bundle every run under OUTPUT_ROOT into BUNDLES_DIR.",
    ),
    LazyCommand(
        "verify", "local_commands:verify_command", "Check bundles without extracting them."
    ),
    LazyCommand(
        "sign", "local_commands:sign_command", "Sign bundles already made with an OpenSSH key."
    ),
    LazyCommand(
        "inspect",
        "local_commands:inspect_command",
        "Show what one bundle claims and whether it is intact.",
    ),
    LazyCommand(
        "upload",
        "hub_commands:upload_command",
        "Verify bundles and publish the new ones to a repository.",
    ),
    LazyCommand(
        "card",
        "hub_commands:card_command",
        "Bring a branch's tables and card up to date with its bundles.",
    ),
    LazyCommand(
        "download",
        "hub_commands:download_command",
        "Download bundles with their sidecars and verify each.",
    ),
    LazyCommand(
        "sync",
        "sync_command:sync_command",
        "Collect the runs, then publish the bundles: `collect` then `upload`.",
    ),
    LazyCommand("diff", "local_commands:diff_command", "Show how two bundles differ."),
    LazyCommand(
        "export-gptnt",
        "local_commands:export_gptnt_command",
        "Write bundles as the folders GPTNT's `gptnt submission new` writes.",
    ),
    LazyCommand(
        "review",
        "hub_commands:review_command",
        "Review pull requests against the leaderboard's policy.",
    ),
    LazyCommand(
        "status",
        "status_command:status_command",
        "Show where your pull requests stand and what to do next.",
    ),
    LazyCommand(
        "audit",
        "audit_command:audit_command",
        "Re-check a leaderboard from its bundles, rows and signatures.",
    ),
    LazyCommand(
        "eval-results",
        "evalresults_command:eval_results_command",
        "Propose the board's scores to the models' own Hub pages.",
    ),
    LazyCommand(
        "template",
        "template_command:template_command",
        "Print a template the bundler ships, or write it to a file.",
    ),
)
"""The top level's commands, in the order --help lists them (the groups follow)."""

TASKS_COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand("define", "hub_commands:tasks_define_command", "Define a leaderboard task."),
    LazyCommand(
        "list", "hub_commands:tasks_list_command", "List the leaderboard's task definitions."
    ),
)

SIGNERS_COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand("add", "signers_command:signers_add_command", "Allow NAME to sign with a key."),
    LazyCommand("remove", "signers_command:signers_remove_command", "Take NAME off the signers."),
    LazyCommand(
        "retire", "signers_command:signers_retire_command", "Retire NAME's keys as of now."
    ),
    LazyCommand("list", "signers_command:signers_list_command", "List the allowed signers."),
    LazyCommand(
        "require",
        "signers_command:signers_require_command",
        "Require every bundle to be signed, or not.",
    ),
)

GROUPS: dict[str, tuple[LazyCommand, ...]] = {
    "bundler": COMMANDS,
    "tasks": TASKS_COMMANDS,
    "signers": SIGNERS_COMMANDS,
}
"""Each group's table, by the group's name."""
