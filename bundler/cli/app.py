"""The `bundler` command: parse arguments, call the library, render the result. Nothing else.

Human output goes to stderr and `--json` output to stdout, so a pipeline can read the JSON
while a person still sees what happened. Exit codes: 0 all good, 1 a person must look (some
checks failed, some inputs were refused, conflicts), 2 unusable input, usage or credentials, 75
temporary failure (the Hub unavailable or rate limiting): retry later.
"""

from __future__ import annotations

import gc
import os
import shlex
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar

import typer

# typer vendors click: its usage errors are these classes, not the `click` package's.
from typer._click import exceptions as click_exceptions
from typer.core import TyperArgument, TyperGroup, TyperOption

# pydantic looks through every installed distribution for plugins when it first builds a model,
# tens of milliseconds at each start; the command uses no pydantic plugin. An explicit setting,
# even an empty one, is respected.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from bundler.cli.render import emit_json, plain, progress_on, shown, stderr_console
from bundler.core import exitcodes
from bundler.core.errors import BundlerError, NoRunSelectedError, Terminated, UsageError
from bundler.core.limits import MAX_LEVEL
from bundler.core.version import bundler_version

if TYPE_CHECKING:
    from rich.console import Console

    from bundler.hub.upload import UploadOptions
    from bundler.local.collect import CollectOptions

# Each command imports the stages it runs when it runs: `bundler --help`, and a command that
# has nothing to do, pay only for typer (measured in tests/benchmark_collect.py).

EXIT_UNUSABLE = exitcodes.UNUSABLE


class _WordArgument(TyperArgument):
    """An argument whose name (its metavar: PATH..., OUTPUT_ROOT) says everything: no
    `<list[Path]>` type column beside it in --help."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


class BundlerGroup(TyperGroup):
    """The `bundler` command group, with the two things typer does not do our way.

    Usage errors (unknown option, missing argument, bad value) are caught here, where the
    command line is parsed, before any command's own code runs: they become one `error:` line
    on stderr, plus the JSON error object on stdout when --json was given, and exit 2. And
    --help shows words for placeholders: a flag shows none (typer would show `<bool>`), an
    argument shows its metavar only.
    """

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _plain_placeholders([*command.params, command.get_help_option(ctx)])
        return command

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _plain_placeholders([*self.params, option])
        return option

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            result = super().main(
                argv,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except click_exceptions.NoArgsIsHelpError as error:
            result = error.exit_code  # the help was shown: that is the whole answer
        except click_exceptions.ClickException as error:
            result = report_usage_error(error, json_output="--json" in argv)
        except typer.Abort:
            stderr_console().print("[red]aborted[/]")
            result = exitcodes.LOOK
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else exitcodes.OK)


def _plain_placeholders(params: list[Any]) -> None:
    """Flags take no value, so they show no placeholder; an argument shows its metavar only.
    (The --help option is made on demand and cached, so callers pass it in too.)"""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
        elif isinstance(param, TyperArgument):
            param.__class__ = _WordArgument


def report_usage_error(error: click_exceptions.ClickException, *, json_output: bool) -> int:
    """One line on stderr (and the JSON error object on stdout under --json); the exit code."""
    message = " ".join(error.format_message().split())
    ctx = getattr(error, "ctx", None)
    command = ctx.command_path if ctx is not None else "bundler"
    hint = f"see `{command} --help`"
    code = error.exit_code if error.exit_code != 1 else EXIT_UNUSABLE
    if json_output:
        emit_json({"error": message, "hint": hint, "exit_code": code})
    stderr_console().print(f"[bold red]error[/]: {shown(message)} ({hint})", highlight=False)
    return code


app = typer.Typer(
    name="bundler",
    help=(
        "Bundle GPTNT statics outputs into verified, byte-reproducible .tar.zst submission "
        "bundles, check them, and publish them to a Hugging Face dataset repository.\n\n"
        "Typical use: `bundler collect ./output` then `bundler verify ./bundles`, then "
        "`bundler upload ./bundles --repo OWNER/NAME --create-pr`."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    cls=BundlerGroup,
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"bundler {bundler_version()}")
        raise typer.Exit(exitcodes.OK)


GC_YOUNG_THRESHOLD = 100_000
"""Allocations between two collections of the youngest generation (Python's default: 700)."""


def main() -> None:
    """The `bundler` console script. Typer builds the parameters of every command before it
    parses the command line, a tenth of a short command's start-up; when the command line names
    a command, only that one is built (`--help`, or an unknown or missing command, still see
    them all).

    A command is a short process that allocates many objects (imports, one record per file) and
    makes few reference cycles, so Python's cyclic collector mostly re-walks the same long-lived
    module objects: it runs less often here (memory stays bounded: a cycle still goes within
    GC_YOUNG_THRESHOLD allocations), and at exit every object is frozen so the interpreter's
    final collection does not walk them all once more just before the process ends. Together,
    measured: 4-9% of collect and verify, and 30-70 ms of a command's start-up."""
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    named = next((word for word in sys.argv[1:] if not word.startswith("-")), None)
    chosen = [info for info in app.registered_commands if info.name == named]
    if chosen:
        app.registered_commands = chosen
    try:
        app()
    finally:
        gc.freeze()


@app.callback()
def _bundler_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_show_version,
            help="Show the bundler's version and exit.",
        ),
    ] = False,
) -> None:
    """Options that come before the command."""


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
        envvar="HF_TOKEN",
        show_envvar=True,
        metavar="TOKEN",
        help="Hugging Face token; else HF_TOKEN, else the stored `hf auth login`. Never shown.",
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

