"""The perfect planner: a deterministic, tool-following model for the eval (``scripted/perfect-planner``).

Given a question written from one of the eval templates, it calls the right graph tools in the
right order and answers from their results only, citing the entities the tools returned. It
never sees the expected answers: it reads the question text (``question_parse``) and the tool
results in the conversation, as any model must. If it scores below 0.95, the tools or their
results are the problem, not the model.

It is a responder of the scripted provider (``apps.agents.llm.scripted``): each model call gets
the whole conversation and answers with tool calls or the final text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.agents.llm.base import ChatMessage, ToolSpec
from apps.agents.llm.scripted import ScriptedProvider, ScriptItem, register_script, text, tool_call
from apps.evals.questions import question_parse
from apps.evals.scoring import normalise

PLANNER_SCRIPT = "perfect-planner"
PLANNER_MODEL = f"scripted/{PLANNER_SCRIPT}"

# Which edges answer which country question: (relationship type, direction).
COUNTRY_EDGES = {
    "capital": ("CAPITAL_OF", "in"),
    "currency": ("USES_CURRENCY", "out"),
    "continent": ("LOCATED_IN", "out"),
    "borders": ("BORDERS", "both"),
    "count_borders": ("BORDERS", "both"),
    "languages": ("SPEAKS", "out"),
    "cities_over": ("LOCATED_IN", "in"),
}
ANSWER_TYPE = {"currency": "Currency", "continent": "Continent", "languages": "Language"}


@dataclass
class Step:
    """One earlier model call of this turn: its tool calls and their results, in order."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)


def _steps(messages: Sequence[ChatMessage]) -> tuple[str, list[Step]]:
    """The question (the last user message) and the tool steps taken since."""
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    question = messages[last_user].content if last_user >= 0 else ""
    steps: list[Step] = []
    for m in messages[last_user + 1 :]:
        if m.role == "assistant" and m.tool_calls:
            steps.append(Step(calls=[(c.name, c.arguments) for c in m.tool_calls]))
        elif m.role == "tool" and steps:
            try:
                steps[-1].results.append(json.loads(m.content))
            except ValueError:
                steps[-1].results.append({"error": m.content})
    return question, steps


def link(entity: dict[str, Any]) -> str:
    return f"[{entity['name']}](entity:{entity['id']})"


def _exact(result: Any, name: str, type_: str) -> dict[str, Any] | None:
    """The search result named exactly ``name`` (normalised) of type ``type_``."""
    wanted = normalise(name)
    for entity in (result or {}).get("results", []) if isinstance(result, dict) else []:
        if entity.get("type") == type_ and normalise(entity.get("name", "")) == wanted:
            return dict(entity)
    return None


def _others(result: Any, type_: str | None = None) -> list[dict[str, Any]]:
    """The entities at the other end of the edges of a ``get_entity_edges`` result, each once."""
    seen: dict[str, dict[str, Any]] = {}
    for edge in (result or {}).get("edges", []) if isinstance(result, dict) else []:
        other = edge.get("other") or {}
        if other.get("id") and (type_ is None or other.get("type") == type_):
            seen.setdefault(other["id"], other)
    return list(seen.values())


def _not_found(what: str, name: str) -> str:
    return f"Not found: the knowledge graph has no {what} named {name}, so I cannot answer that."


def _search(name: str, type_: str) -> list[ScriptItem]:
    return [tool_call("search_entities", {"query": name, "type": type_, "limit": 50})]


def _edges(entity_id: str, relationship_type: str, direction: str, limit: int = 1000) -> ScriptItem:
    return tool_call(
        "get_entity_edges",
        {
            "entity_id": entity_id,
            "relationship_type": relationship_type,
            "direction": direction,
            "limit": limit,
        },
    )


