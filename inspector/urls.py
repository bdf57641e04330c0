from __future__ import annotations

from django.contrib import admin
from django.urls import include, path, re_path

from inspector import api, views

urlpatterns = [
    path("", views.home, name="inspector-home"),
    path("tasksets/upload", views.taskset_upload, name="inspector-upload"),
    path("tasksets/<str:name>/", views.taskset_detail, name="inspector-taskset"),
    path("tasksets/<str:name>/inspect", views.taskset_inspect, name="inspector-inspect"),
    path("tasksets/<str:name>/schedule", views.taskset_schedule, name="inspector-schedule"),
    path("tasksets/<str:name>/manifest.jsonl", views.taskset_manifest, name="inspector-manifest"),
    path("tasksets/<str:name>/report.jsonl", views.taskset_report, name="inspector-report"),
    path("inspections/<int:pk>/progress", views.inspection_progress, name="inspector-progress"),
    path("queue/", views.queue, name="inspector-queue"),
    path("queue/bulk", views.queue_bulk, name="inspector-queue-bulk"),
    path("queue/filters", views.filter_save, name="inspector-filter-save"),
    path("queue/export.<str:fmt>", views.queue_export, name="inspector-queue-export"),
    path(
        "tasksets/<str:name>/report.<str:fmt>",
        views.taskset_report_table,
        name="inspector-report-table",
    ),
    path("tasks/<int:pk>/claim", views.task_claim, name="inspector-claim"),
    path("tasks/<int:pk>/reinspect", views.task_reinspect, name="inspector-task-reinspect"),
    path("tasks/<int:pk>/assign", views.task_assign, name="inspector-assign"),
    path("tasks/<int:pk>/comment", views.task_comment, name="inspector-comment"),
    path("tasks/<int:pk>/", views.task_detail, name="inspector-task"),
    path("tasks/<int:pk>/quarantine", views.task_quarantine, name="inspector-quarantine"),
    path("tasks/<int:pk>/release", views.task_release, name="inspector-release"),
    path("tasks/<int:pk>/relabel", views.task_relabel, name="inspector-relabel"),
    path("flags/<int:pk>/confirm", views.flag_confirm, name="inspector-flag-confirm"),
    path("flags/<int:pk>/dismiss", views.flag_dismiss, name="inspector-flag-dismiss"),
    path("assets/plotly.min.js", views.plotly_js, name="inspector-plotly"),
    path("favicon.ico", views.favicon, name="inspector-favicon"),
    path("tokens/", views.tokens, name="inspector-tokens"),
    path("tokens/<int:pk>/revoke", views.token_revoke, name="inspector-token-revoke"),
    path("api/openapi.json", api.openapi, name="api-openapi"),
    path("api/v1/tasksets", api.tasksets, name="api-tasksets"),
    path("api/v1/tasksets/<str:name>/inspections", api.inspection_start, name="api-inspect"),
    path("api/v1/tasksets/<str:name>/manifest.jsonl", api.manifest, name="api-manifest"),
    *(
        path(
            f"api/v1/tasksets/<str:name>/report.{fmt}",
            api.report,
            {"fmt": fmt},
            name=f"api-report-{fmt}",
        )
        for fmt in ("jsonl", "csv", "parquet")
    ),
    path("api/v1/inspections/<int:pk>", api.inspection_detail, name="api-inspection"),
    path("api/v1/tasks", api.task_list, name="api-tasks"),
    path("api/v1/tasks/<int:pk>", api.task_detail, name="api-task"),
    path("api/v1/tasks/<int:pk>/quarantine", api.task_quarantine, name="api-quarantine"),
    path("api/v1/tasks/<int:pk>/release", api.task_release, name="api-release"),
    path("api/v1/tasks/<int:pk>/relabel", api.task_relabel, name="api-relabel"),
    re_path(r"^api/(?P<rest>.*)$", api.not_found, name="api-not-found"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
]
