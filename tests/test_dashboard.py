"""The task-set pages: the charts on a set's page (what each one shows after an inspection, what
it says instead where a set lacks what it needs, and that data from an upload reaches the page
only as escaped JSON), its versions table, the list of sets with their open flags, a mutant's
diff on a task's page, and the favicon every page links."""

from __future__ import annotations

import datetime
import html
import json
import re
from collections import Counter

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from inspector import charts
from inspector.detect.codes import ADVISORY
from inspector.detect.mutants import generate_mutants
from inspector.models import Flag, Inspection, Run, Task, TaskSetVersion
from tests import test_browser
from tests.builders import PLANTED_SAMPLES, PLANTED_TASKS, jsonl, task

pytestmark = pytest.mark.django_db

CHART_IDS = (
    "chart-pass-rates",
    "chart-flags-by-kind",
    "chart-flags-by-domain",
    "chart-sample-pass-rates",
    "chart-durations",
    "chart-flag-trend",
)
DATA_SCRIPT = re.compile(
    r'<script id="dashboard-data" type="application/json">(.*?)</script>', re.DOTALL
)


# Three of the planted tasks in a domain, two without: what the flags-by-domain chart needs.
DOMAIN_TASKS = [dict(t, domain="arithmetic") for t in PLANTED_TASKS[:3]] + PLANTED_TASKS[3:]


@pytest.fixture
def inspected(planted_inspected):
    """The planted set (samples, no domain) after one inspection."""
    assert planted_inspected.status == Inspection.FINISHED
    return planted_inspected


@pytest.fixture
def inspected_twice(import_taskset, inspect_now):
    """A set with what every chart needs: samples, tasks with a domain, two inspections."""
    inspect_now(import_taskset(tasks=DOMAIN_TASKS))
    inspection = inspect_now(import_taskset(tasks=DOMAIN_TASKS))
    assert inspection.status == Inspection.FINISHED
    return inspection


def taskset_page(client, name: str = "planted") -> str:
    response = client.get(f"/tasksets/{name}/")
    assert response.status_code == 200
    return response.content.decode()


def charts_on(page: str) -> dict[str, dict]:
    """The figures the page hands to plotly, by element id, as the browser reads them."""
    (data,) = DATA_SCRIPT.findall(page)
    return {chart["id"]: chart["figure"] for chart in json.loads(data)["charts"]}


def notes_on(page: str) -> list[str]:
    """The one-line notes the page shows for the charts it leaves out."""
    found = re.search(r'<ul class="muted" id="chart-notes">(.*?)</ul>', page, re.DOTALL)
    return (
        [html.unescape(n) for n in re.findall(r"<li>(.*?)</li>", found.group(1))] if found else []
    )


def bars(figure: dict) -> dict[str, int]:
    (trace,) = figure["data"]
    return dict(zip(trace["x"], trace["y"], strict=True))


def test_a_set_with_samples_domains_and_two_inspections_draws_every_chart_with_bundled_plotly(
    reviewer_client, inspected_twice
):
    page = taskset_page(reviewer_client)
    figures = charts_on(page)

    for element_id in CHART_IDS:
        assert f'id="{element_id}"' in page
        assert element_id in figures
    assert '<script src="/assets/plotly.min.js"></script>' in page
    assert "cdn.plot.ly" not in page and "cdn.jsdelivr" not in page
    # Nothing left out, so nothing to explain.
    assert 'id="chart-notes"' not in page


def test_the_flags_by_kind_bars_count_the_flags_the_inspection_raised(reviewer_client, inspected):
    figures = charts_on(taskset_page(reviewer_client))

    raised = Counter(Flag.objects.filter(inspection=inspected).values_list("code", flat=True))
    assert bars(figures["chart-flags-by-kind"]) == dict(raised)
    assert {"unsolvable", "mislabeled", "flaky", "reward_hackable"} <= set(raised)


