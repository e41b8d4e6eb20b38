"""`bundler signers add|remove|retire|list|require`: who may sign a leaderboard's bundles
(bundler.hub.tasks.signers), and whether every bundle must be signed
(bundler.hub.maintain.signers_require), kept by its maintainers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bundler.cli.console import shown, stderr_console
from bundler.cli.errors import run_command
from bundler.cli.options import DebugOption, JsonOption, RepoOption, TokenOption
from bundler.cli.render import finish
from bundler.cli.tokens import secrets_of, token_to_send
from bundler.core.limits import MAX_PUBLIC_KEY_BYTES

if TYPE_CHECKING:
    from rich.console import Console

    from bundler.hub.maintain.signers_require import RequireReport
    from bundler.hub.tasks.signers import SignersReport
    from bundler.local.allowed_signers import AllowedSigners

NameArgument = Annotated[
    str, typer.Argument(metavar="NAME", help="A Hub user or organization name (the principal).")
]


def render_signers(report: SignersReport, console: Console) -> None:
    from rich.table import Table

    where = f"{shown(report.repo_id)}@{shown(report.revision)}"
    if report.commit is not None:
        console.print(f"committed the allowed signers of {where}: {report.commit}")
    if not report.signers:
        console.print(f"{where} names no allowed signer: review asks for no signature")
        return
    table = Table(title=f"Allowed signers of {where}")
    for column in ("principals", "key type", "fingerprint", "valid", "honoured"):
        table.add_column(column)
    for signer in report.signers:
        honoured = "yes" if signer.honoured else "no (options or patterns it does not trust)"
        valid = " ".join(
            f"{word} {moment}"
            for word, moment in (("from", signer.valid_after), ("until", signer.valid_before))
            if moment
        )
        cells = (
            ", ".join(signer.principals),
            signer.key_type,
            signer.fingerprint,
            valid or "always",
            honoured,
        )
        table.add_row(*(shown(cell) for cell in cells))
    console.print(table)


Change = tuple[Callable[["AllowedSigners"], "AllowedSigners"], str]
"""A change of the allowed signers, and the summary of its commit."""


def _run(
    repo: str,
    token: str | None,
    json_output: bool,
    debug: bool,
    change: Callable[[], Change] | None,
) -> None:
    """Run a signers command: the change `change` makes to commit, or None to list. `change`
    runs first, inside the command's error handling and before the Hub is asked: a key file
    that cannot be used stops the command before any request."""
    from bundler.hub.client.session import HubSession
    from bundler.hub.maintain.signers_change import change_signers
    from bundler.hub.tasks.signers import list_signers

    console = stderr_console()

    def action() -> int:
        planned = None if change is None else change()
        session = HubSession(repo, token=token_to_send(token))
        report = list_signers(session) if planned is None else change_signers(session, *planned)
        return finish(report, render_signers, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )


def _public_key(key: Path) -> str:
    from bundler.local.fileio import read_named_file

    return read_named_file(key, MAX_PUBLIC_KEY_BYTES, "public key").decode("utf-8", "replace")


UTC_TIME_FORM = "YYYYMMDD[HHMM[SS]]Z"


def signers_add_command(
    name: NameArgument,
    key: Annotated[
        Path,
        typer.Option(
            "--key", metavar="PUBKEY", help="The signer's OpenSSH public key file (`KEY.pub`)."
        ),
    ],
    repo: RepoOption = ...,  # type: ignore[assignment]
    valid_after: Annotated[
        str | None,
        typer.Option(
            metavar=UTC_TIME_FORM,
            help="The key vouches only for bundles that land on the branch at or after this "
            "UTC time (OpenSSH's valid-after).",
        ),
    ] = None,
    valid_before: Annotated[
        str | None,
        typer.Option(
            metavar=UTC_TIME_FORM,
            help="The key vouches only for bundles that land on the branch at or before this "
            "UTC time (OpenSSH's valid-before).",
        ),
    ] = None,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Allow NAME to sign the leaderboard's bundles with the key in PUBKEY: one commit to
    leaderboard/allowed_signers naming its parent (none when NAME already has that key at
    every time). Review then passes a bundle this key signed in a pull request NAME opened.
    Needs a write token."""

    def add() -> Change:
        from bundler.hub.tasks.signers import add_signer

        text = _public_key(key)
        return (
            lambda signers: add_signer(
                signers, name, text, str(key), valid_after=valid_after, valid_before=valid_before
            )
        ), f"Allow {name} to sign bundles"

    _run(repo, token, json_output, debug, add)


