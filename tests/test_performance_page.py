"""docs/performance.md, true to the figures saved beside it and of the shape readers rely on:
the machine and the date, each section's table with its columns, every benchmark's rows (or a
line saying it was not measured). A smoke test renders small saved figures
(tests/fixtures/performance/, made with `--sizes smoke`) so the renderer cannot break unseen.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token
from performance_figures import (
    AUDIT_COLUMNS,
    CHARTS_COLUMNS,
    FIGURES,
    MAIN_COLUMNS,
    MECHANISM_COLUMNS,
    NOISE_P,
    PER_RUN_COLUMNS,
    REQUEST_COLUMNS,
    RUN_COLUMNS,
    SCALE_COLUMNS,
    Audit,
    Comparisons,
    FiguresError,
    Scale,
    gain_p_value,
    load,
    render,
    work_of,
)
from performance_page import BENCHMARKS, DOC, FOLDER, measure
from test_code_spans import assert_tables_whole

TESTS = Path(__file__).parent
PACKAGE = TESTS.parent / "bundler"
FIXTURE = TESTS / "fixtures" / "performance"
PARSER = MarkdownIt("commonmark").enable("table")
SECTIONS: list[tuple[str, tuple[str, ...] | None, str | None]] = [
    ("Machine", None, None),
    ("Where users wait", MAIN_COLUMNS, None),
    ("Hub requests", REQUEST_COLUMNS, None),
    ("Time per run added", PER_RUN_COLUMNS, "nightly"),
    ("What each mechanism gains", MECHANISM_COLUMNS, None),
    ("As the repository grows", SCALE_COLUMNS, "scale"),
    ("Audit", AUDIT_COLUMNS, "audit"),
    ("Charts", CHARTS_COLUMNS, "charts"),
    ("How it was measured", RUN_COLUMNS, None),
]
"""The page's sections in order, each table's columns, and the benchmark a section needs."""


def sections(page: str) -> dict[str, list[list[str]]]:
    """Each second-level heading and its table's rows (the header first), as a reader parses
    them."""
    found: dict[str, list[list[str]]] = {}
    heading = ""
    row: list[str] | None = None
    tokens: list[Token] = PARSER.parse(page)
    for number, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h2":
            heading = tokens[number + 1].content
            found[heading] = []
        elif token.type == "tr_open":
            row = []
        elif token.type in ("th_open", "td_open") and row is not None:
            row.append(tokens[number + 1].content)
        elif token.type == "tr_close" and row is not None:
            found[heading].append(row)
            row = None
    return found


def assert_shaped(page: str, folder: Path) -> None:
    """The page rendered from `folder` has every section, column, row and machine line."""
    assert page.startswith("# Performance\n")
    assert_tables_whole(page)
    _, figures = load(folder)
    by_heading = sections(page)
    expected = {
        title: columns for title, columns, needs in SECTIONS if needs is None or needs in figures
    }
    assert list(by_heading) == list(expected)
    for heading, columns in expected.items():
        if columns is not None:
            assert by_heading[heading][0] == list(columns), heading
    for line in (r"Cores: \d+", r"CPU: \S.*", r"Python: 3\.\d+\.\d+", r"OS: \S.*"):
        assert re.search(rf"^- {line}$", page, re.MULTILINE), line
    assert re.search(r"^- Date: \d{4}-\d\d-\d\d \d\d:\d\d to .* UTC$", page, re.MULTILINE)
    works = [cells[0] for cells in by_heading["Where users wait"][1:]]
    for name, each in figures.items():
        if isinstance(each, Comparisons):
            for row in each.comparisons:
                assert work_of(row) in works, (name, row.name)
    nightly = figures.get("nightly")
    if isinstance(nightly, Comparisons):  # each no-op's time per run added, and its floor
        noops = [row for row in nightly.comparisons if row.name.startswith("noop-")]
        per_run = by_heading["Time per run added"][1:]
        assert len(per_run) == len(noops)
        assert all(re.fullmatch(r"-?\d+\.\d\d ms", cells[2]) for cells in per_run), per_run
    measured_gains = [  # every with/without figure a row carries, and nothing else
        (row.name, key)
        for each in figures.values()
        if isinstance(each, Comparisons)
        for row in each.comparisons
        for key in row.extra
        if isinstance(row.extra.get(f"{key}_ratios"), list)
    ]
    gains = by_heading["What each mechanism gains"][1:]
    pooled = [cells for cells in gains if cells[1].startswith("every row where")]
    assert len(gains) - len(pooled) == len(measured_gains), (gains, measured_gains)
    for cells in pooled:  # after the rows it pools, of the same mechanism
        found = re.fullmatch(r"every row where it is used \((\d+) rows above\), pooled", cells[1])
        assert found and int(found[1]) >= 2, cells
        above = gains[: gains.index(cells)]
        assert sum(other[0] == cells[0] for other in above) >= int(found[1]), cells
    assert all(re.fullmatch(r"\d+\.\d\dx", cells[2]) for cells in gains), gains
    assert all(
        re.search(r"\(p (< 0\.001|\d\.\d{3})\)$|MiB less$|no gain\*\*$", cells[6])
        for cells in gains
    )
    if isinstance(figures.get("scale"), Scale):
        commands = [(cells[0], cells[1]) for cells in by_heading["As the repository grows"][1:]]
        for command in figures["scale"].commands:  # type: ignore[attr-defined]
            for size in command.by_size:
                assert (command.name, f"{size:,}") in commands
    if isinstance(figures.get("audit"), Audit):
        runs = [cells[0] for cells in by_heading["Audit"][1:]]
        assert len(runs) == len(figures["audit"].runs)  # type: ignore[attr-defined]
    measured = [cells[0] for cells in by_heading["How it was measured"][1:]]
    for name in FIGURES:
        said = f"- {name}: not measured"
        assert (name in measured) != (said in page), name
        assert (name in figures) == (name in measured), name


def test_the_page_is_what_its_saved_figures_render() -> None:
    assert DOC.read_text(encoding="utf-8") == render(FOLDER), (
        "run `python tests/performance_page.py --from-json docs/performance`"
    )


def test_the_page_has_its_shape() -> None:
    assert_shaped(DOC.read_text(encoding="utf-8"), FOLDER)


def test_small_saved_figures_render_a_page_of_the_same_shape() -> None:
    page = render(FIXTURE)
    assert_shaped(page, FIXTURE)
    assert "tests/benchmark_collect.py --rows 60" in page  # how each ran, from run.json


def test_a_benchmark_without_figures_is_named_not_measured(tmp_path: Path) -> None:
    folder = tmp_path / "figures"
    shutil.copytree(FIXTURE, folder)
    (folder / "verify.json").unlink()
    log = json.loads((folder / "run.json").read_text())
    log["runs"] = [run for run in log["runs"] if run["benchmark"] != "verify"]
    (folder / "run.json").write_text(json.dumps(log))
    page = render(folder)
    assert_shaped(page, folder)
    assert "- verify: not measured (no verify.json)" in page
    assert "verify, " not in page


def test_figures_that_do_not_parse_stop_the_page_naming_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "figures"
    shutil.copytree(FIXTURE, folder)
    (folder / "collect.json").write_text('{"machine": {}, "comparisons": [{}]}')
    with pytest.raises(FiguresError, match=r"collect\.json: not the figures expected"):
        render(folder)
    result = run_page("--from-json", str(folder))
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "collect.json" in result.stderr


def run_page(*args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """tests/performance_page.py run as a person runs it, with `args`."""
    return subprocess.run(
        [sys.executable, str(TESTS / "performance_page.py"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def test_from_json_renders_saved_figures_without_measuring(tmp_path: Path) -> None:
    out = tmp_path / "performance.md"
    result = run_page("--from-json", str(FIXTURE), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_text(encoding="utf-8") == render(FIXTURE)
    assert "==" not in result.stdout  # no benchmark ran


def test_an_absent_script_is_named_not_measured(tmp_path: Path) -> None:
    """The start-up benchmark may not be there yet: the page says so rather than failing."""
    (startup,) = [each for each in BENCHMARKS if each.name == "startup"]
    absent = type(startup)("startup", "benchmark_nothing_here.py", startup.sizes, startup.rounds)
    record = measure(absent, tmp_path, "smoke", None, None)
    assert record.not_measured == "tests/benchmark_nothing_here.py is absent"
    assert record.started is None and not (tmp_path / "startup.json").exists()


@pytest.mark.slow
def test_one_benchmark_measured_again_keeps_the_others(tmp_path: Path) -> None:
    folder = tmp_path / "figures"
    shutil.copytree(FIXTURE, folder)
    out = tmp_path / "performance.md"
    result = run_page(
        *("--sizes", "smoke", "--only", "charts"),
        *("--json-dir", str(folder), "--out", str(out)),
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    page = out.read_text(encoding="utf-8")
    assert_shaped(page, folder)
    assert page == render(folder)
    before = json.loads((FIXTURE / "run.json").read_text())
    after = json.loads((folder / "run.json").read_text())
    assert [run["benchmark"] for run in after["runs"]] == [
        run["benchmark"] for run in before["runs"]
    ]
    changed = [b["benchmark"] for a, b in zip(before["runs"], after["runs"], strict=True) if a != b]
    assert changed == ["charts"]


MEASURED_RATIO = re.compile(r"\b\d+\.\d+x\b")
"""A ratio as benchmarks report one (`0.74x`): with/without figures and ratios of medians."""


def test_a_gain_beyond_the_noise_is_the_exact_one_sided_wilcoxon_test() -> None:
    """A mechanism stays only while its gain shows beyond the noise (DEVELOPERS.md): the page
    reads each with/without figure by the one-sided exact Wilcoxon signed-rank test, whose
    values are checked here against the test's own table (nine rounds: a sum of positive ranks
    of 8 is the largest under 5%, 25 of the 512 sign assignments) and what follows from its
    definition."""
    assert gain_p_value([0.9, 0.92, 0.95, 0.97]) == 1 / 16  # four rounds can never show it
    assert gain_p_value([0.9, 0.92, 0.95, 0.97, 0.99]) == 1 / 32 < NOISE_P  # five can, all won
    assert gain_p_value([1.1, 1.08, 1.05, 1.03, 1.01]) == 1  # all lost
    nine = [0.91, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97, 0.98, 0.99]  # ranks 9..1
    won_but_two = [1 / ratio if ratio in (0.99, 0.93) else ratio for ratio in nine]  # 1 + 7
    assert gain_p_value(won_but_two) == 25 / 512 < NOISE_P
    won_but_one = [1 / ratio if ratio == 0.91 else ratio for ratio in nine]  # rank 9 lost
    assert gain_p_value(won_but_one) == 33 / 512 > NOISE_P  # 25, and the 8 sums of 9
    # Ties share their mean rank; a round of ratio 1 is left out (1.0 and 1 alike).
    # ranks 1, 2.5 and 2.5 (lost): 4 of 8 assignments put 2.5 or less on the losing side
    assert gain_p_value([0.8, 0.5, 2.0]) == gain_p_value([0.8, 0.5, 2.0, 1.0]) == 4 / 8
    assert gain_p_value([0.9, 0.9, 1.05]) == 2 / 8  # ranks 2.5, 2.5 and 1 (lost)
    assert gain_p_value([1, 1.0]) == 1


@pytest.mark.parametrize(
    ("ratios", "reading"),
    [
        ([0.9] * 9, "**not used at this size, though it gains beyond the noise** (p 0.002)"),
        ([1.1, 0.95] * 5, "not used at this size: no gain beyond the noise (p 0.892)"),
    ],
)
def test_a_mechanism_measured_where_it_is_not_used_says_so(
    tmp_path: Path, ratios: list[float], reading: str
) -> None:
    """The verify benchmark forces the read-ahead thread on a bundle under its threshold, to
    show where the threshold belongs: no gain there is as it should be, a gain must stand out."""
    folder = tmp_path / "figures"
    shutil.copytree(FIXTURE, folder)
    figures = json.loads((folder / "verify.json").read_text())
    row = figures["comparisons"][0]
    row["extra"].update(read_ahead=statistics.median(ratios), read_ahead_ratios=ratios)
    row["extra"]["read_ahead_unused"] = True
    (folder / "verify.json").write_text(json.dumps(figures))
    gains = sections(render(folder))["What each mechanism gains"][1:]
    measured_on = work_of(Comparisons.model_validate(figures).comparisons[0])
    (found,) = [cells for cells in gains if cells[1] == measured_on]
    assert found[6] == reading


def test_a_mechanism_used_on_several_rows_is_judged_on_their_rounds_together(
    tmp_path: Path,
) -> None:
    """A gain of a few percent shows beyond the noise in no single row's rounds, and in which
    row it shows changes from run to run: the rows where the mechanism is used are pooled on
    a line of their own. A row where it is not used (forced on under its threshold) and a
    control stay out of the pool; a mechanism used on one row gets no such line."""
    folder = tmp_path / "figures"
    shutil.copytree(FIXTURE, folder)
    figures = json.loads((folder / "verify.json").read_text())
    slight = [0.9, 0.95, 0.97, 1.02, 0.96, 1.03, 0.94, 1.01]
    assert gain_p_value(slight) > NOISE_P  # within the noise, row by row
    with_read_ahead = [row for row in figures["comparisons"] if "read_ahead" in row["extra"]]
    used, unused = with_read_ahead[:2], with_read_ahead[2]
    for row in used:
        row["extra"].update(read_ahead=0.96, read_ahead_ratios=slight, read_ahead_unused=False)
    unused["extra"].update(read_ahead_ratios=[1.5] * 9)  # out of the pool, or it would lose
    (folder / "verify.json").write_text(json.dumps(figures))
    gains = sections(render(folder))["What each mechanism gains"][1:]
    pooled = [cells for cells in gains if cells[1].startswith("every row where it is used")]
    (read_ahead,) = [cells for cells in pooled if "ahead in a thread" in cells[0]]
    assert read_ahead[1:4] == [
        "every row where it is used (2 rows above), pooled",
        f"{statistics.median(slight):.2f}x",
        "0.90-1.03x (16 rounds)",
    ]
    assert read_ahead[6] == f"gain beyond the noise (p {gain_p_value(slight * 2):.3f})"
    # It follows the last row it pools, each of which reads as within the noise.
    before = gains[gains.index(read_ahead) - 1]
    rows = Comparisons.model_validate(figures).comparisons
    last_used = rows[figures["comparisons"].index(used[1])]
    assert before[1] == work_of(last_used) and before[6] == "**within the noise** (p 0.055)"
    # gc_settings is measured on collect's and the nightly sync's rows: pooled; the control
    # (sync finding runs ahead in a small tree) is not, nor the forked child's one row.
    mechanisms = [cells[0] for cells in pooled]
    assert len(mechanisms) == 2 and any("collector settings" in name for name in mechanisms)
    assert not any("forked" in name for name in mechanisms)


def test_measured_ratios_stand_on_the_page_not_in_the_code() -> None:
    """Issue 38: a figure in a docstring goes stale the day the code or the machine changes,
    where the page is measured again by one command; the code points to the page instead
    ("What each mechanism gains")."""
    assert MEASURED_RATIO.search("took 0.74x the time, 1.2x the CPU")  # the check can fail
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if MEASURED_RATIO.search(line)
    ]
    assert found == []
