"""A chart per defined task: its best entries' scores as bars, drawn as a PNG that the card shows
and the commit that writes the task's table writes beside it (`leaderboard/charts/<task>.png`).

PNG, because SVG images have been reported not to display on Hub pages
(lfai/model_openness_tool#159). matplotlib is an optional extra (`statics-bundler[charts]`):
it is imported here only, and only when a chart is drawn, so a bundler without it loads and
works as before, its card saying how to get charts (`chart_png` returns None).

The same board gives the same bytes from the same matplotlib (and Pillow, which writes the
PNG): the Agg canvas at a size set by the number of bars (`chart_height`) and a fixed
resolution, each score's place measured on that canvas, matplotlib's default style whatever a
`matplotlibrc` says, every text in the DejaVu Sans font matplotlib ships (never a system font
of that name), and no `Software` in the PNG's metadata (the only entry that varied). So a
chart is rewritten only when its board changed, and the record (`leaderboard/derived.json`)
vouches for it as for a table: a chart edited by hand is drawn again by the next commit.

Which charts a commit writes or removes (`drawn_charts`, `stale_charts`): of each defined task
with bundles, the chart is drawn when the task's table is derived again, when it is not on the
branch, when it was changed outside the bundler, and when the record names another look for it
than this bundler draws (`bundler.hub.leaderboard.record.CHART_LOOK`). A chart is removed
when its task has no bundle left or is no longer defined, and, where a commit draws no new one
(a bundler without matplotlib, or a chart that failed to draw), when it is edited or its task's
table changed: a chart never shows a board the tables no longer hold, and never stops one
being written.

Any score can be charted: one no bar can show (beyond MAX_DRAWN, or outside [0, 1] on a
proportion's axis) is named and written without its bar (`ChartBar.drawn`).
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import io
import math
import sys
from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from bundler.hub.client.remote import RemoteFile
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.record import CHART_LOOK, BoardRecord, DerivedFile
from bundler.hub.leaderboard.rows import BoardRow
from bundler.hub.repo.paths import CHARTS_DIR, chart_task, task_chart, task_table
from bundler.hub.tasks.definitions import TaskDefinitions
from bundler.local.layout import FINGERPRINT_PREFIX_LENGTH

if TYPE_CHECKING:
    from matplotlib.font_manager import FontProperties

CHART_ROWS = 20
"""Entries a chart shows, best first: as many as the card's board."""
WIDTH_INCHES, DPI = 8.0, 100
"""800 pixels wide."""
HEAD_INCHES, BAR_INCHES, FOOT_INCHES = 0.65, 0.3, 0.6
"""The height: the title above the bars, each bar's slot, the axis and legend below. A chart is
as tall as its entries need (155 pixels for one, 725 for CHART_ROWS), where a fixed 800 x 600
canvas left one to eight entries 85% to 50% blank."""
LEFT, RIGHT = 0.33, 0.97
"""Where the axes start and end across the canvas: the bars' labels are left of them."""
LABEL_LENGTH = 38
"""A bar's label (rank, model name, the setup's fingerprint where two setups share the name) is
cut to this, to fit the left margin."""
CURRENT, MARKED, STALE = "#4c72b0", "#a6bddb", "#b0b0b0"
"""A complete current entry; one marked ⚠ on the card (partial, unknown, unpinned); a stale one."""
LEGEND = ((CURRENT, "complete"), (MARKED, "partial, unknown or unpinned"), (STALE, "stale"))
WARNING = "\u26a0"
"""The card's mark of an entry to compare with care."""
EDGE, GRID = "#333333", "#dddddd"
FONT_FILE = ("fonts", "ttf", "DejaVuSans.ttf")
FONT_SIZES = {"title": 11, "note": 9, "label": 8}


class _Matplotlib(NamedTuple):
    """What the charts use of matplotlib."""

    matplotlib: Any
    canvas: Any
    figure: Any
    font: Any
    patch: Any
    locator: Any
    font_file: Any


