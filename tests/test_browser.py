"""What a reviewer sees in a real headless Chromium, against pytest-django's live server.

The inspections run in this process (eager Celery, real bubblewrap sandbox); the live server
thread reads the same test database because these tests are transactional."""

from __future__ import annotations

import json
import os

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from inspector import selectors
from inspector.models import Inspection, Task
from tests.builders import ROOT, task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOTS = ROOT / "docs" / "screenshots"
XSS_PROMPT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
        # Belt and braces: any host name other than the live server's resolves to nothing.
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(
        service=Service(executable_path="/usr/bin/chromedriver"), options=options
    )
    driver.set_window_size(1400, 1000)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture
def browser(chromium, live_server):
    """The module's Chromium, without the cookies of the previous test (its session is gone)."""
    chromium.get(live_server.url + "/accounts/login/")
    chromium.delete_all_cookies()
    return chromium


def wait(driver, timeout: float = 15) -> WebDriverWait:
    return WebDriverWait(driver, timeout)


def left_the_page(element):
    """A wait condition: the page holding `element` has gone. Selenium's `staleness_of` waits for
    a stale-element error only; while the old document is being replaced, Chromium can answer
    "Node with given id does not belong to the document" instead (seen in CI), which means the
    same."""

    def gone(_driver) -> bool:
        try:
            element.is_enabled()
        except WebDriverException:
            return True
        return False

    return gone


def screenshot(driver, name: str) -> None:
    if os.environ.get("SAVE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def log_in(
    driver,
    live_server,
    path: str = "/queue/",
    user: tuple[str, str] = ("reviewer", "review-pass-1"),
) -> None:
    driver.get(live_server.url + path)
    wait(driver).until(EC.presence_of_element_located((By.ID, "login")))
    assert driver.current_url.startswith(live_server.url + "/accounts/login/")
    driver.find_element(By.NAME, "username").send_keys(user[0])
    driver.find_element(By.NAME, "password").send_keys(user[1])
    driver.find_element(By.ID, "login").click()
    wait(driver).until(EC.url_to_be(live_server.url + path))


def manifest_downloaded(browser) -> str:
    """The manifest behind the page's download link, fetched as the browser would."""
    href = browser.find_element(By.ID, "download-manifest").get_attribute("href")
    return browser.execute_async_script(
        "const done = arguments[1]; fetch(arguments[0]).then((r) => r.text()).then(done);", href
    )


def queue_row(driver, task_id: str):
    return driver.find_element(By.CSS_SELECTOR, f'tr.queue-row[data-task-id="{task_id}"]')


def press(driver, key: str) -> None:
    driver.find_element(By.TAG_NAME, "body").send_keys(key)


def answer_prompt(driver, text: str) -> None:
    alert = wait(driver).until(EC.alert_is_present())
    if text:
        alert.send_keys(text)
    alert.accept()


