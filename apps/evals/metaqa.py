"""MetaQA in ``make eval``: its movie knowledge base imported through the real importer, its dev
questions sampled, and answers scored by Hits@1 and answer recall (issue #25).

The data ships in ``apps/evals/data/metaqa/`` (a modified copy of MetaQA, CC BY 3.0: see its
README for the attribution and what was changed). The knowledge base is imported once into an eval
project named after its content hash (``eval-metaqa-<hash>``) and reused while the file is the same.

The import does not wait for the 43k entities' embeddings (minutes of CPU): questions are asked at
once, and semantic search covers only the entities embedded so far (none, unless an embedding
worker runs); full-text and name search, and the graph tools, cover them all.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import itertools
import json
import random
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from apps.evals.questions import Kind, Question, cased_words, normalise

DATA = Path(__file__).resolve().parent / "data" / "metaqa"
KB = DATA / "kb.jsonl.gz"
QUESTIONS = DATA / "questions-dev.jsonl.gz"
DEFAULT_PER_HOP = 20
HOP_KINDS: dict[int, Kind] = {1: "1-hop", 2: "2-hop", 3: "3-hop"}

# Hits@1 published for MetaQA (README of the data, read off arXiv 2504.08893's chart), per hop.
PUBLISHED: tuple[tuple[str, tuple[float, float, float]], ...] = (
    ("LLM alone", (0.45, 0.38, 0.52)),
    ("LLM + KG retrieval", (0.95, 0.58, 0.50)),
    ("LLM + KG, question decomposition", (0.92, 0.78, 0.63)),
    ("trained KGQA systems (best)", (0.99, 0.99, 0.99)),
)

# A question type's words, as relationship types of the knowledge base (from the film to the value).
RELATIONSHIPS = {
    "actor": "STARRED_ACTORS",
    "director": "DIRECTED_BY",
    "writer": "WRITTEN_BY",
    "genre": "HAS_GENRE",
    "year": "RELEASE_YEAR",
    "language": "IN_LANGUAGE",
    "tags": "HAS_TAGS",
    "tag": "HAS_TAGS",
    "imdbrating": "HAS_IMDB_RATING",
    "imdbvotes": "HAS_IMDB_VOTES",
}
START_TYPES = {"movie": "Movie", "actor": "Person", "director": "Person", "writer": "Person", "tag": "Tag"}
# The entity type a question type asks for (its last word).
ANSWER_TYPES = {
    "movie": "Movie", "actor": "Person", "director": "Person", "writer": "Person", "genre": "Genre",
    "year": "Year", "language": "Language", "tags": "Tag", "imdbrating": "Rating", "imdbvotes": "Votes",
}  # fmt: skip


def kb_lines() -> Iterator[str]:
    """The knowledge base's import lines (entities first)."""
    with gzip.open(KB, "rt", encoding="utf-8") as lines:
        yield from lines


@functools.cache
def kb_digest() -> str:
    """The knowledge base file's content hash (12 hex digits): the eval project's name holds it."""
    return hashlib.sha256(KB.read_bytes()).hexdigest()[:12]


@dataclass(frozen=True)
class Names:
    """The knowledge base's entity names, normalised: their types, the longest in words, and those
    the knowledge base writes without a capital letter (its tags, "famous", years)."""

    types: dict[str, frozenset[str]]
    longest: int
    lower: frozenset[str] = frozenset()


def kb_names() -> Names:
    """The names of the knowledge base the eval uses (read once per content hash)."""
    return _kb_names(kb_digest())


@functools.cache
def _kb_names(digest: str) -> Names:
    types: dict[str, set[str]] = defaultdict(set)
    lower: set[str] = set()
    for line in kb_lines():
        record = json.loads(line)
        if record.get("kind") == "entity":
            name = normalise(record["name"])
            types[name].add(record["type"])
            if not any(c.isupper() for c in record["name"]):
                lower.add(name)
    return Names(
        types={name: frozenset(t) for name, t in types.items() if name},
        longest=max((len(n.split()) for n in types), default=1),
        lower=frozenset(lower),
    )


