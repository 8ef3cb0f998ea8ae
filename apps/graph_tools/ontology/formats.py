"""An ontology file's formats (#51): YAML, JSON and a small OWL/RDFS subset in Turtle (``turtle.py``),
read into the document ``document.ontology_parse`` checks and written from an ``Ontology``."""

from __future__ import annotations

import json
from typing import Any

import yaml

from apps.core.inputs import InvalidInput, json_parse
from apps.graph_tools.errors import OntologyInvalid, OntologyTooLarge
from apps.graph_tools.ontology import turtle
from apps.graph_tools.ontology.document import Ontology, ontology_parse

FORMATS = ("yaml", "json", "turtle")
MAX_BYTES = 1_000_000
CONTENT_TYPES = {"yaml": "application/yaml", "json": "application/json", "turtle": "text/turtle"}
_BY_CONTENT_TYPE = {
    "application/json": "json",
    "application/yaml": "yaml",
    "application/x-yaml": "yaml",
    "text/yaml": "yaml",
    "text/x-yaml": "yaml",
    "text/turtle": "turtle",
    "application/x-turtle": "turtle",
}
_BY_SUFFIX = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".ttl": "turtle"}


def format_of(*, asked: str | None, content_type: str = "", filename: str = "") -> str:
    """The format a file is in: ``asked`` (``?format=``), else its name's suffix, else its content
    type, else YAML (which reads JSON too)."""
    if asked:
        if asked not in FORMATS:
            raise OntologyInvalid(f"format {asked!r:.40} is not one of {', '.join(FORMATS)}")
        return asked
    for suffix, fmt in _BY_SUFFIX.items():
        if filename.lower().endswith(suffix):
            return fmt
    return _BY_CONTENT_TYPE.get(content_type.split(";")[0].strip().lower(), "yaml")


class _SafeLoader(yaml.SafeLoader):
    """YAML's safe loader without aliases (a few lines of anchors can expand to gigabytes)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("aliases (*name) are not allowed in an ontology file")
        return super().compose_node(parent, index)


def _read_yaml(body: bytes) -> Any:
    try:
        return yaml.load(body.decode("utf-8"), Loader=_SafeLoader)
    except UnicodeDecodeError:
        raise OntologyInvalid("the file is not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise OntologyInvalid(f"not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None


def ontology_read(body: bytes, fmt: str) -> Ontology:
    """The ontology a file of format ``fmt`` holds, checked (``OntologyInvalid``, ``OntologyTooLarge``)."""
    if len(body) > MAX_BYTES:
        raise OntologyTooLarge(f"the ontology file is larger than {MAX_BYTES} bytes")
    if not body.strip():
        raise OntologyInvalid("the ontology file is empty")
    if fmt == "json":
        try:
            data = json_parse(body)
        except InvalidInput as exc:
            raise OntologyInvalid(f"not valid JSON: {exc.message}") from None
    elif fmt == "turtle":
        data = turtle.turtle_read(body)
    else:
        data = _read_yaml(body)
    return ontology_parse(data)


def ontology_write(ontology: Ontology, fmt: str, *, with_setting: bool = True) -> str:
    """The ontology as a file of format ``fmt`` (``ontology_read`` reads it back)."""
    document = ontology.as_document(with_setting=with_setting)
    if fmt == "json":
        return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    if fmt == "turtle":
        return turtle.turtle_write(document)
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False, default_flow_style=False)
