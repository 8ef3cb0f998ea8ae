"""Deterministic answer scoring (no LLM judge). The rules, per kind of question:

- **one_hop, two_hop**: 1 if the answer names the expected entity, else 0.
- **list**: the share of expected names the answer names (partial credit; extra names cost nothing).
- **absent**: 1 if the answer says the thing is not there ("not found", "no such", "does not
  exist", "could not find", "there is no", "nothing about", "no information", …), else 0.
- **count**, **inverse_count**: 1 if the first number in the answer (digits, or a number word up
  to twenty) is the expected count, else 0.
- **inverse**, **follow_up**, **casual**: as one_hop (one name) or list (several names).
- **intersection**, **filtered**: the share of expected names named, times one minus the share of
  the wrong names named (the neighbours of only one of the two countries; the neighbours with
  another currency): naming every neighbour of either scores 0.
- **yes_no**: the answer's first word if it is "yes" or "no"; else "no" if it has a negation
  ("not", "doesn't", "no", "never", "neither", …: ``NEGATIONS``), else "yes". 1 if that is the
  expected answer.
- **compare**: 1 if, of the two entities compared, the one the answer names first is the expected
  one ("Nigeria is larger than Benin"; "Benin is smaller than Nigeria" scores 0).
- **per_item**: the share of items (each neighbour) named with all their values (its currency)
  between the item's name and the next item's name in the answer: "Togo (CFA franc), Burkina
  Faso (CFA franc)" scores 1; "Togo and Burkina Faso; Ghana uses the Cedi" scores 0.
- **1-hop, 2-hop, 3-hop** (MetaQA): Hits@1, 1 if the first answer entity the answer names is a
  gold answer (``metaqa.hits_at_1``); the answer recall is reported beside it.

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
from apps.core.numbers import NUMBER_WORDS
from apps.evals.questions import METAQA_KINDS, Question, normalise

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
    # The small-model loop (apps.agents.loop) tells the model to say "the knowledge
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


NEGATIONS = frozenset(
    "not no never neither nor none doesnt dont isnt arent wasnt didnt cannot cant nowhere".split()
)


def yes_or_no(answer: str) -> str:
    """What a yes/no answer says: its first word if that is yes or no, else "no" if it negates."""
    words = normalise(answer).split()
    if words and words[0] in ("yes", "no"):
        return words[0]
    return "no" if NEGATIONS & set(words) else "yes"


def first_named(answer: str, candidates: Iterable[str]) -> str | None:
    """Of ``candidates``, the one ``answer`` names first (whole words, normalised)."""
    text = f" {normalise(answer)} "
    found = [(text.find(f" {normalise(c)} "), c) for c in candidates if normalise(c) and names(answer, c)]
    return min(found)[1] if found else None


def pairs_score(answer: str, pairs: Iterable[tuple[str, tuple[str, ...]]]) -> float:
    """The share of items named with all their values between their name and the next item's."""
    items = list(pairs)
    if not items:
        return 0.0
    text = f" {normalise(answer)} "
    # Longest names first, each occurrence blanked once found: "Republic of the Congo" is not found
    # inside "Democratic Republic of the Congo".
    blanked = text
    found: list[tuple[int, str]] = []
    for item, _ in sorted(items, key=lambda pair: -len(normalise(pair[0]))):
        needle = f" {normalise(item)} "
        at = blanked.find(needle)
        if at >= 0:
            found.append((at, item))
            blanked = blanked[: at + 1] + "\0" * (len(needle) - 2) + blanked[at + len(needle) - 1 :]
    starts = sorted(found)
    right = 0
    for i, (start, item) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        segment = text[start : end + 1]
        values = dict(items)[item]
        if all(f" {normalise(v)} " in segment for v in values):
            right += 1
    return right / len(items)


def answer_score(question: Question, answer: str) -> float:
    """The correctness of ``answer`` to ``question`` from 0 to 1, by the rules of this module.

    Entity links count as their label (an entity id is no answer, and its digits no number).
    """
    answer = LINK.sub(lambda m: m.group(1), answer)
    if question.kind == "absent":
        return 1.0 if says_not_found(answer) else 0.0
    if question.kind in ("count", "inverse_count"):
        return 1.0 if question.count is not None and first_number(answer) == question.count else 0.0
    if question.kind == "yes_no":
        return 1.0 if question.answer is not None and yes_or_no(answer) == question.answer else 0.0
    if question.kind == "per_item":
        return pairs_score(answer, question.pairs)
    if question.kind in METAQA_KINDS:
        from apps.evals.metaqa import hits_at_1

        return hits_at_1(question, answer)
    if not question.expected:
        return 0.0
    if question.kind == "compare":
        return (
            1.0 if first_named(answer, (*question.expected, *question.wrong)) == question.expected[0] else 0.0
        )
    found = sum(1 for name in question.expected if names(answer, name)) / len(question.expected)
    if question.kind in ("one_hop", "two_hop"):
        return 1.0 if found else 0.0
    if question.wrong:
        found *= 1 - sum(1 for name in question.wrong if names(answer, name)) / len(question.wrong)
    return found


def answer_recall(question: Question, answer: str) -> float | None:
    """The share of the expected names the answer names (None for a question without names)."""
    if not question.expected:
        return None
    answer = LINK.sub(lambda m: m.group(1), answer)
    if question.kind in METAQA_KINDS:
        from apps.evals.metaqa import without_topic

        answer = without_topic(question, answer)
    return sum(1 for name in question.expected if names(answer, name)) / len(question.expected)


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
