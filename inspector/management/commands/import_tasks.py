from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from inspector import services
from inspector.formats.humaneval import TaskSetFormatError
from inspector.models import TaskSet


class Command(BaseCommand):
    help = (
        "Import a task set as a new version of NAME: a HumanEval-style JSONL (plain or .gz), a "
        "JSONL of answer-graded questions (task_id, question, answer; or GSM8K's or MATH's own "
        "lines), Harbor / Terminal-Bench task folders (a folder holding one folder per task, "
        "a .zip or a .tar.gz), or a JSONL of SWE-bench instances with --environments."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "tasks",
            metavar="PATH",
            help=(
                "JSONL of tasks (task_id, prompt, canonical_solution, test, entry_point), a "
                "folder / .zip / .tar.gz of task folders, or a JSONL of SWE-bench instances"
            ),
        )
        parser.add_argument(
            "--taskset", required=True, help="task-set name; an existing name gets a new version"
        )
        parser.add_argument(
            "--samples",
            help="JSONL of sampled solutions: task_id and completion (functions) or script "
            "(terminal tasks); SWE-bench predictions (instance_id, model_patch, "
            "model_name_or_path) for repository tasks",
        )
        parser.add_argument(
            "--environments",
            metavar="ARCHIVE",
            help="SWE-bench instances: a .tar.gz / .zip (or a folder) holding a folder per "
            "instance: the repository at base_commit with its .git, and a Dockerfile beside it",
        )
        parser.add_argument(
            "--mode",
            choices=(TaskSet.FAITHFUL, TaskSet.ISOLATED),
            default="",
            help="how terminal tasks run: faithful (as Harbor does, the default) or isolated",
        )
        parser.add_argument(
            "--answer-rule",
            default="",
            help="answer-graded questions: how the final answer is read from a response "
            "(auto, boxed, gsm8k, answer_is, last_number, lenient, contains; given: each sample's own "
            "answer field where it has one; the default auto)",
        )

    def handle(self, *args, **options) -> None:
        tasks_path = Path(options["tasks"])
        samples_path = Path(options["samples"]) if options["samples"] else None
        environments_path = Path(options["environments"]) if options["environments"] else None
        if not tasks_path.exists():
            raise CommandError(f"{tasks_path}: no such file or folder")
        if samples_path and not samples_path.is_file():
            raise CommandError(f"{samples_path}: no such file")
        if environments_path and not environments_path.exists():
            raise CommandError(f"{environments_path}: no such file or folder")
        try:
            with ExitStack() as stack:
                samples = stack.enter_context(samples_path.open("rb")) if samples_path else None
                tasks = None if tasks_path.is_dir() else stack.enter_context(tasks_path.open("rb"))
                version = services.taskset_import(
                    name=options["taskset"],
                    tasks_file=tasks,
                    tasks_folder=tasks_path if tasks_path.is_dir() else None,
                    tasks_name=str(tasks_path),
                    samples_file=samples,
                    samples_name=str(samples_path or ""),
                    environments=environments_path,
                    environments_name=str(environments_path or ""),
                    terminal_mode=options["mode"],
                    answer_rule=options["answer_rule"],
                )
        except TaskSetFormatError as exc:
            raise CommandError(str(exc)) from None
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Imported {version.task_count} tasks and {version.sample_count} samples as {version}."
        )
