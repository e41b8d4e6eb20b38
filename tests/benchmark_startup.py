"""Benchmark: the start-up of a `bundler` command against a bare typer app with its commands.

A script, not a test (pytest does not collect `benchmark_*.py`; the suite runs it once at a
tiny size as a smoke test). The yardstick is built in the same run from the installed
bundler's own command tree: a typer app with the same commands and subcommands, the same
options and arguments (names, flags, help), each command with its one-line help and no body,
started by a launcher written as the console script is. What the bundler costs beyond it is
what its own start-up adds: its imports, its models, its settings. Rows, each alternating
rounds of the two in the same run (ratio of medians and their difference, the per-round
spread, both peak RSS, and the difference of the median CPU times, which a loaded machine
moves less than the wall times):

- `help`: `bundler --help` against the bare app's `--help`;
- `version`: `bundler --version` against the bare app's `--version`;
- `collect-empty`: `bundler collect EMPTY -o OUT` (an output root with no runs: nothing to
  do) against the bare app's `collect EMPTY -o OUT`.

The goal of each: within 30 ms of the bare app (issue 38).

    .venv/bin/python tests/benchmark_startup.py --rounds 15 --json-out /tmp/startup.json

Run with another environment's interpreter to measure that environment's console script.
"""

from __future__ import annotations

import argparse
import compileall
import inspect
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from benchlib import (
    BUNDLER,
    Comparison,
    Measured,
    alternate,
    compile_bytecode,
    machine,
    report_figures,
    run_measured,
)

TARGET_SECONDS = 0.030
"""Start-up goal: within 30 ms of the bare typer app."""
BARE_MODULE = "bare_typer_app"


def one_line(command: Any) -> str:
    """A command's one-line help: its short help, else the first line of its help."""
    text = command.short_help or inspect.cleandoc(command.help or "")
    return text.split("\n\n")[0].split("\n")[0]


def _parameter(param: Any) -> str:
    """One parameter of a bare command, as source: the same names, flags and help, its value a
    string (a bare command converts nothing it does not run)."""
    name = param.name
    help_text = repr(param.help or "")
    if param.param_type_name == "argument":
        many = param.nargs == -1
        annotation = "list[str]" if many else "str"
        metavar = repr(param.metavar) if param.metavar else None
        spec = f"typer.Argument(help={help_text}, metavar={metavar})"
        if param.required:
            return f"{name}: Annotated[{annotation}, {spec}]"
        return f"{name}: Annotated[{annotation} | None, {spec}] = None"
    opts = [*param.opts]
    if param.is_flag:
        if param.secondary_opts:
            opts = [f"{param.opts[0]}/{param.secondary_opts[0]}", *param.opts[1:]]
        flags = ", ".join(repr(opt) for opt in opts)
        eager = ", is_eager=True, callback=_show_version" if name == "version" else ""
        spec = f"typer.Option({flags}, help={help_text}{eager})"
        return f"{name}: Annotated[bool, {spec}] = {bool(param.default)!r}"
    flags = ", ".join(repr(opt) for opt in opts)
    envvar = f", envvar={param.envvar!r}" if param.envvar else ""
    metavar = f", metavar={param.metavar!r}" if param.metavar else ""
    annotation = "list[str] | None" if param.multiple else "str | None"
    spec = f"typer.Option({flags}, help={help_text}{envvar}{metavar})"
    return f"{name}: Annotated[{annotation}, {spec}] = None"


def _function(name: str, params: list[Any]) -> str:
    body = ",\n    ".join(_parameter(param) for param in params)
    return f"def {name}(\n    {body}\n) -> None:\n    pass\n"


def _walk(group: Any, ctx: Any, app_name: str, counter: Iterator[int]) -> list[str]:
    """The source that registers `group`'s commands and subgroups on `app_name`."""
    import typer

    lines: list[str] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        number = next(counter)
        if isinstance(command, typer.core.TyperGroup):
            sub = f"group_{number}"
            lines.append(
                f"{sub} = typer.Typer(name={name!r}, help={one_line(command)!r}, "
                "no_args_is_help=True, add_completion=False)\n"
            )
            inner = typer.Context(command, parent=ctx, info_name=name)
            lines += _walk(command, inner, sub, counter)
            lines.append(f"{app_name}.add_typer({sub})\n")
            continue
        function = f"command_{number}"
        lines.append(f"@{app_name}.command({name!r}, help={one_line(command)!r})\n")
        lines.append(_function(function, command.params))
    return lines


