"""Web pages: thin adapters over the services (inspector/services/: writes) and the selectors
(inspector/selectors/: reads). Every state change is a CSRF-protected POST."""

from __future__ import annotations

import contextlib
import functools
import logging
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    JsonResponse,
    QueryDict,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET, require_POST

from inspector import charts, selectors, services
from inspector.downloads import jsonl_download, refused_status, table_download
from inspector.formats.humaneval import TaskSetFormatError
from inspector.forms import (
    BulkForm,
    DismissForm,
    QuarantineForm,
    QueueFilterForm,
    RelabelForm,
    UploadForm,
)
from inspector.models import ApiToken, ClaimedByOther, Flag, Task, TaskSet
from inspector.roles import admin_required, is_admin, reviewer_required
from inspector.services import review

logger = logging.getLogger(__name__)


@require_GET
@reviewer_required
def home(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "inspector/taskset_list.html",
        {
            "rows": selectors.taskset_list(),
            "form": UploadForm(),
            "flagged": selectors.flagged_task_count(),
        },
    )


@require_POST
@admin_required
def taskset_upload(request: HttpRequest) -> HttpResponse:
    form = UploadForm(request.POST, request.FILES)
    problems: list[str] = []
    if form.is_valid():
        tasks_file = form.cleaned_data["tasks_file"]
        samples_file = form.cleaned_data.get("samples_file")
        environments_file = form.cleaned_data.get("environments_file")
        try:
            version = services.taskset_import(
                name=form.cleaned_data["name"],
                tasks_file=tasks_file,
                tasks_name=tasks_file.name,
                samples_file=samples_file,
                samples_name=samples_file.name if samples_file else "",
                environments=environments_file,
                environments_name=environments_file.name if environments_file else "",
                terminal_mode=form.cleaned_data.get("terminal_mode") or "",
                answer_rule=form.cleaned_data.get("answer_rule") or "",
                by=request.user,
            )
        except TaskSetFormatError as exc:
            problems = [str(issue) for issue in exc.issues]
        except services.ServiceError as exc:
            problems = [str(exc)]
        else:
            messages.success(
                request,
                f"Imported {version.task_count} tasks and {version.sample_count} samples "
                f"as {version}.",
            )
            return redirect(version.taskset)
    return render(
        request,
        "inspector/taskset_list.html",
        {
            "rows": selectors.taskset_list(),
            "form": form,
            "problems": problems[:200],
            "problem_count": len(problems),
        },
        status=400,
    )


def _get_taskset(name: str) -> TaskSet:
    return get_object_or_404(TaskSet, name=name)


@require_GET
@reviewer_required
def taskset_detail(request: HttpRequest, name: str) -> HttpResponse:
    taskset = _get_taskset(name)
    versions = list(taskset.versions.order_by("-number"))
    latest = versions[0] if versions else None
    inspection = latest.latest_inspection() if latest else None
    context = {
        "taskset": taskset,
        "versions": versions,
        "latest": latest,
        "inspection": inspection,
        "inspections": selectors.version_inspections(latest) if latest else [],
    }
    if latest is not None:
        overview = selectors.version_overview(latest)
        context.update(overview)
        # The charts' figures, handed to the page through json_script.
        context["dashboard"] = charts.dashboard(
            latest, inspection=inspection, finished_id=overview["finished_id"]
        )
    return render(request, "inspector/taskset_detail.html", context)


@require_POST
@admin_required
def taskset_inspect(request: HttpRequest, name: str) -> HttpResponse:
    taskset = _get_taskset(name)
    try:
        inspection = services.inspection_start(
            version=selectors.taskset_latest_version(name=taskset.name), by=request.user
        )
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"Inspection #{inspection.pk} started: a worker is preparing its runs."
        )
    return redirect(taskset)


def _export_source(request: HttpRequest, name: str, *, version: bool = False):
    """The inspection a download of the set comes from (`?inspection=N` pins it; `?version=N`,
    where allowed, picks a version), or the text response that says why there is none."""
    try:
        return selectors.export_source(
            taskset_name=name,
            inspection_id=request.GET.get("inspection"),
            version_number=request.GET.get("version") if version else None,
        )
    except services.ServiceError as exc:
        return HttpResponse(
            f"{exc}\n", status=refused_status(exc), content_type="text/plain; charset=utf-8"
        )


@require_GET
@admin_required
def taskset_manifest(request: HttpRequest, name: str) -> HttpResponse:
    source = _export_source(request, name)
    if isinstance(source, HttpResponse):
        return source
    return jsonl_download(
        selectors.manifest_lines(source=source), source.filename("manifest", "jsonl"), source
    )


