"""The `bundler` command: parse arguments, call the library, render the result. Nothing else.

Human output goes to stderr and `--json` output to stdout, so a pipeline can read the JSON
while a person still sees what happened. Exit codes: 0 all good, 1 some checks failed or some
inputs were refused, 2 unusable input or usage.
"""

from __future__ import annotations

import signal
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from bundler.collect import CollectOptions, collect, parse_expectations
from bundler.errors import BundlerError
from bundler.inspection import inspect_bundle
from bundler.manifest import MAX_LEVEL, Submitter
from bundler.report import (
    RichProgress,
    emit_json,
    render_collect,
    render_inspection,
    render_verify,
    stderr_console,
)
from bundler.validation import describe_validation_error
from bundler.verify import verify

EXIT_UNUSABLE = 2

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
)

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
        help="Hugging Face token; else HF_TOKEN, else the stored `hf auth login`. Never shown.",
    ),
]
RepoOption = Annotated[
    str, typer.Option("--repo", help="The dataset repository, OWNER/NAME.", show_default=False)
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


def _token(token: str | None) -> str | None:
    """An empty --token or HF_TOKEN means none, so the client may fall back to the login."""
    return token or None


def _secrets(token: str | None) -> tuple[str, ...]:
    return (token,) if token else ()


class Terminated(BaseException):
    """SIGTERM (a CI timeout, `kill`), raised like Ctrl-C so every atomic write cleans up."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


def run_command(
    action: Callable[[], T], *, json_output: bool, debug: bool, secrets: tuple[str, ...] = ()
) -> T:
    """Run library code; turn an error into one readable line (or a JSON object) and an exit
    code. `secrets` are scrubbed from anything shown, as a last line of defence."""
    console = stderr_console()
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        return action()
    except BundlerError as error:
        code = error.exit_code
        message, hint = _scrub(error.message, secrets), _scrub(error.hint, secrets)
        trace = traceback.format_exc()
    except ValidationError as error:  # options the command line let through but a model refused
        code = EXIT_UNUSABLE
        message = _scrub(f"invalid option: {describe_validation_error(error)}", secrets)
        hint = "see --help"
        trace = traceback.format_exc()
    except (KeyboardInterrupt, Terminated) as stop:
        console.print("[red]interrupted[/]; nothing partial was left behind")
        raise typer.Exit(130 if isinstance(stop, KeyboardInterrupt) else 143) from None
    except Exception as error:  # a bug: say so plainly, with the way to learn more
        code = EXIT_UNUSABLE
        message = _scrub(f"internal error: {type(error).__name__}: {error}", secrets)
        hint = "re-run with --debug for the traceback, and report it"
        trace = traceback.format_exc()
    if debug:
        console.print(_scrub(trace, secrets), markup=False)
    if json_output:
        emit_json({"error": message, "hint": hint, "exit_code": code})
    console.print(f"[bold red]error[/]: {escape(message or '')}", highlight=False)
    if hint:
        console.print(f"  hint: {hint}", markup=False)
    raise typer.Exit(code)


def _scrub(text: str | None, secrets: tuple[str, ...]) -> str | None:
    if text is None:
        return None
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


@app.command("collect")
def collect_command(
    output_root: Annotated[
        Path, typer.Argument(help="The harness's output root, holding <task>_predictions/.")
    ] = Path("output"),
    bundles_dir: Annotated[
        Path, typer.Option("--output", "-o", help="Where bundles are written.")
    ] = Path("bundles"),
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Only this task (repeatable).")
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option("--model", help="Only this player_name or model_name (repeatable)."),
    ] = None,
    submitter_name: Annotated[
        str | None, typer.Option(envvar="BUNDLER_SUBMITTER_NAME", help="Who submits.")
    ] = None,
    submitter_contact: Annotated[
        str | None, typer.Option(envvar="BUNDLER_SUBMITTER_CONTACT", help="How to reach them.")
    ] = None,
    submitter_affiliation: Annotated[
        str | None, typer.Option(envvar="BUNDLER_SUBMITTER_AFFILIATION", help="Their affiliation.")
    ] = None,
    expect: Annotated[
        list[str] | None,
        typer.Option(
            "--expect",
            metavar="TASK=ROWS",
            help="The dataset's row count for TASK, so coverage can be judged (repeatable).",
        ),
    ] = None,
    allow_partial: Annotated[
        bool,
        typer.Option(help="Bundle partial or gapped runs, marked partial, instead of refusing."),
    ] = False,
    resolve_rows: Annotated[
        bool,
        typer.Option(
            help="Look up each pinned dataset split's row count on the Hub (its card's "
            "dataset_info) and judge coverage against it; --expect wins where given."
        ),
    ] = False,
    token: TokenOption = None,
    level: Annotated[int, typer.Option(min=1, max=MAX_LEVEL, help="zstd compression level.")] = 3,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Bundle every run under OUTPUT_ROOT into BUNDLES_DIR/<player>_<fp8>/<target>.tar.zst.

    A run that is wrong, unattributable or (without --allow-partial) partial is refused with a
    one-line reason; the valid runs are still bundled. Exit 1 if any input was refused.
    """
    console = stderr_console()

    def action() -> int:
        options = CollectOptions(
            tasks=task or [],
            models=model or [],
            submitter=Submitter(
                name=submitter_name, contact=submitter_contact, affiliation=submitter_affiliation
            ),
            expected_rows=parse_expectations(expect or []),
            allow_partial=allow_partial,
            resolve_rows=resolve_rows,
            token=_token(token),
            level=level,
        )
        with RichProgress(console) as progress:
            report = collect(output_root, bundles_dir, options, progress)
        return _finish(report, render_collect, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=_secrets(token))
    )


