"""One answer-graded task (a question with a label) as its page shows it: the label in force
and its correction from the trail, the distribution of the samples' final answers with a
representative response each, the verifier's verdicts on the label and on its probes, and each
flag's evidence in one shape whatever spelling the analysis used. Plain rows out: the page, its
chart (inspector/charts.py) and the tests read them.

Kept apart from tasks.py (the page's parts every kind shares): these reads exist for one kind."""

from __future__ import annotations

from inspector.models import Flag, Inspection, ReviewEvent, Run, Sample, Task

# The page lists this many distinct answers, most frequent first; the rest are summed in one row.
ANSWERS_SHOWN = 30
# A representative response is shown shortened to its start and its end (where the final answer
# is); the whole of it is one click away.
RESPONSE_HEAD = 240
RESPONSE_TAIL = 480
NO_MODEL = "(no model)"
# The flags about the label itself, which a reviewer's relabel answers (see
# exports.clean_tasks).
LABEL_FLAGS = ("mislabeled", "unverifiable_label")


def answer_inspection_id(task: Task) -> int | None:
    """The inspection an answer task's page reads its verdicts from: the latest analysed one
    (the flags' own), else the newest that has verified any of its runs (one still running)."""
    if task.last_inspection_id:
        return task.last_inspection_id
    return (
        Run.objects.filter(task=task, status=Run.DONE)
        .order_by("-inspection_id")
        .values_list("inspection_id", flat=True)
        .first()
    )


def answer_label(task: Task) -> dict:
    """An answer task's label as a reviewer judges it: the uploaded one, the correction in force
    (with who made it, when and why, from the trail), where the import took it from, the set's
    answer rule."""
    event = (
        task.events.filter(action=ReviewEvent.RELABEL)
        .select_related("actor")
        .order_by("-created_at", "-id")
        .first()
    )
    relabel = None
    if task.corrected_label and event is not None:
        relabel = {
            "by": event.actor.get_username() if event.actor_id else "system",
            "at": event.created_at,
            "reason": relabel_reason(event.note, task.corrected_label),
        }
    return {
        "uploaded": task.canonical_solution,
        "corrected": task.corrected_label,
        "in_force": task.label,
        "relabel": relabel,
        "label_from": (task.metadata or {}).get("label_from", ""),
        "answer_type": task.answer_type,
        "rule": task.version.taskset.answer_rule,
    }


def relabel_reason(note: str, label: str) -> str:
    """The reason of a relabel event whose note Task.relabel wrote ("'old' -> 'new': reason"),
    found after the new label (either label may itself hold ": "); the whole note otherwise."""
    marker = f" -> {label!r}: "
    at = note.find(marker)
    return note[at + len(marker) :] if at >= 0 else note


def shorten(text: str, *, head: int = RESPONSE_HEAD, tail: int = RESPONSE_TAIL) -> str:
    """The start and the end of a long text (a response's final answer is at its end)."""
    if len(text) <= head + tail + 20:
        return text
    return f"{text[:head]}\n[… {len(text) - head - tail} characters …]\n{text[-tail:]}"


def _verdict(rewarded: int, count: int) -> str:
    if rewarded == count:
        return "rewarded"
    if rewarded == 0:
        return "not rewarded"
    return f"rewarded {rewarded} of {count}"