# Options shared by collect and sync.
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

# Options shared by upload and sync.
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
        help="Propose the bundles in your pull request (no write access needed): re-running "
        "adds commits to your open bundler pull request; it never touches the card.",
    ),
]
PrivateOption = Annotated[
    bool, typer.Option("--private", help="Make the repository private if it is created.")
]
ReplaceOption = Annotated[
    bool,
    typer.Option(
        "--replace",
        help="Overwrite a bundle the repository holds with different content (a resumed run "
        "that only extends it needs no --replace).",
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

T = TypeVar("T")


class _Report(Protocol):
    @property
    def exit_code(self) -> int: ...

    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


R = TypeVar("R", bound=_Report)


def _finish(
    report: R, render: Callable[[R, Console], None], console: Console, as_json: bool
) -> int:
    """Show a library report to the person (stderr) and, with --json, to the machine (stdout)."""
    render(report, console)
    if as_json:
        emit_json(report.model_dump(mode="json") | {"exit_code": report.exit_code})
    return report.exit_code


def _cleaned(token: str | None) -> str:
    """The token as huggingface_hub cleans HF_TOKEN: line breaks and surrounding spaces
    dropped, so a secret pasted from a CRLF file works as it does for `hf`."""
    return (token or "").replace("\r", "").replace("\n", "").strip()


def _token(token: str | None) -> str | None:
    """The token to send; an empty one means none, so the client may fall back to the login.
    One that could never be sent in an HTTP header is refused here, without showing it."""
    cleaned = _cleaned(token)
    if cleaned and not (cleaned.isascii() and cleaned.isprintable() and " " not in cleaned):
        raise UsageError(
            "the token (--token or HF_TOKEN) holds characters no Hugging Face token has",
            hint="copy it again from https://huggingface.co/settings/tokens",
        )
    return cleaned or None


def _secrets(token: str | None) -> tuple[str, ...]:
    """What output must never show: the token as given and as sent."""
    return tuple({value for value in (token, _cleaned(token)) if value})


_stop_signals: list[int] = []
"""The stop signals (SIGINT, SIGTERM) the running command received. The exception a handler
raises can reach the command inside another: pydantic's serializer, interrupted while it calls
back into Python, reports a PydanticSerializationError. The command asks this list, not only
the exception's type, so an interrupted run never reads as an internal error."""


def _on_stop_signal(signum: int, frame: object) -> None:
    _stop_signals.append(signum)
    raise KeyboardInterrupt if signum == signal.SIGINT else Terminated


def _exit_if_stopped(console: Console, error: BaseException) -> None:
    """Exit as interrupted (130 for SIGINT, 143 for SIGTERM, as shells report them) when a stop
    signal came, whatever exception carries it, or when `error` is a stop raised without one."""
    if _stop_signals:
        signum = _stop_signals[-1]
    elif isinstance(error, (KeyboardInterrupt, Terminated)):
        signum = signal.SIGINT if isinstance(error, KeyboardInterrupt) else signal.SIGTERM
    else:
        return
    console.print("[red]interrupted[/]; nothing partial was left behind")
    raise typer.Exit(128 + signum)


def _described(error: Exception, secrets: tuple[str, ...]) -> tuple[int, str | None, str | None]:
    """The exit code, message and hint for an error that ended a command."""
    if isinstance(error, BundlerError):
        return error.exit_code, _scrub(_worded(error), secrets), _scrub(error.hint, secrets)
    from pydantic import ValidationError

    if isinstance(error, ValidationError):  # options the command line let through
        from bundler.local.validation import describe_validation_error

        message = f"invalid option: {describe_validation_error(error)}"
        return EXIT_UNUSABLE, _scrub(message, secrets), "see --help"
    # a bug: say so plainly, with the way to learn more
    message = f"internal error: {type(error).__name__}: {error}"
    hint = "re-run with --debug for the traceback, and report it"
    return EXIT_UNUSABLE, _scrub(message, secrets), hint


def run_command(
    action: Callable[[], T], *, json_output: bool, debug: bool, secrets: tuple[str, ...] = ()
) -> T:
    """Run library code; turn an error into one readable line (or a JSON object) and an exit
    code. `secrets` are scrubbed from anything shown, as a last line of defence."""
    console = stderr_console()
    _stop_signals.clear()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, _on_stop_signal)
    try:
        return action()
    except BaseException as error:
        _exit_if_stopped(console, error)
        if not isinstance(error, Exception):
            raise  # SystemExit and the like end the process as they meant to
        code, message, hint = _described(error, secrets)
        trace = traceback.format_exc()
    finally:
        # The work is done and said: a stop signal from now on ends the process as such a
        # signal does (status 130 or 143), not as an exception raised while Python exits.
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_DFL)
    if debug:
        lines = (_scrub(trace, secrets) or "").splitlines()
        console.print("\n".join(plain(line) for line in lines), markup=False)
    if json_output:
        emit_json({"error": message, "hint": hint, "exit_code": code})
    console.print(f"[bold red]error[/]: {shown(message or '')}", highlight=False)
    if hint:
        console.print(f"  hint: {plain(hint)}", markup=False)
    raise typer.Exit(code)


