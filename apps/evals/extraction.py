"""``make eval --set extraction`` (issue 26 item 5): prose written from the fictional world, extracted
by a model through the real pipeline (upload, the background worker's step, entity resolution, the
change set approved as a whole), and the resulting graph compared with the world.

The prose states several facts per sentence and names things again in other words ("its capital",
"the country"), one paragraph per country. Measured per model: relationship precision and recall
(by names and type), entities created more than once (duplicates), relationships whose audit row
names a passage that does not state them (wrong passage), and passages read per minute.

``scripted/perfect-planner`` (the eval's default) is answered by the perfect extractor: it gives each
passage exactly the facts it was written from, so its figures (1.00) show the pipeline itself loses
nothing; any other model name is asked as it is.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from apps.agents.llm.base import ToolCall
from apps.agents.llm.resolve import resolve_model
from apps.agents.llm.scripted import ScriptedProvider
from apps.documents.extraction.queue import extraction_start
from apps.documents.extraction.spec import TOOL_NAME
from apps.documents.extraction.step import extraction_run_until_idle
from apps.documents.models import ChangeSet, Passage
from apps.documents.review import change_set_apply
from apps.documents.services import document_upload
from apps.evals.planner import PLANNER_MODEL
from apps.evals.questions import normalise
from apps.evals.sets import DEFAULT_SEED, World, fictional_world
from apps.graph_tools.importer import graph_import
from apps.graph_tools.models import GraphChange, GraphObject
from apps.projects.models import Project
from apps.projects.services import project_create, project_delete

Fact = tuple[str, str, str]  # (source name, relationship type, target name)

# The types the project starts with (the schema's enums): one placeholder of each, outside the world.
SCHEMA_LINES = [
    {"kind": "entity", "key": "schema:continent", "type": "Continent", "name": "Example Continent"},
    {"kind": "entity", "key": "schema:country", "type": "Country", "name": "Example Country"},
    {"kind": "entity", "key": "schema:country2", "type": "Country", "name": "Example Neighbour"},
    {"kind": "entity", "key": "schema:city", "type": "City", "name": "Example City"},
    {"kind": "entity", "key": "schema:currency", "type": "Currency", "name": "Example Currency"},
    {"kind": "entity", "key": "schema:language", "type": "Language", "name": "Example Language"},
    {"kind": "relationship", "type": "LOCATED_IN", "src": "schema:country", "dst": "schema:continent"},
    {"kind": "relationship", "type": "LOCATED_IN", "src": "schema:city", "dst": "schema:country"},
    {"kind": "relationship", "type": "CAPITAL_OF", "src": "schema:city", "dst": "schema:country"},
    {"kind": "relationship", "type": "USES_CURRENCY", "src": "schema:country", "dst": "schema:currency"},
    {"kind": "relationship", "type": "SPEAKS", "src": "schema:country", "dst": "schema:language"},
    {"kind": "relationship", "type": "BORDERS", "src": "schema:country", "dst": "schema:country2"},
]


@dataclass(frozen=True)
class Paragraph:
    text: str
    facts: tuple[Fact, ...]
    entities: tuple[tuple[str, str], ...]  # (name, type)


def _names(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def world_prose(world: World, *, countries: int | None = None) -> list[Paragraph]:
    """One paragraph per country: its continent, capital, currency, languages, other cities and
    borders, several facts a sentence, the country named again as "it" and "the country"."""
    paragraphs = []
    for c in list(world.countries.values())[:countries]:
        cities = [city.name for city in world.cities if city.country == c.key and city.name != c.capital]
        neighbours = [world.countries[n].name for n in c.neighbours]
        sentences = [
            f"{c.name} is a country in {c.continent}, and its capital is {c.capital}.",
            f"The country pays with the {c.currency} and its people speak {_names(c.languages)}.",
        ]
        if cities:
            sentences.append(
                f"Besides its capital, {_names(cities)} {'lie' if len(cities) > 1 else 'lies'} in {c.name}."
            )
        sentences.append(f"It borders {_names(neighbours)}.")
        facts: list[Fact] = [
            (c.name, "LOCATED_IN", c.continent),
            (c.capital, "CAPITAL_OF", c.name),
            (c.capital, "LOCATED_IN", c.name),
            (c.name, "USES_CURRENCY", c.currency),
            *((c.name, "SPEAKS", lang) for lang in c.languages),
            *((city, "LOCATED_IN", c.name) for city in cities),
            *((c.name, "BORDERS", n) for n in neighbours),
        ]
        entities = [
            (c.name, "Country"),
            (c.continent, "Continent"),
            (c.capital, "City"),
            (c.currency, "Currency"),
            *((lang, "Language") for lang in c.languages),
            *((city, "City") for city in cities),
            *((n, "Country") for n in neighbours),
        ]
        paragraphs.append(Paragraph(text=" ".join(sentences), facts=tuple(facts), entities=tuple(entities)))
    return paragraphs


def perfect_extractor(paragraphs: list[Paragraph]) -> ScriptedProvider:
    """Answers each passage with exactly the facts it was written from."""
    by_text = {" ".join(p.text.split()): p for p in paragraphs}

    def respond(messages: list[Any], tools: list[Any]) -> list[Any]:
        text = " ".join(messages[-1].content.split("Passage:\n", 1)[-1].split())
        paragraph = by_text.get(text)
        answer: dict[str, Any] = {"entities": [], "relationships": []}
        if paragraph is not None:
            answer = {
                "entities": [
                    {"name": n, "type": t, "description": ""} for n, t in dict.fromkeys(paragraph.entities)
                ],
                "relationships": [{"source": s, "type": r, "target": d} for s, r, d in paragraph.facts],
            }
        return [ToolCall(id="extract", name=TOOL_NAME, arguments=answer)]

    return ScriptedProvider(responder=respond, name="perfect-extractor")


@dataclass
class ExtractionScore:
    model: str
    project: str  # the eval project's slug: the graph the extraction made
    passages: int
    failed: int
    seconds: float
    truth: int
    extracted: int
    correct: int
    entities: int
    duplicates: int
    wrong_passage: int
    # The fictional set's questions asked over the extracted graph (``extraction_answers``):
    # their mean correctness (None: not asked) and how many.
    answers: float | None = None
    questions: int = 0

    @property
    def precision(self) -> float:
        return self.correct / self.extracted if self.extracted else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.truth if self.truth else 0.0

    @property
    def per_minute(self) -> float:
        return self.passages * 60 / self.seconds if self.seconds else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "passages": self.passages,
            "failed": self.failed,
            "seconds": round(self.seconds, 1),
            "passages_per_minute": round(self.per_minute, 1),
            "relationships_true": self.truth,
            "relationships_extracted": self.extracted,
            "relationships_correct": self.correct,
            "precision": round(self.precision, 3),
            "recall": round(self.recall, 3),
            "entities": self.entities,
            "duplicates": self.duplicates,
            "duplicate_share": round(self.duplicates / self.entities, 3) if self.entities else 0.0,
            "wrong_passage": self.wrong_passage,
            "project": self.project,
            "answers_correct": None if self.answers is None else round(self.answers, 3),
            "answers_asked": self.questions,
        }


def _fresh_project(owner: Any, slug: str) -> Project:
    """The model's own eval project, made anew for every run (an extraction writes into it)."""
    old = Project.objects.filter(slug=slug).first()
    if old is not None:
        project_delete(project=old)
    project = project_create(owner=owner, name=f"Eval: extraction ({slug})", slug=slug)
    graph_import(project=project, lines=(json.dumps(r) for r in SCHEMA_LINES))
    return project


