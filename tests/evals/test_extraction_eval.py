"""``make eval --set extraction`` (issue 26 item 5): the world's prose, the perfect extractor's
figures (the pipeline loses nothing), and the table the command prints."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from apps.evals.extraction import extraction_eval, world_prose
from apps.evals.planner import PLANNER_MODEL
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


def test_the_eval_command_prints_the_extraction_table(tmp_path):
    out = io.StringIO()

    call_command("eval", sets=["extraction"], out=str(tmp_path), stdout=out)

    text = out.getvalue()
    assert "extraction   model" in text and "rel_prec" in text and "wrong_psg" in text
    row = next(line for line in text.splitlines() if line.startswith("world prose"))
    assert "1.00     1.00" in row
    saved = json.loads((tmp_path / "extraction.json").read_text())
    assert saved[0]["recall"] == 1.0 and saved[0]["duplicate_share"] == 0.0
