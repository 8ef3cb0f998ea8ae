"""The answer sets asked over an extracted graph (issue 26 item 5's last step).

After ``extraction_eval`` has written the fictional world's prose into its eval project's graph,
the fictional set's questions are asked there through the real turn path (``eval_plan`` and
``eval_run``, the project's ``graph-query-agent``), of the model that extracted it: the perfect
planner after the perfect extractor, ``local/…`` after the offline model. Their results are
labelled set ``extracted`` so the report shows them beside the fictional set asked over the world's
own graph. The prose states no populations or areas, so the questions that compare or filter by
them can only be answered over the world's own graph: the gap between the two is what extraction
loses, and what the prose never said.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from asgiref.sync import sync_to_async

from apps.agents.definitions import default_agents_install
from apps.evals.extraction import ExtractionScore
from apps.evals.services import QuestionResult, eval_plan, eval_run
from apps.evals.sets import DEFAULT_PER_KIND, DEFAULT_SEED
from apps.graph_tools.embeddings import graph_objects_embed
from apps.projects.models import Project

EXTRACTED_SET = "extracted"
AGENT = "graph-query-agent"


def _extracted_project_ready(slug: str) -> None:
    """Embed the entities the extraction wrote (searches rank by vectors too) and install the
    default agents in the extraction's eval project."""
    project = Project.objects.get(slug=slug)
    graph_objects_embed(project_id=project.id, only_missing=True)
    default_agents_install(project=project)


async def extracted_graph_answers(
    *,
    score: ExtractionScore,
    per_kind: int = DEFAULT_PER_KIND,
    seed: int = DEFAULT_SEED,
    kinds: list[str] | None = None,
    on_result: Callable[[QuestionResult], None] | None = None,
) -> list[QuestionResult]:
    """Ask the fictional set's questions over the graph ``score``'s extraction made, of its model;
    ``score.answers`` and ``score.questions`` are set to their mean correctness and number."""
    await sync_to_async(_extracted_project_ready)(score.project)
    plan = await eval_plan(
        set_name="fictional",
        project_ref=score.project,
        agent_name=AGENT,
        models=[score.model],
        plain=False,
        per_kind=per_kind,
        seed=seed,
        kinds=kinds,
    )

    def relabelled(result: QuestionResult) -> None:
        result.set = EXTRACTED_SET
        if on_result is not None:
            on_result(result)

    results = await eval_run(plan=plan, on_result=relabelled)
    score.questions = len(results)
    score.answers = statistics.fmean(r.score for r in results) if results else None
    return results