def test_flags_by_domain_stack_each_code_and_name_an_empty_domain_none(
    reviewer_client, import_taskset, inspect_now
):
    inspection = inspect_now(import_taskset(tasks=DOMAIN_TASKS))
    figure = charts_on(taskset_page(reviewer_client))["chart-flags-by-domain"]

    shown = {
        (domain, trace["name"]): n
        for trace in figure["data"]
        for domain, n in zip(trace["x"], trace["y"], strict=True)
        if n
    }
    expected = Counter(
        (domain or "(none)", code)
        for domain, code in Flag.objects.filter(inspection=inspection).values_list(
            "task__domain", "code"
        )
    )
    assert shown == dict(expected)
    assert shown[("arithmetic", "unsolvable")] == 1 and shown[("(none)", "flaky")] == 1
    assert figure["layout"]["barmode"] == "stack"


def test_the_pass_rate_scatter_opens_a_task_when_its_point_is_clicked(reviewer_client, inspected):
    page = taskset_page(reviewer_client)
    figure = charts_on(page)["chart-pass-rates"]

    urls = {url for trace in figure["data"] for url in trace["customdata"]}
    assert urls == {task.get_absolute_url() for task in Task.objects.all()}
    assert "plotly_click" in page and "window.location = url" in page


def test_the_histograms_count_each_task_once_by_its_rates(reviewer_client, inspected):
    # Fixed learnability values, one task without any, to know which bin each lands in.
    values = {
        "planted/clean": 0.25,
        "planted/unsolvable": 0.0,
        "planted/mislabeled": 0.0,
        "planted/flaky": 0.1,
        "planted/hackable": None,
    }
    for task_id, value in values.items():
        Task.objects.filter(task_id=task_id).update(learnability=value)
    figures = charts_on(taskset_page(reviewer_client))

    rated = Task.objects.exclude(sample_pass_rate=None).count()
    assert sum(figures["chart-sample-pass-rates"]["data"][0]["y"]) == rated == len(PLANTED_TASKS)
    learnability = figures["chart-learnability"]["data"][0]["y"]
    # Ten bins over [0, 0.25]: 0 in the first, 0.1 in the fifth, the maximum in the last.
    assert learnability == [2, 0, 0, 0, 1, 0, 0, 0, 0, 1]


def test_the_learnability_histogram_is_left_out_while_no_task_has_learnability(
    reviewer_client, inspected
):
    Task.objects.update(learnability=None)
    page = taskset_page(reviewer_client)

    assert "chart-learnability" not in charts_on(page)
    assert 'id="chart-learnability"' not in page


def test_run_durations_are_split_by_run_kind(reviewer_client, inspected):
    timed = Run.objects.filter(inspection=inspected).exclude(duration=None)
    # Durations without a long tail, so that every run is drawn.
    for i, run in enumerate(timed):
        Run.objects.filter(pk=run.pk).update(duration=0.01 + (i % 7) / 100)
    figure = charts_on(taskset_page(reviewer_client))["chart-durations"]

    shown = {trace["name"]: sum(trace["y"]) for trace in figure["data"]}
    assert shown == dict(Counter(timed.values_list("kind", flat=True)))
    assert {"reference", "sample"} <= set(shown)
    assert figure["layout"]["barmode"] == "stack"
    assert "subtitle" not in figure["layout"]["title"]


def test_run_durations_leave_out_timed_out_runs_and_a_long_tail_and_say_how_many(
    reviewer_client, inspected
):
    timed = Run.objects.filter(inspection=inspected).exclude(duration=None)
    timed.update(duration=0.02)
    first, second, third = timed.order_by("id")[:3]
    # Two mutants that ran out of their clock and one run far slower than the rest: drawn to
    # scale, they would put every other run in the first bin.
    Run.objects.filter(pk__in=(first.pk, second.pk)).update(outcome="timed_out", duration=10.0)
    Run.objects.filter(pk=third.pk).update(duration=6.0)
    figure = charts_on(taskset_page(reviewer_client))["chart-durations"]

    subtitle = figure["layout"]["title"]["subtitle"]["text"]
    assert subtitle == "not shown: 1 run over 0.02 s and 2 runs that timed out"
    assert sum(n for trace in figure["data"] for n in trace["y"]) == timed.count() - 3
    # The bins end at the cut, not at 10 s.
    assert max(hi for trace in figure["data"] for _, hi in trace["customdata"]) == 0.02


