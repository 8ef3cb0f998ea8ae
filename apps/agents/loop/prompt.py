"""The conversation as the small model reads it: the system prompt, the turn, the results laid out.

The system prompt and tool list are the same for every step and turn, so the server's prompt cache
(``cache_prompt``) reads them once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from apps.agents.llm.base import ChatMessage, ToolSpec
from apps.agents.loop import plan_graph, plan_turn
from apps.agents.loop.cards import entity_card, question_number
from apps.agents.loop.layout import RESULT_MAX_CHARS, clip, layout_passages, layout_result
from apps.agents.loop.lookups import (
    TurnLookups,
    edges_tool,
    entities,
    is_entity,
    link,
    named_hits,
    passages_tool,
    turn_lookups,
)
from apps.agents.loop.plan import plan_system_part

HISTORY_MESSAGES = 4
MESSAGE_MAX_CHARS = 600
# A search that named no entity: how many hits the model reads, and how much of each description.
SEARCH_HITS = 6
HIT_DESCRIPTION = 160
# The ids of the loop's own calls (the model never wrote them, so it is not shown them as its own).
LOOKUP_ID_PREFIX = "lookup_"


def _signature(tool: ToolSpec) -> str:
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    args = ", ".join(name if name in required else f"{name}?" for name in properties)
    description = " ".join(tool.description.split())
    end = description.find(". ")
    return f"- {tool.name}({args}): {description[: end + 1] if end > 0 else description}"


def _first_with_required(tools: Sequence[ToolSpec], argument: str) -> str | None:
    for tool in tools:
        if argument in (tool.parameters.get("required") or []):
            return tool.name
    return None


def _strategy(tools: Sequence[ToolSpec]) -> str:
    """How to look things up, naming the agent's own search and neighbourhood tools when it has them.

    Measured on the demo graph without it: a first step of ``query_entities({})`` (a page of
    arbitrary entities) answered from memory, and a two-hop question was answered after one search.
    """
    search = _first_with_required(tools, "query")
    edges = _first_with_required(tools, "entity_id")
    lines = []
    if search:
        lines.append(
            f"Start with {search} on the name the question is about (only the name, not the whole question)."
        )
    if edges:
        lines.append(
            "When the answer needs facts of another entity that a result mentions (the country a city "
            f"lies in, the members of a group), look that entity up too ({search or edges} with its name, "
            f"or {edges} with its key) before answering."
        )
    return "\n" + "\n".join(lines) if lines else ""


def system_prompt(instructions: str, tools: Sequence[ToolSpec]) -> str:
    """The agent's instructions, the tools and the rules: the same for every step of every turn."""
    parts = [instructions.strip()] if instructions.strip() else []
    if tools:
        listing = "\n".join(_signature(t) for t in tools)
        parts.append(
            "You read a knowledge graph with tools; you know nothing about it yourself.\n"
            f"Tools:\n{listing}\n"
            'To call a tool, reply with only a JSON object: {"name": "<tool>", "arguments": {...}}. '
            "Refer to an entity by the key in its link, for example country:PT in "
            "[Portugal](entity:country:PT).\n"
            "After a tool result, either call another tool the same way or write the answer."
            + _strategy(tools)
        )
    path = plan_graph.path_tool(tools)
    relationships = plan_graph.graph_relationships(path) if path is not None else []
    if relationships:
        # In every step's prompt, so the server's prompt cache reads it once for all of them.
        parts.append(plan_system_part(relationships))
    # Plain chat offers no tools and puts the retrieved facts into the instructions instead.
    if tools:
        use, cite, found = "facts from the tool results", "the link the results give it", "the results"
    else:
        use, cite, found = "the facts above", "the link given for it", "the facts above"
    parts.append(
        f"Rules for the answer: use only {use}, never your own knowledge. "
        f"Cite every entity you mention with {cite}, exactly as written. "
        f"If {found} do not contain what was asked, say that you could not find it in the "
        "knowledge graph, and nothing more. Answer briefly." + _passage_rule(tools)
    )
    return "\n\n".join(parts)


def _passage_rule(tools: Sequence[ToolSpec]) -> str:
    """How to cite a passage of a document, only when a passage search is offered (a project with
    documents): a graph-only project's prompt stays what it was."""
    if passages_tool(tools) is None:
        return ""
    return (
        " Cite a passage of a document you use with the link the results give it, "
        "[document name](passage:<id>), exactly as written."
    )


def answer_system_prompt(instructions: str) -> str:
    """The system prompt of a planned turn's answer step: the agent's instructions and the rules for
    the answer, without the tools, the graph's relationships or the plan rules (the loop has run the
    plan; the step only reads its cards). Measured on the fictional graph: under the long planning
    prompt the model answered "You could not find it in the knowledge graph." from a right card."""
    parts = [instructions.strip()] if instructions.strip() else []
    parts.append(
        "You answer questions about a knowledge graph from what was found in it; you know nothing "
        "about it yourself.\n"
        "Rules for the answer: use only the facts found, never your own knowledge. Write every name "
        "exactly as the facts write it. If the facts do not contain what was asked, say that you could "
        "not find it in the knowledge graph, and nothing more."
    )
    return "\n\n".join(parts)