_FILTER_FLAGS = {"tasks": "--task", "models": "--model"}


def _worded(error: BundlerError) -> str:
    """The error's message, in the command line's terms where the library gave data."""
    if isinstance(error, NoRunSelectedError):
        given = " ".join(
            f"{_FILTER_FLAGS[field]} {shlex.quote(value)}"
            for field, values in error.unmatched.items()
            for value in values
        )
        return f"{given} matched no run"
    return error.message


def _scrub(text: str | None, secrets: tuple[str, ...]) -> str | None:
    if text is None:
        return None
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


@app.command("collect")
def collect_command(
    output_root: OutputRootArgument = Path("output"),
    bundles_dir: BundlesDirOption = Path("bundles"),
    task: TaskOption = None,
    model: ModelOption = None,
    submitter_name: SubmitterNameOption = None,
    submitter_contact: SubmitterContactOption = None,
    submitter_affiliation: SubmitterAffiliationOption = None,
    expect: ExpectOption = None,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="Bundle partial or gapped runs, marked partial, instead of refusing.",
        ),
    ] = False,
    resolve_rows: ResolveRowsOption = False,
    token: TokenOption = None,
    level: LevelOption = 3,
    wait: WaitOption = 0,
    full: FullOption = False,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Bundle every run under OUTPUT_ROOT into BUNDLES_DIR/<player>_<fp8>/<target>.tar.zst.

    A run that is wrong, unattributable or (without --allow-partial) partial is refused with a
    one-line reason; the valid runs are still bundled. Exit 1 if any input was refused, 75 if
    another run kept the bundles folder busy.
    """
    console = stderr_console()

    def action() -> int:
        from bundler.cli.render import render_collect
        from bundler.local.collect import collect

        options = _collect_options(
            task=task,
            model=model,
            submitter=(submitter_name, submitter_contact, submitter_affiliation),
            expect=expect,
            allow_partial=allow_partial,
            level=level,
            wait=wait,
            full=full,
        )
        row_counts = None
        if resolve_rows:
            from bundler.hub.rowcount import RowCountResolver  # the Hub client only when asked

            row_counts = RowCountResolver(_token(token))
        with progress_on(console) as progress:
            report = collect(output_root, bundles_dir, options, progress, row_counts)
        return _finish(report, render_collect, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=_secrets(token))
    )


def _collect_options(
    *,
    task: list[str] | None,
    model: list[str] | None,
    submitter: tuple[str | None, str | None, str | None],
    expect: list[str] | None,
    allow_partial: bool,
    level: int,
    wait: float,
    full: bool = False,
) -> CollectOptions:
    """The collect options from the command line (shared by collect and sync)."""
    from bundler.local.collect import CollectOptions, parse_expectations
    from bundler.local.submitter import Submitter

    name, contact, affiliation = submitter
    return CollectOptions(
        tasks=task or [],
        models=model or [],
        submitter=Submitter(name=name, contact=contact, affiliation=affiliation),
        expected_rows=parse_expectations(expect or []),
        allow_partial=allow_partial,
        level=level,
        lock_wait=wait,
        full=full,
    )


def _upload_options(
    *,
    repo: str,
    revision: str,
    create_pr: bool,
    private: bool,
    replace: bool,
    allow_partial: bool,
    dry_run: bool,
    message: str | None,
    token: str | None,
    wait: float,
) -> UploadOptions:
    """The upload options from the command line (shared by upload and sync)."""
    from bundler.hub.upload import UploadOptions

    return UploadOptions(
        repo_id=repo,
        revision=revision,
        create_pr=create_pr,
        private=private,
        replace=replace,
        allow_partial=allow_partial,
        dry_run=dry_run,
        message=message,
        token=_token(token),
        lock_wait=wait,
    )


@app.command("verify")
def verify_command(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="PATH", help="Bundle archives, or directories searched for them."),
    ],
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Check bundles without extracting them: digests, zstd checksum, tar members against the
    manifest, safe paths, and that every claim matches the files. Exit 1 if any check failed."""
    console = stderr_console()

    def action() -> int:
        from bundler.cli.render import render_verify
        from bundler.local.verify import verify

        with progress_on(console) as progress:
            report = verify(paths, progress)
        return _finish(report, render_verify, console, json_output)

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))


