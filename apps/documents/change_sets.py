"""A document's change set (issue 26 item 3): entity resolution of what extraction found and the
items it proposes, built when no passage of the set waits (``change_set_maybe_finish``; an owner's
set the project auto-approves is applied at once). Its review is ``review.py``'s."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from apps.documents.models import ChangeSet, ChangeSetItem, ExtractionSettings, ExtractionStatus, Passage
from apps.documents.resolution import entity_match, key_for, normalised_name
from apps.documents.review import change_set_apply
from apps.graph_tools.embeddings import get_embedder
from apps.graph_tools.selectors import graph_vocabulary

# --- the schema the model answers under -----------------------------------------------------------


def change_set_build(change_set: ChangeSet, *, embedder: Any = None) -> list[ChangeSetItem]:
    """The proposed changes of a finished extraction: one entity item per distinct mention (link,
    merge or create, with its evidence), then one item per distinct relationship between them;
    each names the passage it was first found in. A relationship's end the model named only there
    becomes a mention of the one type that end has in the graph (beside the other end's type); a
    relationship written against the direction the graph's types give is turned round, and one
    joining types that the graph's relationships of its type never join is left out (unless the
    project allows new types). A name the passages give different types has the type that most
    passages and most of its relationships (as written) agree on (``_agreed_types``)."""
    passages = {
        str(p.id): p
        for p in Passage.objects.filter(id__in=change_set.passage_ids, extraction_state="done").defer(
            "search_vector"
        )
    }
    builder = _Builder(change_set, embedder)
    ordered = [passages[pid] for pid in change_set.passage_ids if pid in passages]
    agreed = _agreed_types([p.extracted or {} for p in ordered], builder.ends)
    for passage in ordered:
        for entity in (passage.extracted or {}).get("entities", []):
            type_ = agreed.get(normalised_name(entity["name"]), entity["type"])
            builder.mention(passage, entity["name"], type_, entity.get("description", ""))
    for passage in ordered:
        for rel in (passage.extracted or {}).get("relationships", []):
            builder.relationship(passage, rel)
    return builder.items


def _agreed_types(answers: list[dict[str, Any]], ends: dict[str, set[tuple[str, str]]]) -> dict[str, str]:
    """The type of each name (normalised) that the passages' answers typed differently: the one
    with the most votes, a vote being a passage that gives it that type or a relationship of it,
    as the model wrote it, whose types the graph's relationships of its type join with that type
    (and any type given to the other end); on a tie, the first given."""
    given: dict[str, list[str]] = {}
    for answer in answers:
        for entity in answer.get("entities", []):
            given.setdefault(normalised_name(entity["name"]), []).append(entity["type"])
    mixed = {name for name, types in given.items() if len(set(types)) > 1}
    if not mixed:
        return {}
    votes: dict[tuple[str, str], int] = {}
    for name in mixed:
        for type_ in given[name]:
            votes[(name, type_)] = votes.get((name, type_), 0) + 1
    for answer in answers:
        for rel in answer.get("relationships", []):
            _relationship_votes(rel, ends.get(rel["type"], set()), given, mixed, votes)
    agreed: dict[str, str] = {}
    for name in mixed:
        # max keeps the first of equals: the type given first wins a tie.
        agreed[name] = max(dict.fromkeys(given[name]), key=lambda type_: votes[(name, type_)])
    return agreed


def _relationship_votes(
    rel: dict[str, str],
    pairs: set[tuple[str, str]],
    given: dict[str, list[str]],
    mixed: set[str],
    votes: dict[tuple[str, str], int],
) -> None:
    """Count the votes of one relationship for the types of its ends (``_agreed_types``)."""
    source, target = normalised_name(rel["source"]), normalised_name(rel["target"])
    for name, side, other in ((source, 0, target), (target, 1, source)):
        if name not in mixed:
            continue
        for type_ in dict.fromkeys(given[name]):
            if any(pair[side] == type_ and pair[1 - side] in given.get(other, ()) for pair in pairs):
                votes[(name, type_)] += 1


class _Builder:
    """A change set's items as they are found: mentions by normalised name, then relationships."""

    def __init__(self, change_set: ChangeSet, embedder: Any) -> None:
        self.change_set, self.embedder = change_set, embedder
        self.project_id = change_set.project_id
        self.items: list[ChangeSetItem] = []
        self.by_name: dict[str, ChangeSetItem] = {}
        self.taken: set[str] = set()
        self.seen: set[tuple[int, str, int]] = set()
        # The ends each relationship type joins in the graph: what a relationship's end is when the
        # model named it only there, and which way round the relationship goes.
        self.ends: dict[str, set[tuple[str, str]]] = {}
        vocabulary = graph_vocabulary(project_id=self.project_id)
        for type_, src_type, dst_type in vocabulary.relationships:
            self.ends.setdefault(type_, set()).add((src_type, dst_type))
        # Whether the extraction may bring new types (then a new pair of types is no mistake); never
        # against the project's ontology (#51), whose domains and ranges are the pairs.
        self.new_types = not vocabulary.declared and (
            not vocabulary.entity_types
            or ExtractionSettings.objects.filter(project_id=self.project_id, allow_new_types=True).exists()
        )

    def mention(self, passage: Passage, name: str, type_: str, description: str) -> ChangeSetItem | None:
        norm = normalised_name(name)
        if not norm:
            return None
        if norm in self.by_name:
            return self.by_name[norm]
        action, evidence = entity_match(
            project_id=self.project_id, name=name, type_=type_, embedder=self.embedder
        )
        values = {"name": name, "type": type_, "description": description}
        target = None
        if action == "create":
            values["key"] = key_for(self.project_id, type_, name, self.taken)
        else:
            target = uuid.UUID(evidence["entity"]["id"])
        item = ChangeSetItem(
            change_set=self.change_set,
            passage=passage,
            ordinal=len(self.items),
            action=f"{action}_entity",
            values=values,
            entity_id=target,
            evidence=evidence,
            status="linked" if action == "link" else "pending",
        )
        self.items.append(item)
        self.by_name[norm] = item
        return item

    def end_of(
        self, passage: Passage, name: str, rel_type: str, side: int, other: ChangeSetItem | None = None
    ) -> ChangeSetItem | None:
        """The mention a relationship's end names; one the model named only there becomes a mention
        of the one type the graph's relationships of this type give that end (next to ``other``'s
        type, when the other end is known), or None when that is not one type."""
        found = self.by_name.get(normalised_name(name))
        if found is not None:
            return found
        pairs = self.ends.get(rel_type, set())
        if other is not None:
            pairs = {pair for pair in pairs if pair[1 - side] == other.values["type"]} or pairs
        types = {pair[side] for pair in pairs}
        return self.mention(passage, name, types.pop(), "") if len(types) == 1 else None

    def relationship(self, passage: Passage, rel: dict[str, str]) -> None:
        src = self.by_name.get(normalised_name(rel["source"]))
        dst = self.end_of(passage, rel["target"], rel["type"], 1, src)
        src = src or self.end_of(passage, rel["source"], rel["type"], 0, dst)
        if src is None or dst is None or src is dst:
            return
        pairs = self.ends.get(rel["type"], set())
        given = (src.values["type"], dst.values["type"])
        if pairs and given not in pairs and given[::-1] in pairs:  # written the other way round
            src, dst = dst, src
        elif pairs and given not in pairs and not self.new_types:
            return  # the graph's relationships of this type never join these types
        triple = (src.ordinal, rel["type"], dst.ordinal)
        if triple in self.seen:
            return
        self.seen.add(triple)
        if (
            src.entity_id
            and dst.entity_id
            and _relationship_exists(src.entity_id, rel["type"], dst.entity_id)
        ):
            return
        self.items.append(
            ChangeSetItem(
                change_set=self.change_set,
                passage=passage,
                ordinal=len(self.items),
                action="create_relationship",
                values={"type": rel["type"], "source": src.ordinal, "target": dst.ordinal},
            )
        )


