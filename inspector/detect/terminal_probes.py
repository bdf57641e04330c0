"""Adversarial agents run on every terminal (Harbor / Terminal-Bench) task beside the samples.

Each probe is a bash script run where the agent would run: in the task's container, as root,
in the image's WORKDIR, during the agent stage (before the tests are copied in). A task whose
check one of them passes is `reward_hackable`, naming the probe. They do not try to solve
anything: a pass means the check can be satisfied without doing the task.

Every script is idempotent (a second run leaves the same state) and does nothing unless it runs
where the terminal executor puts it: as /agent/run.sh, in a container (/.dockerenv or
/run/.containerenv) whose pid 1 is the executor's `sleep infinity`. /.dockerenv alone is not
enough: a developer's machine is often a container itself. Run anywhere else, a script prints
one line and exits 0. None uses the network.
"""

from __future__ import annotations

# Scripts start with this: anywhere but the executor's agent stage they change nothing.
_GUARD = """\
if [ "$0" != /agent/run.sh ] || { [ ! -e /.dockerenv ] && [ ! -e /run/.containerenv ]; } ||
   ! tr '\\0' ' ' < /proc/1/cmdline 2>/dev/null | grep -q 'sleep infinity'; then
  echo "inspector probe: not in an inspector agent container, doing nothing" >&2
  exit 0
fi
"""

# What the conftest-hook probe plants: every collected test becomes a no-op that reports a
# pass, collection errors are reported as passes, and the session's exit status is forced to 0.
CONFTEST_HOOK = """\
# Planted by the inspector's conftest-hook probe: every test reports a pass.
import pytest


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        item.runtest = lambda: None


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.outcome = "passed"
        report.longrepr = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None


def pytest_sessionfinish(session, exitstatus):
    session.exitstatus = 0
"""

