"""``make eval --set extraction`` (issue 26 item 5): the world's prose, the perfect extractor's
figures (the pipeline loses nothing), and the table the command prints."""

from __future__ import annotations

import io
import json

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command

from apps.evals.extraction import extraction_eval, world_prose
from apps.evals.extraction_answers import EXTRACTED_SET, extracted_graph_answers
from apps.evals.planner import COMPARED, PLANNER_MODEL
from apps.evals.questions import KINDS
from apps.evals.services import eval_user_ensure
from apps.evals.sets import fictional_world

pytestmark = pytest.mark.django_db


def test_the_prose_states_several_facts_a_sentence_and_names_things_again_in_other_words():
    world = fictional_world(seed=12)
    first = world_prose(world, countries=1)[0]
    country = next(iter(world.countries.values()))

    assert first.text.startswith(f"{country.name} is a country in {country.continent}, and its capital is")
    assert "The country pays with the" in first.text and "It borders" in first.text
    assert (country.capital, "CAPITAL_OF", country.name) in first.facts
    assert len(first.facts) >= 5


def test_the_perfect_extractor_loses_nothing():
    score = extraction_eval(model=PLANNER_MODEL, owner=eval_user_ensure(), countries=4)

    assert (score.precision, score.recall) == (1.0, 1.0)
    assert score.duplicates == 0 and score.wrong_passage == 0 and score.failed == 0
    assert score.passages == 5  # the heading and four countries


@pytest.mark.django_db(transaction=True)  # the turns run in threads of their own
def test_the_eval_command_prints_the_extraction_table_with_the_answers_over_the_extracted_graph(tmp_path):
    out = io.StringIO()

    call_command("eval", sets=["extraction"], per_kind=1, out=str(tmp_path), stdout=out)

    text = out.getvalue()
    assert "extraction   model" in text and "rel_prec" in text and "wrong_psg" in text
    assert "answers" in next(line for line in text.splitlines() if line.startswith("extraction   model"))
    row = next(line for line in text.splitlines() if line.startswith("world prose"))
    assert "1.00     1.00" in row
    saved = json.loads((tmp_path / "extraction.json").read_text())
    assert saved[0]["recall"] == 1.0 and saved[0]["duplicate_share"] == 0.0
    assert saved[0]["answers_asked"] == len(KINDS) and 0 < saved[0]["answers_correct"] < 1
    assert row.split()[-2:] == [f"{saved[0]['answers_correct']:.2f}", str(len(KINDS))]
    # The report beside it has the extracted set's rows per kind.
    assert any(line.startswith("extracted") and " one_hop " in line for line in text.splitlines())


def test_the_eval_command_can_leave_the_answers_out(tmp_path):
    out = io.StringIO()

    call_command("eval", sets=["extraction"], no_answers=True, out=str(tmp_path), stdout=out)

    row = next(line for line in out.getvalue().splitlines() if line.startswith("world prose"))
    assert row.split()[-2:] == ["-", "0"]
    assert json.loads((tmp_path / "extraction.json").read_text())[0]["answers_correct"] is None


def test_the_eval_command_reads_only_the_first_countries_it_is_told(tmp_path):
    out = io.StringIO()

    call_command("eval", sets=["extraction"], no_answers=True, countries=2, out=str(tmp_path), stdout=out)

    saved = json.loads((tmp_path / "extraction.json").read_text())[0]
    assert saved["passages"] == 3  # the heading and two countries
    assert (saved["precision"], saved["recall"]) == (1.0, 1.0)


@pytest.mark.django_db(transaction=True)
def test_the_perfect_planner_answers_every_question_the_prose_states_over_the_extracted_graph():
    score = extraction_eval(model=PLANNER_MODEL, owner=eval_user_ensure())

    results = async_to_sync(extracted_graph_answers)(score=score, per_kind=1)

    assert [r.kind for r in results] == list(KINDS)
    assert all(r.set == EXTRACTED_SET and r.model == PLANNER_MODEL and r.error is None for r in results)
    # The prose states no populations or areas: what compares or filters by them has nothing to go on.
    by_numbers = [r for r in results if r.template in COMPARED or r.template == "cities_over"]
    stated = [r for r in results if r not in by_numbers]
    assert by_numbers and all(r.score == 0 for r in by_numbers)
    assert all(r.score == 1.0 for r in stated), [(r.question, r.answer) for r in stated if r.score < 1]
    assert score.questions == len(KINDS) and score.answers == len(stated) / len(KINDS)
