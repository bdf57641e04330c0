"""Plotly figures for the task-set page, and for an answer-graded task's page.

The `*_data` functions run the queries, always aggregated in the database or read as flat
value lists, and return plain lists and dicts. The builders take that plain data and return a
figure as a JSON-ready dict, so they need no database. `dashboard` puts the two together for
the view.

Text that came from an upload (task ids, domains) goes into the figures with < > & escaped:
plotly reads a small subset of HTML in labels and decodes entities, so the escaped text is
shown exactly as uploaded instead of being read as markup. The page itself gets the figures
through Django's `json_script`, never as markup.
"""

from __future__ import annotations

import html
import json
from typing import Any

import numpy as np
import plotly.graph_objects as go
from django.db.models import Count
from django.urls import reverse

from inspector.models import Flag, Inspection, Run, Task, TaskSetVersion

NO_DOMAIN = "(none)"
OTHER_DOMAINS = "(other domains)"
# Past these, a chart gets too dense to read and the page too heavy to load.
MAX_DOMAINS = 30
MAX_TREND_INSPECTIONS = 100
SCATTER_LIMIT = 20000
# Run durations are cut at their 99th percentile when the longest run is more than this many
# times longer: drawn to its end, the axis would squeeze 99% of the runs into its first quarter.
TAIL_FACTOR = 4.0
TIMED_OUT = "timed_out"  # a run's outcome (workers.sandbox.Outcome)

Figure = dict[str, Any]


# --- The page ----------------------------------------------------------------------------------


def dashboard(
    version: TaskSetVersion, *, inspection: Inspection | None, finished_id: int | None
) -> dict[str, Any]:
    """Every chart of the task-set page that has something to show, in display order, as
    {"template": plotly's layout template, "charts": [{"id", "figure", "wide"}], "notes": [one
    line per chart left out, saying why]}.

    `inspection` is the version's latest inspection (maybe still running), `finished_id` the
    id of its latest finished one: flags come from a finished inspection only (a running one
    has raised none yet), durations from the latest, even one still running. A chart that would
    say nothing for this set (a scatter of sample pass rates without samples, flags by domain
    where no flagged task has one, a trend of one inspection) is left out with a note, or
    replaced by one that does."""
    items: list[dict[str, Any]] = []
    notes: list[str] = []

    def add(element_id: str, figure: Figure | None, *, wide: bool = False) -> None:
        if figure is not None:
            items.append({"id": element_id, "figure": figure, "wide": wide})

    rates = task_rates_data(version)
    if version.sample_count:
        # The scatter keeps the element id it had before the other charts came (browser tests).
        add("chart-pass-rates", pass_rate_scatter(pass_rate_scatter_data(version)), wide=True)
    elif rates["reference_pass_rate"]:
        # No sample: a task has no sample pass rate, and the reference's is all there is.
        add(
            "chart-reference-pass-rates",
            pass_rate_histogram(rates["reference_pass_rate"], of="reference"),
            wide=True,
        )
        notes.append(
            "No samples uploaded: the pass-rate scatter, the sample pass rates and learnability "
            "need samples; the reference pass rates are shown instead."
        )
    flags = flag_counts_data(finished_id)
    add("chart-flags-by-kind", flags_by_kind(flags["by_kind"], inspection_id=finished_id))
    if set(flags["by_domain"]) == {NO_DOMAIN}:
        notes.append(
            "No flagged task has a domain (the optional domain field of a task line): flags by "
            "domain is left out; flags by kind counts them all."
        )
    else:
        add("chart-flags-by-domain", flags_by_domain(flags["by_domain"], inspection_id=finished_id))
    add("chart-sample-pass-rates", pass_rate_histogram(rates["sample_pass_rate"]))
    add("chart-learnability", learnability_histogram(rates["learnability"]))
    if inspection is not None:
        durations = run_durations_data(inspection.pk)
        figure = run_durations(
            durations["seconds"], timed_out=durations["timed_out"], inspection_id=inspection.pk
        )
        add("chart-durations", figure)
        if figure is None and durations["timed_out"]:
            notes.append(
                f"Every run of inspection #{inspection.pk} so far timed out: run durations has "
                "nothing to show."
            )
    trend = flag_trend_data(version.taskset_id)
    if len(trend["inspections"]) >= 2:
        add("chart-flag-trend", flag_trend(trend), wide=True)
    elif trend["inspections"]:
        notes.append(
            "One finished inspection so far: flags per inspection draws a trend from the "
            "second; flags by kind counts this one's."
        )

    if not items and not notes:
        return {}
    # Every figure carries the same layout template (about 6 kB): send it once.
    template = None
    for item in items:
        template = item["figure"]["layout"].pop("template", None) or template
    return {"template": template, "charts": items, "notes": notes}