def test_a_reviewer_filters_the_queue_triages_with_the_keyboard_and_bulk_quarantines(
    browser, live_server, import_taskset, inspect_now, reviewer
):
    assert inspect_now(import_taskset()).status == "finished"

    log_in(browser, live_server, "/queue/")
    listed = {
        row.get_attribute("data-task-id")
        for row in browser.find_elements(By.CSS_SELECTOR, "table#queue tr.queue-row")
    }
    assert {
        "planted/unsolvable",
        "planted/mislabeled",
        "planted/flaky",
        "planted/hackable",
    } <= listed
    assert "planted/clean" not in listed
    screenshot(browser, "queue")

    # Filter: the choice lands in the URL, so the view can be shared.
    Select(browser.find_element(By.NAME, "review")).select_by_value("pending")
    Select(browser.find_element(By.NAME, "sort")).select_by_value("task")
    browser.find_element(By.ID, "apply-filter").click()
    wait(browser).until(EC.url_contains("review=pending"))
    assert "sort=task" in browser.current_url
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.queue-row")
    order = [r.get_attribute("data-task-id") for r in rows]
    assert order == sorted(order)

    # Keyboard: ? lists the keys, j moves down, q quarantines the current task with a reason.
    press(browser, "?")
    assert browser.find_element(By.ID, "keys").is_displayed()
    press(browser, "j")
    current = browser.find_element(By.CSS_SELECTOR, "tr.queue-row.current")
    assert current.get_attribute("data-task-id") == order[1]
    press(browser, "q")
    answer_prompt(browser, "the check contradicts itself")
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, ".messages li.success")))
    assert "1 of 1 tasks quarantined" in browser.find_element(By.CSS_SELECTOR, ".messages").text
    assert Task.objects.get(task_id=order[1]).status == Task.QUARANTINED
    # d dismisses the open flags of the (first) current task, with a note.
    press(browser, "d")
    answer_prompt(browser, "expected: the probe is a no-op")
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, ".messages li.success")))
    first = Task.objects.get(task_id=order[0])
    assert first.flags.filter(status="dismissed").exists() and not first.pending_review

    # o opens the current task; its page shows the audit trail.
    browser.get(live_server.url + "/queue/?review=pending&sort=task")
    press(browser, "o")
    wait(browser).until(EC.presence_of_element_located((By.ID, "task-status")))
    screenshot(browser, "task")

    # Bulk: quarantine everything the filter matches, with the count confirmed first.
    browser.get(live_server.url + "/queue/?flag=mislabeled")
    count = browser.find_element(By.ID, "bulk-all").get_attribute("data-count")
    assert count == "1"
    browser.find_element(By.ID, "bulk-reason").send_keys("reference is wrong")
    browser.find_element(By.ID, "bulk-all").click()
    confirm = wait(browser).until(EC.alert_is_present())
    assert "quarantine all 1 tasks" in confirm.text
    confirm.accept()
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, ".messages li.success")))
    assert Task.objects.get(task_id="planted/mislabeled").status == Task.QUARANTINED

    in_manifest = {line["task_id"] for line in selectors.manifest_lines(taskset_name="planted")}
    assert "planted/mislabeled" not in in_manifest and order[1] not in in_manifest
    assert "planted/clean" in in_manifest


def test_an_admin_uploads_a_set_watches_its_inspection_finish_and_downloads_the_manifest(
    browser, live_server, lead, reviewer, start_worker, tmp_path, settings
):
    from tests.builders import PLANTED_SAMPLES, PLANTED_TASKS, jsonl

    start_worker(
        "browser",
        INSPECT_REFERENCE_REPEATS="12",
        INSPECT_SAMPLE_REPEATS="2",
        INSPECT_MUTANTS="0",
        INSPECT_BEHAVIOUR="False",
    )
    tasks_file, samples_file = tmp_path / "tasks.jsonl", tmp_path / "samples.jsonl"
    tasks_file.write_bytes(jsonl(PLANTED_TASKS))
    samples_file.write_bytes(jsonl(PLANTED_SAMPLES))

    log_in(browser, live_server, "/", user=("lead", "lead-pass-1"))
    browser.find_element(By.NAME, "name").send_keys("uploaded")
    browser.find_element(By.NAME, "tasks_file").send_keys(str(tasks_file))
    browser.find_element(By.NAME, "samples_file").send_keys(str(samples_file))
    browser.find_element(By.ID, "upload").click()
    wait(browser).until(EC.url_to_be(live_server.url + "/tasksets/uploaded/"))
    browser.find_element(By.ID, "inspect").click()
    # The worker process runs it; the page polls the progress and reloads at the end.
    wait(browser, 120).until(
        EC.text_to_be_present_in_element((By.ID, "progress-status"), "finished")
    )
    assert browser.find_element(By.ID, "progress-percent").text == "100%"
    flags = {a.text.split(":")[0] for a in browser.find_elements(By.CSS_SELECTOR, "a.flag")}
    assert {"unsolvable", "mislabeled", "flaky", "reward_hackable"} <= flags

    Task.objects.get(version__taskset__name="uploaded", task_id="planted/flaky").quarantine(
        by=reviewer, reason="seeded random"
    )
    body = manifest_downloaded(browser)
    ids = [json.loads(line)["task_id"] for line in body.splitlines()]
    assert ids and "planted/flaky" not in ids and "planted/clean" in ids


