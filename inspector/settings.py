"""One settings module. Every deployment choice is an environment variable with an embedded
default that works on a fresh machine: SQLite, a Celery broker on the file system, the local
bubblewrap sandbox. Production sets DATABASE_URL, CELERY_BROKER_URL and SANDBOX_BACKEND."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def envbool(name: str, default: str) -> bool:
    value = os.environ.get(name, default)
    if value not in ("", "True", "False"):
        raise ImproperlyConfigured(f"Unexpected value {name}={value}, use 'True' or 'False'")
    return value == "True"


def envint(name: str, default: str) -> int:
    value = os.environ.get(name, default)
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"Unexpected value {name}={value}, use a whole number") from None


def envfloat(name: str, default: str) -> float:
    value = os.environ.get(name, default)
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"Unexpected value {name}={value}, use a number") from None


# Where the embedded defaults keep their state (SQLite file, broker folders, secret key).
DATA_DIR = Path(env("INSPECTOR_DATA_DIR", str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    if "SECRET_KEY" in os.environ:
        return os.environ["SECRET_KEY"]
    # A fresh machine gets its own key, kept across restarts; never a key committed to git.
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = envbool("DEBUG", "False")
ALLOWED_HOSTS = [h for h in env("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in env("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.humanize",
    "inspector",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "inspector.middleware.LoginRequiredMiddleware",
]

ROOT_URLCONF = "inspector.urls"
WSGI_APPLICATION = "inspector.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "inspector.context_processors.roles",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{DATA_DIR / 'inspector.sqlite3'}"), conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web server and workers write at once: WAL lets readers go on, IMMEDIATE avoids the
    # deadlock-prone lock upgrade, and the timeout waits out a busy writer instead of failing.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file, not memory, so that worker processes started by the tests share it.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A worker host whose database went quiet (a cut link) finds out in about a minute, not
    # after TCP's default two hours; its open transactions are the server's to end
    # (DB_IDLE_IN_TRANSACTION_SECONDS, models.runs_transaction).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "connect_timeout": 10,
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 10,
            "keepalives_count": 3,
        }
    )

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "inspector-home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
# The admin's styles are served by WhiteNoise straight from the installed apps: no collectstatic.
WHITENOISE_USE_FINDERS = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Uploads larger than this many bytes (after decompression) are refused with a clear error.
UPLOAD_MAX_BYTES = envint("UPLOAD_MAX_BYTES", str(200 * 1024 * 1024))
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# --- Celery -------------------------------------------------------------------------------------
BROKER_DIR = DATA_DIR / "broker"
CELERY_BROKER_URL = env("CELERY_BROKER_URL", "filesystem://localhost//")
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("queue", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "polling_interval": 0.01,
    }
else:
    # Unacknowledged messages of a worker killed mid-run come back after this long; the run
    # sweeper re-queues such runs sooner, and claiming a run makes the second delivery harmless.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 600}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
# A plain `celery -A inspector worker` consumes both; production may split them with -Q.
CELERY_TASK_QUEUES = (
    Queue("default", Exchange("default"), routing_key="default"),
    Queue("sandbox", Exchange("sandbox"), routing_key="sandbox"),
)
CELERY_TASK_ROUTES = {"workers.runs_execute": {"queue": "sandbox", "routing_key": "sandbox"}}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = {
    "sweep-runs": {"task": "workers.runs_sweep", "schedule": envfloat("SWEEP_EVERY_SECONDS", "30")},
}
# Every worker sweeps too, in a thread of its main process, this often (0: only beat does): the
# runs of a worker that died come back while any worker lives, without beat. Sweepers may overlap.
WORKER_SWEEP_SECONDS = envfloat("WORKER_SWEEP_SECONDS", env("SWEEP_EVERY_SECONDS", "30"))
# A worker asked to stop (SIGTERM, or a first SIGINT) takes no new message, and its pool
# processes hand back the runs they have not started; what is still running after this many
# seconds is cut short (a cold shutdown: its runs come back when their lease runs out), and a
# worker still up WORKER_STOP_SECONDS + 15 s after the signal exits at once. A second
# SIGTERM or SIGINT is that cold shutdown straight away.
WORKER_STOP_SECONDS = envfloat("WORKER_STOP_SECONDS", "40")
# PostgreSQL: a transaction that writes runs and then waits this long for its host's next word
# (a worker host cut off the network mid-write) is ended by the server, and its row locks freed.
DB_IDLE_IN_TRANSACTION_SECONDS = envfloat("DB_IDLE_IN_TRANSACTION_SECONDS", "30")

# --- Sandbox and inspection ---------------------------------------------------------------------
SANDBOX_BACKEND = env("SANDBOX_BACKEND", "local")
if SANDBOX_BACKEND not in ("local", "docker"):
    raise ImproperlyConfigured(
        f"Unexpected value SANDBOX_BACKEND={SANDBOX_BACKEND}, use 'local' or 'docker'"
    )
SANDBOX_ALLOW_UNSANDBOXED = envbool("SANDBOX_ALLOW_UNSANDBOXED", "False")
SANDBOX_PYTHON = env("SANDBOX_PYTHON", "")  # empty: /usr/bin/python3, else this interpreter
# Kernel limits on each sandbox as a whole (memory and process count of all its processes
# together), through cgroups: "auto" uses them where the host allows (root, or a delegated
# SANDBOX_CGROUP_ROOT) and warns loudly where not; "required" refuses to run without them.
SANDBOX_CGROUPS = env("SANDBOX_CGROUPS", "auto")
SANDBOX_CGROUP_ROOT = env("SANDBOX_CGROUP_ROOT", "")
# Docker backend: the image (built locally by bin/build-sandbox-image) and how many containers
# each worker process keeps started ahead of need.
SANDBOX_IMAGE = env("SANDBOX_IMAGE", "inspector-sandbox:bookworm")
# The answer verifier's libraries (requirements-verifier.txt), installed by bin/setup outside the
# virtualenv and bound read-only into verifier sandboxes (the Docker backend's verifier image
# carries its own copy: bin/build-sandbox-image).
VERIFIER_LIB = env("VERIFIER_LIB", str(BASE_DIR / ".verifier-lib"))
SANDBOX_POOL_SIZE = envint("SANDBOX_POOL_SIZE", "2")

RUN_WALL_SECONDS = envfloat("RUN_WALL_SECONDS", "10")
RUN_MEMORY_MB = envint("RUN_MEMORY_MB", "1024")
RUN_MAX_PROCESSES = envint("RUN_MAX_PROCESSES", "64")
RUN_OUTPUT_BYTES = envint("RUN_OUTPUT_BYTES", str(1024 * 1024))
RUN_TAIL_BYTES = envint("RUN_TAIL_BYTES", "4096")
# A run claimed by a worker that vanished is re-queued after its wall limit plus this slack.
RUN_LEASE_SLACK_SECONDS = envint("RUN_LEASE_SLACK_SECONDS", "60")
RUN_MAX_ATTEMPTS = envint("RUN_MAX_ATTEMPTS", "3")
# Runs travel to the workers a task at a time, about this many in one message (a session, so
# two sandboxes, per message). Docker's sandboxes cost about 0.5 s of the machine's CPU each pair
# to start and remove, against about 30 ms for bubblewrap's: it gets larger messages.
RUNS_PER_MESSAGE = envint("RUNS_PER_MESSAGE", "200" if SANDBOX_BACKEND == "docker" else "50")

# Repeats per solution. A check that fails at random half of the time gives n runs of one
# solution the same outcome with probability 2 * 0.5**n; n = 6 catches it 96.9% of the time.
INSPECT_REFERENCE_REPEATS = envint("INSPECT_REFERENCE_REPEATS", "6")
INSPECT_SAMPLE_REPEATS = envint("INSPECT_SAMPLE_REPEATS", "2")
INSPECT_PROBE_REPEATS = envint("INSPECT_PROBE_REPEATS", "1")
# Adversarial completions run on every task (inspector/detect/probes.py); any that passes flags
# the task reward_hackable.
INSPECT_PROBES = [
    p for p in env("INSPECT_PROBES", "null,exit-zero,atexit-exit,eq-always").split(",") if p
]

# Deeper analysis of function tasks (inspector/detect/signals/). Mutants of the reference run
# through the check; every solution (reference, samples, mutants) is called on the same inputs
# (the arguments in the task's tests and variations of them) to compare behaviours.
INSPECT_MUTANTS = envint("INSPECT_MUTANTS", "12")
INSPECT_BEHAVIOUR = envbool("INSPECT_BEHAVIOUR", "True")
BEHAVIOUR_INPUTS = envint("BEHAVIOUR_INPUTS", "120")
# Behaviour programs: a call's time, for every program (past it, `~timeout`); the reference's
# program's calls in all, after which its remaining inputs are `~skipped` (unknown, never
# compared), and the timeouts after which it skips them too.
BEHAVIOUR_PER_CALL_SECONDS = envfloat("BEHAVIOUR_PER_CALL_SECONDS", "0.5")
BEHAVIOUR_TOTAL_SECONDS = envfloat("BEHAVIOUR_TOTAL_SECONDS", "5")
BEHAVIOUR_MAX_TIMEOUTS = envint("BEHAVIOUR_MAX_TIMEOUTS", "3")
# The same two for the samples' and mutants' programs (the candidates'): a candidate stops sooner
# on a task whose calls are slow, and at its first timeout.
BEHAVIOUR_CANDIDATE_TOTAL_SECONDS = envfloat("BEHAVIOUR_CANDIDATE_TOTAL_SECONDS", "1")
BEHAVIOUR_CANDIDATE_MAX_TIMEOUTS = envint("BEHAVIOUR_CANDIDATE_MAX_TIMEOUTS", "1")
for _name, _bound in (
    ("BEHAVIOUR_CANDIDATE_TOTAL_SECONDS", "BEHAVIOUR_TOTAL_SECONDS"),
    ("BEHAVIOUR_CANDIDATE_MAX_TIMEOUTS", "BEHAVIOUR_MAX_TIMEOUTS"),
):
    if not 0 < globals()[_name] <= globals()[_bound]:
        raise ImproperlyConfigured(
            f"{_name}={globals()[_name]:g}: use a number above 0 and at most "
            f"{_bound} ({globals()[_bound]:g})"
        )
# A mutant's check run gets this long, or 20 times its task's first reference run if that is
# longer (the references' first runs go first); a sample's later repeats get
# INSPECT_SAMPLE_WALL_SECONDS once one of its runs reached its clock (a sample that loops forever
# costs RUN_WALL_SECONDS once, then this). Never more than RUN_WALL_SECONDS, which every other
# run keeps. Both are fixed in an inspection's config when it starts (function_runs.
# run_wall_seconds says why samples are not given a clock from the reference).
INSPECT_MUTANT_WALL_SECONDS = envfloat("INSPECT_MUTANT_WALL_SECONDS", "1")
INSPECT_SAMPLE_WALL_SECONDS = envfloat("INSPECT_SAMPLE_WALL_SECONDS", "3")
for _name in ("INSPECT_MUTANT_WALL_SECONDS", "INSPECT_SAMPLE_WALL_SECONDS"):
    if not 0 < globals()[_name] <= RUN_WALL_SECONDS:
        raise ImproperlyConfigured(
            f"{_name}={globals()[_name]:g}: use a number of seconds above 0 and at most "
            f"RUN_WALL_SECONDS ({RUN_WALL_SECONDS:g})"
        )
# weak_tests: the share of non-equivalent mutants the check lets through.
WEAK_TESTS_SURVIVOR_SHARE = envfloat("WEAK_TESTS_SURVIVOR_SHARE", "0.4")
# duplicate: TF-IDF cosine of two prompts, within a task set and across task sets.
DUPLICATE_SIMILARITY = envfloat("DUPLICATE_SIMILARITY", "0.9")
# no_signal, duplicate, answer_leak and anomaly are advisory: listed here, they block too.
ADVISORY_FLAGS_THAT_BLOCK = [
    c for c in env("ADVISORY_FLAGS_THAT_BLOCK", "").split(",") if c.strip()
]

# Terminal tasks (Harbor / Terminal-Bench folders) always run in Docker, whatever
# SANDBOX_BACKEND says: their environment is a Dockerfile.
TERMINAL_REFERENCE_REPEATS = envint("TERMINAL_REFERENCE_REPEATS", "6")
TERMINAL_SAMPLE_REPEATS = envint("TERMINAL_SAMPLE_REPEATS", "1")
TERMINAL_PROBE_REPEATS = envint("TERMINAL_PROBE_REPEATS", "1")
# inspector/detect/terminal_probes.py. In faithful mode every probe also runs in isolated mode,
# so the report says whether isolating the check would defeat it.
TERMINAL_PROBES = [
    p
    for p in env("TERMINAL_PROBES", "nop,reward-file,conftest-hook,trojan-tool,edit-tests").split(
        ","
    )
    if p
]
# Runs at once in one worker process (threads waiting on Docker), and runs per message.
TERMINAL_PARALLEL = envint("TERMINAL_PARALLEL", "4")
TERMINAL_RUNS_PER_MESSAGE = envint("TERMINAL_RUNS_PER_MESSAGE", "24")
# Repository tasks (SWE-bench instances) always run in Docker (workers/sandbox/swe/). Per
# instance: the tests with no fix and with the gold patch, SWE_REFERENCE_REPEATS times each (how
# flakiness shows), each sampled patch SWE_SAMPLE_REPEATS times, each probe of
# inspector/detect/swe_probes.py SWE_PROBE_REPEATS times in the set's mode (SWE_PROBES: their
# names, "drop-hunk" for every drop-hunk-<i>; empty: all), and one leak scan.
SWE_REFERENCE_REPEATS = envint("SWE_REFERENCE_REPEATS", "3")
SWE_SAMPLE_REPEATS = envint("SWE_SAMPLE_REPEATS", "1")
SWE_PROBE_REPEATS = envint("SWE_PROBE_REPEATS", "1")
SWE_PROBES = [p for p in env("SWE_PROBES", "").split(",") if p.strip()]
SWE_PARALLEL = envint("SWE_PARALLEL", "4")
SWE_RUNS_PER_MESSAGE = envint("SWE_RUNS_PER_MESSAGE", "24")
# Networks for image builds and for runs: "none", or a Docker network name where the machine
# allows it (a run honours a task's allow_internet only when TERMINAL_RUN_NETWORK is not none).
TERMINAL_BUILD_NETWORK = env("TERMINAL_BUILD_NETWORK", "none")
TERMINAL_RUN_NETWORK = env("TERMINAL_RUN_NETWORK", "none")
# Answer-graded tasks (questions with a label): each sample's response and the label itself go
# through the set's verifier (workers/sandbox/verifier.py) in the sandbox, with this long for
# each answer; and so do the verifier probes (inspector/detect/answer_probes.py), responses that
# must earn nothing. A message carries this many of a set's verifications (one sandbox start).
ANSWER_PROBES = [
    p
    for p in env(
        "ANSWER_PROBES",
        "several_boxed,candidate_list,scattered_digits,empty_box,text_wrapper,long_response,"
        "wrong_place,first_number,last_candidate",
    ).split(",")
    if p
]
# A verifier probe is one weakness of the set's verifier, shared by every task: one that beats
# at least this share of the tasks (and HARNESS_FINDING_MIN_TASKS) is one finding on the
# inspection (e.g. a last-number fallback fooled on every single-digit label), not a flag each.
ANSWER_HARNESS_FINDING_SHARE = envfloat("ANSWER_HARNESS_FINDING_SHARE", "0.05")
# A samples file of answer-graded questions is streamed into the database: it may be this large
# uncompressed (100,000 questions with 16 responses each are a few GB).
ANSWER_SAMPLES_MAX_BYTES = envint("ANSWER_SAMPLES_MAX_BYTES", str(8 * 1024**3))
ANSWER_PER_ANSWER_SECONDS = envfloat("ANSWER_PER_ANSWER_SECONDS", "2")
ANSWER_RUNS_PER_MESSAGE = envint("ANSWER_RUNS_PER_MESSAGE", "2000")
# A probe that beats at least this share of a set's tasks (and at least MIN tasks) is a finding
# about the harness: reported once on the inspection, not flagged on each task.
HARNESS_FINDING_SHARE = envfloat("HARNESS_FINDING_SHARE", "0.9")
HARNESS_FINDING_MIN_TASKS = envint("HARNESS_FINDING_MIN_TASKS", "3")
# Unpacking an uploaded archive of task folders: beyond these it is refused as hostile.
ARCHIVE_MAX_FILES = envint("ARCHIVE_MAX_FILES", "5000")
ARCHIVE_MAX_BYTES = envint("ARCHIVE_MAX_BYTES", str(200 * 1024 * 1024))
ARCHIVE_MAX_RATIO = envint("ARCHIVE_MAX_RATIO", "100")
# Drift: a sample pass rate that moved between two inspections of a version with a Fisher's
# exact test p-value under this is flagged. Re-inspection: every active task set's latest version
# is inspected again this many hours after its last inspection (0: never; a task set can
# override it on its page); beat checks every REINSPECT_CHECK_MINUTES.
DRIFT_P_VALUE = envfloat("DRIFT_P_VALUE", "0.01")
REINSPECT_EVERY_HOURS = envfloat("REINSPECT_EVERY_HOURS", "24")
REINSPECT_CHECK_MINUTES = envfloat("REINSPECT_CHECK_MINUTES", "5")
CELERY_BEAT_SCHEDULE["reinspect-due"] = {
    "task": "workers.reinspect_due",
    "schedule": REINSPECT_CHECK_MINUTES * 60,
}

# Review: a reviewer's claim on a task lapses after this many minutes; queue page size; a bulk
# action over "everything the filter matches" refuses more tasks than this.
CLAIM_MINUTES = envint("CLAIM_MINUTES", "15")
QUEUE_PAGE_SIZE = envint("QUEUE_PAGE_SIZE", "50")
BULK_MAX_TASKS = envint("BULK_MAX_TASKS", "100000")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