@app.command("inspect")
def inspect_command(
    archive: Annotated[
        Path, typer.Argument(metavar="ARCHIVE", help="One bundle archive (.tar.zst).")
    ],
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show what one bundle claims (identity, pin, model, provenance, coverage, counts, usage,
    metrics, warnings) and whether it is intact."""
    console = stderr_console()

    def action() -> int:
        from bundler.cli.render import render_inspection
        from bundler.local.inspection import inspect_bundle

        with progress_on(console) as progress:
            inspection = inspect_bundle(archive, progress)
        return _finish(inspection, render_inspection, console, json_output)

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))


@app.command("upload")
def upload_command(
    bundles_dir: Annotated[
        Path,
        typer.Argument(metavar="BUNDLES_DIR", help="The bundles directory written by collect."),
    ] = Path("bundles"),
    repo: RepoOption = ...,  # type: ignore[assignment]
    revision: RevisionOption = "main",
    create_pr: CreatePrOption = False,
    token: TokenOption = None,
    private: PrivateOption = False,
    replace: ReplaceOption = False,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="Publish partial-coverage bundles too (else they are held back, exit 0).",
        ),
    ] = False,
    dry_run: DryRunOption = False,
    message: MessageOption = None,
    wait: WaitOption = 0,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Verify the bundles and publish the new ones to a dataset repository (HF_ENDPOINT is
    honoured), regenerating its dataset card in the same commit. Bundles already there are
    skipped, a resumed run extends its bundle, other different content is a conflict unless
    --replace, and partial bundles are held back unless --allow-partial. Exit 0 when everything
    is published or already there, 1 if a bundle was refused or conflicts, 2 for a problem to fix
    first (token, access, repository, revision), 75 if the Hub stayed unavailable (retry later)."""
    from bundler.cli.render import render_upload
    from bundler.hub.upload import upload

    console = stderr_console()

    def action() -> int:
        options = _upload_options(
            repo=repo,
            revision=revision,
            create_pr=create_pr,
            private=private,
            replace=replace,
            allow_partial=allow_partial,
            dry_run=dry_run,
            message=message,
            token=token,
            wait=wait,
        )
        from bundler.hub.session import quiet_hub_client

        quiet_hub_client()
        with progress_on(console) as progress:
            report = upload(bundles_dir, options, progress, verify_in_child=True)
        return _finish(report, render_upload, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=_secrets(token))
    )