# --- Queries -----------------------------------------------------------------------------------


def pass_rate_scatter_data(version: TaskSetVersion, *, limit: int = SCATTER_LIMIT) -> list[dict]:
    """One row per analysed task, most severe first: its URL, id, both pass rates, the first of
    its open flags (or "clean"/"quarantined")."""
    rows = (
        version.tasks.exclude(last_inspection=None)
        .order_by("-severity", "position")
        .values_list(
            "pk", "task_id", "reference_pass_rate", "sample_pass_rate", "open_flags", "status"
        )[:limit]
    )
    # reverse() once rather than per point: a set can hold tens of thousands of tasks.
    url = reverse("inspector-task", args=(0,)).replace("/0/", "/{}/")
    result = []
    for pk, task_id, reference, sample, open_flags, status in rows:
        group = open_flags.split(",")[0] if open_flags else "clean"
        if status == Task.QUARANTINED:
            group = "quarantined"
        result.append(
            {
                "url": url.format(pk),
                "task_id": task_id,
                "reference_pass_rate": reference,
                "sample_pass_rate": sample,
                "group": group,
            }
        )
    return result


def flag_counts_data(inspection_id: int | None) -> dict[str, dict]:
    """The flags one inspection raised, counted in the database: {"by_kind": {code: n},
    "by_domain": {domain: {code: n}}}, with an empty domain named "(none)"."""
    by_kind: dict[str, int] = {}
    by_domain: dict[str, dict[str, int]] = {}
    if inspection_id is None:
        return {"by_kind": by_kind, "by_domain": by_domain}
    rows = (
        Flag.objects.filter(inspection_id=inspection_id)
        .values_list("task__domain", "code")
        .annotate(n=Count("id"))
        .order_by()  # no Meta ordering in the GROUP BY
    )
    for domain, code, n in rows:
        by_kind[code] = by_kind.get(code, 0) + n
        by_domain.setdefault(domain or NO_DOMAIN, {})[code] = n
    return {"by_kind": by_kind, "by_domain": by_domain}


def task_rates_data(version: TaskSetVersion) -> dict[str, list[float]]:
    """The version's reference and sample pass rates and learnabilities, leaving out tasks
    without one."""
    rows = list(
        version.tasks.order_by().values_list(
            "reference_pass_rate", "sample_pass_rate", "learnability"
        )
    )
    return {
        "reference_pass_rate": [rate for rate, _, _ in rows if rate is not None],
        "sample_pass_rate": [rate for _, rate, _ in rows if rate is not None],
        "learnability": [value for _, _, value in rows if value is not None],
    }


def run_durations_data(inspection_id: int) -> dict[str, Any]:
    """The seconds each finished run of the inspection took, by run kind, and how many runs
    timed out (their seconds are the clock they ran out of, not theirs): {"seconds": {kind:
    [seconds, ...]}, "timed_out": n}."""
    seconds: dict[str, list[float]] = {}
    timed_out = 0
    rows = (
        Run.objects.filter(inspection_id=inspection_id, duration__isnull=False)
        .order_by()
        .values_list("kind", "duration", "outcome")
    )
    for kind, duration, outcome in rows:
        if outcome == TIMED_OUT:
            timed_out += 1
        else:
            seconds.setdefault(kind, []).append(duration)
    return {"seconds": seconds, "timed_out": timed_out}


