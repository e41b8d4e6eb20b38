"""The commands of the local bundle format, no network: collect, verify, inspect, diff,
export-gptnt."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bundler.cli.console import stderr_console
from bundler.cli.errors import run_command
from bundler.cli.options import (
    BundlesDirOption,
    ConfigOption,
    DebugOption,
    ExpectOption,
    FullOption,
    JsonOption,
    LevelOption,
    ModelOption,
    OutputRootArgument,
    ResolveRowsOption,
    SignKeyOption,
    SubmitterAffiliationOption,
    SubmitterContactOption,
    SubmitterNameOption,
    TaskOption,
    TokenOption,
    WaitOption,
)
from bundler.cli.render import finish, progress_on
from bundler.cli.tokens import secrets_of, token_to_send

if TYPE_CHECKING:
    from bundler.local.collect import CollectOptions


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
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Replace a bundle even by one that claims less (weaker coverage, fewer rows, "
            "a row count, submitter or --resolve-rows note dropped); without it such a bundle "
            "is kept, and the run exits 1.",
        ),
    ] = False,
    token: TokenOption = None,
    level: LevelOption = 3,
    wait: WaitOption = 0,
    full: FullOption = False,
    sign_key: SignKeyOption = None,
    config: ConfigOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Bundle every run under OUTPUT_ROOT into BUNDLES_DIR/<player>_<fp8>/<target>.tar.zst.

    <player> is the run's player_name slugged as GPTNT slugs it; a name with no ASCII letter or
    digit leaves it empty, and the folder is _<fp8>, named by the fingerprint alone.
    A run that is wrong, unattributable or (without --allow-partial) partial is refused with a
    one-line reason; the valid runs are still bundled. A bundle is never replaced by one that
    claims less without --replace: it is kept, saying what would be lost. Exit 1 if any input
    was refused or a bundle kept, 75 if another run kept the bundles folder busy.
    """
    console = stderr_console()

    def action() -> int:
        from bundler.cli.error_words import collect_in_words
        from bundler.cli.render import render_collect
        from bundler.local.collect import collect

        options = collect_options(
            task=task,
            model=model,
            submitter=(submitter_name, submitter_contact, submitter_affiliation),
            expect=expect,
            allow_partial=allow_partial,
            level=level,
            wait=wait,
            full=full,
            replace=replace,
        )
        row_counts = None
        if resolve_rows:
            from bundler.hub.tasks.split_size import (
                RowCountResolver,  # the Hub client only when asked
            )

            row_counts = RowCountResolver(token_to_send(token))
        if sign_key is not None:
            from bundler.local.signature import Signer

            Signer(sign_key)  # a key that cannot sign stops the command before it writes
        with progress_on(console) as progress:
            report = collect(output_root, bundles_dir, options, progress, row_counts)
            archives = [Path(bundle.archive) for bundle in report.bundles]
            if sign_key is not None and archives:
                from bundler.local.sign import sign

                report.signing = sign(archives, sign_key, lock_wait=wait, progress=progress)
        return finish(collect_in_words(report), render_collect, console, json_output)

    raise typer.Exit(
        run_command(action, json_output=json_output, debug=debug, secrets=secrets_of(token))
    )


def collect_options(
    *,
    task: list[str] | None,
    model: list[str] | None,
    submitter: tuple[str | None, str | None, str | None],
    expect: list[str] | None,
    allow_partial: bool,
    level: int,
    wait: float,
    full: bool = False,
    replace: bool = False,
) -> CollectOptions:
    """The collect options from the command line (shared by collect and sync)."""
    from bundler.cli.options import parse_expectations
    from bundler.local.collect import CollectOptions
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
        replace=replace,
    )


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
        return finish(report, render_verify, console, json_output)

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))


def sign_command(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="PATH", help="Bundle archives, or directories searched for them."),
    ],
    key: Annotated[
        Path,
        typer.Option(
            "--key",
            metavar="KEY",
            help="Your OpenSSH key: an unencrypted private key signs in process; an encrypted "
            "one is signed by ssh-keygen, which asks its passphrase (the bundler never sees "
            "it); a .pub file signs with the key ssh-agent holds.",
        ),
    ],
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Replace a signature made by another key."),
    ] = False,
    wait: WaitOption = 0,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Sign bundles already made: an OpenSSH signature (the SSHSIG format of `ssh-keygen -Y
    sign`, namespace statics-bundler) of each archive's bytes, kept in its sidecar as
    signature.sshsig. Only a bundle that verifies is signed. Anyone can check it with stock
    OpenSSH: `ssh-keygen -Y verify -f allowed_signers -I NAME -n statics-bundler -s SIG <
    ARCHIVE`. Exit 1 if any bundle was refused (failing verification, or signed by another key
    without --replace), 2 for a key that cannot sign."""
    console = stderr_console()

    def action() -> int:
        from bundler.cli.render import render_sign
        from bundler.local.sign import sign

        with progress_on(console) as progress:
            report = sign(paths, key, replace=replace, lock_wait=wait, progress=progress)
        return finish(report, render_sign, console, json_output)

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))


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
        return finish(inspection, render_inspection, console, json_output)

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))


def diff_command(
    a: Annotated[
        Path,
        typer.Argument(metavar="A", help="The first bundle archive (.tar.zst), e.g. the old one."),
    ],
    b: Annotated[
        Path, typer.Argument(metavar="B", help="The second bundle archive, e.g. the new one.")
    ],
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
        return finish(report, render_diff, console, json_output)

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))


def export_gptnt_command(
    paths: Annotated[
        list[Path],
        typer.Argument(metavar="PATH", help="Bundle archives, or directories searched for them."),
    ],
    output_dir: Annotated[
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
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="Export partial or unknown-coverage bundles too (GPTNT's folder does not say "
            "so), instead of refusing them.",
        ),
    ] = False,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Write each bundle as the folder GPTNT's `gptnt submission new` writes for the same run
    (submission.yaml and metrics.json), for leaderboards that take submissions through GPTNT.
    Bundles are verified first. In a folder, only the config's player's bundles are exported
    (each other one is a `skipped: another player` line). Exit 1 if any bundle was refused
    (failed verification, blank submitter, a capability field GPTNT does not know, partial
    coverage without --allow-partial, another player's config for a bundle named directly), 2
    for a config or path that cannot be used."""
    from bundler.cli.error_words import export_in_words
    from bundler.cli.render import render_export
    from bundler.local.export import SubmitterOverrides, export_gptnt

    console = stderr_console()

    def action() -> int:
        overrides = SubmitterOverrides(
            name=submitter_name, contact=submitter_contact, affiliation=submitter_affiliation
        )
        with progress_on(console) as progress:
            report = export_gptnt(
                paths, output_dir, player_config, overrides, progress, allow_partial=allow_partial
            )
        return finish(export_in_words(report), render_export, console, json_output)

    raise typer.Exit(run_command(action, json_output=json_output, debug=debug))