@functools.cache
def _matplotlib() -> _Matplotlib | None:
    """matplotlib, imported once; None when it is not installed."""
    try:
        import matplotlib
        import matplotlib.style
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.font_manager import FontProperties
        from matplotlib.ft2font import FT2Font
        from matplotlib.patches import Patch
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        return None
    return _Matplotlib(
        matplotlib, FigureCanvasAgg, Figure, FontProperties, Patch, MaxNLocator, FT2Font
    )


def charts_available() -> bool:
    """Whether this bundler can draw charts (matplotlib is installed), asked of the import
    system without importing it: the card asks on every commit, and the import takes a third
    of a second."""
    if "matplotlib" in sys.modules:
        return _matplotlib() is not None
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # refused by a finder; a module without a spec
        return False


def chart_png(board: TaskBoard) -> bytes | None:
    """The board's chart as PNG bytes: its best CHART_ROWS entries that have a score, as
    horizontal bars best first, each with its 95% interval where the task has them, partial
    and stale entries marked. None when matplotlib is not installed.

    A figure is a web of reference cycles (figure, canvas, renderer, artists), freed only by
    the cyclic collector, which the console script runs rarely (bundler.cli.app), so that a
    few dozen charts held about a hundred MB more. So the youngest generation, which holds
    the figure's objects, is collected after each chart, which costs a few ms. The collector
    is not paused meanwhile: whether it runs is the process's setting, not the library's, and
    pausing it gained nothing in the console script, in memory or in CPU. A program on
    Python's default thresholds, where a figure's objects can age past the youngest
    generation while it is drawn, holds some of them until its own collector reaches them,
    as it does for any code that makes cycles."""
    mpl = _matplotlib()
    if mpl is None:
        return None
    try:
        with mpl.matplotlib.style.context("default"):  # whatever a matplotlibrc says
            bars = chart_bars(board, _glyphs(mpl))
            height = chart_height(len(bars))
            figure = mpl.figure(figsize=(WIDTH_INCHES, height), dpi=DPI)
            mpl.canvas(figure)
            top, bottom = 1 - HEAD_INCHES / height, FOOT_INCHES / height
            figure.subplots_adjust(left=LEFT, right=RIGHT, top=top, bottom=bottom)
            _draw(board, bars, figure.add_subplot(), mpl)
            sink = io.BytesIO()
            figure.savefig(sink, format="png", dpi=DPI, metadata={"Software": None})
        del figure
    finally:
        gc.collect(0)
    return sink.getvalue()


def chart_height(bars: int) -> float:
    """The chart's height in inches for `bars` bars (one slot for a chart of none, which says
    so)."""
    return HEAD_INCHES + BAR_INCHES * max(bars, 1) + FOOT_INCHES


def _font_file(mpl: _Matplotlib) -> Path:
    """The font matplotlib ships: a system font of the same name (another version) would give
    other bytes."""
    return Path(mpl.matplotlib.get_data_path(), *FONT_FILE)


def _fonts(mpl: _Matplotlib) -> dict[str, FontProperties]:
    return {name: mpl.font(fname=_font_file(mpl), size=size) for name, size in FONT_SIZES.items()}


@functools.cache
def _glyphs(mpl: _Matplotlib) -> frozenset[int]:
    """The characters (code points) the font has a glyph for."""
    return frozenset(mpl.font_file(str(_font_file(mpl))).get_charmap())


MAX_DRAWN = 1e300
"""The largest score (either way) a bar is drawn for: the axis, its margins and matplotlib's
tick arithmetic multiply the extent by a few, and float64 ends at 1.8e308 (a bar of 4.4e307
already overflowed matplotlib's tick steps, one of 1.7e308 made the axis limits infinite)."""


@dataclass(frozen=True)
class ChartBar:
    """One entry as its bar shows it. `drawn` is False for a score no bar can show: not
    finite, beyond MAX_DRAWN, or outside [0, 1] on a proportion's axis; the entry is then
    named and its score written, without a bar."""

    label: str
    score: float
    interval: tuple[float, float] | None
    marks: str
    colour: str
    drawn: bool = True


