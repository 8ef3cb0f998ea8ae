"""The perfect planner: a deterministic, tool-following model for the eval (``scripted/perfect-planner``).

Given a question written from one of the eval templates (or a MetaQA dev question), it calls the
graph tools a plan needs and answers from their results only, citing the entities the tools
returned. It never sees the expected answers: it reads the question text (``question_parse``; for
MetaQA, the question type the question was written from, ``metaqa.question_plan``) and the tool
results in the conversation, as any model must. If it scores below 0.95, the tools or their results
are the problem, not the model.

Every plan is one ``query_paths`` call (a second one only to read a country's ``capital`` property
when the graph has no city for it), so the planner also shows that this one tool suffices for every
question kind: chains, inverse facts, yes/no, intersections, filtered lists, per-item second hops,
counts, comparisons and follow-ups.

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
from apps.evals import metaqa
from apps.evals.questions import question_parse

PLANNER_SCRIPT = "perfect-planner"
PLANNER_MODEL = f"scripted/{PLANNER_SCRIPT}"
LIMIT = 500

# What a country question follows: (relationship, direction, entity type reached).
COUNTRY_HOPS = {
    "capital": ("CAPITAL_OF", "in", "City"),
    "currency": ("USES_CURRENCY", "out", "Currency"),
    "continent": ("LOCATED_IN", "out", "Continent"),
    "borders": ("BORDERS", "both", "Country"),
    "count_borders": ("BORDERS", "both", "Country"),
    "languages": ("SPEAKS", "out", "Language"),
    "cities_over": ("LOCATED_IN", "in", "City"),
}
# Templates asked about one country that read as another template.
SAME_AS = {
    "casual_capital_1": "capital",
    "casual_capital_2": "capital",
    "casual_currency": "currency",
    "casual_neighbours": "borders",
    "its_currency": "currency",
    "its_capital": "capital",
    "its_neighbours": "borders",
    "its_continent": "continent",
}
COMPARED = {
    "larger_area": ("Country", "area_km2"),
    "more_people": ("Country", "population"),
    "bigger_city_1": ("City", "population"),
    "bigger_city_2": ("City", "population"),
}


@dataclass
class Step:
    """One earlier model call of this turn: its tool calls and their results, in order."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)


def _steps(messages: Sequence[ChatMessage]) -> tuple[str, list[str], list[Step]]:
    """The question (the last user message), the user's earlier messages, and the tool steps since."""
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    last_user = users[-1] if users else -1
    question = messages[last_user].content if last_user >= 0 else ""
    earlier = [messages[i].content for i in users[:-1]]
    steps: list[Step] = []
    for m in messages[last_user + 1 :]:
        if m.role == "assistant" and m.tool_calls:
            steps.append(Step(calls=[(c.name, c.arguments) for c in m.tool_calls]))
        elif m.role == "tool" and steps:
            try:
                steps[-1].results.append(json.loads(m.content))
            except ValueError:
                steps[-1].results.append({"error": m.content})
    return question, earlier, steps


def link(entity: dict[str, Any]) -> str:
    return f"[{entity['name']}](entity:{entity['id']})"


def _listed(entities: Sequence[dict[str, Any]]) -> str:
    return ", ".join(link(e) for e in entities)


def _start(name: str, type_: str | None = None) -> dict[str, Any]:
    return {"name": name, "type": type_} if type_ else {"name": name}


def _hop(relationship: str, direction: str = "both", type_: str | None = None, **more: Any) -> dict[str, Any]:
    hop: dict[str, Any] = {"relationship": relationship, "direction": direction, **more}
    if type_:
        hop["type"] = type_
    return hop


def _query(**arguments: Any) -> list[ScriptItem]:
    return [tool_call("query_paths", {"limit": LIMIT, **arguments})]


def _not_found(result: dict[str, Any]) -> str | None:
    missing = result.get("not_found") or []
    if missing:
        return f"Not found: the knowledge graph has no entity named {', '.join(missing)}, so I cannot answer that."
    return None