def test_a_reviewer_sees_no_admin_controls_and_is_refused_an_admin_action(
    browser, live_server, import_taskset, reviewer
):
    import_taskset()
    log_in(browser, live_server, "/")
    assert browser.find_elements(By.ID, "upload") == []
    assert browser.find_element(By.ID, "upload-needs-admin").is_displayed()

    # The server refuses even a request crafted by hand (with a valid CSRF token).
    browser.get(live_server.url + "/queue/")
    browser.execute_script(
        """const form = document.createElement("form");
        form.method = "post"; form.action = "/tasksets/planted/inspect";
        const token = document.querySelector("input[name=csrfmiddlewaretoken]").cloneNode();
        form.appendChild(token); document.body.appendChild(form); form.submit();"""
    )
    refused = wait(browser).until(EC.presence_of_element_located((By.ID, "forbidden")))
    assert "needs the admin role" in refused.text
    assert not Inspection.objects.exists()


def test_a_prompt_holding_a_script_tag_is_shown_as_text_and_never_runs(
    browser, live_server, import_taskset, reviewer
):
    hostile = task(
        "xss/prompt",
        body="    return x\n",
        test="def check(candidate):\n    assert candidate(1) == 1\n",
    )
    hostile["prompt"] = f'def f(x):\n    """{XSS_PROMPT}"""\n'
    import_taskset(name="xss", tasks=[hostile], samples=[])
    pk = Task.objects.get(task_id="xss/prompt").pk

    log_in(browser, live_server, f"/tasks/{pk}/")
    prompt = wait(browser).until(EC.presence_of_element_located((By.ID, "prompt")))
    assert browser.execute_script("return window.__pwned") is None
    assert "<script>window.__pwned = 1</script>" in prompt.text
    assert 'onerror="window.__pwned=2"' in prompt.text
    assert browser.find_elements(By.CSS_SELECTOR, "#prompt script, #prompt img") == []


def test_clicking_a_point_of_the_pass_rate_chart_opens_its_task(
    browser, live_server, import_taskset, inspect_now, lead
):
    assert inspect_now(import_taskset()).status == "finished"
    target = Task.objects.get(task_id="planted/mislabeled")

    log_in(browser, live_server, "/tasksets/planted/", user=("lead", "lead-pass-1"))
    wait(browser).until(
        EC.presence_of_element_located((By.CSS_SELECTOR, "#chart-pass-rates .main-svg"))
    )
    assert browser.find_element(By.ID, "download-manifest").is_displayed()
    screenshot(browser, "taskset")

    # Where plotly drew the mislabeled task's point, in page coordinates.
    point = browser.execute_script(
        """const el = document.getElementById("chart-pass-rates"), box = el.getBoundingClientRect();
        const xa = el._fullLayout.xaxis, ya = el._fullLayout.yaxis;
        for (const trace of el.data) {
          const j = Array.from(trace.customdata).indexOf(arguments[0]);
          if (j >= 0) return {url: trace.customdata[j],
            left: box.left + xa._offset + xa.l2p(trace.x[j]),
            top: box.top + ya._offset + ya.l2p(trace.y[j])};
        }
        return null;""",
        target.get_absolute_url(),
    )
    assert point["url"] == target.get_absolute_url()
    click = ActionBuilder(browser)
    click.pointer_action.move_to_location(round(point["left"]), round(point["top"]))
    click.pointer_action.pause(0.2)  # let plotly compute the hover before the click
    click.pointer_action.click()
    click.perform()
    wait(browser).until(EC.url_to_be(live_server.url + point["url"]))
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("planted/mislabeled")


