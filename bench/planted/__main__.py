"""The planted-defect benchmark's command line: builds the set, then writes it and stops
(`--build-only`), scores saved reports (`--report`) or runs the platform on it (`--repeats`
times), and prints the score. Run from the repository's root:

    .venv/bin/python -m bench.planted [--seed 0] [--out DIR] [--build-only] [--repeats 1] ...

(`.venv/bin/python bench/planted ...` runs it too.)"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as `python bench/planted`: import the package from the repository
    _here = Path(__file__).resolve().parent
    sys.path[:] = [str(_here.parents[1]), *(p for p in sys.path if Path(p).resolve() != _here)]

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import bench.planted  # noqa: E402
from bench.planted.build import build_planted_set  # noqa: E402
from bench.planted.catalogue import FLAGS  # noqa: E402
from bench.planted.driver import inspect_on_platform  # noqa: E402
from bench.planted.scoring import Score, print_score  # noqa: E402
from bench.planted.write import write_planted_set  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.planted", description=bench.planted.__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="folder for the set (and the reports); kept")
    parser.add_argument("--build-only", action="store_true", help="build and write the set only")
    parser.add_argument("--repeats", type=int, default=1, help="whole inspections to run")
    parser.add_argument("--share-defective", type=float, default=0.5)
    parser.add_argument("--samples-per-task", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--kinds",
        help="comma-separated kind prefixes to keep (e.g. weak_tests,clean): one detector, "
        "quickly; precision then counts only these tasks",
    )
    parser.add_argument(
        "--report",
        action="append",
        metavar="FILE",
        help="score this saved export_report file (of a set built with the same options) "
        "instead of running the platform; repeatable",
    )
    args = parser.parse_args(argv)

    start = time.monotonic()
    planted = build_planted_set(
        seed=args.seed,
        share_defective=args.share_defective,
        samples_per_task=args.samples_per_task,
    )
    build_s = time.monotonic() - start
    if args.kinds:
        planted = planted.only([k.strip() for k in args.kinds.split(",") if k.strip()])
    clean = sum(1 for flags in planted.truth.values() if not flags)
    print(
        f"planted set, seed {args.seed}: {len(planted.tasks)} tasks ({len(planted.tasks) - clean} "
        f"with a planted truth, {clean} clean), {len(planted.samples)} samples, "
        f"built in {build_s:.1f} s"
    )
    print("kinds: " + ", ".join(f"{kind} {count}" for kind, count in planted.counts().items()))
    expected = collections.Counter(code for flags in planted.truth.values() for code in flags)
    print("truth: " + ", ".join(f"{code} {expected[code]}" for code in FLAGS if expected[code]))

    if args.build_only:
        folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="planted-set-"))
        paths = write_planted_set(folder, planted)
        print("wrote " + ", ".join(str(p) for p in paths) + f" and {folder / 'planted.json'}")
        return

    if args.report:
        score = Score()
        for path in args.report:
            lines = Path(path).read_text().splitlines()
            score.add([json.loads(s) for s in lines if s.strip()], planted.truth, planted.kinds)
        print_score(score, planted.kinds)
        return

    score = inspect_on_platform(
        planted,
        seed=args.seed,
        out_dir=args.out,
        repeats=args.repeats,
        concurrency=args.concurrency,
    )
    print_score(score, planted.kinds)


if __name__ == "__main__":
    main()