@require_GET
@admin_required
def taskset_report(request: HttpRequest, name: str) -> HttpResponse:
    source = _export_source(request, name)
    if isinstance(source, HttpResponse):
        return source
    return jsonl_download(
        selectors.report_lines(source=source), source.filename("report", "jsonl"), source
    )


@require_GET
@reviewer_required
def inspection_progress(request: HttpRequest, pk: int) -> JsonResponse:
    inspection = selectors.inspection_get(pk)
    if inspection is None:
        raise Http404(f"no inspection #{pk}")
    return JsonResponse(inspection.progress())


def _queue_filter(request: HttpRequest):
    """The queue's filter form and the filter it stands for, from the URL."""
    form = QueueFilterForm(request.GET or None)
    return form, selectors.QueueFilter.from_query(form.cleaned_data if form.is_valid() else {})


@require_GET
@reviewer_required
def queue(request: HttpRequest) -> HttpResponse:
    form, filters = _queue_filter(request)
    tasks = selectors.queue_page_tasks(selectors.queue_tasks(filters, user=request.user))
    paginator = selectors.KeysFirstPaginator(
        tasks,
        settings.QUEUE_PAGE_SIZE,
        count_cap=filters.SEARCH_COUNT_CAP if filters.q else None,
    )
    page = paginator.get_page(request.GET.get("page"))
    page.object_list = selectors.queue_flag_lines(page.object_list)
    query = urlencode(filters.as_query())
    return render(
        request,
        "inspector/queue.html",
        {
            "form": form,
            "page": page,
            "query": query,
            "filters": filters,
            "saved": request.user.saved_filters.all(),
            "reviewers": selectors.reviewer_names(),
            "is_admin": is_admin(request.user),
            "capped": paginator.count and paginator.capped,
        },
    )


def _queue_redirect(query: str) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("inspector-queue") + (f"?{query}" if query else ""))


@require_POST
@reviewer_required
def queue_bulk(request: HttpRequest) -> HttpResponse:
    """A bulk action on the selected tasks, or on every task the posted filter matches."""
    query = request.POST.get("query", "")
    filters = selectors.QueueFilter.from_query(QueryDict(query))
    form = BulkForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The bulk action was incomplete: " + form.errors.as_text())
        return _queue_redirect(query)
    data = form.cleaned_data
    if data["scope"] == "selected":
        if not data["task"]:
            messages.error(request, "Select at least one task, or act on all matching tasks.")
            return _queue_redirect(query)
        tasks = selectors.tasks_by_ids(data["task"])
        expected = None
    else:
        tasks = selectors.queue_tasks(filters, user=request.user)
        expected = data["expected"]
    try:
        result = review.bulk_apply(
            tasks,
            action=data["action"],
            by=request.user,
            reason=data["reason"],
            flag=filters.flag,
            assignee=data["assignee"],
            expected=expected,
        )
    except review.ReviewError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, result.describe())
    return _queue_redirect(query)


@require_GET
@admin_required
def queue_export(request: HttpRequest, fmt: str) -> HttpResponse:
    """The tasks the queue's filter matches (flagged or not) as CSV (streamed) or Parquet: what
    the queue shows now, each row naming the inspection its flags come from."""
    if fmt not in ("csv", "parquet"):
        raise Http404("exports are .csv or .parquet")
    _, filters = _queue_filter(request)
    tasks = selectors.queue_tasks(filters, user=request.user)
    return table_download(selectors.report_rows(tasks), fmt, f"queue-report.{fmt}")


@require_GET
@admin_required
def taskset_report_table(request: HttpRequest, name: str, fmt: str) -> HttpResponse:
    """Every task of the set's latest version (or `?version=N`) as CSV or Parquet, by its last
    finished inspection (or `?inspection=N`)."""
    if fmt not in ("csv", "parquet"):
        raise Http404("reports are .jsonl, .csv or .parquet")
    source = _export_source(request, name, version=True)
    if isinstance(source, HttpResponse):
        return source
    return table_download(
        selectors.report_table_rows(source=source), fmt, source.filename("report", fmt), source
    )


@require_POST
@reviewer_required
def filter_save(request: HttpRequest) -> HttpResponse:
    query = request.POST.get("query", "")
    filters = selectors.QueueFilter.from_query(QueryDict(query))
    try:
        saved = review.filter_save(
            user=request.user, name=request.POST.get("name", ""), filters=filters
        )
    except review.ReviewError as exc:
        messages.error(request, str(exc))
        return _queue_redirect(query)
    messages.success(request, f"Saved the filter {saved.name!r}.")
    return HttpResponseRedirect(saved.get_absolute_url())