@dataclass(frozen=True)
class Plan:
    """One query and how to answer from its result."""

    arguments: dict[str, Any]
    answer: Any  # (result) -> str


def _country_plan(template: str, country: str, slots: dict[str, str]) -> Plan:
    rel, direction, type_ = COUNTRY_HOPS[template]
    hop = _hop(rel, direction, type_)
    if template == "cities_over":
        hop["where"] = [{"property": "population", "op": ">", "value": int(slots["n"].replace(",", ""))}]
    result_shape = "count" if template == "count_borders" else "entities"

    def answer(result: dict[str, Any]) -> str:
        subject = link(result["start"][0]) if result.get("start") else country
        found = result["results"]
        if template == "count_borders":
            return f"{subject} borders {result['count']} countries: {_listed(found)}."
        if not found:
            return f"The graph records no {template.replace('_', ' ')} for {subject}."
        if template == "cities_over":
            listed = ", ".join(f"{link(e)} ({e['properties'].get('population', 0):,})" for e in found)
            return f"Cities in {subject} with more than {slots['n']} inhabitants: {listed}."
        return f"The {template.replace('_', ' ')} of {subject}: {_listed(found)}."

    return Plan({"start": [_start(country, "Country")], "hops": [hop], "result": result_shape}, answer)


def _previous(earlier: list[str]) -> dict[str, str] | None:
    """The slots of the user's previous question (what a follow-up refers back to)."""
    previous = question_parse(earlier[-1]) if earlier else None
    return previous[1] if previous else None


def _follow_up_plan(template: str, slots: dict[str, str], earlier: list[str]) -> Plan | str:
    country = slots.get("country")
    if country is None:  # a follow-up: the country of the user's previous question
        country = (_previous(earlier) or {}).get("country")
    if country is None:
        return "I cannot tell which country you mean."
    return _country_plan(SAME_AS[template], country, slots)


def _chain_plan(template: str, slots: dict[str, str]) -> Plan:
    hops = [_hop("LOCATED_IN", "out", "Country")]
    if template != "casual_city_country":
        hops.append(_hop(*COUNTRY_HOPS["capital" if template == "city_capital" else "currency"]))
    return Plan(
        {"start": [_start(slots["city"], "City")], "hops": hops},
        lambda r: f"{_path_text(r['results'][0])}." if r["results"] else "The graph does not connect them.",
    )


def _targets_plan(template: str, slots: dict[str, str], earlier: list[str]) -> Plan | str:
    if template == "its_targets":
        previous = _previous(earlier)
        if previous is None:
            return "I cannot tell which entity you mean."
        slots = {**previous, "rel": slots["rel"]}
    start = _start(slots["name"], slots.get("type") if template != "casual_targets" else None)
    return _fact(start, _hop(slots["rel"], "in" if template == "sources" else "out"))


def _yes_no_plan(template: str, slots: dict[str, str]) -> Plan:
    if template == "capital_yn":
        start, hop, other = _start(slots["city"], "City"), _hop("CAPITAL_OF", "out"), slots["country"]
    elif template == "targets_yn":
        start, hop, other = _start(slots["name"], slots["type"]), _hop(slots["rel"], "out"), slots["other"]
    else:
        start, hop, other = _start(slots["a"], "Country"), _hop("BORDERS", "both"), slots["b"]
    hop["in_path"] = {"start": [_start(other)]}
    return Plan(
        {"start": [start], "hops": [hop], "result": "exists"},
        lambda r: (
            f"Yes: {_path_text(r['results'][0])}."
            if r.get("exists")
            else f"No, the graph has no {hop['relationship']} relationship from {start['name']} to {other}."
        ),
    )


