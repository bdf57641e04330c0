from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from inspector import services
from inspector.formats.humaneval import TaskSetFormatError


class Command(BaseCommand):
    help = "Import a HumanEval-style task set (JSONL, plain or .gz) as a new version of NAME."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "tasks_file",
            help="JSONL of tasks: task_id, prompt, canonical_solution, test, entry_point",
        )
        parser.add_argument(
            "--taskset", required=True, help="task-set name; an existing name gets a new version"
        )
        parser.add_argument("--samples", help="JSONL of sampled solutions: task_id, completion")

    def handle(self, *args, **options) -> None:
        tasks_path = Path(options["tasks_file"])
        samples_path = Path(options["samples"]) if options["samples"] else None
        for path in filter(None, (tasks_path, samples_path)):
            if not path.is_file():
                raise CommandError(f"{path}: no such file")
        samples = samples_path.open("rb") if samples_path else None
        try:
            with tasks_path.open("rb") as tasks:
                version = services.taskset_import(
                    name=options["taskset"],
                    tasks_file=tasks,
                    tasks_name=str(tasks_path),
                    samples_file=samples,
                    samples_name=str(samples_path or ""),
                )
        except TaskSetFormatError as exc:
            raise CommandError(str(exc)) from None
        except services.ServiceError as exc:
            raise CommandError(str(exc)) from None
        finally:
            if samples:
                samples.close()
        self.stdout.write(
            f"Imported {version.task_count} tasks and {version.sample_count} samples as {version}."
        )
