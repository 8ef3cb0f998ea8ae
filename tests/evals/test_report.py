"""The eval report: summary rows, the printed table, files, and rescoring a written run."""

import json

import pytest

from apps.evals.report import rescore, summarise, table, write
from apps.evals.services import QuestionResult


def result(**fields):
    base = dict(
        question_id="demo-absent-0", set="demo", kind="absent", template="capital",
        question="What is the capital of Logaria?", expected=[], expected_count=None,
        mode="agent", model="local/m", answer="", score=0.0, done_s=1.0,
    )  # fmt: skip
    return QuestionResult(**{**base, **fields})


def test_rescoring_a_written_run_applies_todays_rules_to_its_answers():
    data = {"results": [result(answer="The knowledge graph has nothing about Logaria.").as_dict()]}

    (again,) = rescore(json.loads(json.dumps(data)))

    assert again.score == 1.0
    assert again.done_s == 1.0


def test_summary_has_a_row_per_kind_and_an_all_row_and_the_files_are_written(tmp_path):
    results = [
        result(score=1.0, cited=0),
        result(
            question_id="demo-count-0",
            kind="count",
            score=0.0,
            cited=2,
            valid_citations=1,
            citation_precision=0.5,
        ),
    ]

    rows = summarise(results)
    paths = write(results, rows, tmp_path)

    assert [(r["kind"], r["n"], r["correct"]) for r in rows] == [
        ("absent", 1, 1.0),
        ("count", 1, 0.0),
        ("all", 2, 0.5),
    ]
    assert rows[-1]["citation_precision"] == 0.5
    assert rows[-1]["answers_without_citations"] == 1
    assert "local/m" in table(rows)
    assert json.loads(paths["json"].read_text())["summary"] == rows
    assert (tmp_path / "latest.json").exists()


def test_metaqa_hits_at_1_is_printed_per_hop_with_the_published_figures_beside_it():
    from apps.evals.report import metaqa_rows, metaqa_table

    results = [
        result(
            question_id="m1", set="metaqa", kind="1-hop", template="movie_to_director", score=1.0, recall=1.0
        ),
        result(
            question_id="m2",
            set="metaqa",
            kind="2-hop",
            template="actor_to_movie_to_director",
            score=0.0,
            recall=0.5,
        ),
    ]

    text = metaqa_table(summarise(results), metaqa_rows(results))

    assert "1.00 (1.00) n=1" in text and "0.00 (0.50) n=1" in text
    assert "LLM + KG retrieval" in text and "0.95" in text and "0.58" in text
    assert "actor_to_movie_to_director" in text


def test_metaqa_dev_weighted_hits_at_1_weighs_each_question_type_by_its_share_of_the_dev_split():
    """The sample is spread evenly over the question types; the dev split is not (1,326 "when was X
    released" at 1-hop, 8 "how popular is X"). The dev-weighted figure weighs them back."""
    from apps.evals.metaqa import dev_shares
    from apps.evals.report import metaqa_rows, metaqa_table, metaqa_weighted

    results = [
        result(question_id="y", set="metaqa", kind="1-hop", template="movie_to_year", score=1.0, recall=1.0),
        result(
            question_id="v", set="metaqa", kind="1-hop", template="movie_to_imdbvotes", score=0.0, recall=0.0
        ),
    ]
    shares = dev_shares()
    year, votes = shares[("1-hop", "movie_to_year")], shares[("1-hop", "movie_to_imdbvotes")]
    assert sum(s for (kind, _), s in shares.items() if kind == "1-hop") == pytest.approx(1.0)

    (weighted,) = metaqa_weighted(metaqa_rows(results))

    assert weighted["hits_at_1"] == pytest.approx(year / (year + votes))
    assert weighted["hits_at_1"] > 0.99 and weighted["n"] == 2
    text = metaqa_table(summarise(results), metaqa_rows(results))
    assert "0.50 (0.50) n=2" in text  # the sample's own mean
    assert f"dev-weighted              {weighted['hits_at_1']:.2f} ({weighted['recall']:.2f})" in text


def test_answers_naming_an_entity_no_tool_returned_are_counted_beside_invented_citations():
    results = [
        result(
            cited=2,
            valid_citations=1,
            invented_names=["The Dark Knight"],
            raw_invented_names=["The Dark Knight"],
        ),
        result(question_id="demo-count-0", kind="count", raw_invented_names=["1911"]),
        result(question_id="demo-count-1", kind="count", cited=1, valid_citations=1),
    ]

    rows = summarise(results)

    everything = rows[-1]
    assert (
        everything["invented_citations"],
        everything["invented_names"],
        everything["raw_invented_names"],
    ) == (1, 1, 2)
    header, *lines = table(rows).splitlines()
    assert "inv_cite" in header and "inv_names" in header
    assert lines[-1].split()[9:11] == ["1", "1"]
