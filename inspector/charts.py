"""Plotly figures for the task-set page, built from plain query results."""

from __future__ import annotations

import plotly.graph_objects as go

from inspector.models import Task, TaskSetVersion


def pass_rate_scatter(version: TaskSetVersion, *, limit: int = 20000) -> str | None:
    """Reference pass rate against sample pass rate, one point per task; None before analysis."""
    rows = list(
        version.tasks.exclude(last_inspection=None)
        .order_by("-severity", "position")
        .values_list(
            "pk", "task_id", "reference_pass_rate", "sample_pass_rate", "open_flags", "status"
        )[:limit]
    )
    if not rows:
        return None
    groups: dict[str, list[tuple]] = {}
    for row in rows:
        flags = row[4].split(",")[0] if row[4] else "clean"
        if row[5] == Task.QUARANTINED:
            flags = "quarantined"
        groups.setdefault(flags, []).append(row)
    # SVG draws without a GPU; WebGL only where SVG would crawl.
    trace = go.Scatter if len(rows) <= 5000 else go.Scattergl
    fig = go.Figure()
    for label, items in sorted(groups.items()):
        fig.add_trace(
            trace(
                # A rate that does not exist (no samples) sits just left of the axis.
                x=[r[3] if r[3] is not None else -0.05 for r in items],
                y=[r[2] if r[2] is not None else -0.05 for r in items],
                mode="markers",
                name=label,
                text=[f"{r[1]}<br>samples {_rate(r[3])}, reference {_rate(r[2])}" for r in items],
                customdata=[f"/tasks/{r[0]}/" for r in items],
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
    return fig.to_json()


def _rate(value: float | None) -> str:
    return "none" if value is None else f"{value:.2f}"
