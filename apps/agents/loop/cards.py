"""What the model reads of the loop's look-ups: an entity's card (the entity, then one line per
relationship type and direction with the number of entities and their links), and the links the
loop writes into an answer for the entities the cards showed (``AnswerLinker``).

The look-ups themselves, and the turn's state they give, are ``lookups``.
"""

from __future__ import annotations

import re
from typing import Any

from apps.agents.loop.lookups import (
    DESCRIPTION_MAX,
    GROUP_SHOWN,
    NEIGHBOUR_GROUP_MAX,
    TurnLookups,
    is_entity,
    link,
)

# --- the card the model reads ---


def _phrase(relationship_type: str) -> str:
    return relationship_type.replace("_", " ").strip().lower()


def _noun(type_name: str, count: int) -> str:
    """ "Country" -> "country" / "countries", "TimeZone" -> "time zones": how a group is counted."""
    spaced = "".join(
        f" {c}" if c.isupper() and i and not type_name[i - 1].isupper() else c
        for i, c in enumerate(type_name)
    )
    noun = " ".join(spaced.replace("_", " ").split()).lower() or "entity"
    if count == 1:
        return noun
    if noun.endswith("y") and noun[-2:-1] not in set("aeiou"):
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def _quantity(others: list[dict[str, Any]]) -> str | None:
    """The whole-number property every member has, not an id (a city's population), the largest if several."""
    shared: set[str] | None = None
    for other in others:
        props = other.get("properties")
        if not isinstance(props, dict):
            return None
        numbers = {
            k for k, v in props.items() if type(v) is int and v > 0 and not k.casefold().endswith("id")
        }
        shared = numbers if shared is None else shared & numbers
    if not shared:
        return None
    return max(sorted(shared), key=lambda k: sum(o["properties"][k] for o in others))


def question_number(question: str) -> int | None:
    """The one number of 10 or more in the question ("more than 700,000 inhabitants"), if it has one."""
    found = {
        int(m.replace(",", ""))
        for m in re.findall(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?![\w,])|\b\d+\b", question)
    }
    found = {n for n in found if n >= 10}
    return found.pop() if len(found) == 1 else None


def _compared(value: int, threshold: int | None) -> str:
    if threshold is None or value == threshold:
        return f"{value:,}"
    return f"{value:,}, {'more' if value > threshold else 'less'} than {threshold:,}"


def members_line(others: list[dict[str, Any]], shown: int = GROUP_SHOWN, threshold: int | None = None) -> str:
    """Links to the members; with a shared quantity, largest first.

    With ``threshold`` (the number the question names) each member's value is shown too, and whether
    it is more or less (without one, the values are left out: ~10 prompt tokens a member). Measured:
    the 1.5B model read "Finlokaburg (population 1,354,128)" and answered that no city
    has more than 700,000 inhabitants.
    """
    quantity = _quantity(others) if len(others) > 1 else None
    if quantity is not None:
        others = sorted(others, key=lambda o: -o["properties"][quantity])
    if quantity is not None and threshold is not None:
        listed = ", ".join(
            f"{link(o)} ({quantity.replace('_', ' ')} {_compared(o['properties'][quantity], threshold)})"
            for o in others[:shown]
        )
    else:
        listed = ", ".join(link(o) for o in others[:shown])
    more = len(others) - shown
    return f"{listed} and {more} more" if more > 0 else listed