def test_the_flag_trend_has_one_point_per_finished_inspection_oldest_first(
    reviewer_client, import_taskset, inspect_now
):
    first = inspect_now(import_taskset())
    # A second version of the set: the trend follows the set across its versions.
    second = inspect_now(import_taskset())
    assert first.version_id != second.version_id
    # Neither an unfinished inspection nor its flags show in the trend.
    Inspection.objects.create(version=second.version, status=Inspection.RUNNING, runs_total=5)
    figure = charts_on(taskset_page(reviewer_client))["chart-flag-trend"]

    for trace in figure["data"]:
        assert trace["x"] == [f"#{first.pk}", f"#{second.pk}"]
        assert trace["y"] == [
            Flag.objects.filter(inspection=i, code=trace["name"]).count() for i in (first, second)
        ]
    assert {t["name"] for t in figure["data"]} == set(Flag.objects.values_list("code", flat=True))


def test_with_one_finished_inspection_there_is_a_note_instead_of_a_trend(
    reviewer_client, inspected
):
    page = taskset_page(reviewer_client)

    assert "chart-flag-trend" not in charts_on(page) and 'id="chart-flag-trend"' not in page
    assert (
        "One finished inspection so far: flags per inspection draws a trend from the second; "
        "flags by kind counts this one's."
    ) in notes_on(page)
    # The one inspection's flags are still counted, by kind.
    assert "chart-flags-by-kind" in charts_on(page)


def test_where_no_flagged_task_has_a_domain_flags_by_domain_gives_way_to_a_note(
    reviewer_client, inspected
):
    page = taskset_page(reviewer_client)

    assert not Task.objects.exclude(domain="").exists()
    assert "chart-flags-by-domain" not in charts_on(page)
    assert 'id="chart-flags-by-domain"' not in page
    assert (
        "No flagged task has a domain (the optional domain field of a task line): flags by "
        "domain is left out; flags by kind counts them all."
    ) in notes_on(page)


def test_a_set_without_samples_shows_its_reference_pass_rates_and_says_why_not_the_scatter(
    reviewer_client, import_taskset, inspect_now
):
    inspect_now(import_taskset(samples=[]))
    page = taskset_page(reviewer_client)
    figures = charts_on(page)

    # No scatter collapsed onto one point left of the axis, no empty sample histograms.
    for left_out in ("chart-pass-rates", "chart-sample-pass-rates", "chart-learnability"):
        assert left_out not in figures and f'id="{left_out}"' not in page
    assert (
        "No samples uploaded: the pass-rate scatter, the sample pass rates and learnability "
        "need samples; the reference pass rates are shown instead."
    ) in notes_on(page)
    rates = list(Task.objects.values_list("reference_pass_rate", flat=True))
    expected, _ = np.histogram(rates, bins=np.linspace(0.0, 1.0, 11))
    assert figures["chart-reference-pass-rates"]["data"][0]["y"] == expected.tolist()
    # The planted clean and hackable tasks' references always pass, the unsolvable's and the
    # mislabeled's never.
    assert expected[0] >= 2 and expected[-1] >= 2


def test_the_charts_need_as_many_queries_for_a_big_set_as_for_a_small_one(inspected):
    version = inspected.version

    def count_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            charts.dashboard(version, inspection=inspected, finished_id=inspected.pk)
        return len(queries)

    small = count_queries()
    # 200 more analysed tasks over 20 domains, each flagged, each with a timed run.
    model = Task.objects.get(task_id="planted/clean")
    extra = Task.objects.bulk_create(
        Task(
            version=version,
            task_id=f"bulk/{i}",
            position=100 + i,
            prompt=model.prompt,
            canonical_solution=model.canonical_solution,
            test=model.test,
            entry_point=model.entry_point,
            domain=f"domain-{i % 20}",
            source={},
            content_hash=f"{i:064d}",
            last_inspection=inspected,
            sample_pass_rate=0.5,
            reference_pass_rate=1.0,
        )
        for i in range(200)
    )
    Flag.objects.bulk_create(
        Flag(task=t, inspection=inspected, code="flaky", severity=60, explanation="bulk")
        for t in extra
    )
    Run.objects.bulk_create(
        Run(inspection=inspected, task=t, kind=Run.REFERENCE, repeat=0, duration=0.5) for t in extra
    )

    assert count_queries() == small <= 8
    figure = charts.dashboard(version, inspection=inspected, finished_id=inspected.pk)
    by_kind = next(c for c in figure["charts"] if c["id"] == "chart-flags-by-kind")
    assert bars(by_kind["figure"])["flaky"] == 201


