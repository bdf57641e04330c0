"""What the platform stores: task sets and their versions, tasks and sampled solutions,
inspections and their sandbox runs, the flags raised on tasks, and the reviewers' audit trail.
Methods here concern one row; workflows over several rows live in services/."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from pathlib import PurePosixPath

from django.conf import settings
from django.db import connections, models, router, transaction
from django.db.models import ExpressionWrapper, Q
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone

from inspector.detect.codes import combined_severity


class ClaimedByOther(Exception):
    """A review action on a task another reviewer is reviewing (their claim has not lapsed)."""


def rows_update(objs: list, fields: tuple[str, ...] | list[str], *, batch_size: int = 2000) -> int:
    """Write `fields` of each of `objs` (instances of one model, each with a primary key) back
    to its row: one UPDATE statement run for every row (executemany), where Django's
    bulk_update builds a CASE expression per field and row (0.5 s of Python for 164 tasks with
    ten fields, the most of an analysis). Like bulk_update it sends no signals. Returns the
    rows written."""
    if not objs:
        return 0
    model = type(objs[0])
    connection = connections[router.db_for_write(model)]
    concrete = [model._meta.get_field(name) for name in fields]
    return values_update(
        model,
        fields,
        (
            [field.get_db_prep_save(getattr(obj, field.attname), connection) for field in concrete]
            + [obj.pk]
            for obj in objs
        ),
        batch_size=batch_size,
    )


def values_update(model, fields, rows, *, batch_size: int = 2000) -> int:
    """Write plain values to rows of `model` (as `rows_update`, without model instances): each
    of `rows` is the values of `fields` as the database takes them (ints, floats, strings,
    booleans, None; a foreign key's id), then the row's primary key. Returns the rows written."""
    db = router.db_for_write(model)
    connection = connections[db]
    meta = model._meta
    quote = connection.ops.quote_name
    sql = "UPDATE {} SET {} WHERE {} = %s".format(
        quote(meta.db_table),
        ", ".join(f"{quote(meta.get_field(name).column)} = %s" for name in fields),
        quote(meta.pk.column),
    )
    rows = list(rows)
    with transaction.atomic(using=db, savepoint=False), connection.cursor() as cursor:
        for start in range(0, len(rows), batch_size):
            cursor.executemany(sql, rows[start : start + batch_size])
    return len(rows)


def lease_from_now(span: timedelta):
    """A lease that runs out `span` from now on the database's clock, for `lease_expires_at`.
    The database's clock, not the host's: leases are written by workers and read by sweepers on
    other hosts, whose clocks may differ (a sweeper an hour ahead would take back every run
    under way; a worker an hour behind would write leases already run out)."""
    return ExpressionWrapper(Now() + span, output_field=models.DateTimeField())


def lease_ran_out() -> Q:
    """Runs whose lease ran out, on the database's clock (see lease_from_now)."""
    return Q(lease_expires_at__lt=Now())


@contextlib.contextmanager
def runs_transaction():
    """A transaction that writes runs (a worker's records, a hand-back, a sweep's take-back).
    On PostgreSQL the server ends a session left idle in it for DB_IDLE_IN_TRANSACTION_SECONDS:
    a worker host cut off the network between a write and its commit would otherwise hold those
    rows' locks until the server noticed the dead peer (hours, by TCP's defaults), and every
    sweeper and worker touching the rows would wait on it."""
    with transaction.atomic():
        connection = connections[router.db_for_write(Run)]
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('idle_in_transaction_session_timeout', %s, true)",
                    [str(int(settings.DB_IDLE_IN_TRANSACTION_SECONDS * 1000))],
                )
        yield


def claim_lapse():
    """Claims made before this moment have lapsed (CLAIM_MINUTES)."""
    return timezone.now() - timezone.timedelta(minutes=settings.CLAIM_MINUTES)


def file_name(path: str) -> str:
    """The last part of a path, "HumanEval.jsonl.gz" of "/srv/in/HumanEval.jsonl.gz"."""
    return PurePosixPath(path.replace("\\", "/")).name


