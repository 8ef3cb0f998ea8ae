"""``manage.py eval``: measure answer quality through the real turn path (see apps.evals)."""

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.evals import metaqa, report
from apps.evals.docqa import DEFAULT_PER_DATASET, DocqaDataMissing, docqa_load, questions_to_answer
from apps.evals.docqa_report import docqa_tables, retrieval_table
from apps.evals.docqa_run import AnswerResult, DocqaProject, RetrievalResult, docqa_eval, retrieval_summary
from apps.evals.extraction import extraction_eval, extraction_table
from apps.evals.extraction_answers import extracted_graph_answers
from apps.evals.planner import PLANNER_MODEL
from apps.evals.questions import KINDS, METAQA_KINDS
from apps.evals.services import SETS, EvalError, QuestionResult, eval_plan, eval_run, eval_user_ensure
from apps.evals.sets import DEFAULT_PER_KIND, DEFAULT_SEED


class Command(BaseCommand):
    help = "Ask eval questions through the turn service and score the answers (table, JSON, chart)."

    def add_arguments(self, parser: CommandParser) -> None:
        _asking_arguments(parser)
        _set_arguments(parser)
        parser.add_argument(
            "--rescore", help="score the answers of a written results file again (nothing is asked)"
        )
        parser.add_argument(
            "--out", default=str(Path(settings.BASE_DIR) / ".data" / "eval"), help="results directory"
        )

    def _extraction(
        self, o: dict[str, Any], results: list[QuestionResult], show: Callable[[QuestionResult], None]
    ) -> list[Any]:
        """The extraction set: each model reads the fictional world's prose (one score each), then
        answers the fictional questions over the graph it extracted (added to ``results``)."""
        scores = []
        for model in o["models"] or [PLANNER_MODEL]:
            self.stdout.write(f"extraction: {model} reads the fictional world's prose…")
            score = extraction_eval(
                model=model, owner=eval_user_ensure(), seed=o["seed"], countries=o["countries"]
            )
            scores.append(score)
            if not o["no_answers"]:
                self.stdout.write(
                    f"extraction: {model} answers the fictional questions over what it extracted…"
                )
                results += async_to_sync(extracted_graph_answers)(
                    score=score, per_kind=o["per_kind"], seed=o["seed"], kinds=o["kinds"], on_result=show
                )
            self.stdout.write(extraction_table([score]).splitlines()[1])
        return scores

    def _docqa(self, o: dict[str, Any], sets: list[str]) -> None:
        """The docqa set: the sample uploaded into a fresh project, retrieval on every question, the
        chosen questions answered by each model (the perfect planner reads only the graph sets)."""
        if "docqa" not in sets:
            return
        try:
            data = docqa_load(Path(o["docqa_data"]) if o["docqa_data"] else None)
        except DocqaDataMissing as exc:
            raise CommandError(str(exc)) from None
        models = [m for m in o["models"] or [PLANNER_MODEL] if m != PLANNER_MODEL]
        if PLANNER_MODEL in (o["models"] or [PLANNER_MODEL]):
            self.stderr.write(
                f"docqa: {PLANNER_MODEL} reads the graph sets' templates; it is not asked docqa"
            )
        chosen = [] if o["no_answers"] else questions_to_answer(data.questions, o["per_dataset"])
        chosen = chosen[: o["limit"]] if o["limit"] is not None else chosen
        self.stdout.write(
            f"docqa: {len(data.passages)} passages and {len(data.questions)} questions from {data.directory} "
            f"({', '.join(f'{k} {v}' for k, v in data.digests.items())}); uploading into a fresh project…"
        )

        out = Path(str(o["out"]))
        out.mkdir(parents=True, exist_ok=True)
        answers_path = out / "docqa-answers.jsonl"  # each answer as it comes: a run stopped early keeps them
        answers_path.write_text("")

        def show(r: AnswerResult) -> None:
            mark = "ok " if r.correct else "NO "
            self.stdout.write(
                f"{mark} docqa {r.dataset[:7]:7} {r.mode:5} {r.question}  ->  {r.answer[:140]!r}"
                f"  gold {r.answers[0]!r}, cited {r.cited}" + (f"  [{r.error}]" if r.error else "")
            )
            with answers_path.open("a") as f:
                f.write(json.dumps(r.as_dict(), ensure_ascii=False) + "\n")

        def searched(setup: DocqaProject, retrieval: list[RetrievalResult]) -> None:
            self.stdout.write(
                f"docqa: {setup.documents} documents ({setup.passages} passages) uploaded in "
                f"{setup.upload_s:.1f} s, embedded in {setup.embed_s:.1f} s, project {setup.project.slug}\n\n"
                + retrieval_table(retrieval_summary(retrieval))
            )

        score = async_to_sync(docqa_eval)(
            data=data,
            models=models,
            agent_name=None if o["plain_only"] else o["agent"],
            plain=bool(o["plain"] or o["plain_only"]),
            answer_questions=chosen,
            on_result=show,
            on_retrieval=searched,
            reuse=bool(o["reuse"]),
        )
        summary = score.as_json()
        self.stdout.write("\n" + docqa_tables(summary["retrieval"], summary["answers"]))
        path = out / "docqa.json"
        path.write_text(json.dumps({"data": data.digests, **summary}, indent=2, ensure_ascii=False))
        self.stdout.write(f"docqa: {path}")

    def handle(self, *args: object, **o: Any) -> None:
        # One line per answer is the progress report; ADK's per-run INFO lines would bury it.
        logging.getLogger("google_adk").setLevel(logging.WARNING)
        results: list[QuestionResult] = []
        if o["rescore"]:
            try:
                results = report.rescore(json.loads(Path(o["rescore"]).read_text()))
            except (OSError, ValueError, TypeError) as exc:
                raise CommandError(f"cannot rescore {o['rescore']}: {exc}") from None
            self._report(results, Path(str(o["out"])))
            return

        def show(r: QuestionResult) -> None:
            mark = "ok " if r.score >= 1 else ("1/2" if r.score > 0 else "NO ")
            self.stdout.write(
                f"{mark} {r.set:9} {r.mode:5} {r.kind:7} {r.question}  ->  {r.answer[:140]!r}"
                + (f"  [{r.error}]" if r.error else "")
                + (f"  invented: {r.invented_names}" if r.invented_names else "")
            )

        if o["plain_only"] and (o["models"] or [PLANNER_MODEL]) == [PLANNER_MODEL]:
            raise CommandError(f"--plain-only needs a --model: {PLANNER_MODEL} only answers with tools")
        if (o["plain"] or o["plain_only"]) and PLANNER_MODEL in (o["models"] or [PLANNER_MODEL]):
            self.stderr.write(
                f"{PLANNER_MODEL} follows tools, and plain chat offers none: it is not asked in plain mode"
            )

        sets = o["sets"] or ["demo"]
        try:
            extraction_scores = self._extraction(o, results, show) if "extraction" in sets else []
            self._docqa(o, sets)
        except EvalError as exc:
            raise CommandError(exc.message) from None

        asked = [s for s in sets if s not in ("extraction", "docqa")]  # the sets asked as turns

        async def run_all() -> None:
            for set_name in asked:
                plan = await eval_plan(
                    set_name=set_name,
                    project_ref=o["project"],
                    agent_name=o["agent"],
                    models=o["models"] or [PLANNER_MODEL],
                    plain=bool(o["plain"] or o["plain_only"]),
                    agent=not o["plain_only"],
                    per_kind=o["per_kind"],
                    limit=o["limit"],
                    seed=o["seed"],
                    per_hop=0 if o["all"] else o["per_hop"],
                    kinds=o["kinds"],
                )
                results.extend(await eval_run(plan=plan, on_result=show))

        try:
            async_to_sync(run_all)()
        except EvalError as exc:
            raise CommandError(exc.message) from None
        if extraction_scores:
            self.stdout.write("\n" + extraction_table(extraction_scores))
            out = Path(str(o["out"]))
            out.mkdir(parents=True, exist_ok=True)
            path = out / "extraction.json"
            path.write_text(json.dumps([s.as_json() for s in extraction_scores], indent=2))
            self.stdout.write(f"extraction: {path}")
        if results or asked:
            self._report(results, Path(str(o["out"])))

    def _report(self, results: list[QuestionResult], out: Path) -> None:
        rows = report.summarise(results)
        self.stdout.write("\n" + report.table(rows))
        metaqa_text = report.metaqa_table(rows, report.metaqa_rows(results))
        if metaqa_text:
            self.stdout.write("\n" + metaqa_text)
        paths = report.write(results, rows, out)
        self.stdout.write("\n" + "  ".join(f"{k}: {v}" for k, v in paths.items()))