def flag_trend_data(taskset_id: int, *, limit: int = MAX_TREND_INSPECTIONS) -> dict[str, list]:
    """How many flags of each code each finished inspection of the set raised, across all its
    versions, oldest first: {"inspections": [id, ...], "counts": {code: [n per inspection]}}."""
    ids = list(
        Inspection.objects.filter(version__taskset_id=taskset_id, status=Inspection.FINISHED)
        .order_by("-id")
        .values_list("pk", flat=True)[:limit]
    )[::-1]
    position = {pk: i for i, pk in enumerate(ids)}
    counts: dict[str, list[int]] = {}
    rows = (
        Flag.objects.filter(inspection_id__in=ids)
        .values_list("inspection_id", "code")
        .annotate(n=Count("id"))
        .order_by()
    )
    for inspection_id, code, n in rows:
        # An inspection that raised none of a code counts 0 there, not a gap in its line.
        counts.setdefault(code, [0] * len(ids))[position[inspection_id]] = n
    return {"inspections": ids, "counts": dict(sorted(counts.items()))}


# --- Figures -----------------------------------------------------------------------------------


def pass_rate_scatter(rows: list[dict]) -> Figure | None:
    """Reference pass rate against sample pass rate, one point per task, its URL in customdata
    for the page's click handler; None before any analysis."""
    if not rows:
        return None
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
    # SVG draws without a GPU; WebGL only where SVG would crawl.
    trace = go.Scatter if len(rows) <= 5000 else go.Scattergl
    fig = go.Figure()
    for label, items in sorted(groups.items()):
        fig.add_trace(
            trace(
                # A rate that does not exist (no samples) sits just left of the axis.
                x=[_or_off_axis(r["sample_pass_rate"]) for r in items],
                y=[_or_off_axis(r["reference_pass_rate"]) for r in items],
                mode="markers",
                name=label,
                text=[
                    f"{_label(r['task_id'])}<br>samples {_rate(r['sample_pass_rate'])}, "
                    f"reference {_rate(r['reference_pass_rate'])}"
                    for r in items
                ],
                customdata=[r["url"] for r in items],
                hovertemplate="%{text}<extra></extra>",
                marker={"size": 9, "opacity": 0.75},
            )
        )
    fig.update_layout(
        height=380,
        margin={"l": 50, "r": 10, "t": 30, "b": 40},
        title="Reference pass rate against sample pass rate (click a point to open its task)",
        xaxis={"title": "sample pass rate", "range": [-0.1, 1.05]},
        yaxis={"title": "reference pass rate", "range": [-0.1, 1.05]},
    )
    return _as_dict(fig)


def flags_by_kind(counts: dict[str, int], *, inspection_id: int | None = None) -> Figure | None:
    """One bar per flag code, most frequent first."""
    if not counts:
        return None
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    fig = go.Figure(
        go.Bar(
            x=[code for code, _ in ordered],
            y=[n for _, n in ordered],
            hovertemplate="%{x}: %{y} flags<extra></extra>",
        )
    )
    fig.update_layout(_small_layout(f"Flags by kind{_of(inspection_id)}"), yaxis={"title": "flags"})
    return _as_dict(fig)


def flags_by_domain(
    counts: dict[str, dict[str, int]], *, inspection_id: int | None = None
) -> Figure | None:
    """Flags per task domain, one stacked segment per flag code; past MAX_DOMAINS domains the
    least flagged are summed into one bar."""
    if not counts:
        return None
    domains = sorted(counts, key=lambda d: (-sum(counts[d].values()), d))
    kept, rest = domains[:MAX_DOMAINS], domains[MAX_DOMAINS:]
    merged = {d: counts[d] for d in kept}
    if rest:
        other: dict[str, int] = {}
        for d in rest:
            for code, n in counts[d].items():
                other[code] = other.get(code, 0) + n
        merged[OTHER_DOMAINS] = other
    codes = sorted({code for per_code in merged.values() for code in per_code})
    labels = [_label(d) for d in merged]
    fig = go.Figure()
    for code in codes:
        fig.add_trace(
            go.Bar(
                name=code,
                x=labels,
                y=[per_code.get(code, 0) for per_code in merged.values()],
                hovertemplate="%{x}: %{y} " + code + "<extra></extra>",
            )
        )
    fig.update_layout(
        _small_layout(f"Flags by domain{_of(inspection_id)}"),
        barmode="stack",
        # Categories, even where a domain looks like a number or a date.
        xaxis={"type": "category"},
        yaxis={"title": "flags"},
    )
    return _as_dict(fig)