def _clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at the end of a sentence where there is one.

    Measured: a description cut inside a list ("It borders Zimbabwe, Tanzania, Moza…") was copied
    into the answer as the whole list, though the card's own lines listed all seven.
    """
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    end = text.rfind(". ", 0, limit)
    return text[: end + 1] if end > 0 else text[: limit - 1].rstrip() + "…"


def _group_line(
    name: str, rel: str, direction: str, others: list[dict[str, Any]], threshold: int | None = None
) -> str:
    """ "Vietnam borders 3 countries: …", "Vietnam uses currency: …", "2 cities located in X: …"."""
    types = {str(o.get("type") or "") for o in others}
    counted = f"{len(others)} {_noun(types.pop(), len(others))}" if len(types) == 1 else f"{len(others)}"
    members = members_line(others, threshold=threshold)
    if direction == "out":
        return (
            f"- {name} {_phrase(rel)}: {members}"
            if len(others) == 1
            else f"- {name} {_phrase(rel)} {counted}: {members}"
        )
    if len(others) == 1:
        return f"- {_phrase(rel)} {name}: {members}"
    return f"- {counted} {_phrase(rel)} {name}: {members}"


def entity_card(
    data: dict[str, Any], *, via: tuple[dict[str, Any], str] | None = None, threshold: int | None = None
) -> str:
    """An edges result as lines: the entity, then each relationship type and direction with its number.

    "Vietnam borders 3 countries: [China](…), …" for outgoing, "capital of Vietnam: [Hanoi](…)" for
    incoming, outgoing types first, smaller groups first; a type whose two directions hold the same
    entities (borders) is written once. With ``via`` (the named entity this one is the neighbour of,
    and the relationship) the card starts with that relationship ("Ba Dinh located in: [Vietnam](…)
    Country") and leaves out large groups and the way back; a neighbour card with nothing more to
    say is empty.
    """
    entity = data["entity"]
    name = str(entity["name"])
    head = link(entity) + (f" {entity['type']}" if entity.get("type") else "")
    if via is not None:
        head = f"{via[0]['name']} {_phrase(via[1])}: {head}"
    description = entity.get("description")
    if isinstance(description, str) and description.strip() and via is None:
        head += ": " + _clip(description, DESCRIPTION_MAX)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for edge in data["edges"]:
        other = edge.get("other")
        if is_entity(other):
            groups.setdefault((str(edge.get("type")), str(edge.get("direction"))), []).append(other)
    lines = []
    for (rel, direction), others in sorted(groups.items(), key=lambda g: (g[0][1] != "out", len(g[1]), g[0])):
        if direction == "in" and {o["key"] for o in groups.get((rel, "out"), [])} == {
            o["key"] for o in others
        }:
            continue
        if via is not None and (
            len(others) > NEIGHBOUR_GROUP_MAX or via[0]["key"] in {o["key"] for o in others}
        ):
            continue
        lines.append(_group_line(name, rel, direction, others, threshold))
    if via is not None and not lines:
        return ""
    return "\n".join([head, *lines])


# --- links for the entities an answer names ---


def card_entities(lookups: TurnLookups) -> dict[str, dict[str, Any]]:
    """The entities the turn's cards showed, by name (a name two entities share is left out)."""
    by_name: dict[str, dict[str, Any]] = {}
    shared: set[str] = set()
    for data in lookups.cards.values():
        others = [edge.get("other") for edge in data["edges"]]
        for item in [data["entity"], *others]:
            if not is_entity(item) or len(str(item["name"]).strip()) < 3:
                continue
            name = str(item["name"])
            if name in by_name and by_name[name]["key"] != item["key"]:
                shared.add(name)
            by_name.setdefault(name, item)
    return {name: item for name, item in by_name.items() if name not in shared}


class AnswerLinker:
    """Stream an answer, turning the first mention of each entity the cards showed into its link.

    Measured in ``make eval``: the 1.5B model cited in 1 answer of 50 however it was asked; the
    entities it names are the cards' own, so the loop links them (``[Ghana](entity:country:gh)``),
    and the chat layer's citation filter checks them like any other citation. A name must stand as
    whole words; text is held back only while it could still be the start of a name. An answer
    that writes entity links itself is left as it is.
    """

    def __init__(self, entities_by_name: dict[str, dict[str, Any]]) -> None:
        self._names = sorted(entities_by_name, key=len, reverse=True)
        self._entities = entities_by_name
        self._linked: set[str] = set()
        self._pattern = (
            re.compile(r"(?<![\w\[])(" + "|".join(re.escape(n) for n in self._names) + r")(?![\w\]])")
            if self._names
            else None
        )
        self._longest = max((len(n) for n in self._names), default=0)
        self._pending = ""
        self._writes_links = False

    def feed(self, delta: str) -> str:
        self._pending += delta
        if "](entity:" in self._pending or "(entity:" in self._pending:
            self._writes_links = True
        if self._pattern is None or self._writes_links:
            out, self._pending = self._pending, ""
            return out
        cut = max(0, len(self._pending) - self._longest)
        # Never cut inside a match: move the cut back to the start of any match that crosses it.
        for match in self._pattern.finditer(self._pending):
            if match.start() < cut < match.end() + 1:
                cut = match.start()
        out = self._link(self._pending[:cut])
        self._pending = self._pending[cut:]
        return out

    def flush(self) -> str:
        out = self._pending if self._writes_links else self._link(self._pending)
        self._pending = ""
        return out

    def _link(self, text: str) -> str:
        if self._pattern is None or self._writes_links:
            return text

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in self._linked:
                return name
            self._linked.add(name)
            return link({**self._entities[name], "name": name})

        return self._pattern.sub(replace, text)
