"""Benchmark: terminal tasks (Harbor task folders) on the platform against harbor 0.26.0, measured
in one run on this machine on the same task folders (see ../shared/PEERS.md).

Rows, at total concurrency N (default 4):
- harbor `oracle` and harbor `nop` (`harbor run -e docker -n N`), each twice: with this machine's
  offline overlay only, and with that overlay plus `init: true` and `stop_grace_period: 2s` (PEERS.md:
  the task containers ignore SIGTERM, so `docker compose down` otherwise waits 10 s per trial).
  Wall clock of the harbor process; trials and errored trials from jobs/NAME/result.json and each
  trial's result.json. An errored trial (failed build, missing reward file) counts as reward 0 here;
  harbor leaves it out of its own mean;
- the platform: `manage.py import_tasks FOLDER --taskset NAME`, one Celery worker process
  (`-c 1`, TERMINAL_PARALLEL=N, SANDBOX_BACKEND=docker) on a fresh INSPECTOR_DATA_DIR, and the wall
  clock of `manage.py inspect NAME --wait`; runs and outcomes read from its database afterwards.
  Its default inspection runs each reference several times plus adversarial probes, so it is
  compared by runs per minute. --like-for-like adds a row with one reference run and the nop probe
  per task only (TERMINAL_REFERENCE_REPEATS=1, TERMINAL_PROBES=nop).

How harbor runs here, with nothing reaching past loopback:
- bin/setup-harbor installs it (.venv-harbor, Python 3.12), the Docker Compose v2 plugin
  (var/docker-config/cli-plugins) and a `docker` guard (var/harbor-bin/docker) that refuses pulls;
- HARBOR_TELEMETRY=0 (harbor/telemetry.py: otherwise each command and job posts an event),
  LITELLM_LOCAL_MODEL_COST_MAP=True (else litellm fetches its cost map at import), COMPOSE_BAKE=false;
- the harbor process runs in an empty network namespace (`unshare --net`): the docker CLI reaches
  dockerd over its Unix socket, anything else it tries fails locally;
- the offline overlay (`--extra-docker-compose`) gives the main service `network_mode: none` and
  builds with `build.network: none`: this dockerd runs with --bridge=none, where a Dockerfile RUN
  step fails with "network bridge not found" in the default build network;
- harbor runs on a copy of the task folders in which `allow_internet = false` lines are dropped:
  for such a task harbor 0.26.0 wants its egress-control sidecar (images pulled from a registry),
  and without it raises in Trial.__init__, which aborts the whole job, not just that trial. The
  overlay keeps every task offline anyway. The platform reads the original folders.

Cold image caches (--cold, issue 15's terms): before harbor's oracle row of each overlay and
before each platform row, every image either side built is removed (harbor's `hb__*`, the
platform's `inspector-task:*`) with the engine's build cache (`docker builder prune -af`) and
dangling layers, so each side builds its task images from the base image, the one image both
Dockerfiles start FROM (`inspector-sandbox:bookworm`, built locally by bin/docker-up: there is no
registry to pull it from, so it is kept). Harbor's nop row after its oracle row then finds the
images its oracle row built, as the platform's later runs find the images its first runs built.

Run: .venv/bin/python bench/terminal.py [--tasks inspector/demo/terminal] [--concurrency 4]
     [--skip-harbor] [--skip-platform] [--like-for-like] [--cold] [--keep]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from humaneval import manage, start_worker, stop  # noqa: E402  (the platform's bench helpers)

DOCKER_CONFIG = ROOT / "var" / "docker-config"
GUARD_DIR = ROOT / "var" / "harbor-bin"
HARBOR_TIMEOUT_S = 1800
OFFLINE_OVERLAY = """\
# This machine's dockerd runs with --bridge=none and no registry is reachable.
services:
  main:
    network_mode: none
    build:
      network: none
"""
FAST_OVERLAY = (
    OFFLINE_OVERLAY
    + """\
    # PEERS.md: the container ignores SIGTERM; with an init and a short grace period
    # `docker compose down` does not wait 10 s.
    init: true
    stop_grace_period: 2s