def chart_bars(board: TaskBoard, glyphs: Container[int] | None = None) -> list[ChartBar]:
    """The board's best CHART_ROWS entries that have a score, best first: each labelled with
    its rank and model name (`_labels`; `glyphs`, the characters the font has, None for all),
    and marked as the card marks it (partial, unknown, unpinned, stale)."""
    ranks = dict(zip((row.bundle_id for row in board.rows), board.ranks(), strict=True))
    scored = [row for row in board.rows if board.value(row, board.sort_column) is not None]
    scored = scored[:CHART_ROWS]
    bars = []
    for row, label in zip(scored, _labels(scored, ranks, glyphs), strict=True):
        score = board.value(row, board.sort_column)
        assert score is not None  # scored
        marks = [] if row.coverage == "complete" else [row.coverage]
        marks += [] if row.is_pinned else ["unpinned"]
        marks += ["stale"] if board.stale(row) else []
        colour = STALE if board.stale(row) else MARKED if marks else CURRENT
        drawn = _drawable(score, proportion=board.by_intervals)
        interval = board.interval(row) if drawn else None
        bars.append(ChartBar(label, score, interval, " ".join(marks), colour, drawn))
    return bars


def _labels(
    rows: Sequence[BoardRow], ranks: Mapping[str, int | None], glyphs: Container[int] | None
) -> list[str]:
    """Each bar's label: its rank and the model's name as its run recorded it, which a reader
    knows (the folder's slug of `Straße-AI/Größe-7B` is `gr-e-7b`); where two setups among
    the bars share a name, the setup's fingerprint (its folder's `<fp8>`) beside it. The one
    font a chart may use (see the module docstring) has no CJK characters, among others: a
    character not among `glyphs` is written `?` (never a missing glyph, which matplotlib warns
    of on stderr), and such a name has the fingerprint beside it too, to tell the setup. The
    name is cut to fit LABEL_LENGTH, the fingerprint never."""
    setups: dict[str, set[str]] = {}
    for row in rows:
        setups.setdefault(row.model_name, set()).add(row.key.player_dir)
    labels = []
    for row in rows:
        rank = ranks[row.bundle_id]
        head = f"{'-' if rank is None else rank}. "
        name = "".join(c if glyphs is None or ord(c) in glyphs else "?" for c in row.model_name)
        tail = ""
        if len(setups[row.model_name]) > 1 or name != row.model_name:
            tail = f" ({row.capability_fingerprint[:FINGERPRINT_PREFIX_LENGTH]})"
        room = LABEL_LENGTH - len(head) - len(tail)
        name = name if len(name) <= room else name[: room - 3] + "..."
        labels.append(head + name + tail)
    return labels


def _drawable(score: float, *, proportion: bool) -> bool:
    """Whether a bar can show `score` (see ChartBar)."""
    if not math.isfinite(score):
        return False
    return 0.0 <= score <= 1.0 if proportion else abs(score) <= MAX_DRAWN


