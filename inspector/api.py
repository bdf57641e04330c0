"""The JSON API for training pipelines and the CI of environment builders: thin adapters over the
same services and selectors the pages use, authenticated by bearer tokens (ApiToken) that act as their user
with the user's roles. Every action lands in the same audit trail. Described by openapi.py."""

from __future__ import annotations

import functools
import json

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from inspector import selectors, services
from inspector.downloads import jsonl_download, refused_status, table_download
from inspector.formats.humaneval import TaskSetFormatError
from inspector.models import ApiToken, ClaimedByOther, Inspection, Task
from inspector.roles import is_admin, is_reviewer

MAX_PAGE_SIZE = 500


def error(status: int, message: str, **extra) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def api_view(role: str, methods: tuple[str, ...]):
    """Token authentication (never the session cookie, so no CSRF), the role, and the methods."""
    check = is_admin if role == "admin" else is_reviewer

    def decorator(view):
        @csrf_exempt
        @login_not_required
        @require_http_methods(list(methods))
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs):
            header = request.headers.get("Authorization", "")
            scheme, _, key = header.partition(" ")
            token = ApiToken.authenticate(key.strip()) if scheme.lower() == "bearer" else None
            if token is None:
                response = error(
                    401, "a valid API token is required: Authorization: Bearer <token>"
                )
                response["WWW-Authenticate"] = "Bearer"
                return response
            request.user = token.user
            if not check(token.user):
                return error(403, f"this needs the {role} role")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def _body(request: HttpRequest) -> dict:
    if request.content_type == "application/json":
        try:
            data = json.loads(request.body or b"{}")
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}
    return request.POST.dict()


# --- Representations ---------------------------------------------------------------------------


def inspection_json(inspection: Inspection) -> dict:
    return {
        "id": inspection.pk,
        "taskset": inspection.version.taskset.name,
        "version": inspection.version.number,
        "status": inspection.status,
        # Queued, its runs still being made by a worker (runs_total is 0 until they are).
        "preparing": inspection.is_preparing,
        "phase": inspection.phase,
        "runs_done": inspection.runs_done,
        "runs_total": inspection.runs_total,
        "percent": inspection.percent,
        "seconds_left": inspection.progress()["seconds_left"],
        "created_at": inspection.created_at.isoformat(),
        "finished_at": inspection.finished_at.isoformat() if inspection.finished_at else None,
        "error": inspection.error,
    }


def task_json(task: Task) -> dict:
    return {
        "id": task.pk,
        "task_id": task.task_id,
        "taskset": task.version.taskset.name,
        "version": task.version.number,
        "status": task.status,
        "quarantine_reason": task.quarantine_reason,
        "severity": task.severity,
        "flags": task.open_flag_list,
        "pending_review": task.pending_review,
        "reference_pass_rate": task.reference_pass_rate,
        "sample_pass_rate": task.sample_pass_rate,
        "learnability": task.learnability,
        "assignee": task.assignee.get_username() if task.assignee_id else None,
    }


def answer_json(task: Task) -> dict:
    """An answer-graded task's label: the one in force, the uploaded one, and whether a
    reviewer corrected it (one task's responses only: a queue page's rows leave the label's
    columns on disk)."""
    if task.kind != Task.ANSWER:
        return {}
    return {
        "kind": task.kind,
        "label": task.label,
        "uploaded_label": task.canonical_solution,
        "relabeled": bool(task.corrected_label),
    }


# --- Views -------------------------------------------------------------------------------------


@api_view("reviewer", ("GET", "POST"))
def tasksets(request: HttpRequest) -> JsonResponse:
    if request.method == "POST":
        return _taskset_upload(request)
    rows = [
        {
            "name": taskset.name,
            "latest_version": latest.number if latest else None,
            "task_count": latest.task_count if latest else 0,
            "created_at": taskset.created_at.isoformat(),
        }
        for taskset, latest in selectors.taskset_rows()
    ]
    return JsonResponse({"results": rows})


def _taskset_upload(request: HttpRequest) -> JsonResponse:
    if not is_admin(request.user):
        return error(403, "this needs the admin role")
    name = request.POST.get("name", "").strip()
    tasks_file = request.FILES.get("tasks_file")
    if not name or tasks_file is None:
        return error(400, "multipart fields `name` and `tasks_file` are required")
    samples_file = request.FILES.get("samples_file")
    environments_file = request.FILES.get("environments_file")
    try:
        version = services.taskset_import(
            name=name,
            tasks_file=tasks_file,
            tasks_name=tasks_file.name,
            samples_file=samples_file,
            samples_name=samples_file.name if samples_file else "",
            environments=environments_file,
            environments_name=environments_file.name if environments_file else "",
            terminal_mode=request.POST.get("terminal_mode", ""),
            answer_rule=request.POST.get("answer_rule", ""),
            by=request.user,
        )
    except TaskSetFormatError as exc:
        issues = [str(issue) for issue in exc.issues]
        return error(
            400, f"{len(issues)} problems in the upload; nothing was stored", issues=issues[:200]
        )
    except services.ServiceError as exc:
        return error(400, str(exc))
    return JsonResponse(
        {
            "taskset": version.taskset.name,
            "version": version.number,
            "task_count": version.task_count,
            "sample_count": version.sample_count,
        },
        status=201,
    )


@api_view("admin", ("POST",))
def inspection_start(request: HttpRequest, name: str) -> JsonResponse:
    try:
        version = selectors.taskset_latest_version(name=name)
        inspection = services.inspection_start(version=version, by=request.user)
    except services.ServiceError as exc:
        status = 404 if not selectors.taskset_exists(name=name) else 409
        return error(status, str(exc))
    return JsonResponse(inspection_json(inspection), status=202)