def signers_retire_command(
    name: NameArgument,
    repo: RepoOption = ...,  # type: ignore[assignment]
    key: Annotated[
        Path | None,
        typer.Option(
            "--key",
            metavar="PUBKEY",
            help="Retire only this key of NAME's (an OpenSSH public key file); all of them "
            "without it.",
        ),
    ] = None,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Retire NAME's keys (or the one in PUBKEY) as of now, without rewriting history: their
    lines get valid-before="<now, UTC>" instead of being deleted, so bundles that landed on the
    branch while the key was valid still count as signed, and bundles that land later do not
    (as git judges a signed commit). One commit naming its parent; every other line is kept
    byte for byte. Exits 1 when NAME has no such key. Needs a write token."""

    def retire() -> Change:
        import time

        from bundler.hub.tasks.signers import retire_signer

        public = None if key is None else (_public_key(key), str(key))
        now = int(time.time())
        return (
            lambda signers: retire_signer(signers, name, public, now)
        ), f"Retire {name}'s signing key{'' if key else 's'}"

    _run(repo, token, json_output, debug, retire)


def signers_remove_command(
    name: NameArgument,
    repo: RepoOption = ...,  # type: ignore[assignment]
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Take NAME off the leaderboard's allowed signers (every key of theirs): one commit naming
    its parent. A NAME the file does not list is refused (exit 1), naming those it lists, and
    nothing is committed. Needs a write token."""

    def remove() -> Change:
        from bundler.hub.tasks.signers import remove_signer

        return (
            lambda signers: remove_signer(signers, name)
        ), f"Stop allowing {name} to sign bundles"

    _run(repo, token, json_output, debug, remove)


def signers_list_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """List the leaderboard's allowed signers (leaderboard/allowed_signers): each key's
    principals, type and SHA256 fingerprint. Any token that can read the repository will do,
    or none for a public one."""
    _run(repo, token, json_output, debug, None)


def render_require(report: RequireReport, console: Console) -> None:
    where = f"{shown(report.repo_id)}@{shown(report.revision)}"
    rule = "requires" if report.require_signature else "does not require"
    if report.commit is not None:
        console.print(f"committed the task definitions of {where}: {report.commit}")
    console.print(f"{where} {rule} a signature on every bundle")
    for warning in report.warnings:
        console.print(f"[yellow]warning[/] {shown(warning)}")


def signers_require_command(
    off: Annotated[
        bool,
        typer.Option(
            "--off", help="Stop requiring signatures: an unsigned bundle is published again."
        ),
    ] = False,
    repo: RepoOption = ...,  # type: ignore[assignment]
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Require every bundle to be signed (`require_signature` in leaderboard/tasks.json), or
    with --off stop requiring it: one commit naming its parent, none when the rule already is
    so. Where it is set, upload and sync to the branch refuse an unsigned bundle (the others
    are still published), upload --create-pr warns that review will fail it, and review and
    audit fail it. Needs a write token."""
    from bundler.hub.client.session import HubSession
    from bundler.hub.maintain.signers_require import require_signatures

    console = stderr_console()

    def action() -> int:
        session = HubSession(repo, token=token_to_send(token))
        report = require_signatures(session, required=not off)
        return finish(report, render_require, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )
