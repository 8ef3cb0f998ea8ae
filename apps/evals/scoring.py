"""Deterministic answer scoring (no LLM judge). The rules, per kind of question:

- **one_hop, two_hop**: 1 if the answer names the expected entity, else 0.
- **list**: the share of expected names the answer names (partial credit; extra names cost nothing).
- **absent**: 1 if the answer says the thing is not there ("not found", "no such", "does not
  exist", "could not find", "there is no", "nothing about", "no information", …), else 0.
- **count**: 1 if the first number in the answer (digits, or a number word up to twenty) is the
  expected count, else 0.

"Names" is a normalised match: accents and case dropped, apostrophes removed, every other
non-alphanumeric character a space, and the name must occur as whole words in the answer.

Citation precision: of the ``[label](entity:<ref>)`` links in the model's raw answer, the share
whose ``ref`` is an entity of the project that a tool returned in that same turn. A turn with no
citation has no precision (``None``), counted apart as "answers without citations".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from apps.chat.turns.citations import LINK
from apps.evals.questions import Question, normalise

NOT_FOUND_PHRASES = (
    "not found",
    "no such",
    "does not exist",
    "do not exist",
    "doesnt exist",
    "dont exist",
    "not exist",
    "could not find",
    "couldnt find",
    "cannot find",
    "cant find",
    "did not find",
    "didnt find",
    "found no",
    "no entity",
    "no country",
    "no city",
    "no results",
    "no result",
    "not in the graph",
    "not in the knowledge graph",
    "there is no",
    "there are no",
    "unknown",
    # The small-model loop (apps.agents.llm.prompted_tools) tells the model to say "the knowledge
    # graph has nothing about it".
    "nothing about",
    "no information",
    "no record",
    "not mentioned",
    "does not mention",
    "does not contain",
    "doesnt contain",
    "not listed",
)

NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?|[a-z]+")


def names(answer: str, name: str) -> bool:
    """Whether ``answer`` names ``name`` (normalised, as whole words)."""
    needle = normalise(name)
    return bool(needle) and f" {needle} " in f" {normalise(answer)} "


def says_not_found(answer: str) -> bool:
    text = f" {normalise(answer)} "
    return any(f" {phrase} " in text for phrase in NOT_FOUND_PHRASES)


def first_number(answer: str) -> int | None:
    """The first number the answer states, in digits or as a word up to twenty."""
    for token in _NUMBER.findall(answer.casefold()):
        if token[0].isdigit():
            try:
                return int(float(token.replace(",", "")))
            except ValueError:
                continue
        if token in NUMBER_WORDS:
            return NUMBER_WORDS[token]
    return None


def answer_score(question: Question, answer: str) -> float:
    """The correctness of ``answer`` to ``question`` from 0 to 1, by the rules of this module.

    Entity links count as their label (an entity id is no answer, and its digits no number).
    """
    answer = LINK.sub(lambda m: m.group(1), answer)
    if question.kind == "absent":
        return 1.0 if says_not_found(answer) else 0.0
    if question.kind == "count":
        return 1.0 if question.count is not None and first_number(answer) == question.count else 0.0
    if not question.expected:
        return 0.0
    found = sum(1 for name in question.expected if names(answer, name))
    if question.kind == "list":
        return found / len(question.expected)
    return 1.0 if found else 0.0


@dataclass(frozen=True)
class CitationCheck:
    cited: int
    valid: int

    @property
    def precision(self) -> float | None:
        return self.valid / self.cited if self.cited else None


def cited_refs(raw_answer: str) -> list[str]:
    """The entity refs the model cited, in order, each once."""
    return list(dict.fromkeys(m.group(2) for m in LINK.finditer(raw_answer)))


def citation_check(*, raw_answer: str, existing: Iterable[str], returned: Iterable[str]) -> CitationCheck:
    """Count the citations of ``raw_answer`` and those that are valid.

    ``existing``: ids and keys of the project's entities among the cited refs; ``returned``: ids
    and keys of every entity a tool (or the retrieval, in plain chat) returned in the turn. A
    citation is valid when its ref is in both.
    """
    refs = cited_refs(raw_answer)
    exists, seen = set(existing), set(returned)
    return CitationCheck(cited=len(refs), valid=sum(1 for r in refs if r in exists and r in seen))
