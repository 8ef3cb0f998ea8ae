"""JSON Lines records the graph import tests share."""

import json


def jsonl(*records: dict) -> str:
    return "\n".join(json.dumps(r) for r in records)


ALICE = {
    "kind": "entity",
    "key": "alice",
    "type": "Person",
    "name": "Alice",
    "description": "An engineer",
    "properties": {"born": 1990},
}
BOB = {"kind": "entity", "key": "bob", "type": "Person", "name": "Bob"}
KNOWS = {"kind": "relationship", "type": "KNOWS", "src": "alice", "dst": "bob", "properties": {"since": 2010}}
