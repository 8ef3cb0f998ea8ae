"""Finding a tool call in free text, holding back what may be one while the text streams, and
telling when the text has started to repeat itself."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FENCE = "```"


@dataclass(frozen=True)
class FoundCall:
    name: str
    arguments: dict[str, Any]
    start: int
    end: int


def find_call(text: str, names: Sequence[str]) -> FoundCall | None:
    """The first JSON object in ``text`` that calls one of ``names``: ``{"name", "arguments"}``.

    It may stand alone, inside a code fence, or after some words. ``arguments`` may be absent
    (no arguments) but must otherwise be an object.
    """
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value, end = None, start + 1
        if isinstance(value, dict) and value.get("name") in names:
            arguments = value.get("arguments", {})
            if isinstance(arguments, dict):
                return FoundCall(name=str(value["name"]), arguments=arguments, start=start, end=end)
        start = text.find("{", start + 1)
    return None


class CallHoldback:
    """Stream text at once, but hold back everything from the first ``{`` or code fence on.

    ``feed`` returns what may be shown now; ``held`` is what waits for the end of the step, when
    the caller decides whether it is a tool call (then it is dropped) or text (then it is shown).
    A backtick at the end of a delta waits for the next one, to tell a fence from inline code.
    """

    def __init__(self) -> None:
        self.held = ""
        self._holding = False

    def feed(self, delta: str) -> str:
        if self._holding:
            self.held += delta
            return ""
        text = self.held + delta
        self.held = ""
        cut = [i for i in (text.find("{"), text.find(FENCE)) if i != -1]
        if cut:
            self._holding = True
            self.held = text[min(cut) :]
            return text[: min(cut)]
        tail = len(text) - len(text.rstrip("`"))
        if 0 < tail < len(FENCE):
            self.held = text[-tail:]
            return text[:-tail]
        return text

    @property
    def holding(self) -> bool:
        return self._holding


# --- an answer that repeats itself ---

# A piece of text written this many times running, back to back, ends the generation (``looping``).
LOOP_REPEATS = 6
LOOP_PIECE = (4, 80)  # its length in characters, shortest and longest


def looping(text: str) -> bool:
    """Whether ``text`` ends with one piece of words written ``LOOP_REPEATS`` times running.

    Measured (MetaQA, "which words describe film Lloyd's of London"): the offline model wrote
    `"Drama", ` over and over until its token cap, 121 s of a turn for one word. A piece must hold
    two letters, so a table's `| --- ` row does not count."""
    shortest, longest = LOOP_PIECE
    for size in range(shortest, min(longest, len(text) // LOOP_REPEATS) + 1):
        piece = text[-size:]
        if sum(c.isalpha() for c in piece) >= 2 and text.endswith(piece * LOOP_REPEATS):
            return True
    return False
