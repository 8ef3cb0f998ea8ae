"""The docqa set end to end (issue #48) on a tiny generated sample: uploaded as documents, searched
with ``search_passages`` through the registry, and answered through the turn path by scripted models."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.agents.llm.scripted import ScriptedProvider, register_script, text, tool_call, unregister_script
from apps.chat.models import Conversation
from apps.chat.streams.bus import InProcessFrameBus, set_bus
from apps.documents.models import Document, Passage
from apps.evals.docqa import docqa_load
from apps.evals.docqa_report import docqa_tables
from apps.evals.docqa_run import answer_summary, docqa_eval, retrieval_summary
from apps.evals.harness import EvalError

pytestmark = pytest.mark.django_db(transaction=True)

# Two questions' supporting passages (a film, its director) and distractors of other films.
CORPUS = [
    ("2wiki-0001", "Glass Orchard", "Glass Orchard is a 1971 film directed by Vera Halloway."),
    ("2wiki-0002", "Vera Halloway", "Vera Halloway was a film director born in Tallinford."),
    ("2wiki-0003", "Copper Hills", "Copper Hills is a 1980 western directed by Sam Rourke."),
    ("2wiki-0004", "Sam Rourke", "Sam Rourke was an actor born in Denver."),
    ("musique-0001", "Lake Ormund", "Lake Ormund lies in the province of Fessland."),
    ("musique-0002", "Fessland", "The capital of Fessland is Brevik, a harbour town."),
    ("musique-0003", "River Tam", "River Tam flows through the province of Oland."),
    ("musique-0004", "Oland", "The capital of Oland is Marsk."),
]
QUESTIONS = [
    {
        "id": "q-2wiki", "dataset": "2wikimultihopqa", "type": "compositional",
        "question": "Where was the director of film Glass Orchard born?",
        "answers": ["Tallinford"], "supporting": ["2wiki-0001", "2wiki-0002"],
    },
    {
        "id": "q-musique", "dataset": "musique", "type": "2hop",
        "question": "What is the capital of the province where Lake Ormund lies?",
        "answers": ["Brevik"], "supporting": ["musique-0001", "musique-0002"],
    },
]  # fmt: skip
# What the scripted reader knows: each question's answer and the passage that states it.
READS = {q["question"]: (q["answers"][0], q["supporting"][1]) for q in QUESTIONS}
MADE_UP = "99999999-9999-9999-9999-999999999999"


@pytest.fixture(autouse=True)
def fresh_bus():
    set_bus(InProcessFrameBus())
    yield
    set_bus(None)


@pytest.fixture
def sample(tmp_path):
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in CORPUS)
    )
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return docqa_load(tmp_path)


def _passage_id(messages, name: str) -> str | None:
    """The id of the passage of document ``name`` in what the model was given (a tool's result or
    plain chat's prompt)."""
    for m in reversed(messages):
        if m.role == "tool":
            for r in json.loads(m.content).get("results", []):
                if r.get("document_name") == name:
                    return r["id"]
    found = re.search(rf"\[{re.escape(name)}\]\(passage:([0-9a-f-]{{36}})\)", messages[0].content)
    return found.group(1) if found else None


def reader(messages, tools):
    """Search the passages when offered the tool and not yet searched; then answer citing the passage
    that states the answer."""
    question = [m.content for m in messages if m.role == "user"][-1]
    if any(t.name == "search_passages" for t in tools) and not any(m.role == "tool" for m in messages):
        return [tool_call("search_passages", {"query": question})]
    answer, name = READS[question]
    passage = _passage_id(messages, name)
    return text(f"{answer}, as [{name}](passage:{passage}) says. Also [a guess](passage:{MADE_UP}).")


@pytest.fixture
def scripted_reader():
    register_script("docqa-reader", ScriptedProvider(responder=reader))
    yield "scripted/docqa-reader"
    unregister_script("docqa-reader")


async def test_the_sample_is_uploaded_searched_and_answered_with_supporting_citations(
    sample, scripted_reader
):
    score = await docqa_eval(
        data=sample, models=[scripted_reader], agent_name="graph-query-agent", plain=True,
        answer_questions=list(sample.questions),
    )  # fmt: skip

    assert await Document.objects.filter(project=score.setup.project).acount() == len(CORPUS)
    assert not await Passage.objects.filter(project=score.setup.project, embedding_pending=True).aexists()
    first = await Document.objects.aget(project=score.setup.project, name="2wiki-0001")
    assert first.text.startswith("Glass Orchard: Glass Orchard is a 1971 film")
    retrieval = retrieval_summary(score.retrieval)
    assert [(r["dataset"], r["n"], r["recall_5"]) for r in retrieval] == [
        ("2wikimultihopqa", 1, 1.0),
        ("musique", 1, 1.0),
    ]
    assert [(a.mode, a.dataset, a.correct, a.cites_supporting, a.invented) for a in score.answers] == [
        ("agent", "2wikimultihopqa", True, True, 1),
        ("plain", "2wikimultihopqa", True, True, 1),
        ("agent", "musique", True, True, 1),
        ("plain", "musique", True, True, 1),
    ]
    assert score.answers[0].tools == ["search_passages"]
    # The agent's one search ranked the supporting passage in its first 5; plain RAG made no call.
    assert [a.searched_recall_5 for a in score.answers] == [1.0, None, 1.0, None]
    assert score.answers[0].cited == ["2wiki-0002"]
    assert await Conversation.objects.filter(project=score.setup.project).acount() == 4
    rows = answer_summary(score.answers)
    assert [(r["mode"], r["correct"], r["f1"] > 0, r["invented"]) for r in rows] == [
        ("agent", 1.0, True, 1), ("agent", 1.0, True, 1), ("plain", 1.0, True, 1), ("plain", 1.0, True, 1),
    ]  # fmt: skip
    assert [r["searched_recall_5"] for r in rows] == [1.0, 1.0, None, None]
    printed = docqa_tables(retrieval, rows)
    assert "HippoRAG 2" in printed and "kgchat plain scripted/docqa-reader" in printed


async def test_a_second_run_starts_from_a_fresh_project_and_a_model_that_knows_nothing_scores_zero(sample):
    register_script("docqa-blank", ScriptedProvider(responder=lambda messages, tools: text("I do not know.")))
    try:
        await docqa_eval(data=sample, models=[], agent_name=None, plain=False, answer_questions=[])

        score = await docqa_eval(
            data=sample, models=["scripted/docqa-blank"], agent_name=None, plain=True,
            answer_questions=list(sample.questions),
        )  # fmt: skip
    finally:
        unregister_script("docqa-blank")

    assert await Document.objects.filter(project=score.setup.project).acount() == len(CORPUS)
    assert [(a.mode, a.correct, a.f1, a.cites_supporting, a.invented) for a in score.answers] == [
        ("plain", False, 0.0, False, 0),
    ] * 2


def test_the_eval_command_prints_our_figures_beside_the_published_table_and_writes_them(
    sample, scripted_reader, tmp_path
):
    out, results = io.StringIO(), tmp_path / "results"

    call_command(
        "eval", sets=["docqa"], docqa_data=str(sample.directory), models=[scripted_reader], plain_only=True,
        per_dataset=1, out=str(results), stdout=out,
    )  # fmt: skip

    printed = out.getvalue()
    assert "docqa retrieval" in printed and "docqa answers" in printed
    assert "HippoRAG 2" in printed and "fast-graphrag 0.96" in printed
    plain = next(
        line for line in printed.splitlines() if line.startswith("kgchat plain scripted/docqa-reader")
    )
    # F1 of "Tallinford, as [2wiki-0002](…) says.": 1 of its 4 words against the gold's 1.
    assert plain.split()[-6:] == ["100.0", "/", "40.0", "100.0", "/", "40.0"]
    saved = json.loads((results / "docqa.json").read_text())
    assert saved["documents"] == len(CORPUS) and len(saved["retrieval_results"]) == len(QUESTIONS)
    assert [(a["mode"], a["n"], a["correct"]) for a in saved["answers"]] == [("plain", 1, 1.0)] * 2
    # Each answer is written as it comes, and the retrieval printed before the first is asked.
    streamed = (results / "docqa-answers.jsonl").read_text().splitlines()
    assert [json.loads(line)["question_id"] for line in streamed] == ["q-2wiki", "q-musique"]
    assert printed.index("docqa retrieval") < printed.index("ok  docqa")


def test_the_eval_command_says_where_it_looked_when_the_sample_is_missing(tmp_path):
    with pytest.raises(CommandError, match=f"the docqa sample is not in {tmp_path}"):
        call_command("eval", sets=["docqa"], docqa_data=str(tmp_path), stdout=io.StringIO())

    assert not Document.objects.exists()


async def test_a_model_that_cannot_be_asked_is_refused_before_anything_is_uploaded(sample):
    with pytest.raises(EvalError, match="'scripted/nobody' cannot be used"):
        await docqa_eval(
            data=sample, models=["scripted/nobody"], agent_name=None, plain=True,
            answer_questions=list(sample.questions),
        )  # fmt: skip

    assert not await Document.objects.aexists()
