"""The scripted model of the black-box suite: the answer is decided by what the user wrote.

Turns run at once and in parallel, so no queue: a user message may start with directive lines
that tell the model what to do in that turn; anything else is answered at once.

``#fail``                 every call answers HTTP 500 (``Retry-After: 0``: the provider's retries
                          fail at once too), so the turn ends with ``llm_error``
``#hold <name>``          streams "Part one. ", then waits until the test calls ``release(name)``
                          (at most a minute), then "Part two."
``#tool <name> <json>``   the turn's first model call asks for tool ``name`` with these arguments;
                          once the turn has a tool result, it answers with text that cites the
                          first entity of the result (a Markdown ``entity:`` link); or, with a
                          ``#hold <name>`` line after it, streams ten words and waits as ``#hold``

Plain turns get no tools, so ``#tool`` only changes agent turns.

Document extraction (a request whose ``response_format`` is the "extraction" JSON Schema) is
answered with the JSON after ``#facts`` in the passage, or with nothing found; an ontology's draft
(the "ontology" JSON Schema) with the JSON after ``#ontology`` in the sampled documents (``#fail``:
HTTP 500), or with nothing proposed.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from tests.llm_server import (
    LLMTestServer,
    Plan,
    Status,
    Stream,
    answer_at_once,
    last_user_text,
    text_chunks,
    tool_call_chunks,
    tool_results,
)

USAGE = {"prompt_tokens": 20, "completion_tokens": 5}
DIRECTIVE = re.compile(r"^#(fail|hold|tool)\b[ \t]*(.*)$", re.MULTILINE)


def _first_entity(value: Any) -> dict[str, Any] | None:
    """The first object with ``id`` and ``name`` in a tool result (depth first)."""
    if isinstance(value, dict):
        if isinstance(value.get("id"), str) and isinstance(value.get("name"), str):
            return value
        children: list[Any] = list(value.values())
    elif isinstance(value, list):
        children = value
    else:
        return None
    for child in children:
        found = _first_entity(child)
        if found is not None:
            return found
    return None


class ScriptedModel:
    """The responder of an ``LLMTestServer``, with the gates that ``#hold`` turns wait on."""

    def __init__(self) -> None:
        self._gates: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def gate(self, name: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def release(self, name: str) -> None:
        self.gate(name).set()

    def release_all(self) -> None:
        with self._lock:
            for gate in self._gates.values():
                gate.set()

    def __call__(self, request: dict[str, Any]) -> Plan:
        schema = (request.get("response_format") or {}).get("json_schema") or {}
        if schema.get("name") == "extraction":
            facts = re.search(r"#facts (\{.*\})", last_user_text(request))
            answer = facts.group(1) if facts else '{"entities": [], "relationships": []}'
            return Stream(text_chunks(answer), usage=USAGE)
        if schema.get("name") == "ontology" and "#fail" not in last_user_text(request):
            proposed = re.search(r"#ontology (\{.*\})", last_user_text(request))
            answer = (
                proposed.group(1)
                if proposed
                else '{"entity_types": [], "relationship_types": [], "properties": []}'
            )
            return Stream(text_chunks(answer), usage=USAGE)
        directive = DIRECTIVE.search(last_user_text(request))
        if directive is None:
            return answer_at_once(request)
        kind, argument = directive.group(1), directive.group(2).strip()
        if kind == "fail":
            return Status(500, {"error": {"message": "scripted failure"}}, headers={"Retry-After": "0"})
        if kind == "hold":
            return Stream(
                text_chunks("Part one. ", "Part two."), usage=USAGE, gate=self.gate(argument), gate_after=2
            )
        results = tool_results(request)
        held = re.search(r"^#hold[ \t]+(\S+)", last_user_text(request), re.MULTILINE)
        if results and held is not None:
            # Eleven chunks, then the wait: the last chunk before a pause is held back on its way
            # (the client's stream reader waits for what follows it), so ten reach the user.
            words = [f"word{i} " for i in range(11)]
            return Stream(text_chunks(*words), usage=USAGE, gate=self.gate(held.group(1)), gate_after=11)
        if not request.get("tools") or results:
            return self._after_tools(results)
        name, _, arguments = argument.partition(" ")
        return Stream(
            tool_call_chunks(name, arguments or "{}", call_id=f"call_{name}"),
            finish_reason="tool_calls",
            usage=USAGE,
        )

    @staticmethod
    def _after_tools(results: list[dict[str, Any]]) -> Plan:
        entity = None
        for message in results:
            try:
                entity = _first_entity(json.loads(message.get("content") or "null"))
            except ValueError:
                entity = None
            if entity is not None:
                break
        if entity is None:
            return Stream(text_chunks("The tool ", "said no."), usage=USAGE)
        return Stream(text_chunks("Found ", f"[{entity['name']}](entity:{entity['id']})", "."), usage=USAGE)


def scripted_server() -> tuple[LLMTestServer, ScriptedModel]:
    model = ScriptedModel()
    return LLMTestServer(responder=model), model
