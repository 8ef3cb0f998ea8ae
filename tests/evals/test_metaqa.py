"""MetaQA in the eval: the shipped copy, its sampled questions, Hits@1, and its eval project."""

import dataclasses
import json

import pytest

from apps.evals import metaqa
from apps.evals.questions import Question
from apps.evals.scoring import answer_recall
from apps.graph_tools.models import GraphObject, GraphRelationship


def test_the_shipped_copy_keeps_its_attribution_and_says_it_is_modified():
    readme = (metaqa.DATA / "README.md").read_text()

    assert "CC BY 3.0" in readme
    assert "Yuyu Zhang" in readme and "AAAI 2018" in readme
    assert "**modified**" in readme
    assert metaqa.KB.exists() and metaqa.QUESTIONS.exists()


def test_a_sample_spreads_each_hop_over_its_question_types_and_is_the_same_for_a_seed():
    questions = metaqa.metaqa_questions(per_hop=26, seed=5)

    by_hop = {kind: [q for q in questions if q.kind == kind] for kind in ("1-hop", "2-hop", "3-hop")}
    assert [len(v) for v in by_hop.values()] == [26, 26, 26]
    # 13 question types at 1 hop: two of each; 21 at 2 hops: one or two of each.
    assert sorted(
        {sum(1 for q in by_hop["1-hop"] if q.template == t) for t in {q.template for q in by_hop["1-hop"]}}
    ) == [2]
    assert len({q.template for q in by_hop["2-hop"]}) == 21
    assert metaqa.metaqa_questions(per_hop=26, seed=5) == questions
    assert metaqa.metaqa_questions(per_hop=26, seed=6) != questions


def test_per_hop_zero_asks_the_whole_dev_split():
    assert len(metaqa.metaqa_questions(per_hop=0)) == 9_483 + 14_331 + 12_168


def _question(
    template="actor_to_movie_to_director", topic="Winston Chao", expected=("Ang Lee", "Jackie Chan")
):
    return Question(
        id="m",
        set="metaqa",
        kind="2-hop",
        template=template,
        text="?",
        expected=expected,
        slots={"topic": topic},
    )


def test_hits_at_1_is_the_first_entity_of_the_asked_type_the_answer_names():
    question = _question()

    assert metaqa.hits_at_1(question, "Winston Chao's films were directed by Ang Lee and Jackie Chan.") == 1.0
    assert metaqa.hits_at_1(question, "Directed by Steven Spielberg, then Ang Lee.") == 0.0
    # "Eat Drink Man Woman" is a film, not a director: it does not count as the first answer.
    assert metaqa.hits_at_1(question, "Eat Drink Man Woman was directed by Jackie Chan.") == 1.0
    assert metaqa.hits_at_1(question, "I could not find it.") == 0.0
    # A person's name inside the topic's own name ("Divine" in "Divine Trash") is not an answer.
    about_a_film = _question("movie_to_director", "Divine Trash", ("Steve Yeager",))
    assert metaqa.hits_at_1(about_a_film, "The director of Divine Trash was Steve Yeager.") == 1.0


def test_a_longer_name_the_topic_starts_is_an_answer_and_the_topic_is_not():
    sequel = _question("movie_to_director_to_movie", "Rocky", ("Rocky II", "Rocky III"))

    assert metaqa.first_answer_entity(sequel, "Rocky shares its director with Rocky II.") == "rocky ii"
    assert metaqa.hits_at_1(sequel, "Rocky shares its director with Rocky II.") == 1.0
    assert metaqa.first_answer_entity(sequel, "Rocky, and Rocky again.") is None


def test_a_capitalised_name_is_named_only_where_the_answer_writes_a_capital():
    """Measured: "Rick Moranis has been tagged with the following films: Ghostbusters, …" scored 0,
    its first film being *Following* (the knowledge base holds a film of that name)."""
    tagged = _question("tag_to_movie", "rick moranis", ("Ghostbusters", "Honey, I Shrunk the Kids"))
    answer = "Rick Moranis has been tagged with the following films: Ghostbusters, Spaceballs."
    rated = _question("movie_to_imdbrating", "The Lookout", ("good",))

    assert metaqa.first_answer_entity(tagged, answer) == "ghostbusters"
    assert metaqa.hits_at_1(tagged, answer) == 1.0
    assert metaqa.first_answer_entity(tagged, "Following, then Ghostbusters.") == "following"
    # Names the knowledge base writes in lower case (tags, ratings) count as written.
    assert metaqa.hits_at_1(rated, "The Lookout is considered good.") == 1.0


def test_a_gold_name_inside_the_topic_is_not_counted_as_named_by_the_answer():
    votes = _question("movie_to_imdb_votes", "Almost Famous", ("famous",))
    votes = dataclasses.replace(votes, kind="1-hop")

    assert answer_recall(votes, "I could not find how popular Almost Famous was.") == 0.0
    assert answer_recall(votes, "almost famous is famous.") == 1.0
    assert answer_recall(votes, "[Almost Famous](kg://movie:1) is famous.") == 1.0


def test_the_perfect_plan_of_a_question_follows_its_question_type():
    record = next(r for r in metaqa.question_records() if r["qtype"] == "movie_to_director_to_movie_to_genre")

    topic, start_type, hops = metaqa.question_plan(str(record["question"]))

    assert (topic, start_type) == (record["topic"], "Movie")
    assert hops == [("DIRECTED_BY", "out"), ("DIRECTED_BY", "in"), ("HAS_GENRE", "out")]


@pytest.mark.django_db
def test_the_eval_project_imports_the_knowledge_base_once_and_is_reused_while_it_is_the_same(monkeypatch):
    from apps.evals.harness import eval_project_ensure

    lines = [
        {"kind": "entity", "key": "movie-a", "type": "Movie", "name": "A Film"},
        {"kind": "entity", "key": "person-b", "type": "Person", "name": "B Person"},
        {"kind": "relationship", "type": "DIRECTED_BY", "src": "movie-a", "dst": "person-b"},
    ]
    monkeypatch.setattr(metaqa, "kb_lines", lambda: (json.dumps(r) for r in lines))
    monkeypatch.setattr(metaqa, "kb_digest", lambda: "0123456789ab")

    project = eval_project_ensure(set_name="metaqa")
    again = eval_project_ensure(set_name="metaqa")
    monkeypatch.setattr(metaqa, "kb_digest", lambda: "ba9876543210")
    changed = eval_project_ensure(set_name="metaqa")

    assert project.slug == "eval-metaqa-0123456789ab" and again.id == project.id
    assert GraphObject.objects.filter(project=project).count() == 2
    assert GraphRelationship.objects.filter(project=project).count() == 1
    assert changed.id != project.id
    assert project.agent_definitions.filter(name="graph-query-agent").exists()