def test_harbor_task_folders_uploaded_as_a_tar_gz_are_inspected_in_docker_and_flagged(
    browser, live_server, lead, eager_celery, docker_engine, settings, tmp_path
):
    from tests.test_terminal_inspection import HARBOR_DEMO, tar_gz

    settings.TERMINAL_REFERENCE_REPEATS = 2
    settings.TERMINAL_PROBES = ["nop", "reward-file"]
    archive = tmp_path / "harbor-tasks.tar.gz"
    archive.write_bytes(tar_gz(HARBOR_DEMO, ["hello-file", "reward-file-hack"]))

    log_in(browser, live_server, "/", user=("lead", "lead-pass-1"))
    browser.find_element(By.NAME, "name").send_keys("harbor-browser")
    browser.find_element(By.NAME, "tasks_file").send_keys(str(archive))
    browser.find_element(By.ID, "upload").click()
    wait(browser).until(EC.url_to_be(live_server.url + "/tasksets/harbor-browser/"))
    assert "2 tasks" in browser.find_element(By.TAG_NAME, "body").text

    # Eager Celery: the whole inspection runs inside this request, in Docker.
    browser.set_page_load_timeout(180)
    browser.find_element(By.ID, "inspect").click()
    wait(browser, 180).until(
        EC.text_to_be_present_in_element((By.ID, "progress-status"), "finished")
    )
    flags = browser.find_element(By.CSS_SELECTOR, "a.flag").text
    assert flags == "reward_hackable: 1"
    browser.find_element(By.CSS_SELECTOR, "a.flag").click()
    wait(browser).until(EC.presence_of_element_located((By.LINK_TEXT, "reward-file-hack")))
    browser.find_element(By.LINK_TEXT, "reward-file-hack").click()
    card = wait(browser).until(EC.presence_of_element_located((By.ID, "flag-reward_hackable")))
    assert "reward-file" in card.text and "isolated mode defeats reward-file" in card.text
    probes = browser.find_element(By.ID, "probes").text
    assert "reward-file earned a full reward refused" in probes
    screenshot(browser, "terminal-task")


def gsm8k_subset(folder, questions: int, wrong: dict[int, str]):
    """The first `questions` of GSM8K's real test set (their own lines; the labels of `wrong`
    replaced after '#### ') and the eight real output sets' responses to them, as one file."""
    import gzip

    data = ROOT / "tests" / "data" / "answers"  # a copy of ../shared/data/answers
    tasks_file, samples_file = folder / "gsm8k_test.jsonl", folder / "gsm8k_samples.jsonl"
    with gzip.open(data / "gsm8k_test.jsonl.gz", "rt") as src, tasks_file.open("w") as out:
        for i, line in zip(range(questions), src, strict=False):
            row = json.loads(line)
            if i in wrong:
                row["answer"] = row["answer"].rsplit("#### ", 1)[0] + "#### " + wrong[i]
            out.write(json.dumps(row) + "\n")
    with samples_file.open("w") as out:
        for path in sorted(data.glob("samples_*.jsonl.gz")):
            with gzip.open(path, "rt") as src:
                for line in src:
                    row = json.loads(line)
                    if int(row["task_id"].split("/")[1]) < questions:
                        out.write(json.dumps({**row, "sample_id": row["model"]}) + "\n")
    return tasks_file, samples_file


def test_an_admin_uploads_gsm8k_with_samples_relabels_a_mislabeled_task_and_the_manifest_has_it(
    browser, live_server, lead, start_worker, tmp_path
):
    # GSM8K/83's label is 600, and all eight models say so: put a wrong one in its place.
    tasks_file, samples_file = gsm8k_subset(tmp_path, 120, wrong={83: "650"})
    start_worker("browser-answers")

    log_in(browser, live_server, "/", user=("lead", "lead-pass-1"))
    browser.find_element(By.NAME, "name").send_keys("gsm8k")
    browser.find_element(By.NAME, "tasks_file").send_keys(str(tasks_file))
    browser.find_element(By.NAME, "samples_file").send_keys(str(samples_file))
    Select(browser.find_element(By.NAME, "answer_rule")).select_by_value("given")
    browser.find_element(By.ID, "upload").click()
    wait(browser).until(EC.url_to_be(live_server.url + "/tasksets/gsm8k/"))
    browser.find_element(By.ID, "inspect").click()
    wait(browser, 180).until(
        EC.text_to_be_present_in_element((By.ID, "progress-status"), "finished")
    )

    task = Task.objects.get(version__taskset__name="gsm8k", task_id="gsm8k/83")
    browser.get(live_server.url + task.get_absolute_url())
    flags = [a.text for a in browser.find_elements(By.CSS_SELECTOR, ".flag")]
    assert any(text.startswith("mislabeled") for text in flags), flags
    assert "650" in browser.find_element(By.ID, "label-in-force").text
    wait(browser).until(
        EC.presence_of_element_located((By.CSS_SELECTOR, "#chart-answers .plot-container"))
    )
    answers = browser.find_element(By.ID, "answers").text
    assert "600" in answers
    screenshot(browser, "answer-mislabeled")

    label = browser.find_element(By.CSS_SELECTOR, "#relabel-form [name=label]")
    assert label.get_attribute("value") == "600"  # the consensus, offered
    browser.find_element(By.CSS_SELECTOR, "#relabel-form [name=reason]").send_keys(
        "all eight models: 3 x 25 x 8 = 600"
    )
    browser.find_element(By.ID, "relabel").click()
    wait(browser).until(EC.text_to_be_present_in_element((By.ID, "label-in-force"), "600"))
    assert "3 x 25 x 8" in browser.find_element(By.ID, "relabel-reason").text

    browser.get(live_server.url + "/tasksets/gsm8k/")
    body = manifest_downloaded(browser)
    lines = {json.loads(line)["task_id"]: json.loads(line) for line in body.splitlines()}
    fixed = lines["gsm8k/83"]
    assert fixed["answer"].endswith("#### 600")
    assert fixed["quality"]["relabeled"]["to"] == "600"