def _relationship_exists(src: uuid.UUID, type_: str, dst: uuid.UUID) -> bool:
    from apps.graph_tools.models import GraphRelationship

    return GraphRelationship.objects.filter(src_id=src, type=type_, dst_id=dst).exists()


def change_set_maybe_finish(*, change_set_id: uuid.UUID) -> bool:
    """Once no passage of a running change set waits, build its items (status ``review``, or
    ``empty``); an owner's upload with the project's auto-approval is applied at once. True when
    it finished now."""
    with transaction.atomic():
        change_set = ChangeSet.objects.select_for_update().filter(id=change_set_id).first()
        if change_set is None or change_set.status != ExtractionStatus.RUNNING:
            return False
        if Passage.objects.filter(id__in=change_set.passage_ids, extraction_state="pending").exists():
            return False
        items = change_set_build(change_set, embedder=_embedder_or_none())
        ChangeSetItem.objects.bulk_create(items)
        writable = any(i.status == "pending" for i in items)
        change_set.status = ExtractionStatus.REVIEW if writable else ExtractionStatus.EMPTY
        change_set.save(update_fields=["status", "updated_at"])
    if writable and change_set.auto_approve:
        change_set_apply(
            change_set_id=change_set.id,
            approve=None,
            reject=[],
            edits={},
            user_id=change_set.requested_by_id,
            auto=True,
        )
    return True


def _embedder_or_none() -> Any:
    try:
        return get_embedder()
    except Exception:  # no embedding model here: names decide alone
        return None