@app.command("verify")
def verify_command(
    paths: Annotated[
        list[Path], typer.Argument(help="Bundle archives, or directories searched for them.")
    ],
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Check bundles without extracting them: digests, zstd checksum, tar members against the
    manifest, safe paths, and that every claim matches the files. Exit 1 if any check failed."""
    console = stderr_console()

    def action() -> int:
        with RichProgress(console) as progress:
            report = verify(paths, progress)
        return _finish(report, render_verify, console, json_output)

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))


@app.command("inspect")
def inspect_command(
    archive: Annotated[Path, typer.Argument(help="One bundle archive (.tar.zst).")],
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show what one bundle claims (identity, pin, model, provenance, coverage, counts, usage,
    metrics, warnings) and whether it is intact."""
    console = stderr_console()

    def action() -> int:
        with RichProgress(console) as progress:
            inspection = inspect_bundle(archive, progress)
        return _finish(inspection, render_inspection, console, json_output)

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))


@app.command("upload")
def upload_command(
    bundles_dir: Annotated[
        Path, typer.Argument(help="The bundles directory written by collect.")
    ] = Path("bundles"),
    repo: RepoOption = ...,  # type: ignore[assignment]
    revision: Annotated[
        str, typer.Option(help="The branch to publish to (or to open the pull request on).")
    ] = "main",
    create_pr: Annotated[
        bool,
        typer.Option(
            "--create-pr",
            help="Propose the bundles as a pull request (no write access needed); re-running "
            "updates the same open pull request.",
        ),
    ] = False,
    token: TokenOption = None,
    private: Annotated[
        bool, typer.Option("--private", help="Make the repository private if it is created.")
    ] = False,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace", help="Overwrite a bundle the repository holds with different content."
        ),
    ] = False,
    allow_partial: Annotated[
        bool, typer.Option("--allow-partial", help="Publish partial-coverage bundles too.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the plan; change nothing on the Hub.")
    ] = False,
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="Commit summary to use.")
    ] = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Verify the bundles and publish the new ones to a dataset repository (HF_ENDPOINT is
    honoured). Bundles already there are skipped, a bundle with different content is a conflict
    unless --replace, and partial bundles need --allow-partial. Exit 1 if any bundle was refused
    or not published, 2 for a problem to fix first (token, access, repository, revision)."""
    from bundler.report import render_upload
    from bundler.upload import UploadOptions, upload

    console = stderr_console()

    def action() -> int:
        options = UploadOptions(
            repo_id=repo,
            revision=revision,
            create_pr=create_pr,
            private=private,
            replace=replace,
            allow_partial=allow_partial,
            dry_run=dry_run,
            message=message,
            token=_token(token),
        )
        _quiet_hub_client()
        with RichProgress(console) as progress:
            report = upload(bundles_dir, options, progress)
        return _finish(report, render_upload, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=_secrets(token))
    )


@app.command("download")
def download_command(
    repo: RepoOption = ...,  # type: ignore[assignment]
    output_dir: Annotated[
        Path, typer.Option("--output", "-o", help="The local bundles directory to fill.")
    ] = Path("bundles"),
    revision: Annotated[
        str, typer.Option(help="A branch, tag, commit or refs/pr/N (to review a pull request).")
    ] = "main",
    bundle: Annotated[
        list[str] | None,
        typer.Option("--bundle", help="Only this bundle id, <player>_<fp8>/<target> (repeatable)."),
    ] = None,
    token: TokenOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Download bundles with their sidecars into the local layout and verify each one. A bundle
    that fails verification is kept apart in OUTPUT/.rejected/, never mixed with the good ones.
    Exit 1 if any bundle was rejected or not found."""
    from bundler.download import download
    from bundler.report import render_download

    console = stderr_console()

    def action() -> int:
        _quiet_hub_client()
        with RichProgress(console) as progress:
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


def _quiet_hub_client() -> None:
    """The client's own tqdm bars and warnings would interleave with ours on stderr."""
    from huggingface_hub.utils import logging
    from huggingface_hub.utils.tqdm import disable_progress_bars

    disable_progress_bars()
    logging.set_verbosity_error()  # type: ignore[no-untyped-call]
