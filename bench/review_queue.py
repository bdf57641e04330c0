"""Benchmark: the review queue's server time on PostgreSQL with 100,000 tasks and 30,000 flags.

Creates a database of its own (`inspector_bench_queue` on DATABASE_URL's server, or on
127.0.0.1:5432 as postgres), migrates it, seeds task sets with 100,000 tasks in all (prompts of
realistic length, domains, pass rates, 30,000 flags over 24,000 flagged tasks, some reviewed,
assigned, quarantined), then requests each queue page a reviewer uses through Django's test
client (the whole view: middleware, queries, template) and prints p50, p95 and max per page,
with the number of SQL queries. The target is p95 under 150 ms for every page.

Run: .venv/bin/python bench/review_queue.py [--tasks 100000] [--flags 30000] [--repeat 30] [--keep]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DB_NAME = "inspector_bench_queue"
COMMON = (
    "return list string integer sorted numbers given vowels prime sum product palindrome "
    "count words letters even odd maximum minimum array index binary decimal digits matrix "
    "fibonacci factorial substring character unique duplicate balanced brackets interval"
).split()


def vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    """Made-up words from syllables: prompts share the common words above and otherwise
    differ, as real task prompts do (a vocabulary of 30 words would make every search match
    most prompts)."""
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    return ["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(size)]


def prompt_words(rng: random.Random, rare: list[str]) -> str:
    words = [
        rng.choice(COMMON) if rng.random() < 0.5 else rare[int(rng.paretovariate(1.2)) % len(rare)]
        for _ in range(rng.randint(30, 90))
    ]
    return " ".join(words)


def _server_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        return url.rsplit("/", 1)[0]
    return "postgres://postgres@127.0.0.1:5432"


def _recreate_database(server: str) -> None:
    import psycopg

    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME}")
        conn.execute(f"CREATE DATABASE {DB_NAME}")


def seed(n_tasks: int, n_flags: int, rng: random.Random) -> dict[str, float]:
    from django.contrib.auth.models import Group, User
    from django.utils import timezone

    from inspector.detect.codes import SEVERITY, combined_severity
    from inspector.models import Flag, Inspection, Task, TaskSet, TaskSetVersion

    started = time.monotonic()
    admin = User.objects.create_superuser("bench", password="bench-pass-1")
    reviewers = []
    for i in range(5):
        user = User.objects.create_user(f"reviewer{i}", password="x")
        user.groups.add(Group.objects.get(name="reviewers"))
        reviewers.append(user)
    domains = ["strings", "math", "lists", "parsing", "graphs", "dates", "io", "regex"]
    codes = list(SEVERITY)
    rare = vocabulary(rng)
    per_set = 10_000
    flagged_share = 0.8 * n_flags / n_tasks  # 30k flags over 24k tasks: some carry two
    task_pks: list[int] = []
    for s in range(max(1, n_tasks // per_set)):
        taskset = TaskSet.objects.create(name=f"bench-{s:02d}", created_by=admin)
        version = TaskSetVersion.objects.create(
            taskset=taskset, number=1, task_count=per_set, created_by=admin
        )
        inspection = Inspection.objects.create(
            version=version, status=Inspection.FINISHED, finished_at=timezone.now()
        )
        rows = []
        for i in range(per_set):
            words = prompt_words(rng, rare)
            sample_rate = rng.random()
            rows.append(
                Task(
                    version=version,
                    task_id=f"bench/{s}/{i}",
                    position=i,
                    prompt=f'def f{i}(x):\n    """{words}"""\n',
                    canonical_solution="    return x\n",
                    test="def check(candidate):\n    assert candidate(1) == 1\n",
                    entry_point=f"f{i}",
                    domain=rng.choice(domains),
                    source={"task_id": f"bench/{s}/{i}"},
                    content_hash=f"{s:02d}{i:062d}",
                    last_inspection=inspection,
                    runs_count=20,
                    reference_pass_rate=1.0 if rng.random() > 0.1 else 0.0,
                    sample_pass_rate=sample_rate,
                    learnability=sample_rate * (1 - sample_rate),
                    status=Task.QUARANTINED if rng.random() < 0.02 else Task.ACTIVE,
                    assignee=rng.choice(reviewers) if rng.random() < 0.1 else None,
                )
            )
        made = Task.objects.bulk_create(rows, batch_size=2000)
        task_pks.extend(t.pk for t in made)
        flags = []
        touched = []
        for task in made:
            if rng.random() >= flagged_share:
                continue
            chosen = rng.sample(codes, 2 if rng.random() < 0.25 else 1)
            mine = []
            for code in chosen:
                status = Flag.DISMISSED if rng.random() < 0.1 else Flag.OPEN
                flag = Flag(
                    task=task,
                    inspection=inspection,
                    code=code,
                    severity=SEVERITY[code],
                    confidence=1.0,
                    explanation=f"{code} found by the bench",
                    status=status,
                )
                flags.append(flag)
                if status == Flag.OPEN:
                    mine.append(flag)
            task.severity = combined_severity([f.severity for f in mine])
            task.open_flags = ",".join(f.code for f in mine)
            task.pending_review = bool(mine)
            touched.append(task)
        Flag.objects.bulk_create(flags, batch_size=2000)
        Task.objects.bulk_update(
            touched, ("severity", "open_flags", "pending_review"), batch_size=2000
        )
    from django.db import connection

    with connection.cursor() as cursor:
        # What autovacuum does on a live database: statistics, and the visibility map that
        # lets the queue's counts and id pages read the indexes alone.
        cursor.execute("VACUUM ANALYZE")
    return {
        "seconds": time.monotonic() - started,
        "tasks": Task.objects.count(),
        "flags": Flag.objects.count(),
        "flagged_tasks": Task.objects.filter(severity__gt=0).count(),
        "word": rare[40],  # in about 1% of prompts
    }


PAGES = [
    ("default queue, page 1", "/queue/"),
    ("default queue, page 200", "/queue/?page=200"),
    ("flag = flaky", "/queue/?flag=flaky"),
    ("severity >= 80, sorted by task id", "/queue/?severity=80&sort=task"),
    ("domain + awaiting review", "/queue/?domain=parsing&review=pending"),
    ("one task set, unassigned", "/queue/?taskset=bench-03&assignee=none"),
    ("assignee = reviewer2", "/queue/?assignee=reviewer2"),
    ("quarantined", "/queue/?status=quarantined"),
    ("search task id", "/queue/?q=bench/7/123"),
    ("search prompt, two common words", "/queue/?q=palindrome+fibonacci"),
    ("search prompt, a rarer word", "/queue/?q=" + "SEARCH_WORD"),
    ("sample pass rate, high first", "/queue/?sort=-samples&review=pending"),
]


def measure(repeat: int, word: str) -> list[tuple[str, float, float, float, int]]:
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="127.0.0.1")
    client.login(username="bench", password="bench-pass-1")
    results = []
    for name, url in PAGES:
        url = url.replace("SEARCH_WORD", word)
        client.get(url)  # warm: the plan cache and the database's buffers
        times = []
        queries = 0
        for _ in range(repeat):
            reset_queries()
            with CaptureQueriesContext(connection) as captured:
                started = time.perf_counter()
                response = client.get(url)
                times.append(time.perf_counter() - started)
            assert response.status_code == 200, (url, response.status_code)
            queries = len(captured)
        times.sort()
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        results.append((name, statistics.median(times), p95, times[-1], queries))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--flags", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args(argv)

    server = _server_url()
    _recreate_database(server)
    os.environ["DATABASE_URL"] = f"{server}/{DB_NAME}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    seeded = seed(args.tasks, args.flags, random.Random(args.seed))
    print(
        f"seeded {seeded['tasks']} tasks, {seeded['flags']} flags "
        f"({seeded['flagged_tasks']} tasks with an open flag) in {seeded['seconds']:.1f} s"
    )
    from inspector.models import Task

    share = Task.objects.filter(prompt__contains=seeded["word"]).count() / seeded["tasks"]
    print(f"the rarer search word {seeded['word']!r} is in {share:.1%} of prompts")
    # Measure as a web process would see the database: a fresh connection, not the one that
    # just wrote 100,000 rows (whose plans and caches are the seeder's).
    from django.db import connections

    connections.close_all()
    print(f"each page requested {args.repeat} times after a warm-up; server time in ms")
    print(f"{'page':40} {'p50':>7} {'p95':>7} {'max':>7} {'queries':>8}")
    worst = 0.0
    for name, p50, p95, top, queries in measure(args.repeat, seeded["word"]):
        worst = max(worst, p95)
        mark = "" if p95 < 0.150 else "  ! over 150 ms"
        print(f"{name:40} {p50 * 1000:7.1f} {p95 * 1000:7.1f} {top * 1000:7.1f} {queries:8d}{mark}")
    print(f"worst p95: {worst * 1000:.1f} ms (target < 150 ms)")
    if not args.keep:
        from django.db import connections

        connections.close_all()
        import psycopg

        with psycopg.connect(server + "/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME}")


if __name__ == "__main__":
    main()