def extraction_eval(
    *, model: str, owner: Any, seed: int = DEFAULT_SEED, countries: int | None = None
) -> ExtractionScore:
    """Write the fictional world as prose, extract it with ``model``, approve the change set as a
    whole and score the graph it made against the world."""
    paragraphs = world_prose(fictional_world(seed=seed), countries=countries)
    slug = f"eval-extraction-{normalise(model).replace(' ', '-')[:40]}"
    project = _fresh_project(owner, slug)
    text = "# The fictional world\n\n" + "\n\n".join(p.text for p in paragraphs) + "\n"
    document = document_upload(project=project, name="world.md", data=text.encode()).document
    provider = perfect_extractor(paragraphs) if model == PLANNER_MODEL else resolve_model(model)
    change_set = extraction_start(document=document, model=model, user_id=None)
    started = time.monotonic()
    while ChangeSet.objects.filter(id=change_set.id, status="running").exists():
        if not extraction_run_until_idle(provider=provider):
            time.sleep(1.0)  # passages in their backoff
    seconds = time.monotonic() - started
    with transaction.atomic():
        if ChangeSet.objects.filter(id=change_set.id, status="review").exists():
            change_set_apply(change_set_id=change_set.id, approve=None, reject=[], edits={}, user_id=owner.pk)
    return _score(project, change_set.id, paragraphs, model, seconds)


