"""A small OWL/RDFS subset in Turtle, read and written with rdflib (the one module that imports it).

Read: every ``owl:Class``/``rdfs:Class`` is an entity type (a class named only as a domain or range
is one too); every ``owl:ObjectProperty`` (or an ``rdf:Property`` whose range is a class) a
relationship type, its ``rdfs:domain`` and ``rdfs:range`` its domain and range, widened to their
subclasses (``rdfs:subClassOf``, transitively); every ``owl:DatatypeProperty`` (or an
``rdf:Property`` whose range is an XSD datatype) a property of the entity types of its domain, its
datatype read from its range (``xsd:string`` when it has none). ``rdfs:comment`` is a description.
A name is its IRI's last segment (after ``#``, ``/`` or ``:``), percent-decoded. Anything else
(restrictions, unions, individuals) is left out. Written: the same subset, under ``urn:kgchat:ontology#``;
relationship types' properties have no place in it and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote

from rdflib import OWL, RDF, RDFS, XSD, Graph, Literal, Namespace, URIRef
from rdflib.exceptions import Error as RdflibError

from apps.graph_tools.errors import OntologyInvalid

NS = Namespace("urn:kgchat:ontology#")
_XSD_TO_DATATYPE = {
    "string": "string",
    "normalizedString": "string",
    "anyURI": "string",
    "integer": "integer",
    "int": "integer",
    "long": "integer",
    "short": "integer",
    "nonNegativeInteger": "integer",
    "positiveInteger": "integer",
    "decimal": "number",
    "double": "number",
    "float": "number",
    "boolean": "boolean",
    "date": "date",
    "dateTime": "datetime",
}
_DATATYPE_TO_XSD = {
    "string": "string",
    "integer": "integer",
    "number": "decimal",
    "boolean": "boolean",
    "date": "date",
    "datetime": "dateTime",
    "array": "string",
    "object": "string",
}


def _local(iri: Any) -> str:
    text = str(iri)
    for separator in ("#", "/", ":"):
        if separator in text:
            text = text.rsplit(separator, 1)[1]
            break
    return unquote(text)


def _iris(values: Iterable[Any]) -> list[URIRef]:
    return sorted(v for v in values if isinstance(v, URIRef))


def _comment(graph: Graph, subject: URIRef) -> str:
    comment = next((str(c) for c in graph.objects(subject, RDFS.comment) if isinstance(c, Literal)), "")
    return comment[:2000]


def _subclasses(graph: Graph, classes: set[URIRef]) -> dict[URIRef, set[URIRef]]:
    """Each class with itself and its subclasses, transitively."""
    children: dict[URIRef, set[URIRef]] = {}
    for child, parent in graph.subject_objects(RDFS.subClassOf):
        if isinstance(child, URIRef) and isinstance(parent, URIRef):
            children.setdefault(parent, set()).add(child)
    closure: dict[URIRef, set[URIRef]] = {}
    for cls in classes:
        seen, todo = {cls}, [cls]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        closure[cls] = seen
    return closure


def _is_xsd(iri: URIRef) -> bool:
    return str(iri).startswith(str(XSD))


def _parsed(body: bytes) -> Graph:
    graph = Graph()
    try:
        graph.parse(data=body.decode("utf-8"), format="turtle")
    except UnicodeDecodeError:
        raise OntologyInvalid("the file is not UTF-8 text") from None
    except (RdflibError, SyntaxError, ValueError) as exc:
        raise OntologyInvalid(f"not valid Turtle: {str(exc)[:300]}") from None
    except (IndexError, KeyError, TypeError, AttributeError):
        # rdflib's Turtle parser fails on some truncated input with these rather than its own error.
        raise OntologyInvalid(
            "not valid Turtle: the file ends or breaks off in the middle of a statement"
        ) from None
    return graph


def _kinds(graph: Graph) -> tuple[set[URIRef], set[URIRef], set[URIRef]]:
    """The classes, object properties and datatype properties the graph states."""
    classes = set(_iris(graph.subjects(RDF.type, OWL.Class))) | set(
        _iris(graph.subjects(RDF.type, RDFS.Class))
    )
    object_props = set(_iris(graph.subjects(RDF.type, OWL.ObjectProperty)))
    datatype_props = set(_iris(graph.subjects(RDF.type, OWL.DatatypeProperty)))
    for prop in set(_iris(graph.subjects(RDF.type, RDF.Property))) - object_props - datatype_props:
        ranges = _iris(graph.objects(prop, RDFS.range))
        (datatype_props if ranges and all(_is_xsd(r) for r in ranges) else object_props).add(prop)
    for prop in object_props:
        for end in (RDFS.domain, RDFS.range):
            classes |= {c for c in _iris(graph.objects(prop, end)) if not _is_xsd(c)}
    for prop in datatype_props:
        classes |= set(_iris(graph.objects(prop, RDFS.domain)))
    return classes, object_props, datatype_props


def turtle_read(body: bytes) -> dict[str, Any]:
    """The ontology document a Turtle file's OWL/RDFS subset states (``OntologyInvalid`` if the file
    is not Turtle)."""
    graph = _parsed(body)
    classes, object_props, datatype_props = _kinds(graph)
    closure = _subclasses(graph, classes)
    entity_types: dict[str, dict[str, Any]] = {}
    for cls in sorted(classes):
        entity_types[_local(cls)] = {"description": _comment(graph, cls)} if _comment(graph, cls) else {}
    for prop in sorted(datatype_props):
        xsd = next((r for r in _iris(graph.objects(prop, RDFS.range)) if _is_xsd(r)), XSD.string)
        datatype = _XSD_TO_DATATYPE.get(_local(xsd), "string")
        for cls in _iris(graph.objects(prop, RDFS.domain)):
            entity_types[_local(cls)].setdefault("properties", {})[_local(prop)] = datatype
    relationship_types: dict[str, dict[str, Any]] = {}
    for prop in sorted(object_props):
        definition: dict[str, Any] = {}
        for key, end in (("domain", RDFS.domain), ("range", RDFS.range)):
            allowed = {_local(c) for cls in _iris(graph.objects(prop, end)) for c in closure.get(cls, {cls})}
            if allowed:
                definition[key] = sorted(allowed)
        if _comment(graph, prop):
            definition["description"] = _comment(graph, prop)
        relationship_types[_local(prop)] = definition
    return {"entity_types": entity_types, "relationship_types": relationship_types}


def _iri(name: str) -> URIRef:
    return NS[quote(name, safe="")]


def turtle_write(document: dict[str, Any]) -> str:
    """An ontology document (``Ontology.as_document``) as Turtle of the subset ``turtle_read`` reads."""
    graph = Graph()
    graph.bind("kg", NS)
    graph.bind("owl", OWL)
    for name, definition in document["entity_types"].items():
        graph.add((_iri(name), RDF.type, OWL.Class))
        if definition.get("description"):
            graph.add((_iri(name), RDFS.comment, Literal(definition["description"])))
        for prop, datatype in (definition.get("properties") or {}).items():
            graph.add((_iri(prop), RDF.type, OWL.DatatypeProperty))
            graph.add((_iri(prop), RDFS.domain, _iri(name)))
            graph.add((_iri(prop), RDFS.range, XSD[_DATATYPE_TO_XSD[datatype]]))
    for name, definition in document["relationship_types"].items():
        graph.add((_iri(name), RDF.type, OWL.ObjectProperty))
        if definition.get("description"):
            graph.add((_iri(name), RDFS.comment, Literal(definition["description"])))
        for key, end in (("domain", RDFS.domain), ("range", RDFS.range)):
            for cls in definition.get(key) or ():
                graph.add((_iri(name), end, _iri(cls)))
    return graph.serialize(format="turtle")
