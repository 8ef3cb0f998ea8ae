"""Summaries of eval results: a printed table, a JSON file and a bar chart."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apps.evals.metaqa import PUBLISHED, dev_weighted
from apps.evals.questions import KINDS, METAQA_KINDS, Question
from apps.evals.scoring import answer_recall, answer_score
from apps.evals.services import QuestionResult

ORDER = (*KINDS, *METAQA_KINDS, "all")
COLUMNS = (
    ("set", 10), ("mode", 6), ("model", 26), ("kind", 13), ("n", 3), ("correct", 7), ("recall", 6), ("cite_prec", 9),
    ("no_cite", 7), ("inv_cite", 8), ("inv_names", 9), ("tools/ans", 9), ("steps", 5), ("tok_in", 7), ("tok_out", 7), ("ttft_p50", 8), ("done_p50", 8),
)  # fmt: skip


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarise(results: list[QuestionResult]) -> list[dict[str, Any]]:
    """One row per (set, mode, model, kind), then an "all" row per (set, mode, model)."""
    groups: dict[tuple[str, str, str, str], list[QuestionResult]] = defaultdict(list)
    for r in results:
        groups[(r.set, r.mode, r.model, r.kind)].append(r)
        groups[(r.set, r.mode, r.model, "all")].append(r)
    order = {k: i for i, k in enumerate(ORDER)}
    rows = []
    for (set_name, mode, model, kind), group in sorted(
        groups.items(), key=lambda g: (*g[0][:3], order[g[0][3]])
    ):
        rows.append(
            {
                "set": set_name,
                "mode": mode,
                "model": model,
                "kind": kind,
                "n": len(group),
                "correct": _mean(r.score for r in group),
                "recall": _mean(r.recall for r in group),
                "citation_precision": _mean(r.citation_precision for r in group),
                "answers_without_citations": sum(1 for r in group if r.cited == 0),
                # Answers whose model cited an entity no tool of the turn returned (its raw text).
                "invented_citations": sum(1 for r in group if r.cited > r.valid_citations),
                # Answers that name, as stored, an entity of the graph nothing the turn was given holds.
                "invented_names": sum(1 for r in group if r.invented_names),
                "raw_invented_names": sum(1 for r in group if r.raw_invented_names),
                "tool_calls_per_answer": _mean(r.tool_calls for r in group),
                "steps": _mean(r.steps for r in group),
                "input_tokens": _mean(r.input_tokens for r in group),
                "output_tokens": _mean(r.output_tokens for r in group),
                "ttft_p50_s": _median(r.ttft_s for r in group),
                "done_p50_s": _median(r.done_s for r in group),
                "errors": sum(1 for r in group if r.error),
            }
        )
    return rows


def rescore(data: dict[str, Any]) -> list[QuestionResult]:
    """The results of a written eval file, their correctness scored again by today's rules.

    Only correctness is recomputed (from the stored answers); citations, tools, tokens and times
    are what the run measured.
    """
    results = []
    for item in data.get("results", []):
        result = QuestionResult(**item)
        question = Question(
            id=result.question_id,
            set=result.set,
            kind=result.kind,  # type: ignore[arg-type]
            template=result.template,
            text=result.question,
            expected=tuple(result.expected),
            count=result.expected_count,
            slots=dict(result.slots),
            wrong=tuple(result.wrong),
            answer=result.expected_answer,
            pairs=tuple((str(item), tuple(values)) for item, values in result.pairs),
            prelude=tuple(result.prelude),
        )
        # A turn that stored no answer has "" here, which scores 0 under every rule.
        result.score = answer_score(question, result.answer)
        result.recall = answer_recall(question, result.answer)
        results.append(result)
    return results


def metaqa_rows(results: list[QuestionResult]) -> list[dict[str, Any]]:
    """MetaQA per (mode, model, hop, question type): Hits@1, answer recall, n, done p50."""
    groups: dict[tuple[str, str, str, str], list[QuestionResult]] = defaultdict(list)
    for r in results:
        if r.set == "metaqa":
            groups[(r.mode, r.model, r.kind, r.template)].append(r)
    return [
        {
            "mode": mode, "model": model, "hop": hop, "qtype": qtype, "n": len(group),
            "hits_at_1": _mean(r.score for r in group), "recall": _mean(r.recall for r in group),
            "done_p50_s": _median(r.done_s for r in group),
        }
        for (mode, model, hop, qtype), group in sorted(groups.items())
    ]  # fmt: skip


def metaqa_weighted(qtypes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (mode, model, hop): Hits@1 and recall of the per-type rows (``metaqa_rows``) weighted by
    each type's share of the dev split (``metaqa.dev_weighted``): the sample's estimate of the whole
    split's figures, which published figures are comparable to."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for q in qtypes:
        groups[(q["mode"], q["model"], q["hop"])].append(q)
    return [
        {
            "mode": mode, "model": model, "hop": hop, "n": sum(q["n"] for q in group),
            "hits_at_1": dev_weighted([(hop, q["qtype"], q["hits_at_1"]) for q in group]),
            "recall": dev_weighted([(hop, q["qtype"], q["recall"]) for q in group]),
        }
        for (mode, model, hop), group in sorted(groups.items())
    ]  # fmt: skip


def metaqa_table(rows: list[dict[str, Any]], qtypes: list[dict[str, Any]]) -> str:
    """MetaQA's Hits@1 per hop beside the published figures, then per question type."""
    hops = [r for r in rows if r["set"] == "metaqa" and r["kind"] in METAQA_KINDS]
    if not hops:
        return ""
    lines = [
        "MetaQA dev, Hits@1 (recall) per hop, published Hits@1 beside it; the sample is spread evenly",
        'over the question types, "dev-weighted" weighs each type by its share of the dev split:',
    ]
    header = "  ".join(["mode".ljust(6), "model".ljust(26), *(k.ljust(14) for k in METAQA_KINDS)])
    lines.append(header)
    for mode, model in sorted({(r["mode"], r["model"]) for r in hops}):
        cells = []
        for kind in METAQA_KINDS:
            row = next((r for r in hops if (r["mode"], r["model"], r["kind"]) == (mode, model, kind)), None)
            cells.append(
                f"{_cell(row['correct'])} ({_cell(row['recall'])}) n={row['n']}".ljust(14)
                if row
                else "-".ljust(14)
            )
        lines.append("  ".join([mode.ljust(6), model.ljust(26)[:26], *cells]))
        weighted = {w["hop"]: w for w in metaqa_weighted(qtypes) if (w["mode"], w["model"]) == (mode, model)}
        lines.append(
            "  ".join(
                [
                    "".ljust(6),
                    "  dev-weighted".ljust(26),
                    *(
                        f"{_cell(weighted[k]['hits_at_1'])} ({_cell(weighted[k]['recall'])})".ljust(14)
                        if k in weighted
                        else "-".ljust(14)
                        for k in METAQA_KINDS
                    ),
                ]
            )
        )
    for name, figures in PUBLISHED:
        lines.append(
            "  ".join(["publ.".ljust(6), name.ljust(26)[:26], *(f"{f:.2f}".ljust(14) for f in figures)])
        )
    lines.append("")
    lines.append("per question type: mode  model  hop  qtype  n  hits@1  recall  done_p50")
    for q in qtypes:
        lines.append(
            f"  {q['mode']:5} {q['model'][:26]:26} {q['hop']:5} {q['qtype'][:40]:40} {q['n']:3} "
            f"{_cell(q['hits_at_1']):6} {_cell(q['recall']):6} {_cell(q['done_p50_s'])}"
        )
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}" if value < 100 else f"{value:.0f}"
    return str(value)