"""
)
ALLOW_INTERNET_FALSE = re.compile(r"^\s*allow_internet\s*=\s*false\s*(#.*)?$", re.M | re.I)
# Outcomes of platform runs that are verdicts on the solution; anything else is an error.
VERDICTS = {"passed", "failed", "timed_out"}
# The platform's runs, read through its ORM after the inspection (works on any DATABASE_URL).
DB_SCRIPT = """
import json
from collections import Counter
from inspector.models import Flag, Inspection, Run
insp = Inspection.objects.order_by("-id").first()
runs = list(Run.objects.filter(inspection=insp).values_list(
    "kind", "probe", "mode", "status", "outcome", "duration", "task__task_id"))
print(json.dumps({
    "inspection": insp.pk,
    "status": insp.status,
    "runs_total": insp.runs_total,
    "runs_done": insp.runs_done,
    "runs": len(runs),
    "done": sum(1 for r in runs if r[3] == "done"),
    "outcomes": sorted(Counter(
        f"{k}{'/' + p if p else ''}{'/' + m if m else ''} {o or s}"
        for k, p, m, s, o, *_ in runs).items()),
    "by_outcome": sorted(Counter(o or s for _, _, _, s, o, *_ in runs).items()),
    "sandbox_s": sum(d or 0 for *_, d, _ in runs),
    "flags": sorted({(t, c) for t, c in Flag.objects.filter(inspection=insp).values_list(
        "task__task_id", "code")}),
    "findings": [f.get("explanation", "") for f in insp.findings],
}))
"""


@dataclass
class Row:
    name: str
    seconds: float = 0.0
    runs: int = 0
    errors: int = 0
    notes: list[str] = field(default_factory=list)
    error: str = ""
    # harbor: task -> (reward counting an error as 0, error type or "")
    per_task: dict[str, tuple[float, str]] = field(default_factory=dict)

    @property
    def per_minute(self) -> float:
        return 60 * self.runs / self.seconds if self.seconds else 0.0


# --- harbor -------------------------------------------------------------------------------------


def harbor_executable() -> Path:
    """bin/setup-harbor installs what is missing (quiet otherwise) and prints harbor's path."""
    done = subprocess.run(
        [str(ROOT / "bin" / "setup-harbor")], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"bin/setup-harbor failed:\n{done.stdout}\n{done.stderr}")
    if done.stderr.strip():
        print(done.stderr.strip())
    return Path(done.stdout.strip().splitlines()[-1])


def harbor_env() -> dict[str, str]:
    return {
        **os.environ,
        "DOCKER_CONFIG": str(DOCKER_CONFIG),
        "PATH": f"{GUARD_DIR}{os.pathsep}{os.environ.get('PATH', '')}",
        "HARBOR_TELEMETRY": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "COMPOSE_BAKE": "false",
        "PYTHONUNBUFFERED": "1",
    }