def test_a_set_never_inspected_shows_no_charts_and_no_errors(reviewer_client, import_taskset):
    import_taskset()
    page = taskset_page(reviewer_client)

    assert "Not inspected yet." in page
    assert 'id="dashboard-data"' not in page and "plotly.min.js" not in page
    for element_id in (*CHART_IDS, "chart-learnability"):
        assert element_id not in page


def test_a_running_inspection_shows_a_progress_bar_that_polls_every_second(
    reviewer_client, import_taskset
):
    version = import_taskset()
    running = Inspection.objects.create(
        version=version,
        status=Inspection.RUNNING,
        runs_total=40,
        runs_done=10,
        started_at=timezone.now() - datetime.timedelta(seconds=1000),
    )
    page = taskset_page(reviewer_client)
    progress = reviewer_client.get(f"/inspections/{running.pk}/progress").json()

    assert f'data-url="/inspections/{running.pk}/progress"' in page and 'data-active="1"' in page
    assert "10 / 40 runs" in page and 'id="progress-percent">25%' in page
    assert "setTimeout(tick, 1000)" in page and "window.location.reload()" in page
    # 10 runs in 1,000 s: the 30 left take about 3,000 s.
    assert 3000 <= progress.pop("seconds_left") < 3100
    assert progress == {
        "id": running.pk,
        "status": "running",
        "preparing": False,
        "phase": "running",
        "runs_done": 10,
        "runs_total": 40,
        "percent": 25,
        "left": "about 50 min left",
        "error": "",
    }
    assert " · about 50 min left" in page


def test_while_an_inspection_runs_inspect_is_disabled_and_its_row_updates_live(
    lead_client, import_taskset
):
    version = import_taskset()
    running = Inspection.objects.create(
        version=version, status=Inspection.QUEUED, runs_total=40, runs_done=0
    )
    page = taskset_page(lead_client)

    button = re.search(r'<button type="submit" id="inspect"[^>]*>', page).group(0)
    assert "disabled" in button and f"Inspection #{running.pk} is still queued" in button
    assert "estimating the time left" in page
    assert f'<tr id="inspection-{running.pk}">' in page and '<td class="runs">0/40</td>' in page
    assert 'row.querySelector(".runs").textContent' in page
    # The server refuses a second one too, whatever the button says.
    response = lead_client.post(f"/tasksets/{version.taskset.name}/inspect", follow=True)
    assert f"Inspection #{running.pk} of" in response.content.decode()
    assert Inspection.objects.count() == 1


def test_a_finished_set_offers_inspect_again(lead_client, import_taskset):
    version = import_taskset()
    Inspection.objects.create(
        version=version, status=Inspection.FINISHED, runs_total=4, runs_done=4
    )
    button = re.search(r'<button type="submit" id="inspect"[^>]*>', taskset_page(lead_client))

    assert "disabled" not in button.group(0)


def test_a_finished_inspection_does_not_poll(reviewer_client, inspected):
    assert 'data-active="0"' in taskset_page(reviewer_client)