def _score(
    project: Project, change_set_id: Any, paragraphs: list[Paragraph], model: str, seconds: float
) -> ExtractionScore:
    def key(name: str) -> str:
        return normalise(name)

    truth = {(key(s), r, key(d)) for p in paragraphs for s, r, d in p.facts}
    stated_in: dict[str, set[Fact]] = {
        " ".join(p.text.split()): {(key(s), r, key(d)) for s, r, d in p.facts} for p in paragraphs
    }
    names: dict[Any, str] = dict(GraphObject.objects.filter(project=project).values_list("id", "name"))
    passages: dict[Any, str] = {
        p.id: " ".join(p.text.split()) for p in Passage.objects.filter(project=project)
    }
    # Each relationship the extraction wrote, with the passage its audit row names.
    made: list[tuple[Fact, str]] = []
    for change in GraphChange.objects.filter(
        project=project, action="create_relationship", document_id__isnull=False
    ):
        after = change.after if isinstance(change.after, dict) else {}
        fact = (key(names[change.src_id]), str(after.get("type", "")), key(names[change.dst_id]))
        made.append((fact, passages.get(change.passage_id, "")))
    extracted = {fact for fact, _ in made}
    wrong = len([fact for fact, text in made if fact in truth and fact not in stated_in.get(text, set())])
    world_entities = GraphObject.objects.filter(project=project).exclude(key__startswith="schema:")
    counted: dict[str, int] = {}
    for name in world_entities.values_list("name", flat=True):
        counted[key(name)] = counted.get(key(name), 0) + 1
    duplicates = sum(n - 1 for n in counted.values() if n > 1)
    states = list(Passage.objects.filter(project=project).values_list("extraction_state", flat=True))
    return ExtractionScore(
        model=model,
        project=project.slug,
        passages=sum(1 for s in states if s in ("done", "failed")),
        failed=sum(1 for s in states if s == "failed"),
        seconds=seconds,
        truth=len(truth),
        extracted=len(extracted),
        correct=len(extracted & truth),
        entities=world_entities.count(),
        duplicates=duplicates,
        wrong_passage=wrong,
    )


def extraction_table(scores: list[ExtractionScore]) -> str:
    """The printed table of ``make eval --set extraction``: the extraction's figures, then the mean
    correctness of the fictional questions asked over the extracted graph and how many were asked."""
    head = f"{'extraction':12} {'model':28} {'passages':>8} {'failed':>6} {'pass/min':>8} {'rel_prec':>8} {'rel_rec':>8} {'entities':>8} {'dup':>5} {'dup%':>6} {'wrong_psg':>9} {'answers':>7} {'asked':>5}"
    rows = [head]
    for s in scores:
        share = 100 * s.duplicates / s.entities if s.entities else 0.0
        answers = "-" if s.answers is None else f"{s.answers:.2f}"
        rows.append(
            f"{'world prose':12} {s.model[:28]:28} {s.passages:8d} {s.failed:6d} {s.per_minute:8.1f} "
            f"{s.precision:8.2f} {s.recall:8.2f} {s.entities:8d} {s.duplicates:5d} {share:5.1f}% {s.wrong_passage:9d}"
            f" {answers:>7} {s.questions:5d}"
        )
    return "\n".join(rows)