def pass_rate_histogram(values: list[float], *, of: str = "sample") -> Figure | None:
    """How the tasks' pass rates of `of` ("sample", or "reference" for a set without samples)
    spread over [0, 1]."""
    return _histogram(
        values,
        edges=np.linspace(0.0, 1.0, 11),
        title=f"{of.capitalize()} pass rate of the tasks",
        x_title=f"{of} pass rate",
    )


def learnability_histogram(values: list[float]) -> Figure | None:
    """How the tasks' learnability p(1-p) spreads over [0, 0.25] (its maximum, at p = 0.5)."""
    return _histogram(
        values,
        edges=np.linspace(0.0, 0.25, 11),
        title="Learnability p(1−p) of the tasks",
        x_title="learnability",
    )


def run_durations(
    durations: dict[str, list[float]], *, timed_out: int = 0, inspection_id: int | None = None
) -> Figure | None:
    """A histogram of run seconds, one stacked colour per run kind, over shared bins. A long
    tail (the longest run more than TAIL_FACTOR times the 99th percentile: a few slow mutants)
    is cut at that percentile, so the bins show where the runs are; the subtitle says how many
    runs it leaves out, and how many timed out (left out by the caller)."""
    values = [d for per_kind in durations.values() for d in per_kind]
    if not values:
        return None
    top = max(values)
    # "lower": a value that is there, not one drawn towards the outlier between two of them.
    cut = float(np.percentile(values, 99, method="lower"))
    if cut > 0 and top > TAIL_FACTOR * cut:
        top = cut
    top = top or 1.0
    over = sum(1 for d in values if d > top)
    edges = np.linspace(0.0, top, 21)
    fig = go.Figure()
    for kind, per_kind in sorted(durations.items()):
        counts, _ = np.histogram([d for d in per_kind if d <= top], bins=edges)
        fig.add_trace(_bins_trace(edges, counts, name=kind, unit="runs"))
    left_out = []
    if over:
        left_out.append(f"{over} run{_s(over)} over {top:.3g} s")
    if timed_out:
        left_out.append(f"{timed_out} run{_s(timed_out)} that timed out")
    layout = _small_layout(f"Run durations{_of(inspection_id)}")
    if left_out:
        shown = " and ".join(left_out)
        layout["title"] = {"text": layout["title"], "subtitle": {"text": f"not shown: {shown}"}}
        layout["margin"] = {**layout["margin"], "t": 60}
    fig.update_layout(layout, barmode="stack", xaxis={"title": "seconds"}, yaxis={"title": "runs"})
    return _as_dict(fig)


def flag_trend(trend: dict[str, list]) -> Figure | None:
    """Flags of each code per finished inspection, oldest first, one line per code."""
    if not trend["inspections"] or not trend["counts"]:
        return None
    labels = [f"#{pk}" for pk in trend["inspections"]]
    fig = go.Figure()
    for code, counts in trend["counts"].items():
        fig.add_trace(
            go.Scatter(
                x=labels,
                y=counts,
                mode="lines+markers",
                name=code,
                hovertemplate="inspection %{x}: %{y} " + code + "<extra></extra>",
            )
        )
    fig.update_layout(
        _small_layout("Flags per finished inspection"),
        height=340,
        xaxis={"title": "inspection", "type": "category"},
        yaxis={"title": "flags", "rangemode": "tozero"},
    )
    return _as_dict(fig)


# How long an answer may be on the chart's axis; the table under the chart has it whole.
ANSWER_AXIS_CHARS = 32