def _both_plan(template: str, slots: dict[str, str]) -> Plan:
    type_ = slots.get("type", "Country")
    hop = _hop(slots.get("rel", "BORDERS"), "out" if template == "targets_both" else "both")
    return _fact([_start(slots["a"], type_), _start(slots["b"], type_)], hop, start_match="all")


def _filtered_plan(template: str, slots: dict[str, str]) -> Plan:
    if template == "targets_filtered":
        start, first = _start(slots["name"], slots["type"]), _hop(slots["rel"], "out")
        second = {"start": [_start(slots["other"])], "hops": [_hop(slots["rel2"], "in")]}
    else:
        start, first = _start(slots["country"], "Country"), _hop("BORDERS", "both", "Country")
        by = ("currency", "USES_CURRENCY") if "currency" in template else ("language", "SPEAKS")
        second = {"start": [_start(slots[by[0]])], "hops": [_hop(by[1], "in")]}
    first["in_path"] = second
    return _fact(start, first)


def _each_plan(template: str, slots: dict[str, str]) -> Plan:
    if template == "targets_each":
        start = _start(slots["name"], slots["type"])
        hops = [_hop(slots["rel"], "out"), _hop(slots["rel2"], "out")]
    else:
        start = _start(slots["country"], "Country")
        second = (
            _hop("CAPITAL_OF", "in", "City")
            if template == "each_capital"
            else _hop(*COUNTRY_HOPS["currency"])
        )
        hops = [_hop("BORDERS", "both", "Country"), second]
    return Plan(
        {"start": [start], "hops": hops, "result": "group", "group_by": 1},
        lambda r: (
            "; ".join(f"{link(g['entity'])}: {_listed(g['members'])}" for g in r["groups"]) + "."
            if r["groups"]
            else "The graph records none."
        ),
    )


def _count_plan(template: str, slots: dict[str, str]) -> Plan:
    if template == "sources_count":
        start, hop = _start(slots["name"], slots["type"]), _hop(slots["rel"], "in")
    elif template == "language_count":
        start, hop = _start(slots["language"], "Language"), _hop("SPEAKS", "in", "Country")
    else:
        start, hop = _start(slots["currency"], "Currency"), _hop("USES_CURRENCY", "in", "Country")
    return Plan(
        {"start": [start], "hops": [hop], "result": "count"},
        lambda r: f"{r['count']}: {_listed(r['results'])}.",
    )


def _compare_plan(template: str, slots: dict[str, str]) -> Plan:
    type_, prop = COMPARED.get(template, (slots.get("type", ""), slots.get("prop", "")))
    return Plan(
        {"start": [_start(slots["a"], type_), _start(slots["b"], type_)], "result": "max", "property": prop},
        lambda r: _compared(r, prop),
    )


def _plan(template: str, slots: dict[str, str], earlier: list[str]) -> Plan | str:
    """The query of a template's question (or a text answer when there is none to make)."""
    if template in SAME_AS:
        return _follow_up_plan(template, slots, earlier)
    if template in COUNTRY_HOPS:
        return _country_plan(template, slots["country"], slots)
    if template in ("city_capital", "city_currency", "casual_city_country"):
        return _chain_plan(template, slots)
    if template.startswith("capital_of"):
        return _fact(_start(slots["city"], "City"), _hop("CAPITAL_OF", "out", "Country"))
    if template.startswith("currency_of"):
        return _fact(_start(slots["currency"], "Currency"), _hop("USES_CURRENCY", "in", "Country"))
    if template in ("targets", "sources", "casual_targets", "its_targets"):
        return _targets_plan(template, slots, earlier)
    return _shape_plan(template, slots)