class TaskSet(models.Model):
    # How terminal tasks run: `faithful` as Harbor runs them (agent and check share a container),
    # `isolated` with the check in a fresh container that gets only the agent's work folder.
    FAITHFUL = "faithful"
    ISOLATED = "isolated"
    MODE_CHOICES = [(FAITHFUL, "faithful (as Harbor runs it)"), (ISOLATED, "isolated check")]

    name = models.CharField(max_length=200, unique=True)
    terminal_mode = models.CharField(max_length=10, choices=MODE_CHOICES, default=FAITHFUL)
    # How answer-graded tasks' responses are read (workers/sandbox/verifier.py RULES): where
    # the final answer is taken from, as the set's RL reward takes it.
    answer_rule = models.CharField(max_length=20, default="auto")
    # Scheduled re-inspection: an inactive set is never re-inspected; `reinspect_hours` overrides
    # REINSPECT_EVERY_HOURS for this set (0: never).
    active = models.BooleanField(default=True)
    reinspect_hours = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("inspector-taskset", args=(self.name,))

    def latest_version(self) -> TaskSetVersion | None:
        return self.versions.order_by("-number").first()

    @property
    def reinspect_every_hours(self) -> float:
        """Hours between scheduled inspections of the latest version; 0 means never."""
        if not self.active:
            return 0.0
        if self.reinspect_hours is not None:
            return self.reinspect_hours
        return settings.REINSPECT_EVERY_HOURS