def _names_in(content: str, query: str) -> bool | None:
    """Whether a search result names an entity that the query names (``None``: no entities in it).

    Searches always return their nearest matches. Measured on the demo graph: asked for the capital
    of an invented country, the model answered with the nearest result ("Oslo"); a plain note that
    no result's name is in the query is what it lacked.
    """
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return None
    hits = entities(data)
    if not hits:
        return None
    return bool(named_hits(hits, query))


def this_turn_start(messages: Sequence[ChatMessage]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return len(messages)


def model_calls(messages: Sequence[ChatMessage]) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) of the calls the model made in this turn (not the loop's look-ups)."""
    start = this_turn_start(messages)
    return [
        (c.name, c.arguments)
        for m in messages[start + 1 :]
        if m.role == "assistant"
        for c in m.tool_calls
        if not c.id.startswith(LOOKUP_ID_PREFIX)
    ]


def _earlier_question(messages: Sequence[ChatMessage]) -> str | None:
    start = this_turn_start(messages)
    return next((m.content for m in reversed(messages[:start]) if m.role == "user"), None)


def path_move(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> plan_turn.Move | None:
    """The path plan's next move this turn (``plan_turn.next_move``), or None for the earlier recipe."""
    start = this_turn_start(messages)
    if start >= len(messages):
        return None
    return plan_turn.next_move(
        messages[start + 1 :],
        tools,
        question=messages[start].content,
        earlier=_earlier_question(messages),
        edges_name=edges_tool(tools),
        lookup_prefix=LOOKUP_ID_PREFIX,
    )


def answer_messages(
    messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], move: plan_turn.Answer
) -> list[ChatMessage]:
    """The answer step of a planned turn: the system prompt, the last exchanges, the question with
    the plan's cards, and the instruction to answer (one sentence when the loop adds a long list)."""
    start = this_turn_start(messages)
    out = prompt_messages(messages[: start + 1], tools)
    instructions = "\n".join(m.content for m in messages if m.role == "system")
    out[0] = ChatMessage(role="system", content=answer_system_prompt(instructions))
    if move.appended:
        # Measured: told that the loop adds the list, the model wrote that sentence as its answer.
        instruction = "Answer in one short sentence that names the first three found."
    else:
        # Measured: "briefly" gave bare names or the card's arrows copied as the answer; asked to
        # name each "with its link", the model wrote "(entity:city:…)" as words. Names it writes
        # plainly are linked by the loop (``AnswerLinker``).
        instruction = (
            "Answer the question from these facts only, in one or two full sentences that name what "
            "was found; no tool calls."
        )
    # The card's names without their links: the loop links the names the answer writes
    # (``AnswerLinker``). Measured: a link costs the prompt ~10 tokens for a slug key
    # ("[1951](entity:year-1951)") and ~40 for a UUID, against 1-4 for the name.
    out[-1] = ChatMessage(
        role="user",
        content=f"{out[-1].content}\n\nFound in the graph:\n{plan_turn.unlinked(move.card)}\n\n{instruction}",
    )
    return out


def turn_calls(messages: Sequence[ChatMessage]) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) of every tool call made in this turn so far (after the last user message)."""
    start = this_turn_start(messages)
    return [
        (c.name, c.arguments) for m in messages[start + 1 :] if m.role == "assistant" for c in m.tool_calls
    ]


def _trimmed(data: Any) -> Any:
    """A search result cut to its first ``SEARCH_HITS`` hits, descriptions to ``HIT_DESCRIPTION`` characters.

    Shown when the search named no entity (else the cards say more): measured, the whole result cost
    ~550 prompt tokens (~16 s on 2 cores) to answer an invented place "not found".
    """
    if isinstance(data, dict):
        return {k: _trimmed(v) for k, v in data.items()}
    if isinstance(data, list):
        return [
            {**x, "description": clip(str(x["description"]), HIT_DESCRIPTION)}
            if is_entity(x) and x.get("description")
            else x
            for x in data[:SEARCH_HITS]
        ]
    return data


def _result_text(name: str, content: str, query: Any, lookups: TurnLookups, limit: int) -> str:
    """One tool result as the model reads it: an entity card, a search, or laid-out lines."""
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        data = None
    if isinstance(data, dict) and is_entity(data.get("entity")) and isinstance(data.get("edges"), list):
        card = entity_card(
            data, via=lookups.neighbour_of(str(data["entity"]["key"])), threshold=lookups.threshold
        )
        return f"Result of {name}:\n{clip(card, limit)}"
    if isinstance(query, str) and data is not None:
        named = [hit for hit in named_hits(entities(data), query) if hit["key"] in lookups.cards]
        if named:
            # Measured: the other, nearer-by-words hits cost ~200 prompt tokens (~6 s on 2 cores) and
            # lured the model into listing them; the named entities' cards follow. No number here:
            # "(and 9 other matches)" was answered "10 countries border Qualumistan" (it borders 2).
            found = ", ".join(link(hit) for hit in named)
            return f"Result of {name}: {found} (the other matches are about something else)"
        text = f"Result of {name}:\n{layout_result(json.dumps(_trimmed(data)), limit)}"
        if _names_in(content, query) is False and not lookups.named:
            text += f'\n(No result has a name that appears in "{query}".)'
        return text
    return f"Result of {name}:\n{layout_result(content, limit)}"


def _hidden_calls(turn: Sequence[ChatMessage]) -> set[str]:
    """The ids of this turn's calls the model does not read: the loop's look-ups of the names a
    question mentions (what a plan starts from) and path queries that found nothing (the earlier
    recipe's cards answer instead)."""
    calls = {c.id: c for m in turn if m.role == "assistant" for c in m.tool_calls}
    hidden = {
        c.id
        for c in calls.values()
        if c.id.startswith(LOOKUP_ID_PREFIX) and plan_turn.is_mention_lookup(c.arguments)
    }
    for message in turn:
        call = calls.get(message.tool_call_id or "") if message.role == "tool" else None
        if call is None or "hops" not in call.arguments:
            continue
        try:
            data = json.loads(message.content)
        except (json.JSONDecodeError, TypeError):
            continue
        if isinstance(data, dict) and plan_turn.found_nothing(call.arguments, data):
            hidden.add(call.id)
    return hidden


def _turn_so_far(
    out: list[ChatMessage],
    messages: Sequence[ChatMessage],
    start: int,
    lookups: TurnLookups,
    result_limit: int,
    passages: str | None = None,
) -> None:
    """Append this turn's calls and results to ``out``: the model's calls as JSON, results laid out,
    the loop's own look-ups as found facts (its look-ups of names not at all). ``passages``: the
    offered passage search, whose results read as citable passages (``layout_passages``)."""
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    queries = {c.id: c.arguments.get("query") for m in messages for c in m.tool_calls}
    hidden = _hidden_calls(messages[start + 1 :])
    for message in messages[start + 1 :]:
        if message.role == "assistant":
            calls = [
                json.dumps({"name": c.name, "arguments": c.arguments})
                for c in message.tool_calls
                if not c.id.startswith(LOOKUP_ID_PREFIX) and c.id not in hidden
            ]
            text = "\n".join([message.content.strip(), *calls]).strip()
            if text:
                out.append(ChatMessage(role="assistant", content=text))
            continue
        call_id = message.tool_call_id or ""
        if message.role != "tool" or call_id in hidden:
            continue
        name = names.get(call_id, message.name or "tool")
        if passages is not None and name == passages:
            text = f"Result of {name}:\n{layout_passages(message.content, result_limit)}"
        else:
            text = _result_text(name, message.content, queries.get(call_id), lookups, result_limit)
        if call_id.startswith(LOOKUP_ID_PREFIX):
            # The loop's own look-up: shown as found facts, not as a call the model made.
            _, _, card = text.partition("\n")
            if not card.strip():
                continue
            found_in = "the project's documents" if name == passages else "the graph"
            text = f"Looked up in {found_in}:\n{card}"
            if out[-1].role == "user":
                out[-1] = ChatMessage(role="user", content=f"{out[-1].content}\n\n{text}")
                continue
        out.append(ChatMessage(role="user", content=text))


def prompt_messages(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    answer_now: bool = False,
    result_limit: int = RESULT_MAX_CHARS,
    lookups: TurnLookups | None = None,
) -> list[ChatMessage]:
    """The conversation as the small model reads it: plain roles, calls as JSON, results laid out.

    ``lookups``: this turn's ``turn_lookups`` when the caller read them already.
    """
    instructions = "\n".join(m.content for m in messages if m.role == "system")
    out = [ChatMessage(role="system", content=system_prompt(instructions, tools))]
    start = this_turn_start(messages)
    earlier = [
        ChatMessage(role=m.role, content=clip(plan_turn.unlinked(m.content), MESSAGE_MAX_CHARS))
        for m in messages[:start]
        if m.role in {"user", "assistant"} and m.content.strip()
    ]
    out.extend(earlier[-HISTORY_MESSAGES:])
    if start < len(messages):
        out.append(ChatMessage(role="user", content=messages[start].content))
    if lookups is None:
        lookups = turn_lookups(messages[start + 1 :], edges_tool(tools))
    if start < len(messages):
        lookups.threshold = question_number(messages[start].content)
    _turn_so_far(out, messages, start, lookups, result_limit, passages_tool(tools))
    if answer_now and out[-1].role == "user":
        out[-1] = ChatMessage(
            role="user", content=out[-1].content + "\n\nNo more tool calls: write the answer now."
        )
    return out