def isolating_prefix() -> list[str]:
    """`unshare --net` when it works here (it needs root or user namespaces), else nothing."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "--net", "true"], capture_output=True).returncode == 0:
        return [unshare, "--net", "--"]
    print("note: `unshare --net` is not available; harbor runs in the host's network namespace "
          "(its telemetry is still off: HARBOR_TELEMETRY=0)")  # fmt: skip
    return []


def copy_tasks_for_harbor(src: Path, dst: Path) -> list[str]:
    """Copy the task folders, dropping `allow_internet = false` lines; return the tasks changed."""
    shutil.copytree(src, dst, symlinks=True)
    changed = []
    for toml in sorted(dst.glob("*/task.toml")):
        text = toml.read_text()
        new = ALLOW_INTERNET_FALSE.sub("", text)
        if new != text:
            toml.write_text(new)
            changed.append(toml.parent.name)
    return changed


def run_harbor(
    harbor: Path, prefix: list[str], tasks: Path, jobs: Path, name: str, agent: str,
    conc: int, overlay: Path,
) -> Row:  # fmt: skip
    row = Row(name)
    job_name = name.replace(" ", "-").replace(",", "").replace("+", "")
    argv = [*prefix, str(harbor), "run", "-p", str(tasks), "-a", agent, "-e", "docker"]
    argv += ["-o", str(jobs), "--job-name", job_name, "-y", "-n", str(conc)]
    argv += ["--extra-docker-compose", str(overlay)]
    log = jobs / f"{job_name}.log"
    start = time.monotonic()
    with log.open("wb") as out:
        try:
            done = subprocess.run(
                argv, cwd=ROOT, env=harbor_env(), stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, timeout=HARBOR_TIMEOUT_S,
            )  # fmt: skip
            rc = done.returncode
        except subprocess.TimeoutExpired:
            rc = None
    row.seconds = time.monotonic() - start
    job_dir = jobs / job_name
    result = job_dir / "result.json"
    if rc is None or not result.exists():
        tail = log.read_text(errors="replace")[-3000:]
        row.error = f"harbor exited {rc} without {result}:\n{tail}"
        return row
    job = json.loads(result.read_text())
    stats = job["stats"]
    phases: dict[str, list[float]] = collections.defaultdict(list)
    for trial_result in sorted(job_dir.glob("*/result.json")):
        trial = json.loads(trial_result.read_text())
        row.runs += 1
        exc = trial.get("exception_info")
        rewards = (trial.get("verifier_result") or {}).get("rewards") or {}
        error = exc.get("exception_type", "error") if exc else ""
        if not rewards and not error:
            error = "no reward"
        reward = 0.0 if error else float(rewards.get("reward", 0.0))
        row.per_task[trial.get("task_name", trial_result.parent.name)] = (reward, error)
        row.errors += bool(error)
        for phase in ("environment_setup", "agent_execution", "verifier"):
            timing = trial.get(phase) or {}
            if timing.get("started_at") and timing.get("finished_at"):
                phases[phase].append(seconds_between(timing["started_at"], timing["finished_at"]))
        if trial.get("started_at") and trial.get("finished_at"):
            phases["trial"].append(seconds_between(trial["started_at"], trial["finished_at"]))
    if row.runs != job.get("n_total_trials") or row.errors != stats.get("n_errored_trials"):
        row.notes.append(
            f"harbor's result.json says {job.get('n_total_trials')} trials, "
            f"{stats.get('n_errored_trials')} errored"
        )
    said = ", ".join(
        f"{label} {sum(v) / len(v):.1f}"
        for label, key in (("setup", "environment_setup"), ("agent", "agent_execution"),
                           ("verifier", "verifier"), ("whole trial", "trial"))
        if (v := phases.get(key))
    )  # fmt: skip
    row.notes.append(f"mean seconds per trial: {said}")
    mean = sum(r for r, _ in row.per_task.values()) / max(len(row.per_task), 1)
    row.notes.append(f"mean reward, errors as 0: {mean:.3f}; harbor's own: {harbor_means(stats)}")
    if rc != 0:
        row.notes.append(f"harbor exited {rc}")
    return row


def seconds_between(start: str, end: str) -> float:
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def harbor_means(stats: dict) -> str:
    out = []
    for evals in stats.get("evals", {}).values():
        for metric in evals.get("metrics", []):
            out.append(", ".join(f"{k} {v:.3f}" for k, v in metric.items()))
        out.append(f"over {evals.get('n_trials')} trials")
    return "; ".join(out) or "none"


# --- cold caches --------------------------------------------------------------------------------

# The images the two sides build: harbor tags `hb__<trial environment>`, the platform
# `inspector-task:<context hash>` (workers/sandbox/terminal/images.py).
BUILT_IMAGE = re.compile(r"^(hb__[^:]*|inspector-task):")


def clear_image_caches() -> str:
    """Remove every image either side built, the build cache and dangling layers; say what went."""
    listed = subprocess.run(
        ["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    built = [name for name in listed if BUILT_IMAGE.match(name)]
    if built:
        subprocess.run(["docker", "image", "rm", "-f", *built], capture_output=True, check=True)
    pruned = subprocess.run(
        ["docker", "builder", "prune", "-af"], capture_output=True, text=True
    ).stdout.strip().splitlines()  # fmt: skip
    subprocess.run(["docker", "image", "prune", "-f"], capture_output=True, check=True)
    left = subprocess.run(
        ["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    if any(BUILT_IMAGE.match(name) for name in left):
        raise SystemExit(f"--cold: built images are still on the engine: {left}")
    freed = pruned[-1] if pruned else "build cache: nothing"
    return f"cold caches: {len(built)} built images removed; {freed}; left: {', '.join(left)}"


# --- platform -----------------------------------------------------------------------------------


def platform(tmp: Path, name: str, tasks: Path, conc: int, extra: dict[str, str]) -> Row:
    """Import the folders, start one worker process, time `inspect --wait`, read the database."""
    row = Row(name)
    data = tmp / re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    data.mkdir()
    env = {
        **os.environ,
        "INSPECTOR_DATA_DIR": str(data),
        "PYTHONUNBUFFERED": "1",
        "SANDBOX_BACKEND": "docker",
        "TERMINAL_PARALLEL": str(conc),
        **extra,
    }
    log = data / "worker.log"
    worker: subprocess.Popen | None = None
    try:
        manage(env, "migrate", "--no-input", "-v0")
        _, out = manage(env, "import_tasks", str(tasks), "--taskset", "terminal")
        row.notes.append(out.strip().splitlines()[-1] if out.strip() else "imported")
        worker, _ = start_worker(env, 1, log)  # one process; TERMINAL_PARALLEL runs at once
        row.seconds, out = manage(env, "inspect", "terminal", "--wait")
        stop(worker)
        lines = [s.strip() for s in out.replace("\r", "\n").splitlines() if s.strip()]
        row.notes += [s for s in lines if not s.startswith("[")][-6:]
        db = json.loads(manage(env, "shell", "-c", DB_SCRIPT)[1].strip().splitlines()[-1])
        row.runs = db["runs_done"]
        row.errors = sum(n for outcome, n in db["by_outcome"] if outcome not in VERDICTS)
        if db["runs"] != db["runs_total"] or db["done"] != db["runs"]:
            row.notes.append(
                f"runs: {db['runs']} created, {db['done']} done, {db['runs_total']} expected"
            )
        row.notes.append("outcomes: " + ", ".join(f"{k} {n}" for k, n in db["outcomes"]))
        row.notes.append(
            f"per run: {db['sandbox_s'] / max(row.runs, 1):.2f} s in the sandbox, "
            f"{row.seconds * conc / max(row.runs, 1):.2f} s of run slot"
        )
        flagged = collections.defaultdict(list)
        for task_id, code in db["flags"]:
            flagged[task_id].append(code)
        row.notes.append(f"flags on {len(flagged)} tasks:")
        row.notes += [f"  {t}: {', '.join(codes)}" for t, codes in sorted(flagged.items())]
        row.notes += [f"harness finding: {f}" for f in db["findings"]]
    except SystemExit as exc:  # manage() and start_worker() stop with SystemExit and a message
        row.error = str(exc)[-4000:]
    finally:
        stop(worker)
        if log.exists():
            text = log.read_text(errors="replace")
            if "Traceback" in text:
                first = text[text.index("Traceback") :][:2500]
                row.notes.append(
                    f"worker log: {text.count('Traceback')} traceback(s); first:\n{first}"
                )
    return row


# --- report -------------------------------------------------------------------------------------


def combined(name: str, a: Row | None, b: Row | None) -> Row | None:
    if not a or not b or a.error or b.error:
        return None
    return Row(name, a.seconds + b.seconds, a.runs + b.runs, a.errors + b.errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="inspector/demo/terminal", help="folder of task folders")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--skip-harbor", action="store_true")
    parser.add_argument("--skip-platform", action="store_true")
    parser.add_argument(
        "--like-for-like",
        action="store_true",
        help="also run the platform with one reference run and the nop probe per task",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="remove both sides' built images and the build cache before each side's rows",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    tasks = (
        (ROOT / args.tasks).resolve() if not Path(args.tasks).is_absolute() else Path(args.tasks)
    )
    folders = sorted(p.parent.name for p in tasks.glob("*/task.toml"))
    if not folders:
        raise SystemExit(f"no task folders (*/task.toml) in {tasks}")
    conc = args.concurrency
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        raise SystemExit("no Docker engine answers `docker info`; run bin/docker-up")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} CPUs; load average at start {load}")
    if os.getloadavg()[0] > (os.cpu_count() or 1):
        print("note: the machine is already busy; the wall times below will be noisy")
    print(f"{len(folders)} task folders in {tasks}: {', '.join(folders)}; concurrency {conc}")
    caches = "cold: each side builds its images first" if args.cold else "as found on the engine"
    print(f"image caches: {caches}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-terminal-"))
    rows: list[Row] = []
    harbor_rows: dict[tuple[str, str], Row] = {}
    try:
        if not args.skip_harbor:
            harbor = harbor_executable()
            prefix = isolating_prefix()
            copy = tmp / "harbor-tasks" / tasks.name
            changed = copy_tasks_for_harbor(tasks, copy)
            if changed:
                print(f"harbor runs on a copy without `allow_internet = false` in: "
                      f"{', '.join(changed)} (see the docstring)")  # fmt: skip
            jobs = tmp / "harbor-jobs"
            jobs.mkdir()
            overlays = {
                "offline overlay": tmp / "offline.yaml",
                "+init, grace 2s": tmp / "fast.yaml",
            }
            overlays["offline overlay"].write_text(OFFLINE_OVERLAY)
            overlays["+init, grace 2s"].write_text(FAST_OVERLAY)
            for variant, overlay in overlays.items():
                for agent in ("oracle", "nop"):
                    name = f"harbor {agent}, {variant}"
                    if args.cold and agent == "oracle":
                        print(clear_image_caches(), flush=True)
                    print(f"running {name} ...", flush=True)
                    row = run_harbor(harbor, prefix, copy, jobs, name, agent, conc, overlay)
                    harbor_rows[(agent, variant)] = row
                    rows.append(row)
        if not args.skip_platform:
            runs = [("platform, default inspection", {})]
            if args.like_for_like:
                like = {"TERMINAL_REFERENCE_REPEATS": "1", "TERMINAL_PROBES": "nop"}
                runs.append(("platform, reference x1 + nop", like))
            for name, extra in runs:
                if args.cold:
                    print(clear_image_caches(), flush=True)
                print(f"running {name} ...", flush=True)
                rows.append(platform(tmp, name, tasks, conc, extra))
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())

        both = {
            variant: combined(
                f"harbor oracle+nop, {variant}",
                harbor_rows.get(("oracle", variant)),
                harbor_rows.get(("nop", variant)),
            )
            for variant in ("offline overlay", "+init, grace 2s")
        }
        table = rows + [r for r in both.values() if r]
        print(f"\nTerminal tasks: {len(folders)} folders, total concurrency {conc}, "
              f"image caches {'cold' if args.cold else 'as found'}")  # fmt: skip
        print(f"{'':40}{'runs':>6}{'errors':>8}{'wall s':>9}{'runs/min':>10}")
        for row in table:
            if row.error:
                print(f"{row.name:40}{'FAILED':>6}")
                continue
            print(f"{row.name:40}{row.runs:6d}{row.errors:8d}{row.seconds:9.1f}"
                  f"{row.per_minute:10.1f}")  # fmt: skip
        peers = [r for r in both.values() if r]
        fastest = min(peers, key=lambda r: r.seconds / max(r.runs, 1), default=None)
        for row in rows:
            if row.name.startswith("platform") and not row.error and row.runs:
                for peer in peers:
                    tag = " (the faster harbor)" if peer is fastest and len(peers) > 1 else ""
                    print(f"ratio of runs/min, {row.name} / {peer.name}{tag}: "
                          f"{row.per_minute / peer.per_minute:.2f}")  # fmt: skip

        if harbor_rows:
            print("\nharbor's reward per task (an errored trial as 0, with its exception):")
            names = list(harbor_rows)
            header = "".join(f"{a + ' ' + ('+init' if 'init' in v else 'offline'):>22}"
                             for a, v in names)  # fmt: skip
            print(f"{'':20}{header}")
            for task in folders:
                cells = []
                for key in names:
                    reward, error = harbor_rows[key].per_task.get(task, (0.0, "missing"))
                    cells.append(f"{reward:g}" + (f" ({error})" if error else ""))
                print(f"{task:20}" + "".join(f"{c[:21]:>22}" for c in cells))
        for row in rows:
            print(f"\n[{row.name}]")
            if row.error:
                print(f"  FAILED: {row.error}")
            for note in row.notes:
                print(f"  {note}")
        print(f"\nload average at end {load}")
        if args.keep:
            print(f"kept {tmp}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