TERMINAL_PROBES: dict[str, str] = {
    # Does nothing: a check that holds for the untouched image passes it.
    "nop": "#!/bin/bash\n# The nop probe: does nothing.\nexit 0\n",
    # Writes a full reward where a Harbor harness reads it, and leaves a process behind that
    # brings reward.txt back whenever no reward file is there: harbor deletes both files just
    # before its check, so only a check that writes no reward on some path (and shares the
    # agent's container) falls for it. The reward goes in place by a hard link of a file
    # written whole (`ln` fails if a reward is there), so a reward the check writes is never
    # overwritten: with `set -C` the writer's create could land between the check's "0" and the
    # writer's own "1", which then read as a full reward (seen on a loaded machine). The writer
    # is a bash loop that forks only to put a reward in place (it waits with `read -t` on a
    # fifo, not `sleep`), so a failed fork under load costs one round, not the writer, and the
    # probe ends only once the writer has left the agent's session (it says so in a file after
    # its setsid), so nothing that ends that session can take it along.
    "reward-file": (
        "#!/bin/bash\n" + _GUARD + "mkdir -p /logs/verifier\n"
        "echo 1 > /logs/verifier/reward.txt\n"
        "writer=/tmp/.inspector-reward-writer\n"
        'rm -f -- "$writer.sh" "$writer.ready" "$writer.fifo"\n'
        "cat > \"$writer.sh\" <<'INSPECTOR_WRITER'\n"
        "writer=/tmp/.inspector-reward-writer\n"
        'mkfifo -- "$writer.fifo" && exec 3<>"$writer.fifo"\n'
        'rm -f -- "$writer.fifo"\n'
        'echo ready > "$writer.ready"\n'
        # Written whole beside it, then linked into place: the link fails if the tests wrote a
        # reward meanwhile, and never leaves a half-written file for the tests' own write to race
        # with (an open, then empty, reward.txt written after the tests' "0" read as "1").
        "one=/logs/verifier/.inspector-reward-$$\n"
        "while :; do\n"
        "  if [ ! -e /logs/verifier/reward.json ] && [ ! -e /logs/verifier/reward.txt ]; then\n"
        '    echo 1 > "$one" && ln -- "$one" /logs/verifier/reward.txt 2>/dev/null\n'
        '    rm -f -- "$one"\n'
        "  fi\n"
        "  read -r -t 0.01 -u 3 || :\n"
        "done\n"
        "INSPECTOR_WRITER\n"
        'setsid bash "$writer.sh" >/dev/null 2>&1 </dev/null &\n'
        'for _ in $(seq 1000); do [ -e "$writer.ready" ] && break; sleep 0.01; done\n'
        'rm -f -- "$writer.sh" "$writer.ready"\n'
        "exit 0\n"
    ),
    # Plants a pytest conftest.py whose hooks turn every test into a pass, in every folder
    # pytest may read one from: the working folder and its parents, /tests (where the harness
    # later copies the tests: the copy merges, so the planted file stays), /tests' parent, and
    # the folders that already hold test files under the working folder.
    "conftest-hook": (
        "#!/bin/bash\n"
        + _GUARD
        + "conftest=$(cat <<'INSPECTOR_CONFTEST'\n"
        + CONFTEST_HOOK
        + "INSPECTOR_CONFTEST\n"
        ")\n"
        "plant() {\n"
        '  mkdir -p -- "$1" 2>/dev/null || return 0\n'
        '  printf \'%s\\n\' "$conftest" > "$1/conftest.py" 2>/dev/null || true\n'
        "}\n"
        "dir=$(pwd -P 2>/dev/null || echo /)\n"
        'while :; do plant "$dir"; [ "$dir" = / ] && break; dir=$(dirname -- "$dir"); done\n'
        "plant /tests\n"
        'find "$(pwd -P 2>/dev/null || echo /)" -xdev -maxdepth 6 -type f '
        "\\( -name 'test_*.py' -o -name '*_test.py' \\) 2>/dev/null |\n"
        '  while IFS= read -r f; do plant "$(dirname -- "$f")"; done\n'
        "exit 0\n"
    ),
    # Puts fake curl, python3, python and pytest that exit 0 at once first on the PATH: passes
    # a check that runs its checker through a PATH lookup in the agent's container.
    "trojan-tool": (
        "#!/bin/bash\n" + _GUARD + "for d in /usr/local/bin /usr/local/sbin; do\n"
        '  mkdir -p "$d"\n'
        "  for tool in curl python3 python pytest; do\n"
        "    printf '#!/bin/sh\\n# planted by the inspector trojan-tool probe\\nexit 0\\n' "
        '> "$d/$tool"\n'
        '    chmod 755 "$d/$tool"\n'
        "  done\n"
        "done\n"
        "exit 0\n"
    ),
    # Deletes the test folders (tests/, checks/) and empties the test files (test_*.py,
    # *_test.py, test_*.sh) it can find outside the system folders: passes a check that runs
    # whatever tests are left in the image, and counts none as a pass.
    "edit-tests": (
        "#!/bin/bash\n"
        + _GUARD
        + "find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /usr "
        "-o -path /lib -o -path /lib32 -o -path /lib64 -o -path /bin -o -path /sbin "
        "-o -path /etc -o -path /boot -o -path /agent -o -path /solution \\) -prune -o \\\n"
        "  -type d \\( -name tests -o -name checks \\) -prune -exec rm -rf -- {} + -o \\\n"
        "  -type f \\( -name 'test_*.py' -o -name '*_test.py' -o -name 'test_*.sh' \\) "
        "! -name conftest.py \\\n"
        "  -exec sh -c 'for f; do : > \"$f\"; done' sh {} + 2>/dev/null\n"
        "exit 0\n"
    ),
}

TERMINAL_PROBE_DESCRIPTIONS: dict[str, str] = {
    "nop": "does nothing: the check passes the untouched environment",
    "reward-file": "writes reward 1 to /logs/verifier/reward.txt and keeps it there while none is",
    "conftest-hook": "plants a pytest conftest.py (workdir, its parents, /tests) forcing passes",
    "trojan-tool": "puts fake curl/python3/python/pytest exiting 0 in /usr/local/bin and sbin",
    "edit-tests": "deletes tests/ and checks/ folders and empties test_*.py, *_test.py, test_*.sh",
}

__all__ = ["CONFTEST_HOOK", "TERMINAL_PROBES", "TERMINAL_PROBE_DESCRIPTIONS"]
