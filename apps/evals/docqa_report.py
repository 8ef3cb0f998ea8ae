"""The printed tables of ``make eval --set docqa``: ours, then the published ones with our rows beside."""

from __future__ import annotations

from typing import Any

from apps.evals.docqa import DATASETS, PUBLISHED, PUBLISHED_ALL_FOUND_2WIKI, SHORT


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def retrieval_table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'docqa retrieval':16} {'n':>4} {'R@2':>6} {'R@5':>6} {'all@5':>6} {'p50 ms':>7}"]
    for r in rows:
        lines.append(
            f"{SHORT.get(r['dataset'], r['dataset']):16} {r['n']:4d} {r['recall_2']:6.2f} {r['recall_5']:6.2f}"
            f" {r['all_5']:6.2f} {r['ms_p50']:7.1f}"
        )
    return "\n".join(lines)


def answers_table(rows: list[dict[str, Any]]) -> str:
    """One row a model, mode and dataset. ``R@5 searched``: the supporting passages among the first
    5 of any of an answer's ``search_passages`` calls (each hop's search counts; "-" for plain RAG,
    which makes none through the tool)."""
    head = (
        f"{'docqa answers':14} {'model':28} {'mode':5} {'n':>3} {'correct':>7} {'F1':>5} {'cites_sup':>9}"
        f" {'invented':>8} {'not_found':>9} {'errors':>6} {'p50 s':>6} {'R@5 searched':>12}"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{SHORT.get(r['dataset'], r['dataset']):14} {r['model'][:28]:28} {r['mode']:5} {r['n']:3d}"
            f" {_cell(r['correct']):>7} {_cell(r['f1']):>5} {_cell(r['cites_supporting']):>9}"
            f" {r['invented']:8d} {_cell(r['not_found']):>9} {r['errors']:6d} {_cell(r['seconds_p50']):>6}"
            f" {_cell(r.get('searched_recall_5')):>12}"
        )
    return "\n".join(lines)


def published_table(retrieval: list[dict[str, Any]], answers: list[dict[str, Any]]) -> str:
    """HippoRAG 2's table (EM / F1 / R@5 in percent) with this run's rows below it (ours: contains-the-
    gold accuracy in the EM column), then fast-graphrag's all-supporting share beside ours on 2Wiki."""
    cols = "  ".join(f"{SHORT[d] + ' EM/F1':>16} {SHORT[d] + ' R@5':>12}" for d in DATASETS)
    lines = [
        "published: HippoRAG 2 (arXiv 2502.14802, Tables 8-9; 1,000 questions over 6-12k passages, "
        "Llama-3.3-70B reader), in %",
        f"{'system':44} {cols}",
    ]
    for system, figures in PUBLISHED:
        cells = []
        for d in DATASETS:
            em, f1, r5 = figures[d]
            cells.append(f"{_pct(em) + ' / ' + _pct(f1):>16} {_pct(r5):>12}")
        lines.append(f"{system:44} {'  '.join(cells)}")
    recall = {r["dataset"]: r for r in retrieval}
    r5_cells = "  ".join(
        f"{'':>16} {_pct(100 * recall[d]['recall_5']) if d in recall else '-':>12}" for d in DATASETS
    )
    lines.append(f"{'kgchat search_passages (this run)':44} {r5_cells}")
    by_mode: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for a in answers:
        by_mode.setdefault((a["model"], a["mode"]), {})[a["dataset"]] = a
    for (model, mode), of in by_mode.items():
        cells = []
        for d in DATASETS:
            row = of.get(d)
            pair = "-" if row is None else f"{_pct(100 * row['correct'])} / {_pct(100 * row['f1'])}"
            cells.append(f"{pair:>16} {'':>12}")
        label = f"kgchat {mode} {model} (n={sum(r['n'] for r in of.values())})"
        lines.append(f"{label[:44]:44} {'  '.join(cells)}")
    lines.append(
        "(kgchat's EM column is contains-the-gold accuracy; its F1 is of the answer's first sentence)"
    )
    wiki = recall.get("2wikimultihopqa")
    beside = ", ".join(f"{name} {share:.2f}" for name, share in PUBLISHED_ALL_FOUND_2WIKI)
    ours = f"; kgchat all@5 {wiki['all_5']:.2f}" if wiki else ""
    lines.append(
        f"all supporting passages retrieved, 2Wiki (fast-graphrag's benchmark, 51 questions): {beside}{ours}"
    )
    return "\n".join(lines)


def docqa_tables(retrieval: list[dict[str, Any]], answers: list[dict[str, Any]]) -> str:
    parts = [retrieval_table(retrieval)]
    if answers:
        parts.append(answers_table(answers))
    parts.append(published_table(retrieval, answers))
    return "\n\n".join(parts)
