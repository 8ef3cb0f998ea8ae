"""A follow-up question read on its own (issue #48): "When was he born?" after "Who directed Jump
for Glory?" is read as "When was Raoul Walsh born?", so the reading loop searches the documents for
something they name.

The graph loop looks up the previous question's names when a follow-up names none
(``plan_graph``); reading searches passages with the question's words, and a pronoun finds nothing.
Rules over English, not a model: in a question that names nothing, a personal pronoun ("he", "her",
"their") stands for the previous answer when a "who" question asked for that name, else for a
person the previous question described ("the director of Night Harbour"); "it" and "its" stand for
the previous answer when a "which film …" question asked for it. Otherwise either stands for the
previous question's first name ("What is the capital of Norland?" – "And its currency?"). A
question that names something, or has no earlier turn, is read as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from apps.agents.llm.base import ChatMessage
from apps.agents.loop.prompt import this_turn_start
from apps.agents.loop.questions import PERSON_ROLES, answer_kind, nested_description, whole_names

# The longest previous answer (in words) read as a name a pronoun can stand for.
NAME_MAX_WORDS = 6
_PERSON = re.compile(r"\b(?:he|she|him|they|them)\b", re.IGNORECASE)
_PERSON_OWN = re.compile(r"\b(?:his|their)\b|\bher\b(?=\s+[a-z])", re.IGNORECASE)
_PERSON_HER = re.compile(r"\bher\b", re.IGNORECASE)
_THING = re.compile(r"\bit\b", re.IGNORECASE)
_THING_OWN = re.compile(r"\bits\b", re.IGNORECASE)
_ASKS_A_THING = re.compile(r"^\s*(?:which|what)\s+(?!(?:is|was|are|were)\b)[a-z]+\b", re.IGNORECASE)
_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")


def _answer_name(answer: str) -> str:
    """The previous answer's first line as a name ("Raoul Walsh." → "Raoul Walsh"; "Danish
    (Denmark)" → "Danish"), or "" when it is not one (a sentence, a date, "not found")."""
    line = _QUALIFIER.sub("", answer.strip().split("\n", 1)[0].strip().rstrip("."))
    if not line or len(line.split()) > NAME_MAX_WORDS:
        return ""
    return line if whole_names(line) == [line] else ""


def _person_described(question: str) -> str:
    """The person ``question`` describes rather than names ("the director of Night Harbour" in
    "Where was the director of Night Harbour born?"), or "": "she" then stands for the description,
    which the reading loop resolves again."""
    nested = nested_description(question)
    return nested.text if nested is not None and nested.head().rstrip("s") in PERSON_ROLES else ""


class Said(Protocol):
    """A message of a conversation as either layer keeps it (``ChatMessage``, ``HistoryMessage``)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


def previous_turn(history: Sequence[Said]) -> tuple[str, str]:
    """The last question of ``history`` (the messages before this turn's) and its answer ("" each
    when there is none)."""
    users = [i for i, m in enumerate(history) if m.role == "user"]
    if not users:
        return "", ""
    answers = [m.content for m in history[users[-1] + 1 :] if m.role == "assistant" and m.content.strip()]
    return history[users[-1]].content, answers[-1] if answers else ""


def standalone_question(messages: Sequence[ChatMessage]) -> str:
    """This turn's question (``this_turn_start``), with a follow-up's pronouns replaced."""
    start = this_turn_start(messages)
    if start >= len(messages):
        return ""
    return standalone(messages[start].content, *previous_turn(messages[:start]))


def standalone(question: str, before: str, answer: str) -> str:
    """``question`` with a follow-up's pronouns replaced by what they stand for in the previous
    turn (its question ``before`` and its ``answer``; "" each when there was none)."""
    if whole_names(question) or not before:
        return question
    subjects = whole_names(before)
    subject = subjects[0] if subjects else ""
    # A "who" question's answer is whom "he" stands for, a "which film …" question's what "it" does;
    # after "What is the capital of X?", "its currency" is still X's.
    name = _answer_name(answer)
    person = name if name and answer_kind(before) == "a name" else _person_described(before) or subject
    thing = name if name and _ASKS_A_THING.match(before) else subject
    if person and any(p.search(question) for p in (_PERSON, _PERSON_OWN, _PERSON_HER)):
        question = _PERSON_OWN.sub(f"{person}'s", question)
        question = _PERSON.sub(person, question)
        return _PERSON_HER.sub(person, question)
    if thing and (_THING.search(question) or _THING_OWN.search(question)):
        question = _THING_OWN.sub(f"{thing}'s", question)
        return _THING.sub(thing, question)
    return question