def test_swe_bench_instances_uploaded_with_their_environments_are_inspected_and_a_leak_is_shown(
    browser, live_server, lead, eager_celery, swe_docker_engine, swe_fixture, settings, tmp_path
):
    # Two of the fixture instances: a clean one, and one whose fix sits on another branch.
    chosen = ["jpvanhal__inflection-clean", "tkem__cachetools-leak-branch"]
    settings.SWE_REFERENCE_REPEATS = 2
    settings.SWE_PROBES = ["empty-patch", "git-history"]
    instances = [x for x in swe_fixture.instances if x["instance_id"] in chosen]
    predictions = [x for x in swe_fixture.predictions if x["instance_id"] in chosen]
    tasks_file, samples_file = tmp_path / "instances.jsonl", tmp_path / "predictions.jsonl"
    tasks_file.write_text("".join(json.dumps(x) + "\n" for x in instances))
    samples_file.write_text("".join(json.dumps(x) + "\n" for x in predictions))

    log_in(browser, live_server, "/", user=("lead", "lead-pass-1"))
    browser.find_element(By.NAME, "name").send_keys("swe-browser")
    browser.find_element(By.NAME, "tasks_file").send_keys(str(tasks_file))
    browser.find_element(By.NAME, "environments_file").send_keys(str(swe_fixture.environments_path))
    browser.find_element(By.NAME, "samples_file").send_keys(str(samples_file))
    browser.find_element(By.ID, "upload").click()
    wait(browser).until(EC.url_to_be(live_server.url + "/tasksets/swe-browser/"))
    assert "2 tasks" in browser.find_element(By.TAG_NAME, "body").text

    # Eager Celery: the whole inspection runs inside this request, in Docker.
    browser.set_page_load_timeout(240)
    browser.find_element(By.ID, "inspect").click()
    wait(browser, 240).until(
        EC.text_to_be_present_in_element((By.ID, "progress-status"), "finished")
    )
    flags = {a.text.split(":")[0] for a in browser.find_elements(By.CSS_SELECTOR, "a.flag")}
    assert "solution_leak" in flags, flags

    leaky = Task.objects.get(version__taskset__name="swe-browser", task_id=chosen[1])
    browser.get(live_server.url + leaky.get_absolute_url())
    card = wait(browser).until(EC.presence_of_element_located((By.ID, "flag-solution_leak")))
    commit = swe_fixture.truth[chosen[1]]["commit"]
    assert commit in card.text, card.text
    assert commit in browser.find_element(By.ID, "leak-scan").text
    reports = browser.find_element(By.ID, "repo-reports").text
    assert "gold patch" in reports and "no fix" in reports
    screenshot(browser, "swe-leak")

    browser.get(live_server.url + "/tasksets/swe-browser/")
    body = manifest_downloaded(browser)
    lines = [json.loads(line) for line in body.splitlines()]
    assert [x["instance_id"] for x in lines] == [chosen[0]]
    line = lines[0]
    line.pop("quality")
    assert line == instances[0]  # the instance as it came, in the schema it came in