def answer_distribution(distribution: dict, *, label: str) -> Figure | None:
    """An answer task's final answers (selectors.answer_distribution's rows), one bar per
    answer, stacked by model; the label's bar is marked, and the label gets an empty bar of its
    own when no sample reached it. None without a verified sample."""
    rows = distribution["rows"]
    if not rows:
        return None
    names = [_answer_axis(r["answer"], i) for i, r in enumerate(rows)]
    label_at = next((i for i, r in enumerate(rows) if r["is_label"]), None)
    if label_at is None:
        names.append(_answer_axis(label, len(rows)))
        label_at = len(names) - 1
    fig = go.Figure()
    for model in distribution["models"]:
        counts = [r["per_model"].get(model, 0) for r in rows] + [0] * (len(names) - len(rows))
        fig.add_trace(
            go.Bar(
                name=_label(model),
                x=names,
                y=counts,
                hovertemplate="%{x}: %{y} from " + _label(model) + "<extra></extra>",
            )
        )
    height = rows[label_at]["count"] if label_at < len(rows) else 0
    reached = label_at < len(rows)
    fig.add_annotation(
        x=names[label_at],
        y=height,
        text="label" if reached else "label (no sample)",
        showarrow=True,
        arrowhead=2,
        ay=-30,
        font={"color": "#1a7f37" if reached else "#b3261e"},
    )
    # The label's category drawn as a grey band, so it stands out whatever the model colours.
    fig.add_vrect(
        x0=label_at - 0.45, x1=label_at + 0.45, fillcolor="#5b6577", opacity=0.15, line_width=0
    )
    title = f"Final answers of {distribution['total']} sample{_s(distribution['total'])}"
    if distribution.get("other"):
        other = distribution["other"]
        title += f" (and {other['count']} in {other['answers']} rarer answers, not shown)"
    fig.update_layout(
        _small_layout(title),
        height=340,
        barmode="stack",
        # Answers are categories, even when they look like numbers.
        xaxis={"title": "final answer (the verifier's normal form)", "type": "category"},
        yaxis={"title": "samples", "rangemode": "tozero"},
        legend={"title": {"text": "model"}},
    )
    return _as_dict(fig)


def _answer_axis(answer: str, i: int) -> str:
    # Numbered, so two answers shortened alike stay two categories.
    text = answer if len(answer) <= ANSWER_AXIS_CHARS else answer[: ANSWER_AXIS_CHARS - 1] + "…"
    return f"{i + 1}. {_label(text)}"


# --- Helpers -----------------------------------------------------------------------------------


def _histogram(
    values: list[float], *, edges: np.ndarray, title: str, x_title: str
) -> Figure | None:
    if not values:
        return None
    # Clipped so a value a hair outside the range still lands in the end bins.
    counts, _ = np.histogram(np.clip(values, edges[0], edges[-1]), bins=edges)
    fig = go.Figure(_bins_trace(edges, counts, name="tasks", unit="tasks"))
    fig.update_layout(
        _small_layout(title), xaxis={"title": x_title}, yaxis={"title": "tasks"}, showlegend=False
    )
    return _as_dict(fig)


def _bins_trace(edges: np.ndarray, counts: np.ndarray, *, name: str, unit: str) -> go.Bar:
    """Histogram bins counted here as bars: the page gets one number per bin, not every value."""
    lows, highs = edges[:-1].tolist(), edges[1:].tolist()
    return go.Bar(
        name=name,
        x=[(lo + hi) / 2 for lo, hi in zip(lows, highs, strict=True)],
        y=counts.tolist(),
        width=[hi - lo for lo, hi in zip(lows, highs, strict=True)],
        customdata=[[lo, hi] for lo, hi in zip(lows, highs, strict=True)],
        hovertemplate=(
            f"{name}: %{{customdata[0]:.3g}}–%{{customdata[1]:.3g}}: %{{y}} {unit}<extra></extra>"
        ),
    )


def _small_layout(title: str) -> dict[str, Any]:
    return {"title": title, "height": 300, "margin": {"l": 50, "r": 10, "t": 40, "b": 50}}


def _as_dict(fig: go.Figure) -> Figure:
    # Through plotly's own encoder: plain lists and numbers, ready for json_script.
    return json.loads(fig.to_json())


def _label(text: str) -> str:
    # Only < > &: plotly decodes these (and numeric entities) but shows &quot; as typed.
    return html.escape(text, quote=False)


def _of(inspection_id: int | None) -> str:
    return f" in inspection #{inspection_id}" if inspection_id else ""


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _or_off_axis(value: float | None) -> float:
    return -0.05 if value is None else value


def _rate(value: float | None) -> str:
    return "none" if value is None else f"{value:.2f}"