@require_POST
@reviewer_required
def task_claim(request: HttpRequest, pk: int) -> JsonResponse:
    """Claim the task for the reviewer who opened it, unless another reviewer holds it."""
    task = _get_task(pk)
    held = task.claim(by=request.user)
    holder = task.claimed_by.get_username() if task.claimed_by else ""
    return JsonResponse({"claimed": held, "by": holder}, status=200 if held else 409)


@require_POST
@reviewer_required
def task_assign(request: HttpRequest, pk: int) -> HttpResponse:
    task = _get_task(pk)
    username = request.POST.get("assignee", "").strip()
    to = selectors.user_named(username) if username else None
    if username and to is None:
        messages.error(request, f"No user named {username!r}.")
    else:
        with _refused_when_claimed(request):
            task.assign(by=request.user, to=to)
            messages.success(request, f"{task.task_id} assigned to {username or 'nobody'}.")
    return _back(request, task)


def _get_task(pk: int) -> Task:
    task = selectors.task_get(pk)
    if task is None:
        raise Http404(f"no task #{pk}")
    return task


@require_GET
@reviewer_required
def task_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _task_page(request, _get_task(pk))


def _task_page(
    request: HttpRequest, task: Task, *, relabel_form: RelabelForm | None = None, status: int = 200
) -> HttpResponse:
    probe_results = (
        selectors.terminal_probe_results(version=task.version).get(task.pk, {})
        if task.kind == Task.TERMINAL
        else {}
    )
    flags = selectors.task_flags_with_evidence(task)
    context = {
        "task": task,
        "flags": flags,
        "history": selectors.task_history(task),
        "events": selectors.task_trail(task),
        "replaced": selectors.task_replaced(task),
        "samples": task.samples.all()[:50],
        "files": selectors.task_files(task),
        "probe_results": sorted(probe_results.items()),
        "claimed_by_other": task.claimed_by_other(request.user),
        "quarantine_form": QuarantineForm(),
        "dismiss_form": DismissForm(),
    }
    if task.kind == Task.REPO:
        context["repo"] = selectors.repo_page(task)
    if task.kind == Task.ANSWER:
        answer = selectors.answer_page(task, flags)
        context["answer"] = answer
        context["answer_chart"] = charts.answer_distribution(
            answer["distribution"], label=task.label
        )
        context["relabel_form"] = relabel_form or RelabelForm(
            initial={"label": answer["consensus"]}
        )
    return render(request, "inspector/task_detail.html", context, status=status)


@contextlib.contextmanager
def _refused_when_claimed(request: HttpRequest):
    """Another reviewer is reviewing the task: the action is refused, with their name."""
    try:
        yield
    except ClaimedByOther as exc:
        messages.error(request, str(exc))


def _back(request: HttpRequest, task: Task) -> HttpResponseRedirect:
    nxt = request.POST.get("next", "")
    if nxt.startswith("/") and not nxt.startswith("//"):
        return HttpResponseRedirect(nxt)
    return redirect(task)


@require_POST
@reviewer_required
def task_quarantine(request: HttpRequest, pk: int) -> HttpResponse:
    task = _get_task(pk)
    form = QuarantineForm(request.POST)
    if not form.is_valid():
        messages.error(request, "A reason is required to quarantine a task.")
        return _back(request, task)
    with _refused_when_claimed(request):
        task.quarantine(by=request.user, reason=form.cleaned_data["reason"])
        messages.success(request, f"{task.task_id} is quarantined: it stays out of the manifest.")
    return _back(request, task)


@require_POST
@reviewer_required
def task_relabel(request: HttpRequest, pk: int) -> HttpResponse:
    """Put a reviewer's label in place of an answer task's uploaded one, with a reason; the
    page again, with the form's errors, when the label or the reason is missing."""
    task = _get_task(pk)
    if task.kind != Task.ANSWER:
        # Its page has no relabel form to show an error in.
        messages.error(request, "Only answer-graded tasks have a label to correct.")
        return _back(request, task)
    form = RelabelForm(request.POST)
    if not form.is_valid():
        return _task_page(request, task, relabel_form=form, status=400)
    try:
        with _refused_when_claimed(request):
            before = task.label
            task.relabel(
                by=request.user,
                label=form.cleaned_data["label"],
                reason=form.cleaned_data["reason"],
            )
            if task.corrected_label:
                messages.success(
                    request,
                    f"{task.task_id} relabeled {before!r} -> {task.label!r}: the manifest "
                    "carries the label in force; inspect again to verify the samples against it.",
                )
            else:
                messages.success(request, f"{task.task_id} has its uploaded label again.")
    except ValueError as exc:
        form.add_error(None, str(exc))
        return _task_page(request, task, relabel_form=form, status=400)
    return _back(request, task)