def _country_answer(template: str, country: dict[str, Any], edges: Any, slots: dict[str, str]) -> str:
    """Answer a country question from the country's edges."""
    c = link(country)
    if template == "capital":
        cities = _others(edges, "City")
        if cities:
            return f"The capital of {c} is {link(cities[0])}."
        capital = ((edges or {}).get("entity") or {}).get("properties", {}).get("capital")
        return f"The capital of {c} is {capital}." if capital else f"The graph records no capital for {c}."
    if template in ("borders", "count_borders"):
        countries = _others(edges, "Country")
        listed = ", ".join(link(x) for x in countries)
        if template == "count_borders":
            return (
                f"{c} borders {len(countries)} countries: {listed}."
                if countries
                else f"{c} borders 0 countries."
            )
        return f"{c} borders {listed}." if countries else f"The graph records no country bordering {c}."
    found = _others(edges, ANSWER_TYPE[template])
    if not found:
        return f"The graph records no {template} for {c}."
    listed = ", ".join(link(x) for x in found)
    if template == "currency":
        return f"{c} uses {listed}."
    if template == "continent":
        return f"{c} is in {listed}."
    return f"In {c} people speak {listed}."


def plan(question: str, steps: list[Step]) -> list[ScriptItem]:
    """The next model response: tool calls, or the answer once the results suffice."""
    parsed = question_parse(question)
    if parsed is None:
        return text("I can only answer questions written from the eval templates.")
    template, slots = parsed
    results = [s.results for s in steps]
    n = len(steps)

    if template == "targets":
        if n == 0:
            return _search(slots["name"], slots["type"])
        entity = _exact(results[0][0], slots["name"], slots["type"])
        if entity is None:
            return text(_not_found(slots["type"], slots["name"]))
        if n == 1:
            return [_edges(entity["id"], slots["rel"], "out")]
        targets = _others(results[1][0])
        if not targets:
            return text(f"{link(entity)} has no {slots['rel']} relationship in the graph.")
        return text(
            f"{link(entity)} has a {slots['rel']} relationship to {', '.join(link(t) for t in targets)}."
        )

    if template in ("city_capital", "city_currency"):
        if n == 0:
            return _search(slots["city"], "City")
        city = _exact(results[0][0], slots["city"], "City")
        if city is None:
            return text(_not_found("city", slots["city"]))
        if n == 1:
            return [_edges(city["id"], "LOCATED_IN", "out")]
        countries = _others(results[1][0], "Country")
        if not countries:
            return text(f"The graph does not say which country {link(city)} lies in.")
        country = countries[0]
        inner = "capital" if template == "city_capital" else "currency"
        if n == 2:
            return [_edges(country["id"], *COUNTRY_EDGES[inner])]
        answer = _country_answer(inner, country, results[2][0], slots)
        return text(f"{link(city)} lies in {link(country)}. {answer}")

    if n == 0:
        return _search(slots["country"], "Country")
    named = _exact(results[0][0], slots["country"], "Country")
    if named is None:
        return text(_not_found("country", slots["country"]))
    country = named
    if n == 1:
        return [_edges(country["id"], *COUNTRY_EDGES[template])]
    if template != "cities_over":
        return text(_country_answer(template, country, results[1][0], slots))
    cities = _others(results[1][0], "City")
    if n == 2 and cities:
        # The edges carry no populations: read each city (its properties come with its edges).
        return [_edges(city["id"], "LOCATED_IN", "out", limit=1) for city in cities]
    threshold = int(slots["n"].replace(",", ""))
    big = []
    for result in results[2] if n > 2 else []:
        entity = (result or {}).get("entity") or {}
        population = (entity.get("properties") or {}).get("population")
        if isinstance(population, int | float) and population > threshold:
            big.append((population, entity))
    big.sort(key=lambda p: -p[0])
    if not big:
        return text(f"The graph records no city in {link(country)} with more than {slots['n']} inhabitants.")
    listed = ", ".join(f"{link(e)} ({int(p):,})" for p, e in big)
    return text(f"Cities in {link(country)} with more than {slots['n']} inhabitants: {listed}.")


def respond(messages: list[ChatMessage], tools: list[ToolSpec]) -> list[ScriptItem]:
    question, steps = _steps(messages)
    return plan(question, steps)


def planner_register() -> str:
    """Register the planner as ``scripted/perfect-planner`` in this process; return its model name."""
    register_script(PLANNER_SCRIPT, ScriptedProvider(responder=respond))
    return PLANNER_MODEL