def _asking_arguments(parser: CommandParser) -> None:
    """What is asked and of whom: the sets, the project and agent, the models, plain chat, which
    questions and how many."""
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        choices=(*SETS, "extraction", "docqa"),
        help="question set (repeatable; default demo); extraction: the fictional world as prose, "
        "extracted into a graph and compared with the world; docqa: multi-hop questions over "
        "Wikipedia passages uploaded as documents (retrieval and answers)",
    )
    parser.add_argument(
        "--project", help="project slug or id (default: the set's own eval project; needed for generated)"
    )
    parser.add_argument("--agent", default="graph-query-agent", help="agent definition name in the project")
    parser.add_argument(
        "--model",
        dest="models",
        action="append",
        help=f"model to evaluate (repeatable; default {PLANNER_MODEL})",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="also ask in plain chat (RAG without an agent; not for the planner)",
    )
    parser.add_argument("--plain-only", action="store_true", help="only plain chat, no agent")
    parser.add_argument("--per-kind", type=int, default=DEFAULT_PER_KIND, help="questions of each kind")
    parser.add_argument("--limit", type=int, help="at most this many questions per set")
    parser.add_argument(
        "--kind",
        dest="kinds",
        action="append",
        choices=[*KINDS, *METAQA_KINDS],
        help="only questions of this kind (repeatable; default every kind)",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)


def _set_arguments(parser: CommandParser) -> None:
    """Options of one set: metaqa's share of the dev split, extraction's countries and answers, docqa's
    questions, data and reuse of its uploaded project."""
    parser.add_argument(
        "--per-hop",
        type=int,
        default=metaqa.DEFAULT_PER_HOP,
        help="metaqa: dev questions of each hop count, spread over its question types (0: all of them)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="metaqa: the whole dev split (36k questions; same as --per-hop 0)",
    )
    parser.add_argument(
        "--no-answers",
        action="store_true",
        help="extraction: do not ask the fictional questions over the extracted graph; "
        "docqa: score retrieval only",
    )
    parser.add_argument(
        "--countries",
        type=int,
        help="extraction: only the first this many countries' paragraphs (default all of them)",
    )
    parser.add_argument(
        "--per-dataset",
        type=int,
        default=DEFAULT_PER_DATASET,
        help="docqa: answer the first N questions of each dataset (0: all 50); retrieval is "
        f"always scored on every question (default {DEFAULT_PER_DATASET})",
    )
    parser.add_argument(
        "--docqa-data",
        help="docqa: the sample's folder (default ../shared/data/docqa beside the clone)",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="docqa: keep the project an earlier run uploaded and embedded, if it is complete "
        "(not after a change to the mention recognizer)",
    )