@app.command("card")
def card_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    revision: Annotated[
        str, typer.Option(metavar="BRANCH", help="The branch whose card to regenerate.")
    ] = "main",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say whether the card is stale; change nothing.")
    ] = False,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Regenerate the dataset card from every bundle row the branch holds, as one commit naming
    its parent; nothing is committed when the card is already true. Repairs a card gone stale
    after pull requests were merged in the web interface. Needs write access (not for
    --dry-run). Exit 1 if some row file could not be read."""
    from bundler.cli.render import render_card
    from bundler.hub.card import refresh_card
    from bundler.hub.session import HubSession

    console = stderr_console()

    def action() -> int:
        from bundler.hub.session import quiet_hub_client

        quiet_hub_client()
        session = HubSession(repo, token=_token(token))
        refresh = refresh_card(session, revision, dry_run=dry_run)
        return _finish(refresh, render_card, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=_secrets(token))
    )


@app.command("download")
def download_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    output_dir: Annotated[
        Path,
        typer.Option("--output", "-o", metavar="DIR", help="The local bundles directory to fill."),
    ] = Path("bundles"),
    revision: Annotated[
        str,
        typer.Option(
            metavar="REVISION",
            help="A branch, tag, commit or refs/pr/N (to review a pull request).",
        ),
    ] = "main",
    bundle: Annotated[
        list[str] | None,
        typer.Option(
            "--bundle",
            metavar="BUNDLE_ID",
            help="Only this bundle id, <player>_<fp8>/<target> (repeatable).",
        ),
    ] = None,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Download bundles with their sidecars into the local layout and verify each one. A bundle
    that fails verification is kept apart in OUTPUT/.rejected/, never mixed with the good ones.
    Exit 1 if any bundle was rejected, not found or could not be saved, 75 if the Hub stayed
    unavailable."""
    from bundler.cli.render import render_download
    from bundler.hub.download import download

    console = stderr_console()

    def action() -> int:
        from bundler.hub.session import quiet_hub_client

        quiet_hub_client()
        with progress_on(console) as progress:
            report = download(
                repo,
                output_dir,
                revision=revision,
                bundle_ids=bundle or None,
                token=_token(token),
                progress=progress,
            )
        return _finish(report, render_download, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=_secrets(token))
    )


