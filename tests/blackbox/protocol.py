"""What docs/protocol.md (the project's contract) lists, read by the tests that must follow it:
the refusals of each REST route, the websocket's message types, the graph tools."""

from __future__ import annotations

import re
from pathlib import Path

PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
METHODS = r"GET|POST|PUT|PATCH|DELETE"
ROUTE = re.compile(rf"`((?:{METHODS})(?:, (?:{METHODS}))*) (/api/[^ ?`]+)")
STATUS_CODE = re.compile(r"`(\d{3}) ([a-z_]+)")


def shape(path: str) -> str:
    """A path with its parameters blanked: ``/api/x/{projectId}`` and ``/api/x/{project_id}`` meet."""
    return re.sub(r"\{[^}]+\}", "{}", path)


def _section(start: str, end: str) -> str:
    text = PROTOCOL.read_text()
    return text[text.index(start) : text.index(end)]


def route_refusals() -> dict[tuple[str, ...], set[str]]:
    """§2: for each row of the route table (its operations), the "`NNN code`" refusals it names;
    the StreamRequest section's belong to ``POST /api/chat/stream``."""
    rest = _section("## 2. REST", "## 3. Frames")
    found: dict[tuple[str, ...], set[str]] = {}
    for line in rest.splitlines():
        if not line.startswith("| `"):
            continue
        cells = re.split(r"(?<!\\)\|", line)
        route = ROUTE.match(cells[1].strip())
        assert route, f"a route row the tests cannot read: {line[:100]}"
        operations = tuple(f"{m} {shape(route.group(2))}" for m in route.group(1).split(", "))
        found[operations] = {f"{s} {c}" for s, c in STATUS_CODE.findall(cells[2])}
    stream = rest[rest.index("### StreamRequest") :]
    found[("POST /api/chat/stream",)] = {f"{s} {c}" for s, c in STATUS_CODE.findall(stream)}
    return found


def websocket_types() -> set[str]:
    """§4: the types of the messages a client sends."""
    return set(re.findall(r'`\{"type": "(chat\.\w+)"', _section("## 4. Websocket", "## 5. ")))


def graph_tools() -> tuple[set[str], set[str]]:
    """§6: the read tools (their sentence) and the write tools (their table)."""
    section = _section("## 6. Graph tools", "## 7. ")
    read = section[section.index("read tools (") : section.index(")", section.index("read tools ("))]
    writes = section[section.index("**Write tools**") :]
    write_names = set(re.findall(r"^\| `(\w+)` \|", writes, re.MULTILINE))
    return set(re.findall(r"`(\w+)`", read)), write_names
