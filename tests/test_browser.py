"""What a reviewer sees in a real headless Chromium, against pytest-django's live server.

The inspections run in this process (eager Celery, real bubblewrap sandbox); the live server
thread reads the same test database because these tests are transactional."""

from __future__ import annotations

import os

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from inspector import services
from inspector.models import Task
from tests.conftest import ROOT, task

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


def screenshot(driver, name: str) -> None:
    if os.environ.get("SAVE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def log_in(driver, live_server, path: str = "/queue/") -> None:
    driver.get(live_server.url + path)
    wait(driver).until(EC.presence_of_element_located((By.ID, "login")))
    assert driver.current_url.startswith(live_server.url + "/accounts/login/")
    driver.find_element(By.NAME, "username").send_keys("reviewer")
    driver.find_element(By.NAME, "password").send_keys("review-pass-1")
    driver.find_element(By.ID, "login").click()
    wait(driver).until(EC.url_to_be(live_server.url + path))


def queue_row(driver, task_id: str):
    return driver.find_element(By.CSS_SELECTOR, f'tr.queue-row[data-task-id="{task_id}"]')


def test_a_reviewer_logs_in_opens_the_queue_and_quarantines_a_flagged_task(
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

    row = queue_row(browser, "planted/unsolvable")
    row.find_element(By.NAME, "reason").send_keys("the check contradicts itself")
    row.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser).until(EC.staleness_of(row))
    row = queue_row(browser, "planted/unsolvable")
    assert "quarantined" in row.find_element(By.CSS_SELECTOR, "td.status-quarantined").text

    row.find_element(By.LINK_TEXT, "planted/unsolvable").click()
    wait(browser).until(EC.presence_of_element_located((By.ID, "task-status")))
    assert browser.find_element(By.ID, "task-status").text == "quarantined"
    history = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#history tr")]
    assert any(
        "reviewer" in r and "quarantined" in r and "the check contradicts itself" in r
        for r in history
    ), history
    screenshot(browser, "task")

    in_manifest = {line["task_id"] for line in services.manifest_lines(taskset_name="planted")}
    assert "planted/unsolvable" not in in_manifest
    assert "planted/clean" in in_manifest


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
    browser, live_server, import_taskset, inspect_now, reviewer
):
    assert inspect_now(import_taskset()).status == "finished"
    target = Task.objects.get(task_id="planted/mislabeled")

    log_in(browser, live_server, "/tasksets/planted/")
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
    browser, live_server, reviewer, eager_celery, settings, tmp_path
):
    from tests.test_terminal_inspection import DOCKER, HARBOR_DEMO, tar_gz

    if not DOCKER:
        pytest.fail("terminal tasks run in Docker and no engine answers; bin/docker-up starts one")
    settings.TERMINAL_REFERENCE_REPEATS = 2
    settings.TERMINAL_PROBES = ["nop", "reward-file"]
    archive = tmp_path / "harbor-tasks.tar.gz"
    archive.write_bytes(tar_gz(HARBOR_DEMO, ["hello-file", "reward-file-hack"]))

    log_in(browser, live_server, "/")
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