@app.command("sync")
def sync_command(
    output_root: OutputRootArgument = Path("output"),
    bundles_dir: BundlesDirOption = Path("bundles"),
    repo: RepoOption = ...,  # type: ignore[assignment]
    task: TaskOption = None,
    model: ModelOption = None,
    expect: ExpectOption = None,
    resolve_rows: ResolveRowsOption = False,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="Bundle partial or gapped runs, marked partial, and publish them.",
        ),
    ] = False,
    submitter_name: SubmitterNameOption = None,
    submitter_contact: SubmitterContactOption = None,
    submitter_affiliation: SubmitterAffiliationOption = None,
    level: LevelOption = 3,
    revision: RevisionOption = "main",
    create_pr: CreatePrOption = False,
    token: TokenOption = None,
    private: PrivateOption = False,
    replace: ReplaceOption = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Collect as usual, then only show the upload plan; change nothing on the Hub.",
        ),
    ] = False,
    message: MessageOption = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            metavar="FILE",
            help="Also write the JSON report (with start and end times, counts, every "
            "bundle's outcome and the commits made) to FILE, atomically, whatever happens.",
        ),
    ] = None,
    wait: WaitOption = 0,
    full: FullOption = False,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Collect the runs under OUTPUT_ROOT into BUNDLES_DIR, then publish the bundles to a
    dataset repository: `collect` then `upload` in one unattended command.

    Refused runs do not stop the upload of the good bundles. Exit 0 when everything is
    published or already there, 1 when a person must look (refused runs or bundles, failed
    checks, conflicts), 2 for unusable input, usage or credentials, 75 for a temporary failure
    (the Hub unavailable or rate limiting, or another run using BUNDLES_DIR): retry later.
    """
    from bundler.cli.render import render_sync
    from bundler.sync import SyncOptions, SyncReport, keep_report, sync

    console = stderr_console()

    def action() -> int:
        try:
            options = sync_options()
        except BundlerError as error:  # unusable options: the report file still says so
            if report is not None:
                unusable = SyncReport.stopped_before_start(
                    output_root, bundles_dir, repo, revision, dry_run, error
                )
                keep_report(unusable, report)
            raise
        from bundler.hub.session import quiet_hub_client

        quiet_hub_client()
        with progress_on(console) as progress:
            result = sync(output_root, bundles_dir, options, progress)
        return _finish(result, render_sync, console, json_output)

    def sync_options() -> SyncOptions:
        return SyncOptions(
            collect=_collect_options(
                task=task,
                model=model,
                submitter=(submitter_name, submitter_contact, submitter_affiliation),
                expect=expect,
                allow_partial=allow_partial,
                level=level,
                wait=wait,
                full=full,
            ),
            resolve_rows=resolve_rows,
            upload=_upload_options(
                repo=repo,
                revision=revision,
                create_pr=create_pr,
                private=private,
                replace=replace,
                allow_partial=allow_partial,
                dry_run=dry_run,
                message=message,
                token=token,
                wait=wait,
            ),
            lock_wait=wait,
            report_path=report,
        )

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=_secrets(token))
    )


@app.command("diff")
def diff_command(
    a: Annotated[
        Path, typer.Argument(help="The first bundle archive (.tar.zst), e.g. the old one.")
    ],
    b: Annotated[Path, typer.Argument(help="The second bundle archive, e.g. the new one.")],
    predictions: Annotated[
        int,
        typer.Option(
            "--predictions",
            min=0,
            metavar="N",
            help="Also show the answers (scored_output, else output) of the first N changed "
            "predictions side by side.",
        ),
    ] = 0,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show how two bundles differ: claims field by field, metric deltas, and predictions
    added, removed and changed (by sha256, from the manifests). Both are verified first.
    Exit 0 identical, 1 different, 2 unusable (missing, or failing verification)."""
    from bundler.cli.render import render_diff
    from bundler.local.diff import diff_bundles

    console = stderr_console()

    def action() -> int:
        with progress_on(console) as progress:
            report = diff_bundles(a, b, predictions=predictions, progress=progress)
        return _finish(report, render_diff, console, json_output)

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))