def table(rows: list[dict[str, Any]]) -> str:
    keys = ("set", "mode", "model", "kind", "n", "correct", "recall", "citation_precision", "answers_without_citations",
            "invented_citations", "invented_names", "tool_calls_per_answer", "steps", "input_tokens", "output_tokens", "ttft_p50_s", "done_p50_s")  # fmt: skip
    lines = ["  ".join(name.ljust(width) for name, width in COLUMNS)]
    for row in rows:
        lines.append(
            "  ".join(
                _cell(row[k]).ljust(width)[: max(width, len(_cell(row[k])))]
                for k, (_, width) in zip(keys, COLUMNS, strict=True)
            )
        )
    return "\n".join(lines)


def write(results: list[QuestionResult], rows: list[dict[str, Any]], directory: Path) -> dict[str, Path]:
    """Write ``eval-<time>.json`` (every answer and the summary) and its chart; also ``latest.*``."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    data = {
        "created_at": stamp,
        "summary": rows,
        "metaqa": metaqa_rows(results),
        "metaqa_dev_weighted": metaqa_weighted(metaqa_rows(results)),
        "results": [r.as_dict() for r in results],
    }
    paths = {"json": directory / f"eval-{stamp}.json"}
    text = json.dumps(data, indent=2, ensure_ascii=False)
    paths["json"].write_text(text)
    (directory / "latest.json").write_text(text)
    chart = directory / f"eval-{stamp}.png"
    if plot(rows, chart):
        paths["plot"] = chart
        (directory / "latest.png").write_bytes(chart.read_bytes())
    return paths


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    """Correctness by kind, one bar per (set, mode, model). False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    series = sorted({(r["set"], r["mode"], r["model"]) for r in rows})
    kinds = [k for k in ORDER if any(r["kind"] == k for r in rows)]
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(kinds) * max(1, len(series)) / 2), 4.5))
    for i, key in enumerate(series):
        values = [
            next(
                (
                    r["correct"] or 0.0
                    for r in rows
                    if (r["set"], r["mode"], r["model"]) == key and r["kind"] == k
                ),
                0.0,
            )
            for k in kinds
        ]
        ax.bar([x + i * width for x in range(len(kinds))], values, width, label=" / ".join(key))
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(kinds))], kinds)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("answer correctness")
    ax.set_title("kgchat answer quality by question kind")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