def answer_distribution(task: Task, *, inspection_id: int | None) -> dict:
    """The final answers of the task's samples in one inspection, grouped by the verifier's
    normal form (`detail.canonical`: equal answers written differently are one answer).

    Returns {"rows": [...], "total": samples verified, "models": [model, ...], "other": the
    answers past ANSWERS_SHOWN summed ({"answers", "count", "share"} or None), "label_canonical":
    the label's normal form in that inspection, "label_then": the label the runs were verified
    against (differs from the task's label after a relabel)}. Each row: answer (as extracted,
    the commonest spelling), canonical, count, share, per_model ({model: count}), is_label,
    rewarded (how many the verifier rewarded), verdict, statuses ({status: count}) and
    representative ({run_id, sample_id, model, short, full, shortened})."""
    empty = {
        "rows": [],
        "total": 0,
        "models": [],
        "other": None,
        "label_canonical": "",
        "label_then": "",
    }
    if inspection_id is None:
        return empty
    runs = Run.objects.filter(task=task, inspection_id=inspection_id, status=Run.DONE)
    reference = runs.filter(kind=Run.REFERENCE).values_list("detail", flat=True).first() or {}
    label_canonical = str(reference.get("canonical") or "")
    groups: dict[str, dict] = {}
    models: set[str] = set()
    total = 0
    rows = (
        runs.filter(kind=Run.SAMPLE)
        .order_by("pk")
        .values_list("pk", "sample_id", "sample__sample_id", "sample__model", "outcome", "detail")
    )
    label_then = ""
    for run_pk, sample_pk, sample_id, model, outcome, detail in rows.iterator(chunk_size=2000):
        detail = detail or {}
        status = str(detail.get("status") or outcome or "error")
        canonical = str(detail.get("canonical") or "")
        extracted = str(detail.get("extracted") or "")
        label_then = label_then or str(detail.get("label") or "")
        # Nothing read from the response: grouped by why (no answer, the verifier timed out).
        key = canonical or f"({status.replace('_', ' ')})"
        model = model or NO_MODEL
        models.add(model)
        total += 1
        group = groups.setdefault(
            key,
            {
                "canonical": canonical,
                "count": 0,
                "rewarded": 0,
                "per_model": {},
                "spellings": {},
                "statuses": {},
                "first": (run_pk, sample_pk, sample_id, model),
            },
        )
        group["count"] += 1
        group["rewarded"] += outcome == "passed"
        group["per_model"][model] = group["per_model"].get(model, 0) + 1
        group["statuses"][status] = group["statuses"].get(status, 0) + 1
        if extracted:
            group["spellings"][extracted] = group["spellings"].get(extracted, 0) + 1
    if not total:
        return {**empty, "label_canonical": label_canonical}

    def is_label(group: dict) -> bool:
        if label_canonical:
            return group["canonical"] == label_canonical
        return bool(group["canonical"]) and group["rewarded"] == group["count"]

    ordered = sorted(groups.items(), key=lambda kv: (-kv[1]["count"], not is_label(kv[1]), kv[0]))
    shown, rest = ordered[:ANSWERS_SHOWN], ordered[ANSWERS_SHOWN:]
    # Only the representatives' texts are read: a response can be long.
    texts = {
        pk: completion or answer
        for pk, completion, answer in Sample.objects.filter(
            pk__in=[g["first"][1] for _, g in shown]
        ).values_list("pk", "completion", "answer")
    }
    result = []
    for key, group in shown:
        run_pk, sample_pk, sample_id, model = group["first"]
        full = texts.get(sample_pk) or ""
        short = shorten(full)
        spellings = group["spellings"]
        result.append(
            {
                "answer": max(spellings, key=lambda s: (spellings[s], -len(s)))
                if spellings
                else key,
                "canonical": group["canonical"],
                "count": group["count"],
                "share": group["count"] / total,
                "per_model": dict(sorted(group["per_model"].items())),
                "is_label": is_label(group),
                "rewarded": group["rewarded"],
                "verdict": _verdict(group["rewarded"], group["count"]),
                "statuses": group["statuses"],
                "representative": {
                    "run_id": run_pk,
                    "sample_id": sample_id,
                    "model": model,
                    "short": short,
                    "full": full,
                    "shortened": short != full,
                },
            }
        )
    other = None
    if rest:
        count = sum(g["count"] for _, g in rest)
        other = {"answers": len(rest), "count": count, "share": count / total}
    return {
        "rows": result,
        "total": total,
        "models": sorted(models),
        "other": other,
        "label_canonical": label_canonical,
        "label_then": label_then,
    }


def answer_label_verdict(task: Task, *, inspection_id: int | None) -> dict | None:
    """The verifier on the label itself in one inspection: {status, canonical, why, readable}."""
    if inspection_id is None:
        return None
    run = (
        Run.objects.filter(
            task=task, inspection_id=inspection_id, kind=Run.REFERENCE, status=Run.DONE
        )
        .values("pk", "outcome", "detail")
        .first()
    )
    if run is None:
        return None
    detail = run["detail"] or {}
    return {
        "run_id": run["pk"],
        "status": detail.get("status") or run["outcome"],
        "canonical": detail.get("canonical") or "",
        "why": detail.get("why") or "",
        "readable": run["outcome"] == "passed",
    }


def answer_probe_verdicts(task: Task, *, inspection_id: int | None) -> list[dict]:
    """The verifier's verdict on each of its probes (responses that must earn nothing) in one
    inspection, by probe name: {probe, run_id, status, extracted, rewarded, why, set_wide (the
    probe beats nearly every task of the set: a finding about the set's verifier)}."""
    if inspection_id is None:
        return []
    findings = (
        Inspection.objects.filter(pk=inspection_id).values_list("findings", flat=True).first() or []
    )
    set_wide = {str(f.get("probe")) for f in findings if isinstance(f, dict) and f.get("probe")}
    rows = Run.objects.filter(
        task=task, inspection_id=inspection_id, kind=Run.PROBE, status=Run.DONE
    ).values_list("pk", "probe", "outcome", "detail")
    result = []
    for run_pk, probe, outcome, detail in rows.order_by("probe", "pk"):
        detail = detail or {}
        result.append(
            {
                "probe": probe,
                "run_id": run_pk,
                "status": detail.get("status") or outcome,
                "extracted": detail.get("extracted") or "",
                "rewarded": outcome == "passed",
                "why": detail.get("why") or "",
                "set_wide": probe in set_wide,
            }
        )
    return result