def test_a_hostile_domain_reaches_the_page_escaped_and_never_raw(
    reviewer_client, import_taskset, inspect_now
):
    hostile = "<script>alert(1)</script>"
    tasks = [dict(t, domain=hostile) for t in PLANTED_TASKS]
    tasks[0]["task_id"] = "planted/<img src=x onerror=alert(2)>"
    samples = [dict(s) for s in PLANTED_SAMPLES]
    for sample in samples:
        if sample["task_id"] == "planted/clean":
            sample["task_id"] = tasks[0]["task_id"]
    inspect_now(import_taskset(tasks=tasks, samples=samples))
    page = taskset_page(reviewer_client)

    assert hostile not in page and "<img src=x" not in page
    # json_script writes < > & as \u003C \u003E \u0026: still one JSON string for the browser.
    assert "\\u0026lt;script\\u0026gt;alert(1)" in page
    figure = charts_on(page)["chart-flags-by-domain"]
    # Escaped for plotly too, which shows the text as uploaded instead of reading it as markup.
    assert {x for trace in figure["data"] for x in trace["x"]} == {
        html.escape(hostile, quote=False)
    }
    scatter = charts_on(page)["chart-pass-rates"]
    texts = [t for trace in scatter["data"] for t in trace["text"]]
    assert any(t.startswith("planted/&lt;img src=x onerror=alert(2)&gt;<br>") for t in texts)


# --- Beside the charts: the versions table, the list of sets, diffs, the favicon --------------


def test_the_versions_table_shows_the_names_of_the_uploaded_files_not_the_servers_paths(
    reviewer_client, tmp_path
):
    folder = tmp_path / "srv" / "uploads"
    folder.mkdir(parents=True)
    (folder / "HumanEval-mini.jsonl").write_bytes(jsonl(PLANTED_TASKS))
    (folder / "samples-mini.jsonl").write_bytes(jsonl(PLANTED_SAMPLES))
    call_command(
        "import_tasks",
        str(folder / "HumanEval-mini.jsonl"),
        "--taskset",
        "planted",
        "--samples",
        str(folder / "samples-mini.jsonl"),
    )
    page = taskset_page(reviewer_client)

    assert '<td class="muted">HumanEval-mini.jsonl, samples-mini.jsonl</td>' in page
    assert str(tmp_path) not in page


def test_a_version_stored_with_a_path_before_is_shown_by_its_file_name(
    reviewer_client, import_taskset
):
    import_taskset()
    TaskSetVersion.objects.update(
        tasks_filename="/var/lib/inspector/in/tasks.jsonl.gz", samples_filename=""
    )
    page = taskset_page(reviewer_client)

    assert '<td class="muted">tasks.jsonl.gz</td>' in page and "/var/lib" not in page


def list_row(page: str, name: str) -> str:
    (row,) = re.findall(rf'<tr>\s*<td><a href="/tasksets/{name}/">.*?</tr>', page, re.DOTALL)
    return row


def test_the_task_set_list_counts_each_sets_open_flags_blocking_and_advisory(
    reviewer_client, reviewer, import_taskset, inspect_now
):
    inspection = inspect_now(import_taskset())
    import_taskset(name="uninspected")
    clean = Task.objects.get(version=inspection.version, task_id="planted/clean")
    Flag.objects.create(
        task=clean, inspection=inspection, code="duplicate", severity=30, explanation="a copy"
    )
    # A dismissed flag awaits no one.
    Flag.objects.get(inspection=inspection, code="flaky").dismiss(by=reviewer, note="known")
    page = reviewer_client.get("/").content.decode()

    planted = list_row(page, "planted")
    open_flags = Counter(
        Flag.objects.filter(inspection=inspection, status=Flag.OPEN).values_list("code", flat=True)
    )
    blocking = sum(n for code, n in open_flags.items() if code not in ADVISORY)
    advisory = sum(n for code, n in open_flags.items() if code in ADVISORY)
    assert blocking >= 3 and advisory >= 1
    assert f"<strong>{blocking} blocking</strong> · {advisory} advisory" in planted
    for code, n in open_flags.items():
        link = f'href="/queue/?taskset=planted&amp;flag={code}"'
        assert (
            f"{link}>{code}: {n}</a>" in planted
            or f'{link} title="advisory">{code}: {n}</a>' in planted
        )
    assert "flaky" not in planted
    assert "not inspected" in list_row(page, "uninspected")