@require_POST
@reviewer_required
def task_release(request: HttpRequest, pk: int) -> HttpResponse:
    task = _get_task(pk)
    with _refused_when_claimed(request):
        task.release(by=request.user, note=request.POST.get("note", ""))
        messages.success(request, f"{task.task_id} is released.")
    return _back(request, task)


def _get_flag(pk: int) -> Flag:
    flag = selectors.flag_get(pk)
    if flag is None:
        raise Http404(f"no flag #{pk}")
    return flag


@require_POST
@reviewer_required
def flag_confirm(request: HttpRequest, pk: int) -> HttpResponse:
    flag = _get_flag(pk)
    with _refused_when_claimed(request):
        flag.confirm(by=request.user, note=request.POST.get("note", ""))
        messages.success(request, f"Confirmed {flag.code} on {flag.task.task_id}.")
    return _back(request, flag.task)


@require_POST
@reviewer_required
def flag_dismiss(request: HttpRequest, pk: int) -> HttpResponse:
    flag = _get_flag(pk)
    form = DismissForm(request.POST)
    if not form.is_valid():
        messages.error(request, "A note is required to dismiss a flag: say why it is not a defect.")
        return _back(request, flag.task)
    with _refused_when_claimed(request):
        flag.dismiss(by=request.user, note=form.cleaned_data["note"])
        messages.success(request, f"Dismissed {flag.code} on {flag.task.task_id}.")
    return _back(request, flag.task)


@functools.cache
def _plotly_js() -> bytes:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs().encode()


@require_GET
@cache_control(max_age=86400, public=True)
def plotly_js(request: HttpRequest) -> HttpResponse:
    # Served from the plotly package itself: the pages never load a script from elsewhere.
    return HttpResponse(_plotly_js(), content_type="application/javascript")


@functools.cache
def _favicon() -> bytes:
    return (Path(__file__).parent / "static" / "inspector" / "favicon.ico").read_bytes()


@login_not_required
@require_GET
@cache_control(max_age=86400, public=True)
def favicon(request: HttpRequest) -> HttpResponse:
    # Where browsers look for an icon by themselves; open to anyone, as the login page is.
    return HttpResponse(_favicon(), content_type="image/vnd.microsoft.icon")


@reviewer_required
def tokens(request: HttpRequest) -> HttpResponse:
    """Your API tokens: a new one is shown once, here, right after it is made."""
    key = None
    if request.method == "POST":
        token, key = ApiToken.issue(user=request.user, name=request.POST.get("name", ""))
        messages.success(
            request, f"Token {token.name!r} created: copy it now, it is not shown again."
        )
    elif request.method != "GET":
        return HttpResponse(status=405)
    return render(
        request,
        "inspector/tokens.html",
        {"tokens": request.user.api_tokens.all(), "new_key": key},
    )


@require_POST
@reviewer_required
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token.revoke()
    messages.success(request, f"Token {token.name!r} revoked.")
    return redirect("inspector-tokens")


@require_POST
@admin_required
def taskset_schedule(request: HttpRequest, name: str) -> HttpResponse:
    """A task set's re-inspection: active or not, and its own period (empty: the default)."""
    taskset = _get_taskset(name)
    raw = request.POST.get("reinspect_hours", "").strip()
    try:
        hours = float(raw) if raw else None
        if hours is not None and not 0 <= hours <= 24 * 365:
            raise ValueError
    except ValueError:
        messages.error(request, f"Hours must be a number from 0 to 8760, not {raw!r}.")
        return redirect(taskset)
    taskset.active = request.POST.get("active") == "1"
    taskset.reinspect_hours = hours
    taskset.save(update_fields=("active", "reinspect_hours"))
    messages.success(request, "Schedule saved.")
    return redirect(taskset)


@require_POST
@admin_required
def task_reinspect(request: HttpRequest, pk: int) -> HttpResponse:
    """ "Fixed? Inspect again": inspect the latest version of the task's set, which holds it."""
    task = _get_task(pk)
    latest = task.version.taskset.latest_version()
    if latest is None or latest.pk != task.version_id:
        messages.error(request, f"{task.version} is not the latest version: open the task there.")
        return redirect(task)
    try:
        inspection = services.inspection_start(version=latest, by=request.user)
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"Inspection #{inspection.pk} of {latest} started to re-check {task.task_id}."
        )
    return redirect(task)


@require_POST
@reviewer_required
def task_comment(request: HttpRequest, pk: int) -> HttpResponse:
    task = _get_task(pk)
    try:
        task.comment(by=request.user, text=request.POST.get("text", "")[:5000])
    except ValueError as exc:
        messages.error(request, str(exc))
    return redirect(task)