@api_view("reviewer", ("GET",))
def inspection_detail(request: HttpRequest, pk: int) -> JsonResponse:
    inspection = selectors.inspection_get(pk)
    if inspection is None:
        return error(404, f"no inspection #{pk}")
    return JsonResponse(inspection_json(inspection))


@api_view("reviewer", ("GET",))
def task_list(request: HttpRequest) -> JsonResponse:
    filters = selectors.QueueFilter.from_query(request.GET)
    tasks = selectors.queue_page_tasks(selectors.queue_tasks(filters, user=request.user))
    try:
        size = min(max(int(request.GET.get("page_size", 100)), 1), MAX_PAGE_SIZE)
        number = max(int(request.GET.get("page", 1)), 1)
    except ValueError:
        return error(400, "page and page_size are whole numbers")
    paginator = selectors.KeysFirstPaginator(tasks, size)
    if number > max(paginator.num_pages, 1):
        return error(404, f"page {number} is past the last page ({paginator.num_pages})")
    page = paginator.page(number)
    return JsonResponse(
        {
            "count": paginator.count,
            "page": number,
            "pages": paginator.num_pages,
            "results": [task_json(task) for task in page],
        }
    )


def _task(pk: int) -> Task | None:
    return selectors.task_get(pk)


@api_view("reviewer", ("GET",))
def task_detail(request: HttpRequest, pk: int) -> JsonResponse:
    task = _task(pk)
    if task is None:
        return error(404, f"no task #{pk}")
    data = task_json(task) | answer_json(task)
    data["flag_details"] = [
        {
            "code": f.code,
            "status": f.status,
            "confidence": f.confidence,
            "explanation": f.explanation,
        }
        for f in selectors.task_flags(task)
    ]
    return JsonResponse(data)


@api_view("reviewer", ("POST",))
def task_quarantine(request: HttpRequest, pk: int) -> JsonResponse:
    task = _task(pk)
    if task is None:
        return error(404, f"no task #{pk}")
    reason = str(_body(request).get("reason", "")).strip()
    if not reason:
        return error(400, "a reason is required to quarantine a task")
    try:
        task.quarantine(by=request.user, reason=reason)
    except ClaimedByOther as exc:
        return error(409, str(exc))
    return JsonResponse(task_json(task))


@api_view("reviewer", ("POST",))
def task_release(request: HttpRequest, pk: int) -> JsonResponse:
    task = _task(pk)
    if task is None:
        return error(404, f"no task #{pk}")
    try:
        task.release(by=request.user, note=str(_body(request).get("note", "")))
    except ClaimedByOther as exc:
        return error(409, str(exc))
    return JsonResponse(task_json(task))


@api_view("reviewer", ("POST",))
def task_relabel(request: HttpRequest, pk: int) -> JsonResponse:
    """An answer task's new label, with a reason (audited as the page's relabel is): 400 when
    the label or the reason is missing or too long, 409 when the task is not an answer task or
    another reviewer is reviewing it."""
    task = _task(pk)
    if task is None:
        return error(404, f"no task #{pk}")
    data = _body(request)
    label, reason = str(data.get("label", "")).strip(), str(data.get("reason", "")).strip()
    if not label:
        return error(400, "a new label is required to relabel a task")
    if not reason:
        return error(400, "a reason is required to relabel a task")
    if task.kind != Task.ANSWER:
        return error(
            409, f"{task.task_id} is a {task.kind} task: only answer-graded tasks have a label"
        )
    try:
        task.relabel(by=request.user, label=label, reason=reason)
    except ClaimedByOther as exc:
        return error(409, str(exc))
    except ValueError as exc:
        return error(400, str(exc))
    return JsonResponse(task_json(task) | answer_json(task))


def _export_source(request: HttpRequest, name: str):
    """The inspection an export comes from (`?inspection=N` pins it), or the error response:
    404 no such set or inspection, 409 nothing finished to export from (naming the inspection
    in the way, with its progress), 400 a pin that is not a number."""
    try:
        return selectors.export_source(
            taskset_name=name, inspection_id=request.GET.get("inspection")
        )
    except services.ServiceError as exc:
        extra = {}
        if getattr(exc, "inspection", None) is not None:
            extra["inspection"] = inspection_json(exc.inspection)
        return error(refused_status(exc), str(exc), **extra)


@api_view("admin", ("GET",))
def manifest(request: HttpRequest, name: str) -> StreamingHttpResponse | JsonResponse:
    source = _export_source(request, name)
    if isinstance(source, JsonResponse):
        return source
    return jsonl_download(
        selectors.manifest_lines(source=source), source.filename("manifest", "jsonl"), source
    )


@api_view("admin", ("GET",))
def report(request: HttpRequest, name: str, fmt: str) -> HttpResponse:
    """Every task of the latest version with its flags and figures: JSONL (the lines of
    `export_report`), or the report table as CSV or Parquet (the browser's report downloads)."""
    source = _export_source(request, name)
    if isinstance(source, JsonResponse):
        return source
    filename = source.filename("report", fmt)
    if fmt == "jsonl":
        return jsonl_download(selectors.report_lines(source=source), filename, source)
    return table_download(selectors.report_table_rows(source=source), fmt, filename, source)


@csrf_exempt
@login_not_required
def not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Any other path under /api/: a JSON 404, never a page or the login redirect."""
    return error(
        404, f"no API operation at {request.path}; the operations are listed at /api/openapi.json"
    )


@login_not_required
@require_http_methods(["GET"])
def openapi(request: HttpRequest) -> JsonResponse:
    from inspector.openapi import document

    return JsonResponse(document(request.build_absolute_uri("/")[:-1]))