def _first(evidence: dict, *keys: str):
    for key in keys:
        if evidence.get(key) not in (None, "", [], {}):
            return evidence[key]
    return None


def _answer_counts(value) -> list[dict]:
    """An answer distribution as evidence holds it (a list of {answer, count, share, is_label},
    as inspector/detect/answers.py writes it; or {answer: count}, or [answer, count] pairs) as
    rows {answer, count, share, is_label}."""
    rows: list[dict] = []
    if isinstance(value, dict):
        for answer, v in value.items():
            if isinstance(v, dict):
                rows.append(
                    {"answer": answer, "count": v.get("count"), "share": v.get("share"),
                     "is_label": bool(v.get("is_label"))}
                )  # fmt: skip
            else:
                rows.append({"answer": answer, "count": v, "share": None, "is_label": False})
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                rows.append(
                    {
                        "answer": _first(item, "answer", "canonical", "value"),
                        "count": item.get("count"),
                        "share": _first(item, "share", "weight", "weighted_share"),
                        "is_label": bool(item.get("is_label")),
                    }
                )
            elif isinstance(item, list | tuple) and len(item) >= 2:
                rows.append({"answer": item[0], "count": item[1], "share": None, "is_label": False})
            else:
                rows.append({"answer": item, "count": None, "share": None, "is_label": False})
    total = sum(r["count"] for r in rows if isinstance(r["count"], int | float))
    for row in rows:
        if row["share"] is None and total and isinstance(row["count"], int | float):
            row["share"] = row["count"] / total
    return rows


def _number(value) -> float:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else -1.0


def _model_weights(value) -> list[dict]:
    """The models behind a vote, heaviest first, as rows {model, weight, reliability, answers}:
    from {model: {weight, reliability, answers: {answer: share}}} (inspector/detect/answers.py),
    or {model: weight}, or a list of {model, weight, answer}. `answers` is a list of (answer,
    share) pairs, most given first."""
    rows: list[dict] = []
    items = value.items() if isinstance(value, dict) else []
    if isinstance(value, list):
        items = [
            (i.get("model") or NO_MODEL, i) if isinstance(i, dict) else (i, None) for i in value
        ]
    for model, v in items:
        row = {"model": model, "weight": None, "reliability": None, "answers": []}
        if isinstance(v, dict):
            row["weight"] = _first(v, "weight", "accuracy")
            row["reliability"] = v.get("reliability")
            given = v.get("answers")
            if isinstance(given, dict):
                row["answers"] = sorted(given.items(), key=lambda kv: -_number(kv[1]))
            elif v.get("answer") is not None:
                row["answers"] = [(v["answer"], v.get("count"))]
        elif v is not None:
            row["weight"] = v
        rows.append(row)
    return sorted(rows, key=lambda r: -_number(r["weight"]))


def _probe_rows(evidence: dict) -> list[dict]:
    """The probes a reward_hackable flag names, with what the verifier extracted from each:
    {probe: extracted} (inspector/detect/answers.py), or a list of names with `extracted`."""
    probes = _first(evidence, "probes", "probe")
    extracted = evidence.get("extracted")
    if isinstance(probes, str):
        probes = [probes]
    if isinstance(probes, dict):
        return [{"probe": p, "extracted": x} for p, x in sorted(probes.items())]
    rows = []
    for item in probes or []:
        if isinstance(item, dict):
            rows.append(
                {"probe": item.get("probe") or item.get("name"), "extracted": item.get("extracted")}
            )
        else:
            x = extracted.get(item) if isinstance(extracted, dict) else extracted
            rows.append({"probe": item, "extracted": x})
    return rows


def _split(evidence: dict) -> list[dict]:
    """An ambiguous flag's competing answers with their reliability-weighted shares."""
    split = evidence.get("split")
    if not isinstance(split, list):
        return []
    shares = evidence.get("weighted_shares")
    shares = shares if isinstance(shares, list) else []
    return [
        {"answer": answer, "share": shares[i] if i < len(shares) else None}
        for i, answer in enumerate(split)
    ]


