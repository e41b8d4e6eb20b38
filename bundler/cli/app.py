"""The `bundler` command: parse arguments, call the library, render the result. Nothing else.

Human output goes to stderr and `--json` output to stdout, so a pipeline can read the JSON
while a person still sees what happened. Exit codes: 0 all good, 1 a person must look (some
checks failed, some inputs were refused, conflicts), 2 unusable input, usage or credentials, 75
temporary failure (the Hub unavailable or rate limiting): retry later.

Here: the typer app and what it does our way (commands loaded when run, placeholders in
--help, usage errors, --version) and the console script's `main`. Which commands there are, and
where each one's function is, is the table in `commands`; the options they share are in
`options`; `errors` words what ended a command.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import inspect
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.main

# typer vendors click: its usage errors are these classes, not the `click` package's.
from typer._click import exceptions as click_exceptions
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import CommandInfo

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

# pydantic looks through every installed distribution for plugins when it first builds a model,
# tens of milliseconds at each start; the command uses no pydantic plugin. An explicit setting,
# even an empty one, is respected.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
# The Hub client's own progress bars and log lines are off unless the user's environment says
# otherwise (the client reads these when it is imported): the command draws its own progress
# on stderr, and the two would interleave.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_VERBOSITY", "error")

from bundler.cli.commands import GROUPS, LazyCommand
from bundler.cli.options import CONFIG_EXAMPLE_HELP, ConfigOption, config_path
from bundler.core import exitcodes
from bundler.core.forked import allow_forks
from bundler.core.version import bundler_version


class _WordArgument(TyperArgument):
    """An argument whose name (its metavar: PATH..., OUTPUT_ROOT) says everything: no
    `<list[Path]>` type column beside it in --help."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


class BundlerGroup(TyperGroup):
    """The `bundler` command group, with the three things typer does not do our way.

    Its commands are those of its table in bundler.cli.commands (GROUPS, by the group's name),
    each built from its function the first time the command line names it: a command imports
    its own module and no other's, and the listing in the group's --help shows each command's
    one-line help from the table without importing any.

    Usage errors (unknown option, missing argument, bad value) are caught here, where the
    command line is parsed, before any command's own code runs: they become one `error:` line
    on stderr, plus the JSON error object on stdout when --json was given, and exit 2. And
    --help shows words for placeholders: a flag shows none (typer would show `<bool>`), an
    argument shows its metavar only.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = {entry.name: entry for entry in GROUPS.get(self.name or "", ())}
        self.listing = False
        """Whether the group's --help is listing its commands (`format_help`)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*self.lazy, *(name for name in self.commands if name not in self.lazy)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = self.lazy.get(cmd_name)
        if entry is not None and cmd_name not in self.commands:
            if self.listing:  # a name and a line to show, not a command to run
                return TyperCommand(cmd_name, short_help=entry.summary)
            self.commands[cmd_name] = _built(entry, self.rich_markup_mode)
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _plain_placeholders([*command.params, command.get_help_option(ctx)])
        return command

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _plain_placeholders([*self.params, option])
        return option

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _help_console_settings()
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False

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
            extra.setdefault("default_map", _config_defaults(argv))
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
            from bundler.cli.console import stderr_console

            stderr_console().print("[red]aborted[/]")
            result = exitcodes.LOOK
        except SystemExit:
            if not _pipe_closed():
                raise
            result = exitcodes.OK  # `bundler ... | head`: the reader had what it wanted
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else exitcodes.OK)