def bare_app_source() -> str:
    """A typer app with the bundler's commands, options and one-line help, and no bodies."""
    import typer
    import typer.main

    from bundler.cli.app import app

    group = typer.main.get_command(app)
    ctx = typer.Context(group, info_name="bundler")
    counter = iter(range(1_000))
    head = [
        '"""A bare typer app with the bundler\'s commands: the floor of its start-up."""\n',
        "from typing import Annotated\n",
        "import typer\n",
        f"app = typer.Typer(name='bundler', help={one_line(group)!r}, no_args_is_help=True, "
        "add_completion=False)\n",
        "def _show_version(value: bool) -> None:\n",
        "    if value:\n",
        "        typer.echo('bundler 0')\n",
        "        raise typer.Exit(0)\n",
        "@app.callback()\n",
        _function("options", group.params),
    ]
    tail = ["def main() -> None:\n", "    app()\n"]
    return "".join([*head, *_walk(group, ctx, "app", counter), *tail])


def write_bare_app(workdir: Path) -> Path:
    """The bare app as an installed command would be: its module compiled, and a launcher that
    is the bundler's console script with the module's name in place of the bundler's."""
    module = workdir / f"{BARE_MODULE}.py"
    module.write_text(bare_app_source(), encoding="utf-8")
    compileall.compile_file(module, quiet=1)
    launcher = workdir / "bare"
    script = BUNDLER.read_text(encoding="utf-8")
    assert "from bundler.cli.app import main" in script, "the console script changed its form"
    launcher.write_text(
        script.replace("from bundler.cli.app import main", f"from {BARE_MODULE} import main"),
        encoding="utf-8",
    )
    launcher.chmod(0o755)
    return launcher


def startup_rows(workdir: Path, rounds: int) -> list[Comparison]:
    bare = write_bare_app(workdir)
    empty = workdir / "empty-output"
    empty.mkdir(exist_ok=True)
    collect_args = ["collect", str(empty), "-o", str(workdir / "bundles")]
    for words in (["--help"], ["--version"], collect_args):  # each side once, unmeasured
        for program in (BUNDLER, bare):
            if run_measured([str(program), *words]).exit_code != 0:
                raise SystemExit(f"{program} {' '.join(words)} failed")
    rows = []
    for name, words in (
        ("help", ["--help"]),
        ("version", ["--version"]),
        ("collect-empty", collect_args),
    ):
        comparison = Comparison(
            name,
            " ".join(["bundler", *words[:1]]),
            " ".join(["bare typer app", *words[:1]]),
            target_difference=TARGET_SECONDS,
        )
        bare_runs: list[Measured] = []
        runs: list[Measured] = []

        def baseline(words: list[str] = words, kept: list[Measured] = bare_runs) -> float:
            kept.append(run_measured([str(bare), *words]))
            return kept[-1].seconds

        def subject(words: list[str] = words, kept: list[Measured] = runs) -> Measured:
            kept.append(run_measured([str(BUNDLER), *words]))
            return kept[-1]

        alternate(comparison, rounds, subject, baseline)
        cpu = statistics.median(run.cpu_seconds for run in runs)
        bare_cpu = statistics.median(run.cpu_seconds for run in bare_runs)
        comparison.extra |= {
            "difference_ms": round(comparison.difference * 1000, 1),
            "cpu_difference_ms": round((cpu - bare_cpu) * 1000, 1),
            "cpu_ms": round(cpu * 1000, 1),
            "bare_cpu_ms": round(bare_cpu * 1000, 1),
            "bare_peak_rss_mib": round(max(run.peak_rss_kib for run in bare_runs) / 1024, 1),
        }
        rows.append(comparison)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="alternated rounds per row")
    parser.add_argument("--workdir", type=Path, default=None, help="where to write (a tmp dir)")
    parser.add_argument("--json-out", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bundler-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}", flush=True)
    compile_bytecode()
    try:
        comparisons = startup_rows(workdir, args.rounds)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report_figures(args.json_out, comparisons)
    return 0


if __name__ == "__main__":
    sys.exit(main())