def question_records() -> list[dict[str, object]]:
    with gzip.open(QUESTIONS, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def metaqa_questions(*, per_hop: int = DEFAULT_PER_HOP, seed: int = 12) -> list[Question]:
    """``per_hop`` dev questions of each hop count, spread evenly over its question types (seeded);
    ``per_hop`` 0: the whole dev split."""
    by_hop: dict[int, dict[str, list[dict[str, object]]]] = defaultdict(lambda: defaultdict(list))
    for record in question_records():
        by_hop[int(str(record["hop"]))][str(record["qtype"])].append(record)
    questions: list[Question] = []
    for hop in sorted(by_hop):
        qtypes = by_hop[hop]
        if per_hop <= 0:
            chosen = [r for qtype in sorted(qtypes) for r in qtypes[qtype]]
        else:
            rng = random.Random(f"metaqa:{seed}:{hop}")
            pools = {qtype: rng.sample(records, len(records)) for qtype, records in sorted(qtypes.items())}
            order = sorted(pools)
            rng.shuffle(order)
            chosen = []
            while len(chosen) < per_hop and any(pools.values()):
                for qtype in order:
                    if pools[qtype] and len(chosen) < per_hop:
                        chosen.append(pools[qtype].pop())
        for index, record in enumerate(chosen):
            questions.append(
                Question(
                    id=f"metaqa-{hop}-hop-{index}",
                    set="metaqa",
                    kind=HOP_KINDS[hop],
                    template=str(record["qtype"]),
                    text=str(record["question"]),
                    expected=tuple(str(a) for a in record["answers"]),  # type: ignore[attr-defined]
                    slots={"topic": str(record["topic"])},
                )
            )
    return questions


@functools.cache
def dev_shares() -> dict[tuple[str, str], float]:
    """Each question type's share of its hop's dev questions, by ``(kind, qtype)``: a sample spread
    evenly over the types (``metaqa_questions``) weighs a rare type (8 "how popular" questions of
    9,483 at 1-hop) like a common one (1,326 "when was X released"); these shares weigh it back."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for record in question_records():
        counts[(HOP_KINDS[int(str(record["hop"]))], str(record["qtype"]))] += 1
    totals: dict[str, int] = defaultdict(int)
    for (kind, _), n in counts.items():
        totals[kind] += n
    return {(kind, qtype): n / totals[kind] for (kind, qtype), n in counts.items()}


def dev_weighted(rows: list[tuple[str, str, float | None]]) -> float | None:
    """The mean of per-type figures ``(kind, qtype, figure)`` of one hop weighted by the types' shares
    of the dev split (``dev_shares``), over the types sampled: the estimate of the whole split's
    figure that published Hits@1 is comparable to. None when no row has a figure."""
    shares = dev_shares()
    weighed = [(shares.get((kind, qtype), 0.0), figure) for kind, qtype, figure in rows if figure is not None]
    total = sum(share for share, _ in weighed)
    return sum(share * figure for share, figure in weighed) / total if total else None


@functools.cache
def _question_index() -> dict[str, tuple[str, str]]:
    return {str(r["question"]): (str(r["topic"]), str(r["qtype"])) for r in question_records()}


def question_plan(text: str) -> tuple[str, str, list[tuple[str, str]]] | None:
    """A dev question's topic, its start type and its hops ``(relationship, direction)``, from its
    question type (the template it was written from), for the perfect planner; None if unknown."""
    found = _question_index().get(text.strip())
    if found is None:
        return None
    topic, qtype = found
    parts = qtype.split("_to_")
    hops = [
        (RELATIONSHIPS[b], "out") if a == "movie" else (RELATIONSHIPS[a], "in")
        for a, b in itertools.pairwise(parts)
    ]
    return topic, START_TYPES[parts[0]], hops


def _answer_types(question: Question) -> frozenset[str]:
    asked = ANSWER_TYPES.get(question.template.rsplit("_to_", 1)[-1])
    if asked is not None:
        return frozenset({asked})
    names = kb_names()
    return frozenset(t for answer in question.expected for t in names.types.get(normalise(answer), ()))


def first_answer_entity(question: Question, answer: str) -> str | None:
    """The first name in ``answer`` (normalised) of an entity of the type asked for (the question
    type's last word: "director" a Person, "genre" a Genre), the question's topic left out; at a
    word, the longest such name. "Films directed by Ang Lee: …" does not count "Ang Lee" for a
    question about Ang Lee; "film" (a tag) does not count for a question about directors; a name
    the knowledge base writes with capitals counts only where the answer does too ("the following
    films: …" does not name the film *Following*)."""
    names = kb_names()
    types = _answer_types(question)
    topic = normalise(question.slots.get("topic", ""))
    words = normalise(answer).split()
    cased = cased_words(answer)
    if len(cased) != len(words):
        cased = []  # folding the case split a word: no case check
    size = len(topic.split())
    i = 0
    while i < len(words):
        at_topic = bool(size) and " ".join(words[i : i + size]) == topic
        # A longer name the topic starts ("Rocky II" for "Rocky") is an answer; the topic itself
        # and the shorter names inside it ("Divine" in "Divine Trash") are not.
        for j in range(min(len(words), i + names.longest), i + (size if at_topic else 0), -1):
            candidate = " ".join(words[i:j])
            if names.types.get(candidate, frozenset()) & types and _written_as_named(
                candidate, cased[i:j], names
            ):
                return candidate
        i += size if at_topic else 1
    return None


def _written_as_named(candidate: str, written: list[str], names: Names) -> bool:
    """Whether the answer's words ``written`` can be the entity ``candidate``: the knowledge base
    writes it in lower case, or the answer gives it a capital letter somewhere."""
    return not written or candidate in names.lower or any(c.isupper() for word in written for c in word)


def without_topic(question: Question, answer: str) -> str:
    """``answer`` with the question's topic cut out wherever it is named, case aside: a gold name
    inside the topic's own ("famous" in "Almost Famous") is not one the answer gives."""
    topic = question.slots.get("topic", "").strip()
    if not topic:
        return answer
    return re.sub(rf"(?<!\w){re.escape(topic)}(?!\w)", " ", answer, flags=re.IGNORECASE)


def hits_at_1(question: Question, answer: str) -> float:
    """1 if the first answer entity the answer names is a gold answer, else 0."""
    first = first_answer_entity(question, answer)
    return 1.0 if first is not None and first in {normalise(a) for a in question.expected} else 0.0