@app.command("export-gptnt")
def export_gptnt_command(
    paths: Annotated[
        list[Path], typer.Argument(help="Bundle archives, or directories searched for them.")
    ],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            metavar="OUT_DIR",
            help="Where the GPTNT submission folders are written.",
            show_default=False,
        ),
    ] = ...,  # type: ignore[assignment]
    player_config: Annotated[
        Path,
        typer.Option(
            "--player-config",
            metavar="PLAYER_YAML",
            help="The player's GPTNT config (configs/player/<name>.yaml); its identity block "
            "is the leaderboard identity.",
            show_default=False,
        ),
    ] = ...,  # type: ignore[assignment]
    submitter_name: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Who submits; else the bundle's submitter name."),
    ] = None,
    submitter_contact: Annotated[
        str | None,
        typer.Option(
            metavar="CONTACT", help="@github handle or email; else the bundle's submitter contact."
        ),
    ] = None,
    submitter_affiliation: Annotated[
        str | None,
        typer.Option(
            metavar="NAME", help="Their affiliation; else the bundle's (empty clears it)."
        ),
    ] = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Write each bundle as the folder GPTNT's `gptnt submission new` writes for the same run
    (submission.yaml and metrics.json), for leaderboards that take submissions through GPTNT.
    Bundles are verified first. Exit 1 if any bundle was refused (failed verification, blank
    submitter, a capability field GPTNT does not know, another player's config), 2 for a config
    or path that cannot be used."""
    from bundler.cli.render import render_export
    from bundler.local.export import SubmitterOverrides, export_gptnt

    console = stderr_console()

    def action() -> int:
        overrides = SubmitterOverrides(
            name=submitter_name, contact=submitter_contact, affiliation=submitter_affiliation
        )
        with progress_on(console) as progress:
            report = export_gptnt(paths, out_dir, player_config, overrides, progress)
        return _finish(report, render_export, console, json_output)

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))


@app.command("review")
def review_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    pr: Annotated[
        list[int] | None,
        typer.Option(
            "--pr",
            min=1,
            metavar="N",
            help="Only this pull request (repeatable); default: every open one.",
        ),
    ] = None,
    comment: Annotated[
        bool,
        typer.Option(
            "--comment",
            help="Post the report on each PR (needs a write token); an unchanged report is "
            "not posted again.",
        ),
    ] = False,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="Merge each PR whose every check passed (needs a write token), then "
            "regenerate the dataset card.",
        ),
    ] = False,
    max_exception_rate: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            metavar="RATE",
            help="Highest share of predictions that may have raised in the harness (0 to 1).",
        ),
    ] = 0.05,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Review pull requests: fetch and verify only the bundles each one adds or changes, classify
    them against main (new, replacement, unchanged), and check policy (coverage, the dataset's
    row count, pin, harness tree, exception rate, submitter, files outside the bundles,
    conflicts). The Markdown report goes to stdout (the JSON with --json), a summary to stderr.
    Exit 0 if every PR is clean, 1 if any is not, 2 for a problem to fix first, 75 when only
    temporary Hub failures stood in the way."""
    from bundler.cli.render import emit_text, render_review
    from bundler.hub.review import ReviewOptions, review

    console = stderr_console()

    def action() -> int:
        options = ReviewOptions(
            repo_id=repo,
            pull_requests=pr or [],
            comment=comment,
            merge=merge,
            max_exception_rate=max_exception_rate,
            token=_token(token),
        )
        from bundler.hub.session import quiet_hub_client

        quiet_hub_client()
        with progress_on(console) as progress:
            report = review(options, progress)
        if not json_output:
            emit_text("\n---\n\n".join(pr.markdown for pr in report.pull_requests))
        return _finish(report, render_review, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=_secrets(token))
    )