def _draw(board: TaskBoard, bars: Sequence[ChartBar], axes: Any, mpl: _Matplotlib) -> None:
    fonts = _fonts(mpl)
    metric = board.sort_column or (board.definition.metric if board.definition else "-")
    known = [(place, bar) for place, bar in enumerate(bars) if bar.interval is not None]
    title = f"{board.task}: {metric}, {board.direction} is better"
    subtitle = f"the best {len(bars)} of {board.total} entries"  # however many rows it read
    subtitle += ", with their 95% Wilson intervals" if known else ""
    axes.set_title(f"{title}\n{subtitle}", fontproperties=fonts["title"])
    slots = max(len(bars), 1)
    axes.set_ylim(slots - 0.5, -0.5)
    if not bars:
        axes.set_xlim(0, 1)
        axes.set_xticks([])
        axes.set_yticks([])
        axes.text(0.5, slots / 2, "no entry has a score", ha="center", fontproperties=fonts["note"])
        return
    positions = range(len(bars))
    colours = [bar.colour for bar in bars]
    scores = [bar.score if bar.drawn else 0.0 for bar in bars]
    axes.barh(positions, scores, height=0.7, color=colours, edgecolor=EDGE, linewidth=0.5)
    if known:
        lows = [bar.score - bar.interval[0] for _, bar in known if bar.interval]
        highs = [bar.interval[1] - bar.score for _, bar in known if bar.interval]
        axes.errorbar(
            [bar.score for _, bar in known],
            [place for place, _ in known],
            xerr=[lows, highs],
            fmt="none",
            ecolor=EDGE,
            elinewidth=1,
            capsize=3,
        )
    low, high = _extent(bars, board.by_intervals)
    axes.set_xlim(low, high)
    ticks = [float(t) for t in mpl.locator(nbins=6).tick_values(low, high) if low <= t <= high]
    axes.set_xticks(ticks, labels=[f"{t:g}" for t in ticks], fontproperties=fonts["label"])
    axes.set_yticks(positions, labels=[bar.label for bar in bars], fontproperties=fonts["label"])
    axes.axvline(0, color=EDGE, linewidth=0.8)
    axes.grid(axis="x", color=GRID, linewidth=0.6)
    axes.set_axisbelow(True)
    _write_scores(bars, scores, axes, (low, high), fonts["label"])
    legend = [
        mpl.patch(facecolor=colour, edgecolor=EDGE, label=text)
        for colour, text in LEGEND
        if colour in colours
    ]
    axes.legend(
        handles=legend,
        loc="lower center",  # below the axis, however tall the chart
        bbox_to_anchor=((LEFT + RIGHT) / 2, 0.0),
        bbox_transform=axes.figure.transFigure,
        ncols=len(legend),
        prop=fonts["label"],
        frameon=False,
    )