def test_the_task_set_list_needs_as_many_queries_for_many_sets_as_for_one(
    reviewer_client, planted_inspected, import_taskset, inspect_now
):

    def count_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert reviewer_client.get("/").status_code == 200
        return len(queries)

    one = count_queries()
    # Three more sets of two tasks each, one of them blocked (unsolvable).
    two = [t for t in PLANTED_TASKS if t["task_id"] in ("planted/clean", "planted/unsolvable")]
    ids = {t["task_id"] for t in two}
    samples = [s for s in PLANTED_SAMPLES if s["task_id"] in ids]
    for name in ("second", "third", "fourth"):
        inspect_now(import_taskset(name=name, tasks=two, samples=samples))
    assert count_queries() == one
    assert reviewer_client.get("/").content.decode().count(" blocking</strong>") == 4


def test_a_mutant_diff_colours_removed_lines_red_added_lines_green_and_context_plain(
    reviewer_client, import_taskset, inspect_now
):
    clamp = task(
        "clamp/weak",
        entry_point="clamp",
        body="    if x < 0:\n        return 0\n    if x > 10:\n        return 10\n    return x\n",
        test="def check(candidate):\n    assert candidate(-5) == 0\n",
    )
    inspection = inspect_now(import_taskset(name="clamp", tasks=[clamp], samples=[]))
    weak = Task.objects.get(task_id="clamp/weak")
    mutant = generate_mutants(
        clamp["canonical_solution"], prompt=clamp["prompt"], entry_point="clamp"
    )[1]
    assert mutant.diff.splitlines()[-1].startswith(" ")  # it ends on a context line
    Flag.objects.create(
        task=weak,
        inspection=inspection,
        code="weak_tests",
        severity=65,
        explanation="mutants survive",
        evidence={
            "survivors": [
                {
                    "mutant_id": mutant.mutant_id,
                    "description": mutant.description,
                    "diff": mutant.diff,
                }
            ],
            "survivor_count": 1,
        },
    )
    page = reviewer_client.get(weak.get_absolute_url()).content.decode()

    (shown,) = re.findall(r'<pre class="diff">(.*?)</pre>', page, re.DOTALL)
    assert "hl-err" not in shown
    for line, drawn in zip(mutant.diff.splitlines(), shown.split("\n"), strict=True):
        text = html.escape(line, quote=True).replace("&#x27;", "&#39;")
        if line.startswith(("--- ", "+++ ")):
            assert drawn == f'<span class="hl-gh">{text}</span>'
        elif line.startswith("@@"):
            assert drawn == f'<span class="hl-gu">{text}</span>'
        elif line.startswith("-"):
            assert drawn == f'<span class="hl-gd">{text}</span>'
        elif line.startswith("+"):
            assert drawn == f'<span class="hl-gi">{text}</span>'
        else:
            assert drawn == text  # context: no colour, no box


def test_the_favicon_is_served_to_anyone_and_every_page_links_it(client, reviewer_client):
    icon = client.get("/favicon.ico")
    login = client.get("/accounts/login/").content.decode()
    svg = client.get("/static/inspector/favicon.svg")

    assert icon.status_code == 200 and icon["Content-Type"] == "image/vnd.microsoft.icon"
    assert icon.content[:4] == b"\x00\x00\x01\x00"  # an icon file
    for page in (login, reviewer_client.get("/").content.decode()):
        assert '<link rel="icon" href="/favicon.ico" sizes="32x32">' in page
        assert '<link rel="icon" href="/static/inspector/favicon.svg" type="image/svg+xml">' in page
    assert svg.status_code == 200 and b"<svg" in b"".join(svg.streaming_content)


# --- In a real browser -------------------------------------------------------------------------

