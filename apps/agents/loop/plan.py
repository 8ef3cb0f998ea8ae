"""The plan step of a planned turn: its JSON Schemas, the question's hints, and the typed paths chosen.

See ``plan_graph`` for how a turn is planned. The model writes the answer's shape, then the plan for
that shape (a start among the named entities, the type asked for, the relationships the question
goes through, maybe a second named entity); ``candidates.plan_candidates`` turns it
into ``query_paths`` calls; ``grammar`` and ``word_relationships`` read the question.
"""

import json
from collections.abc import Sequence
from typing import Any

from apps.agents.loop.grammar import grammar_shapes, ranking_words, words_outside
from apps.agents.loop.plan_graph import PLAN_MAX_HOPS, SHAPES, Mention, Relationship
from apps.agents.loop.word_relationships import word_hints

# --- the plan ----------------------------------------------------------------------------------

PLAN_RULES = """To look something up, first say the shape of the answer:
- "list": the entities asked for ("which countries border X", "who directed Y", "what is the capital of X");
- "count": how many;
- "yes/no": a question answered yes or no ("does A border B", "is X the capital of Y");
- "each": a list where every item gets its own answer ("which countries border X, and what currency does each use", "list the books with their authors", "for each neighbour, name its capital");
- "largest"/"smallest": which of two or more is bigger, larger, more populous / smaller ("which is larger, A or B").
Then the plan, for that shape:
- "start": the entity the question is about (one of the entities named; some named entities are only common words);
- "asks_for": the type of what is asked;
- "relationships": every relationship the question goes through, in the order it mentions them; one mentioned twice ("the films directed by the director of X": directed, director) is written twice; none when it asks about the start itself;
- "and": another named entity the answers must also be related to, with the relationships from it ("both A and B", "the ones that use X", "is A related to B"), else null;
- "property" (largest/smallest): the number compared, of the start and the "and" entity, or of the answers.
Examples from another graph (Book -WRITTEN_BY-> Person, Book -PUBLISHED_BY-> Publisher, Book -HAS_TOPIC-> Topic, Book -PUBLISHED_IN-> Year, Publisher -LOCATED_IN-> City):
- "who wrote Dune" (list): {"start": "Dune", "asks_for": "Person", "relationships": ["WRITTEN_BY"], "and": null}
- "which books did Ann Lee write" (list): {"start": "Ann Lee", "asks_for": "Book", "relationships": ["WRITTEN_BY"], "and": null}
- "Orbit Press is the publisher of which books?" (list): {"start": "Orbit Press", "asks_for": "Book", "relationships": ["PUBLISHED_BY"], "and": null}
- "which books have the same author as Dune" (list): {"start": "Dune", "asks_for": "Book", "relationships": ["WRITTEN_BY", "WRITTEN_BY"], "and": null}
- "who wrote books together with Ann Lee" (list): {"start": "Ann Lee", "asks_for": "Person", "relationships": ["WRITTEN_BY", "WRITTEN_BY"], "and": null}
- "when were the books by Ann Lee published" (list): {"start": "Ann Lee", "asks_for": "Year", "relationships": ["WRITTEN_BY", "PUBLISHED_IN"], "and": null}
- "what topics are the books of Ann Lee about" (list): {"start": "Ann Lee", "asks_for": "Topic", "relationships": ["HAS_TOPIC", "WRITTEN_BY"], "and": null}
- "the publishers of the books written by the author of Dune" (list): {"start": "Dune", "asks_for": "Publisher", "relationships": ["PUBLISHED_BY", "WRITTEN_BY", "WRITTEN_BY"], "and": null}
- "in which city is the publisher of Dune" (list): {"start": "Dune", "asks_for": "City", "relationships": ["LOCATED_IN", "PUBLISHED_BY"], "and": null}
- "the books that share a topic with Dune were published by whom" (list): {"start": "Dune", "asks_for": "Publisher", "relationships": ["HAS_TOPIC", "HAS_TOPIC", "PUBLISHED_BY"], "and": null}
- "how many books did Ann Lee write" (count): {"start": "Ann Lee", "asks_for": "Book", "relationships": ["WRITTEN_BY"], "and": null}
- "which books did both Ann Lee and Bo Chen write" (list): {"start": "Ann Lee", "asks_for": "Book", "relationships": ["WRITTEN_BY"], "and": {"start": "Bo Chen", "relationships": ["WRITTEN_BY"]}}
- "which of Ann Lee's books are about space" (list): {"start": "Ann Lee", "asks_for": "Book", "relationships": ["WRITTEN_BY"], "and": {"start": "space", "relationships": ["HAS_TOPIC"]}}
- "did Ann Lee write Dune?" (yes/no): {"start": "Ann Lee", "asks_for": "Book", "relationships": ["WRITTEN_BY"], "and": {"start": "Dune", "relationships": []}}
- "list Ann Lee's books with their publishers" (each): {"start": "Ann Lee", "asks_for": "Publisher", "relationships": ["WRITTEN_BY", "PUBLISHED_BY"], "and": null}
- "which books did Ann Lee write, and who published each?" (each): {"start": "Ann Lee", "asks_for": "Publisher", "relationships": ["WRITTEN_BY", "PUBLISHED_BY"], "and": null}
- "which book is longer, Dune or Emma?" (largest): {"start": "Dune", "asks_for": "Book", "relationships": [], "and": {"start": "Emma", "relationships": []}, "property": "pages"}
- "tell me about Dune" (list): {"start": "Dune", "asks_for": "Book", "relationships": [], "and": null}"""