def _write_scores(
    bars: Sequence[ChartBar],
    scores: Sequence[float],
    axes: Any,
    extent: tuple[float, float],
    font: FontProperties,
) -> None:
    """Each bar's score and marks, after the bar and its interval where the text fits inside
    the axes, else at the bar's foot, which no score reaches (a proportion's axis ends at 1,
    so a high score leaves no room after it). Where the text goes is measured on the canvas:
    the same bars give the same places. A light box keeps it legible over a bar."""
    low, high = extent
    gap = (high - low) * 0.01
    right = axes.get_window_extent().x1
    renderer = axes.figure.canvas.get_renderer()
    box = {"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1}
    for place, bar in enumerate(bars):
        end = max(scores[place], bar.interval[1] if bar.interval else 0.0)
        text = f"{bar.score:.4g}" + ("" if bar.drawn else " (no bar: off the axis)")
        text += f" {WARNING} {bar.marks}" if bar.marks else ""
        written = axes.text(end + gap, place, text, va="center", fontproperties=font, bbox=box)
        if written.get_window_extent(renderer).x1 > right:
            written.set_x(max(low, 0.0) + gap)


def _extent(bars: Sequence[ChartBar], proportion: bool) -> tuple[float, float]:
    """The x range: 0 to 1 for a proportion (its axis ends at 1); else 0 and every score and
    interval, with room for the score written after each bar."""
    if proportion:
        return 0.0, 1.0
    values = [0.0, *(bar.score for bar in bars if bar.drawn)]
    values += [bound for bar in bars if bar.interval for bound in bar.interval]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return low - (span * 0.02 if low < 0 else 0.0), high + span * 0.25


@dataclass
class DrawnCharts:
    """The charts a commit draws, by path, and those it could not, by path with why."""

    drawn: dict[str, bytes] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def drawn_charts(
    boards: Sequence[TaskBoard],
    wanted: Collection[str],
    held: Mapping[str, RemoteFile],
    edited: Collection[str],
    record: BoardRecord | None,
) -> DrawnCharts:
    """The charts a commit draws: of each defined task among `wanted` (whose table it derives
    again), or whose chart is not held or was `edited`, or is of another look than this
    bundler's (CHART_LOOK, as the `record` names it); none without matplotlib, which is
    imported only when there is a chart to draw (a third of a second: a commit to a board of
    no defined task, or that changes no chart, never loads it).

    A chart is an illustration of a board its tables hold in full, so one that fails to draw
    (whatever matplotlib raises) never stops the commit: the commit goes without it, as
    without matplotlib (`stale_charts` removes a held one that no longer shows its board),
    and the failure is named with why, for the run to say."""
    charts = DrawnCharts()
    due = [board for board in boards if _due(board, wanted, held, edited, record)]
    if not due or not charts_available():  # matplotlib is loaded only to draw
        return charts
    for board in due:
        path = task_chart(board.task)
        try:
            png = chart_png(board)
        except Exception as error:  # matplotlib's errors have no common base
            charts.failed[path] = _why(error)
            continue
        if png is not None:
            charts.drawn[path] = png
    return charts


def _due(
    board: TaskBoard,
    wanted: Collection[str],
    held: Mapping[str, RemoteFile],
    edited: Collection[str],
    record: BoardRecord | None,
) -> bool:
    """Whether a commit draws the board's chart (`drawn_charts`)."""
    path = task_chart(board.task)
    drawn = None if record is None else record.files.get(path)
    return board.definition is not None and (
        board.task in wanted
        or path not in held
        or path in edited
        or (drawn is not None and drawn.look != CHART_LOOK)
    )


def not_drawn(failed: Mapping[str, str]) -> list[str]:
    """Each chart a commit went without (`DrawnCharts.failed`), in one line, for the run to
    say (a warning, and a field of the upload's and the card's reports)."""
    return [
        f"{path}: not drawn ({why}); the tables and card go without it"
        for path, why in sorted(failed.items())
    ]


FAILURE_LENGTH = 200
"""A failed chart's reason is cut to this: one line of a report."""


def _why(error: Exception) -> str:
    """An error as one short line: its type and the first line of its message."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text if len(text) <= FAILURE_LENGTH else text[: FAILURE_LENGTH - 3] + "..."


def stale_charts(
    held: Mapping[str, RemoteFile],
    record: BoardRecord | None,
    rendered: Mapping[str, bytes],
    charted: Collection[str],
) -> list[str]:
    """The charts on the branch that a commit writing `rendered` removes: those of a task not
    in `charted` (the defined tasks with bundles) and, where it draws no new one (no
    matplotlib), those no record vouches for (edited) and those whose task's table it changes."""
    stale = []
    for path, listed in sorted(held.items()):
        if not path.startswith(f"{CHARTS_DIR}/") or path in rendered:
            continue
        task = chart_task(path)
        table = "" if task is None else task_table(task)
        vouched = record is not None and record.holds(path, listed)
        changed = table in rendered and not DerivedFile.of(rendered[table]).matches(held.get(table))
        if task not in charted or not vouched or changed:
            stale.append(path)
    return stale


def charted_tasks(tasks: Iterable[str], definitions: TaskDefinitions) -> set[str]:
    """The tasks that have a chart: of `tasks` (those with bundles), the defined ones."""
    return {task for task in tasks if definitions.get(task) is not None}


def shown_charts(
    boards: Sequence[TaskBoard],
    held: Mapping[str, RemoteFile],
    record: BoardRecord | None,
    rendered: Mapping[str, bytes],
) -> set[str]:
    """The tasks whose chart the branch holds once a commit writes `rendered`: drawn by it, or
    held and kept."""
    charted = {board.task for board in boards if board.definition is not None}
    stale = set(stale_charts(held, record, rendered, charted))
    return {
        board.task
        for board in boards
        if (path := task_chart(board.task)) in rendered or (path in held and path not in stale)
    }