class BundlerCommand(TyperCommand):
    """A command whose --help fits 80 columns whole (`_compact_help_columns`)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _help_console_settings()
        super().format_help(ctx, formatter)


def _help_console_settings() -> None:
    """What the console that typer shows --help on needs of ours, set when help is shown, as
    rich is loaded only then: a closed pipe ends it quietly (`bundler --help | head`), and
    its columns are compact."""
    from bundler.cli.console import end_quietly_on_closed_pipe

    end_quietly_on_closed_pipe()
    _compact_help_columns()


def _compact_help_columns() -> None:
    """One space between the columns of --help's option tables, not two. Typer lays them out
    in seven columns (required mark, option, short option, their negative forms, metavar, help),
    the negative ones always empty here, and at 80 columns the gaps left the help column too
    narrow for a whole word: `[env var: BUNDLER_SUBMITTER_AFFILIATION]` was cut to
    `BUNDLER_SUBMITTER_AFFILIAT…` (tests/test_width.py). Set when help is shown, not at import:
    importing typer's rich_utils takes longer than a whole `--version`, a cost no
    other run of a command pays."""
    from typer import rich_utils

    rich_utils.STYLE_OPTIONS_TABLE_PADDING = (0, 1, 0, 0)  # type: ignore[assignment]  # rich's 4-tuple


def flowing(text: str | None) -> str | None:
    """`text` (a docstring) with each paragraph on one line, for typer to wrap to the terminal.
    Typer's rich markup keeps a docstring's line breaks, so --help broke sentences where the
    source did, and the commands panel kept them all; an indented paragraph (an example) is
    kept as written."""
    if text is None:
        return None
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        part if part.startswith(" ") else " ".join(line.strip() for line in part.splitlines())
        for part in paragraphs
    )


def _built(entry: LazyCommand, markup_mode: Any) -> Any:
    """The command `entry` names, as typer builds it from its function: imported now, its help
    the flowing docstring, its listing the table's line, its class ours."""
    module, _, name = entry.function.partition(":")
    function = getattr(importlib.import_module(f"bundler.cli.{module}"), name)
    info = CommandInfo(
        name=entry.name,
        cls=BundlerCommand,
        help=flowing(function.__doc__),
        short_help=entry.summary,
        callback=function,
    )
    return typer.main.get_command_from_info(
        info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=markup_mode
    )


class ConfigError(click_exceptions.UsageError):
    """The config file cannot be used: one line naming the key, exit 2."""


def _config_defaults(argv: list[str]) -> dict[str, Any] | None:
    """The config file's values as the commands' option defaults (bundler.cli.config); None
    when there is no config file. Only a run that has one pays for reading it."""

    path, _named = config_path(argv)
    if path is None:
        return None
    from bundler.cli.config import default_map, load_config
    from bundler.core.errors import UsageError

    try:
        return default_map(load_config(path))
    except UsageError as error:
        raise ConfigError(error.message) from None


def _pipe_closed() -> bool:
    """Whether typer ended the command because the reader of stdout or stderr closed the pipe
    (it then wraps both streams to stay quiet, and exits 1): a closed pipe is no failure."""
    from typer._click.utils import PacifyFlushWrapper

    return isinstance(sys.stdout, PacifyFlushWrapper) or isinstance(sys.stderr, PacifyFlushWrapper)


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
    from bundler.cli.console import emit_error, shown, stderr_console
    from bundler.cli.errors import USAGE_KIND

    message = " ".join(error.format_message().split())
    ctx = getattr(error, "ctx", None)
    command = ctx.command_path if ctx is not None else "bundler"
    hint = f"see `{command} --help`"
    code = error.exit_code if error.exit_code != 1 else exitcodes.UNUSABLE
    if json_output:
        emit_error(message, hint, code, USAGE_KIND)
    stderr_console().print(f"[bold red]error[/]: {shown(message)} ({hint})", highlight=False)
    return code