# The evidence keys answer_evidence reads (or leaves out on purpose: the label is on the page);
# any other key of a flag's evidence is listed as it is.
_ANSWER_EVIDENCE_KEYS = {
    "consensus", "consensus_answer", "majority", "posterior", "probability", "label_posterior",
    "support", "supporters", "models", "model_weights", "weights", "distribution", "answers",
    "competing", "counts", "probes", "probe", "extracted", "why", "reason", "status", "label",
    "label_status", "label_canonical", "label_share", "share", "supporting_models", "split",
    "weighted_shares", "chance_one_would_be_right", "samples", "correct", "phrase",
}  # fmt: skip


def answer_evidence(flag: Flag, *, label_why: str = "") -> dict:
    """An answer task's flag's evidence in the shape the page shows it (the keys of
    inspector/detect/answers.py, and a few other spellings):

    consensus (the answer the samples agree on), posterior (its probability), label_posterior,
    supporting (how many models back the consensus), supporters (the models with their weights,
    reliabilities and answers), answers (the distribution: {answer, count, share, is_label}),
    split (an ambiguous flag's competing answers with weighted shares), probes ({probe,
    extracted}), chance (unsolvable: that at least one sample would have reached a right
    label), samples and correct (no_signal), phrase (answer_leak), status and why (the
    verifier on the label: `label_why`, from the label's own run, when the flag has none), and
    `more`: the other keys, (key, value) as they are."""
    evidence = flag.evidence or {}
    why = _first(evidence, "why", "reason")
    if flag.code == "unverifiable_label" and not why:
        why = label_why
    return {
        "consensus": _first(evidence, "consensus", "consensus_answer", "majority"),
        "posterior": _first(evidence, "posterior", "probability"),
        "label_posterior": evidence.get("label_posterior"),
        "supporting": evidence.get("supporting_models"),
        "supporters": _model_weights(
            _first(evidence, "support", "supporters", "models", "model_weights", "weights")
        ),
        "answers": _answer_counts(
            _first(evidence, "competing", "distribution", "answers", "counts")
        ),
        "split": _split(evidence),
        "probes": _probe_rows(evidence) if flag.code == "reward_hackable" else [],
        "chance": evidence.get("chance_one_would_be_right"),
        "samples": evidence.get("samples"),
        "correct": evidence.get("correct"),
        "phrase": evidence.get("phrase"),
        "why": why,
        "status": _first(evidence, "status", "label_status"),
        "label_share": _first(evidence, "label_share", "share"),
        "more": sorted((k, v) for k, v in evidence.items() if k not in _ANSWER_EVIDENCE_KEYS),
    }


def answer_consensus(task: Task, flags: list[Flag], distribution: dict) -> str:
    """The answer a relabel form offers: a mislabeled flag's consensus, else nothing."""
    for flag in flags:
        if flag.code == "mislabeled" and flag.status != Flag.DISMISSED:
            consensus = answer_evidence(flag)["consensus"]
            if consensus not in (None, ""):
                return str(consensus)
            top = next((r for r in distribution["rows"] if r["canonical"]), None)
            if top is not None and not top["is_label"]:
                return top["answer"]
    return ""


def answer_page(task: Task, flags: list[Flag]) -> dict:
    """Everything an answer task's page shows beyond the common parts, as plain data; each flag
    of `flags` also gets `answer_evidence` and `answered_by_relabel`."""
    inspection_id = answer_inspection_id(task)
    distribution = answer_distribution(task, inspection_id=inspection_id)
    label_verdict = answer_label_verdict(task, inspection_id=inspection_id)
    relabeled_at = None
    if task.corrected_label:
        relabeled_at = (
            task.events.filter(action=ReviewEvent.RELABEL)
            .order_by("-created_at")
            .values_list("created_at", flat=True)
            .first()
        )
    started = dict(
        Inspection.objects.filter(pk__in={f.inspection_id for f in flags}).values_list(
            "pk", "created_at"
        )
    )
    for flag in flags:
        flag.answer_evidence = answer_evidence(
            flag, label_why=label_verdict["why"] if label_verdict else ""
        )
        # Relabeled since the flag's inspection: it no longer keeps the task out of the manifest.
        flag.answered_by_relabel = (
            flag.code in LABEL_FLAGS
            and relabeled_at is not None
            and relabeled_at >= started.get(flag.inspection_id, relabeled_at)
        )
    return {
        "answer_inspection_id": inspection_id,
        "label": answer_label(task),
        "label_verdict": label_verdict,
        "distribution": distribution,
        "probe_verdicts": answer_probe_verdicts(task, inspection_id=inspection_id),
        "consensus": answer_consensus(task, flags, distribution),
        "sample_count": task.samples.count(),
    }