def _shape_plan(template: str, slots: dict[str, str]) -> Plan | str:
    """The query of a question of a shape beyond a fact (yes/no, both, filtered, each, count, compare)."""
    if template.startswith("borders_yn") or template in ("capital_yn", "targets_yn"):
        return _yes_no_plan(template, slots)
    if template.startswith("borders_both") or template == "targets_both":
        return _both_plan(template, slots)
    if template.startswith("neighbours_") or template == "targets_filtered":
        return _filtered_plan(template, slots)
    if template.startswith("each_") or template == "targets_each":
        return _each_plan(template, slots)
    if template in ("currency_count_1", "currency_count_2", "language_count", "sources_count"):
        return _count_plan(template, slots)
    if template in COMPARED or template == "larger_property":
        return _compare_plan(template, slots)
    return f"I can only answer questions written from the eval templates, not {template!r}."


def _compared(result: dict[str, Any], prop: str) -> str:
    ranked = result["results"]
    if len(ranked) < 2:
        return f"The graph does not give the {prop} of both."
    first, second = ranked[0], ranked[1]
    return (
        f"{link(first)} ({prop.replace('_', ' ')} {first['properties'][prop]:,}) is larger than "
        f"{link(second)} ({second['properties'][prop]:,})."
    )


def _path_text(item: dict[str, Any]) -> str:
    parts = [link(item["path"][0]["entity"])]
    for step in item["path"][1:]:
        arrow = "->" if step["direction"] == "out" else "<-"
        parts.append(f"{arrow} {step['relationship']} {arrow} {link(step['entity'])}")
    return " ".join(parts)


def _fact(start: Any, hop: dict[str, Any], **more: Any) -> Plan:
    starts = start if isinstance(start, list) else [start]
    return Plan(
        {"start": starts, "hops": [hop], **more},
        lambda r: f"{_listed(r['results'])}." if r["results"] else "The graph records none.",
    )


def _capital_property(result: dict[str, Any]) -> str | None:
    for item in result.get("results", []):
        capital = (item.get("properties") or {}).get("capital")
        if capital:
            return f"The capital of {link(item)} is {capital}."
    return None


def plan(question: str, steps: list[Step], earlier: list[str] | None = None) -> list[ScriptItem]:
    """The next model response: tool calls, or the answer once the results suffice."""
    earlier = earlier or []
    parsed = question_parse(question)
    if parsed is None:
        found = metaqa.question_plan(question)
        if found is None:
            return text("I can only answer questions written from the eval templates.")
        topic, start_type, hops = found
        chosen: Plan | str = Plan(
            {"start": [_start(topic, start_type)], "hops": [_hop(r, d) for r, d in hops]},
            lambda r: f"{_listed(r['results'])}." if r["results"] else "The graph records none.",
        )
        template = "metaqa"
    else:
        template, slots = parsed
        chosen = _plan(template, slots, earlier)
    if isinstance(chosen, str):
        return text(chosen)
    if not steps:
        return _query(**chosen.arguments)
    result = steps[0].results[0] if steps[0].results else {}
    if not isinstance(result, dict) or "error" in result:
        return text(f"The graph tool failed: {result.get('error') if isinstance(result, dict) else result}.")
    missing = _not_found(result)
    if missing:
        return text(missing)
    capital_asked = template in (
        "capital",
        "casual_capital_1",
        "casual_capital_2",
        "its_capital",
        "city_capital",
    )
    if capital_asked and not result["results"]:
        # The demo graph has cities of 200,000 people or more: a smaller capital is a property of its country.
        if len(steps) == 1:
            hops = chosen.arguments["hops"][:-1]
            return _query(start=chosen.arguments["start"], hops=hops)
        by_property = _capital_property(steps[1].results[0] if steps[1].results else {})
        if by_property:
            return text(by_property)
    return text(chosen.answer(result))


def respond(messages: list[ChatMessage], tools: list[ToolSpec]) -> list[ScriptItem]:
    question, earlier, steps = _steps(messages)
    return plan(question, steps, earlier)


def planner_register() -> str:
    """Register the planner as ``scripted/perfect-planner`` in this process; return its model name."""
    register_script(PLANNER_SCRIPT, ScriptedProvider(responder=respond))
    return PLANNER_MODEL