class TaskSetVersion(models.Model):
    taskset = models.ForeignKey(TaskSet, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tasks_filename = models.CharField(max_length=300, blank=True)
    samples_filename = models.CharField(max_length=300, blank=True)
    # Repository tasks: the archive of environment folders uploaded with the instances.
    environments_filename = models.CharField(max_length=300, blank=True)
    task_count = models.PositiveIntegerField(default=0)
    sample_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ("taskset__name", "-number")
        constraints = [
            models.UniqueConstraint(fields=("taskset", "number"), name="version_number_unique")
        ]

    def __str__(self) -> str:
        return f"{self.taskset.name} v{self.number}"

    def latest_inspection(self) -> Inspection | None:
        return self.inspections.order_by("-id").first()

    @property
    def uploaded_files(self) -> list[str]:
        """The names of the files the version was uploaded from, as their uploader knows them:
        without the folders a command read them from on the server (versions imported before
        the import kept names only may still hold a path)."""
        names = (self.tasks_filename, self.environments_filename, self.samples_filename)
        return [file_name(n) for n in names if n]


class Task(models.Model):
    ACTIVE = "active"
    QUARANTINED = "quarantined"
    STATUS_CHOICES = [(ACTIVE, "active"), (QUARANTINED, "quarantined")]
    FUNCTION = "function"
    TERMINAL = "terminal"
    ANSWER = "answer"
    REPO = "repo"
    KIND_CHOICES = [
        (FUNCTION, "function (HumanEval-style)"),
        (TERMINAL, "terminal (task folder)"),
        (ANSWER, "answer-graded (question and label)"),
        (REPO, "repository (SWE-bench instance)"),
    ]

    version = models.ForeignKey(TaskSetVersion, on_delete=models.CASCADE, related_name="tasks")
    task_id = models.CharField(max_length=500)
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=10, choices=KIND_CHOICES, default=FUNCTION)
    # For terminal tasks: the instruction, the reference's entry script and the check's entry
    # script; the whole folder is in `source`. For answer-graded tasks: the question and its
    # label (the reference answer as uploaded); `test` and `entry_point` stay empty. For
    # repository tasks: the problem statement, the gold patch and the test_patch; the instance
    # (its line as uploaded in source["line"]) and its environment are in `source`, the repo in
    # `domain`, base_commit, version, hints and dates in `metadata`.
    prompt = models.TextField()
    canonical_solution = models.TextField()
    test = models.TextField()
    entry_point = models.CharField(max_length=200)
    domain = models.CharField(max_length=200, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # The uploaded line exactly as read: the manifest writes it back unchanged.
    source = models.JSONField()
    content_hash = models.CharField(max_length=64, db_index=True)
    # Answer-graded tasks: the label's type (number, expression, choice, text; empty: inferred)
    # and the label a reviewer put in place of the uploaded one (empty: none), which the
    # manifest carries; the audit trail holds who and why.
    answer_type = models.CharField(max_length=20, blank=True)
    corrected_label = models.TextField(blank=True)
    # Repository tasks: the FAIL_TO_PASS and PASS_TO_PASS test ids (lists, however the upload
    # wrote them), which the analysis and the task page read without the environment's files.
    fail_to_pass = models.JSONField(default=list, blank=True)
    pass_to_pass = models.JSONField(default=list, blank=True)
    # Static findings that need no run (terminal tasks): code, file, line, message.
    lint = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=12, choices=STATUS_CHOICES, default=ACTIVE)
    quarantine_reason = models.TextField(blank=True)
    # Kept in step with the flags of the latest finished inspection, so the queue sorts and
    # filters on indexed columns of this table alone.
    last_inspection = models.ForeignKey(
        "Inspection", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    severity = models.PositiveSmallIntegerField(default=0)
    open_flags = models.CharField(max_length=300, blank=True)
    runs_count = models.PositiveIntegerField(default=0)
    reference_pass_rate = models.FloatField(null=True, blank=True)
    sample_pass_rate = models.FloatField(null=True, blank=True)
    # From the latest inspection's deeper analysis: p(1-p) of the sample pass rate, the share of
    # the reference's mutants the check lets through, and how many behaviour groups the samples
    # form.
    learnability = models.FloatField(null=True, blank=True)
    survivor_share = models.FloatField(null=True, blank=True)
    cluster_count = models.PositiveIntegerField(null=True, blank=True)
    # The arguments every solution of the task is called with to compare behaviours.
    behaviour_inputs = models.JSONField(default=list, blank=True)
    # Review: whether a flag of the latest inspection still awaits a reviewer's decision; who is
    # assigned the task; who is reviewing it right now (a claim lapses after CLAIM_MINUTES).
    pending_review = models.BooleanField(default=False)
    # Whether the task belongs to its set's latest version (kept by the import), so the queue
    # filters and orders on one indexed table.
    in_latest_version = models.BooleanField(default=True)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("version", "position")
        constraints = [
            models.UniqueConstraint(fields=("version", "task_id"), name="task_id_unique_in_version")
        ]
        indexes = [
            models.Index(fields=("version", "-severity", "id"), name="task_queue_idx"),
            models.Index(fields=("-severity", "id"), name="task_severity_idx"),
            # The review queue: each set's latest version, by its filters and sort keys.
            models.Index(
                fields=("-severity", "id"),
                condition=models.Q(in_latest_version=True),
                name="task_latest_queue_idx",
            ),
            models.Index(
                fields=("-severity", "id"),
                condition=models.Q(in_latest_version=True, pending_review=True),
                name="task_latest_pending_idx",
            ),
            models.Index(
                fields=("status", "-severity", "id"),
                condition=models.Q(in_latest_version=True),
                name="task_latest_status_idx",
            ),
            models.Index(
                fields=("domain", "-severity", "id"),
                condition=models.Q(in_latest_version=True),
                name="task_latest_domain_idx",
            ),
            models.Index(
                fields=("sample_pass_rate", "id"),
                condition=models.Q(in_latest_version=True),
                name="task_latest_samples_idx",
            ),
            models.Index(
                fields=("reference_pass_rate", "id"),
                condition=models.Q(in_latest_version=True),
                name="task_latest_reference_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.task_id

    def get_absolute_url(self) -> str:
        return reverse("inspector-task", args=(self.pk,))

    @property
    def open_flag_list(self) -> list[str]:
        return [c for c in self.open_flags.split(",") if c]

    def claimed_by_other(self, user) -> bool:
        """Someone else claimed the task within the last CLAIM_MINUTES."""
        if self.claimed_by_id is None or self.claimed_by_id == getattr(user, "pk", None):
            return False
        return self.claimed_at is not None and self.claimed_at > claim_lapse()

    def ensure_free_for(self, user) -> None:
        """Raise ClaimedByOther when another reviewer is reviewing the task. Every review
        action calls it, whichever door (page, API) it came through; the system (None) may act."""
        if user is not None and self.claimed_by_other(user):
            raise ClaimedByOther(
                f"{self.claimed_by.get_username()} is reviewing {self.task_id}; "
                "their claim lapses after a few minutes without activity."
            )

    def claim(self, *, by) -> bool:
        """Claim the task for `by` unless another reviewer holds it; True when `by` holds it."""
        taken = (
            Task.objects.filter(pk=self.pk)
            .filter(
                models.Q(claimed_by__isnull=True)
                | models.Q(claimed_by=by)
                | models.Q(claimed_at__lt=claim_lapse())
            )
            .update(claimed_by=by, claimed_at=timezone.now())
        )
        self.refresh_from_db(fields=("claimed_by", "claimed_at"))
        return bool(taken)

    def unclaim(self, *, by) -> None:
        Task.objects.filter(pk=self.pk, claimed_by=by).update(claimed_by=None, claimed_at=None)

    @transaction.atomic
    def assign(self, *, by, to) -> ReviewEvent:
        self.ensure_free_for(by)
        self.assignee = to
        self.save(update_fields=("assignee",))
        return ReviewEvent.objects.create(
            task=self,
            actor=by,
            action=ReviewEvent.ASSIGN,
            note=f"to {to.get_username()}" if to else "unassigned",
        )

    def comment(self, *, by, text: str) -> ReviewEvent:
        if not text.strip():
            raise ValueError("A comment needs some text.")
        return ReviewEvent.objects.create(
            task=self, actor=by, action=ReviewEvent.COMMENT, note=text.strip()
        )

    @transaction.atomic
    def quarantine(self, *, by, reason: str) -> ReviewEvent:
        if not reason.strip():
            raise ValueError("A reason is required to quarantine a task.")
        self.ensure_free_for(by)
        self.status = Task.QUARANTINED
        self.quarantine_reason = reason.strip()
        self.save(update_fields=("status", "quarantine_reason"))
        return ReviewEvent.objects.create(
            task=self, actor=by, action=ReviewEvent.QUARANTINE, note=self.quarantine_reason
        )

    @transaction.atomic
    def release(self, *, by, note: str = "") -> ReviewEvent:
        self.ensure_free_for(by)
        self.status = Task.ACTIVE
        self.quarantine_reason = ""
        self.save(update_fields=("status", "quarantine_reason"))
        return ReviewEvent.objects.create(
            task=self, actor=by, action=ReviewEvent.RELEASE, note=note.strip()
        )

    @property
    def label(self) -> str:
        """An answer-graded task's label in force: the reviewer's correction, else the upload's."""
        return self.corrected_label or self.canonical_solution

    @transaction.atomic
    def relabel(self, *, by, label: str, reason: str) -> ReviewEvent:
        """Put `label` in place of the uploaded label (the uploaded one again: undo), with a
        reason, audited like a quarantine."""
        if self.kind != Task.ANSWER:
            raise ValueError("Only answer-graded tasks have a label to correct.")
        label, reason = label.strip(), reason.strip()
        if not label:
            raise ValueError("A new label is required.")
        if not reason:
            raise ValueError("A reason is required to relabel a task.")
        if len(label) > 10_000:
            raise ValueError("A label is at most 10,000 characters.")
        self.ensure_free_for(by)
        before = self.label
        self.corrected_label = "" if label == self.canonical_solution else label
        self.save(update_fields=("corrected_label",))
        return ReviewEvent.objects.create(
            task=self,
            actor=by,
            action=ReviewEvent.RELABEL,
            note=f"{before!r} -> {label!r}: {reason}",
        )

    def refresh_open_flags(self) -> None:
        """Recompute the queue columns from the flags of the task's latest inspection."""
        blocking = self.flags.filter(
            inspection_id=self.last_inspection_id, status__in=Flag.BLOCKING
        ).order_by("-severity", "code")
        codes = [f.code for f in blocking]
        self.severity = combined_severity([f.severity for f in blocking])
        self.open_flags = ",".join(codes)
        self.pending_review = any(f.status == Flag.OPEN for f in blocking)
        self.save(update_fields=("severity", "open_flags", "pending_review"))


class Sample(models.Model):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="samples")
    sample_id = models.CharField(max_length=200)
    position = models.PositiveIntegerField()
    completion = models.TextField()
    model = models.CharField(max_length=200, blank=True)
    # Answer-graded tasks: the final answer the sample's source extracted (its `completion` is
    # the whole response); empty when not given.
    answer = models.TextField(blank=True)

    class Meta:
        ordering = ("task", "position")
        constraints = [
            models.UniqueConstraint(fields=("task", "sample_id"), name="sample_id_unique_in_task")
        ]

    def __str__(self) -> str:
        return f"{self.task.task_id} {self.sample_id}"


class Inspection(models.Model):
    QUEUED = "queued"
    RUNNING = "running"
    ANALYSING = "analysing"
    FINISHED = "finished"
    FAILED = "failed"
    STATUS_CHOICES = [(s, s) for s in (QUEUED, RUNNING, ANALYSING, FINISHED, FAILED)]
    ACTIVE = (QUEUED, RUNNING, ANALYSING)  # not ended yet: one at a time per version

    version = models.ForeignKey(
        TaskSetVersion, on_delete=models.CASCADE, related_name="inspections"
    )
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=QUEUED)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    runs_total = models.PositiveIntegerField(default=0)
    runs_done = models.PositiveIntegerField(default=0)
    # Function tasks' references go first: every run but the references' first repeat is held
    # back until those are recorded, because their times set the samples' and mutants' clocks
    # (function_runs.run_wall_seconds). True while runs are held back.
    runs_held = models.BooleanField(default=False)
    # When its runs were created. inspection_start leaves it empty and a worker's
    # inspection_prepare sets it, in the transaction that creates the runs: until then the
    # inspection is preparing (queued, no runs yet). An inspection made some other way is
    # prepared when it is made.
    prepared_at = models.DateTimeField(null=True, blank=True, default=timezone.now)
    # The worker preparing it ("" before one takes it, or after a sweep took it back from a
    # worker that stopped showing signs of life).
    preparer = models.CharField(max_length=200, blank=True)
    # The repeat counts, limits and sandbox backend this inspection ran with.
    config = models.JSONField(default=dict)
    error = models.TextField(blank=True)
    # Findings about the harness rather than any one task (a probe that beats nearly every
    # task of the set): reported once here, not as a flag on each task.
    findings = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ("-id",)

    def __str__(self) -> str:
        return f"inspection #{self.pk} of {self.version}"

    @property
    def is_active(self) -> bool:
        return self.status in Inspection.ACTIVE

    @property
    def is_preparing(self) -> bool:
        """Queued, its runs not created yet (a worker's inspection_prepare makes them)."""
        return self.status == Inspection.QUEUED and self.prepared_at is None

    @property
    def phase(self) -> str:
        """What it is doing, as shown: "preparing" while its runs are being made, else its
        status."""
        return "preparing" if self.is_preparing else self.status

    @property
    def percent(self) -> int:
        if self.is_preparing:
            return 0
        return int(100 * self.runs_done / self.runs_total) if self.runs_total else 100

    def seconds_left(self, now=None) -> float | None:
        """An estimate of the seconds until the last run is done, from the pace so far (runs
        done since it started); None when there is nothing to go on yet (not started, no run
        done) or nothing left."""
        if self.status != Inspection.RUNNING or self.started_at is None or not self.runs_done:
            return None
        left = self.runs_total - self.runs_done
        if left <= 0:
            return None
        elapsed = ((now or timezone.now()) - self.started_at).total_seconds()
        if elapsed <= 0:
            return None
        return left * elapsed / self.runs_done

    def progress(self, now=None) -> dict:
        """What a progress bar shows: status, runs, percent and the time left, as plain data."""
        left = self.seconds_left(now)
        return {
            "id": self.pk,
            "status": self.status,
            "preparing": self.is_preparing,
            "phase": self.phase,
            "runs_done": self.runs_done,
            "runs_total": self.runs_total,
            "percent": self.percent,
            "seconds_left": None if left is None else round(left, 1),
            "left": duration_words(left) if left is not None else "",
            "error": self.error,
        }


def duration_words(seconds: float) -> str:
    """'about 40 s left', 'about 3 min left', 'about 2 h 5 min left'."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"about {max(seconds, 1)} s left"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min left"
    return f"about {minutes // 60} h {minutes % 60} min left"


class Run(models.Model):
    REFERENCE = "reference"
    SAMPLE = "sample"
    PROBE = "probe"
    # A mutant of the reference run through the check (`probe` holds its id, `detail` its code
    # and diff); a behaviour run calls one solution on the task's behaviour inputs (`probe`
    # names the solution: "reference", "sample:<sample id>" or "mutant:<mutant id>").
    MUTANT = "mutant"
    BEHAVIOUR = "behaviour"
    # Repository tasks: the instance's tests with no fix (the base commit with only its
    # test_patch), and the leak scan (is the gold's result in the repository's history?).
    NOFIX = "nofix"
    LEAK_SCAN = "leak_scan"
    KIND_CHOICES = [(k, k) for k in (REFERENCE, SAMPLE, PROBE, MUTANT, BEHAVIOUR, NOFIX, LEAK_SCAN)]

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    STATUS_CHOICES = [(s, s) for s in (QUEUED, RUNNING, DONE)]

    inspection = models.ForeignKey(Inspection, on_delete=models.CASCADE, related_name="runs")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="runs")
    kind = models.CharField(max_length=10, choices=KIND_CHOICES)
    sample = models.ForeignKey(Sample, null=True, blank=True, on_delete=models.CASCADE)
    probe = models.CharField(max_length=40, blank=True)
    repeat = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=8, choices=STATUS_CHOICES, default=QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    outcome = models.CharField(max_length=20, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    duration = models.FloatField(null=True, blank=True)
    stdout_tail = models.TextField(blank=True)
    stderr_tail = models.TextField(blank=True)
    error = models.TextField(blank=True)
    # Terminal tasks: the mode the run used, the reward the check wrote, and per stage (build,
    # agent, verifier) its exit code, seconds and output tail.
    mode = models.CharField(max_length=10, blank=True)
    reward = models.FloatField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("id",)
        indexes = [
            models.Index(fields=("inspection", "status"), name="run_progress_idx"),
            models.Index(fields=("status", "lease_expires_at"), name="run_lease_idx"),
            models.Index(fields=("task", "inspection"), name="run_task_idx"),
        ]

    def __str__(self) -> str:
        return f"run #{self.pk} {self.solution_label} of {self.task_id}"

    @property
    def solution_key(self) -> str:
        if self.kind == Run.SAMPLE:
            return self.sample.sample_id
        if self.kind in (Run.PROBE, Run.MUTANT, Run.BEHAVIOUR):
            return self.probe
        return Run.REFERENCE

    @property
    def solution_label(self) -> str:
        if self.kind == Run.SAMPLE:
            return f"sample {self.sample.sample_id}"
        if self.kind == Run.PROBE:
            return f"{self.probe} probe"
        if self.kind == Run.MUTANT:
            return f"mutant {self.probe}"
        if self.kind == Run.BEHAVIOUR:
            return f"behaviour of {self.probe}"
        if self.kind == Run.NOFIX:
            return "no fix"
        if self.kind == Run.LEAK_SCAN:
            return "leak scan"
        return "reference"

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    @property
    def timed_out(self) -> bool:
        return self.outcome == "timed_out"


class Flag(models.Model):
    OPEN = "open"
    CONFIRMED = "confirmed"
    DISMISSED = "dismissed"
    STATUS_CHOICES = [(s, s) for s in (OPEN, CONFIRMED, DISMISSED)]
    # A flag keeps its task out of the manifest until a reviewer dismisses it.
    BLOCKING = (OPEN, CONFIRMED)

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="flags")
    inspection = models.ForeignKey(Inspection, on_delete=models.CASCADE, related_name="flags")
    code = models.CharField(max_length=30)
    severity = models.PositiveSmallIntegerField()
    confidence = models.FloatField(default=1.0)
    explanation = models.TextField()
    evidence_run_ids = models.JSONField(default=list)
    # What a reviewer judges the flag by besides runs: a surviving mutant's diff and an input
    # where it differs, one representative per sample group, the duplicate task, the leaked line.
    evidence = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=OPEN)
    note = models.TextField(blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-severity", "code")
        constraints = [
            models.UniqueConstraint(
                fields=("inspection", "task", "code"), name="flag_once_per_inspection"
            )
        ]
        indexes = [models.Index(fields=("code", "status"), name="flag_code_idx")]

    def __str__(self) -> str:
        return f"{self.code} on {self.task_id}"

    @transaction.atomic
    def confirm(self, *, by, note: str = "") -> ReviewEvent:
        return self._review(by=by, status=Flag.CONFIRMED, note=note, action=ReviewEvent.CONFIRM)

    @transaction.atomic
    def dismiss(self, *, by, note: str) -> ReviewEvent:
        if not note.strip():
            raise ValueError("A note is required to dismiss a flag: say why it is not a defect.")
        return self._review(by=by, status=Flag.DISMISSED, note=note, action=ReviewEvent.DISMISS)

    def _review(self, *, by, status: str, note: str, action: str) -> ReviewEvent:
        self.task.ensure_free_for(by)
        self.status = status
        self.note = note.strip()
        self.reviewed_by = by
        self.reviewed_at = timezone.now()
        self.save(update_fields=("status", "note", "reviewed_by", "reviewed_at"))
        self.task.refresh_open_flags()
        return ReviewEvent.objects.create(
            task=self.task, actor=by, action=action, flag=self, note=self.note
        )


class ReviewEvent(models.Model):
    """The audit trail: who did what to a task, and when."""

    CONFIRM = "confirm_flag"
    DISMISS = "dismiss_flag"
    QUARANTINE = "quarantine"
    RELEASE = "release"
    ASSIGN = "assign"
    NEW_VERSION = "new_version"
    COMMENT = "comment"
    RELABEL = "relabel"
    ACTION_CHOICES = [
        (COMMENT, "commented"),
        (CONFIRM, "confirmed a flag"),
        (DISMISS, "dismissed a flag"),
        (QUARANTINE, "quarantined"),
        (RELEASE, "released"),
        (ASSIGN, "assigned"),
        (NEW_VERSION, "uploaded a new version"),
        (RELABEL, "relabeled"),
    ]

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=20, choices=ACTION_CHOICES)
    flag = models.ForeignKey(Flag, null=True, blank=True, on_delete=models.SET_NULL)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.get_action_display()} {self.task_id}"


class SavedFilter(models.Model):
    """A reviewer's named queue filter: the query string of the queue's URL."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_filters"
    )
    name = models.CharField(max_length=100)
    query = models.CharField(max_length=2000)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("name",)
        constraints = [
            models.UniqueConstraint(fields=("user", "name"), name="saved_filter_name_unique")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"

    def get_absolute_url(self) -> str:
        return reverse("inspector-queue") + ("?" + self.query if self.query else "")


class ApiToken(models.Model):
    """A bearer token for the JSON API, acting as its user (with the user's roles). Only a hash
    is stored: the token itself is shown once, when it is created."""

    PREFIX_LENGTH = 8

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=PREFIX_LENGTH, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…, {self.user})"

    @staticmethod
    def _hash(key: str) -> str:
        import hashlib

        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(cls, *, user, name: str) -> tuple[ApiToken, str]:
        """A new token for `user`; returns it and the key, which is never shown again."""
        import secrets

        key = "ei_" + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user,
            name=name.strip()[:100] or "token",
            prefix=key[3 : 3 + cls.PREFIX_LENGTH],
            key_hash=cls._hash(key),
        )
        return token, key

    @classmethod
    def authenticate(cls, key: str) -> ApiToken | None:
        """The live token with this key, marking it used; None for an unknown or revoked one."""
        token = (
            cls.objects.select_related("user")
            .filter(key_hash=cls._hash(key), revoked_at__isnull=True, user__is_active=True)
            .first()
        )
        if token is not None:
            now = timezone.now()
            if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
                cls.objects.filter(pk=token.pk).update(last_used_at=now)
        return token

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=("revoked_at",))