app = typer.Typer(
    name="bundler",
    help=(
        "Bundle GPTNT statics outputs into verified, byte-reproducible .tar.zst submission "
        "bundles, check them, and publish them to a Hugging Face dataset repository.\n\n"
        "Typical use: `bundler collect ./output` then `bundler verify ./bundles`, then "
        "`bundler upload ./bundles --repo OWNER/NAME --create-pr`.\n\n"
        "What a job repeats every run can live in bundler.toml in the working folder (or "
        "--config FILE): one table per command (collect, upload, sync, download), its keys "
        "the options' names; options given on the command line win. For example:\n\n"
        + CONFIG_EXAMPLE_HELP
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


GC_YOUNG_THRESHOLD = 1_000_000
"""Allocations between two collections of the youngest generation (Python's default: 700).
A collection walks every young container still alive, and a command's young objects are its
records (the stat cache's entries, a run's listing, a report's rows): at a tenth of this, a
no-op sync of 2,000 runs still spent a noticeable share of its time in the two or three
collections that came, at this none comes once the threshold is set, and collect's peak RSS
stays what it was. What it gains: docs/performance.md, "What each mechanism gains"
(`gc_settings`)."""


ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


class PandasLeftOut:
    """An import finder, first on `sys.meta_path`, that answers any import of pandas as if
    pandas were not installed.

    pyarrow imports pandas, where it is installed, the first time it asks whether a value is
    a pandas object: almost any table operation asks (pyarrow/pandas-shim.pxi, `pa.array` and
    `Schema.empty_table` among them). The bundler makes no pandas object and asks pyarrow for
    none, and the tables it writes are the same bytes either way; but pandas is in most
    environments that run evaluations (`datasets` requires it), and loading it costs about
    half a second and tens of MiB. Where pandas is not installed, nothing changes. What it
    gains where it is: docs/performance.md, "What each mechanism gains" (`pandas_left_out`)."""

    @staticmethod
    def find_spec(
        fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def main() -> None:
    """The `bundler` console script, and the settings of its process (none of them the
    library's to make: a program that imports the bundler keeps its own).

    A command is a short process that allocates many objects (imports, one record per file) and
    makes few reference cycles, so Python's cyclic collector mostly re-walks the same long-lived
    module objects: it runs less often here (memory stays bounded: a cycle still goes within
    GC_YOUNG_THRESHOLD allocations), and at exit every object is frozen so the interpreter's
    final collection does not walk them all once more just before the process ends.

    The process is one thread, so work may be done ahead in forked children
    (bundler.core.forked).

    Arrow allocates from the C library's heap, not its own pool (ARROW_DEFAULT_MEMORY_POOL,
    unless the user set it): its pool keeps what the tables' parts freed, and a command reads
    many parts one after another, and the heap gives back what was freed.

    pandas is left out of the process (`PandasLeftOut`).

    Each of these settings is measured with and without it (the collector's as `gc_settings`,
    the heap as `arrow_heap`): docs/performance.md, "What each mechanism gains"."""
    os.environ.setdefault(ARROW_POOL_ENV, "system")
    sys.meta_path.insert(0, PandasLeftOut())
    allow_forks()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    try:
        app()
    except SystemExit as ending:
        if "pyarrow" in sys.modules:
            _end_without_teardown(ending.code)
        raise
    finally:
        gc.freeze()


def _end_without_teardown(code: object) -> None:
    """End the process as Python would, less the teardown of native libraries.

    pyarrow's thread pools can abort a process that is done with them when they are torn down
    at interpreter exit ("terminate called without an active exception", exit -6;
    apache/arrow#34314). Measured here on a script that sorts, writes and reads a small
    Parquet table: pyarrow 15.0.0 aborted 14 times in 40, 21.0.0 38 in 60, 25.0.0 1 in 150; the
    same script ending with os._exit, 0 in 60 at 21.0.0. So a command that loaded pyarrow runs
    the atexit handlers, flushes its output and ends with os._exit, its exit code unchanged."""
    if isinstance(code, str):
        print(code, file=sys.stderr)
    status = code if isinstance(code, int) else (0 if code is None else 1)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(status)


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
    config: ConfigOption = None,
) -> None:
    """Options that come before the command."""


tasks_app = typer.Typer(
    name="tasks",
    help="The leaderboard's task definitions (leaderboard/tasks.json), kept by its maintainers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    cls=BundlerGroup,  # its commands from its table, as the top level's are
)
app.add_typer(tasks_app)

signers_app = typer.Typer(
    name="signers",
    help="Who may sign the leaderboard's bundles (leaderboard/allowed_signers), kept by its "
    "maintainers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    cls=BundlerGroup,
)
app.add_typer(signers_app)