def shape_schema(named: Sequence[Mention], question: str = "") -> dict[str, Any]:
    """The JSON Schema of the first plan step: the answer's shape only, among those the question's
    grammar allows (comparisons only when the named entities have numbers to compare)."""
    return {
        "type": "object",
        "properties": {"answer": {"enum": allowed_shapes(named, question)}},
        "required": ["answer"],
        "additionalProperties": False,
    }


def allowed_shapes(named: Sequence[Mention], question: str = "") -> list[str]:
    """The shapes the plan may take: the grammar's (``grammar_shapes``), comparisons only with numbers."""
    numbers = any(m.numbers for m in named)
    names = [m.name for m in named]
    shapes = grammar_shapes(question, names) if question else SHAPES
    ranks = numbers and (not question or ranking_words(words_outside(question, names)))
    allowed = [s for s in shapes if ranks or s not in ("largest", "smallest")]
    # A comparison between entities with no numbers to compare is planned as any other question.
    return allowed or [s for s in SHAPES if s not in ("yes/no", "largest", "smallest")]


def plan_schema(
    named: Sequence[Mention], relationships: Sequence[Relationship], shape: str = "list"
) -> dict[str, Any]:
    """The JSON Schema of a plan for a shape: a named entity as the start, one of this graph's entity
    types, a list of this graph's relationship types (two at least for "each"), maybe a second named
    entity, and for largest/smallest the number compared."""
    names = list(dict.fromkeys(m.name for m in named))
    types = sorted(
        {r.source for r in relationships} | {r.target for r in relationships} | {m.type for m in named}
    )
    rel_list: dict[str, Any] = {
        "type": "array",
        "items": {"enum": sorted({r.type for r in relationships})},
        "maxItems": PLAN_MAX_HOPS,
    }
    main_list = {**rel_list, "minItems": 2} if shape == "each" else rel_list
    numbers = sorted({n for m in named for n in m.numbers})
    properties: dict[str, Any] = {
        "start": {"enum": names},
        "asks_for": {"enum": types},
        "relationships": main_list,
        "and": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {"start": {"enum": names}, "relationships": rel_list},
                    "required": ["start", "relationships"],
                    "additionalProperties": False,
                },
            ]
        },
    }
    if shape in ("largest", "smallest") and numbers:
        properties["property"] = {"enum": numbers}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def graph_lines(relationships: Sequence[Relationship]) -> str:
    """This graph's relationships, one a line, for the system prompt."""
    return "\n".join(f"- {r.source} -{r.type}-> {r.target}" for r in relationships)


def plan_system_part(relationships: Sequence[Relationship]) -> str:
    """What the system prompt says about plans: the graph's relationships, the rules and the examples."""
    return f"This graph's relationships (source type -TYPE-> target type):\n{graph_lines(relationships)}\n{PLAN_RULES}"


def plan_request(
    question: str,
    named: Sequence[Mention],
    earlier: str | None = None,
    relationships: Sequence[Relationship] = (),
) -> str:
    """The user message of both plan steps: the question, the entities it names, and the types and
    relationships its words name (the second step adds the shape the first chose)."""
    listing = ", ".join(
        f"{m.name}: {m.type}" + (f" (numbers: {', '.join(m.numbers)})" if m.numbers else "") for m in named
    )
    before = f"(The question before: {earlier})\n" if earlier else ""
    types, rel_types = word_hints(question, relationships)
    hints = ""
    if types:
        hints += f"\nTypes its words name: {', '.join(types)}"
    if rel_types:
        hints += f"\nRelationships its words name: {', '.join(rel_types)}"
    return f"{before}Question: {question}\nEntities named: {listing}{hints}"


def parse_plan(text: str) -> dict[str, Any] | None:
    try:
        plan = json.loads(text)
    except json.JSONDecodeError:
        return None
    return plan if isinstance(plan, dict) else None