# The headless Chromium of the browser tests, shared rather than set up a second way.
chromium = test_browser.chromium
browser = test_browser.browser


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_in_a_browser_plotly_draws_every_chart_and_a_running_inspection_fills_its_bar(
    browser, live_server, import_taskset, inspect_now, reviewer
):
    hostile = '<img src=x onerror="window.__pwned=1">'
    # Twice: the trend of flags per inspection needs two.
    inspect_now(import_taskset(tasks=[dict(t, domain=hostile) for t in PLANTED_TASKS]))
    inspect_now(import_taskset(tasks=[dict(t, domain=hostile) for t in PLANTED_TASKS]))
    test_browser.log_in(browser, live_server, "/tasksets/planted/")
    for element_id in CHART_IDS:
        test_browser.wait(browser).until(
            EC.presence_of_element_located((By.CSS_SELECTOR, f"#{element_id} .main-svg"))
        )
    # The domain is drawn as the text it is, and nothing in it ran.
    ticks = browser.find_elements(By.CSS_SELECTOR, "#chart-flags-by-domain .xtick text")
    assert [tick.text for tick in ticks] == [hostile]
    assert browser.find_elements(By.CSS_SELECTOR, "#dashboard img") == []
    assert browser.execute_script("return window.__pwned") is None

    # A second inspection still running: the page polls it and reloads once it ends.
    running = Inspection.objects.create(
        version=Inspection.objects.latest("id").version,
        status=Inspection.RUNNING,
        runs_total=4,
        runs_done=1,
    )
    browser.get(live_server.url + "/tasksets/planted/")
    assert browser.find_element(By.ID, "progress-percent").text == "25%"
    Inspection.objects.filter(pk=running.pk).update(runs_done=3)
    test_browser.wait(browser).until(
        EC.text_to_be_present_in_element((By.ID, "progress-percent"), "75%")
    )
    assert browser.find_element(By.ID, "progress-text").text == "3 / 4 runs"
    Inspection.objects.filter(pk=running.pk).update(status=Inspection.FINISHED, runs_done=4)
    # Reloaded: the page of a finished inspection, which no longer polls.
    WebDriverWait(browser, 15, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda driver: driver.find_element(By.ID, "progress").get_attribute("data-active") == "0"
    )
    assert browser.find_element(By.ID, "progress-status").text == "finished"

    # A click on a scatter point (as plotly reports it) opens the task in its customdata.
    target = Task.objects.get(task_id="planted/mislabeled", in_latest_version=True)
    target = target.get_absolute_url()
    test_browser.wait(browser).until(
        EC.presence_of_element_located((By.CSS_SELECTOR, "#chart-pass-rates .main-svg"))
    )
    browser.execute_script(
        """const el = document.getElementById("chart-pass-rates");
        el.emit("plotly_click", {points: [{customdata: arguments[0]}]});""",
        target,
    )
    test_browser.wait(browser).until(EC.url_to_be(live_server.url + target))


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_in_a_browser_an_anomaly_shows_what_makes_its_task_odd_beside_the_set_median(
    browser, live_server, import_taskset, inspect_now, reviewer, settings
):
    # Twelve tasks alike, but one whose check takes 1.5 s at every run: an odd task no rule
    # flags, which the IsolationForest isolates by its run time.
    settings.INSPECT_REFERENCE_REPEATS = 2
    settings.INSPECT_PROBES = []
    tasks = [
        task(
            f"plain/add-{n}",
            body=f"    return x + {n}\n",
            test=f"def check(candidate):\n    assert candidate(1) == {1 + n}\n"
            f"    assert candidate(5) == {5 + n}\n",
        )
        for n in range(11)
    ]
    tasks.append(
        task(
            "plain/slow-check",
            body="    return x * 2\n",
            test="import time\ntime.sleep(1.5)\n\n\ndef check(candidate):\n"
            "    assert candidate(1) == 2\n    assert candidate(5) == 10\n",
        )
    )
    inspect_now(import_taskset(name="plain", tasks=tasks, samples=[]))
    odd = Flag.objects.get(code="anomaly")
    assert odd.task.task_id == "plain/slow-check"

    test_browser.log_in(browser, live_server, odd.task.get_absolute_url())
    table = browser.find_element(By.CSS_SELECTOR, "#flag-anomaly table.anomaly-features")
    cells = [td.text for td in table.find_elements(By.CSS_SELECTOR, "tr:nth-child(2) td")]
    assert cells[0] == "mean_seconds" and float(cells[1]) > 1.4 and float(cells[2]) < 0.5
    # The slow runs themselves are its evidence.
    assert browser.find_element(By.CSS_SELECTOR, "#flag-anomaly details > summary").text == (
        "Evidence: 2 runs"
    )
    browser.execute_script("arguments[0].scrollIntoView()", table)
    test_browser.screenshot(browser, "flag-anomaly")
