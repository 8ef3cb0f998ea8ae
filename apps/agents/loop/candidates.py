"""Paths to candidates: a plan (the shape, a start, the type asked for, the relationships, maybe a
second named entity) turned into the ``query_paths`` arguments of the typed paths of this graph
that fit it best, best first (``plan_candidates``).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from apps.agents.loop.plan_graph import (
    MAX_CANDIDATES,
    RESULT_SHAPES,
    Mention,
    PathOption,
    Relationship,
    typed_paths,
)
from apps.agents.loop.word_relationships import (
    time_type,
    type_named,
    value_path,
    word_leanings,
    word_path,
)


def _inversions(used: Sequence[str], order: Sequence[str]) -> int:
    """How many pairs of the path's relationships come in the other order than ``order`` has them."""
    first = {rel: i for i, rel in reversed(list(enumerate(order)))}
    at = [first[rel] for rel in used if rel in first]
    return sum(1 for i, j in itertools.combinations(range(len(at)), 2) if at[i] > at[j])


def path_rank(
    option: PathOption, mentioned: Sequence[str], asks_for: str | None, order: Sequence[str] = ()
) -> tuple[int, ...]:
    """How well a typed path fits what the plan said (lower is better): the relationships it uses
    against those mentioned, counted with repeats, plus whether it ends at the type asked for; then
    whether it ends there, whether it uses every relationship mentioned, its length, and whether it
    takes them in the order mentioned (or its reverse). Measured: the model often names a
    relationship once where the path goes there and back ("the movies that share directors with
    X"), so a longer path that ends at the type asked for beats a shorter one that does not."""
    used = [h[0] for h in option.hops]
    differ = sum(((Counter(used) - Counter(mentioned)) + (Counter(mentioned) - Counter(used))).values())
    misses = int(asks_for is not None and option.end != asks_for)
    unused = len(set(mentioned) - set(used))
    # A relationship the question did not mention, where one it did would connect as well (the films
    # "starred by actors in X" go back along STARRED_ACTORS, not along DIRECTED_BY).
    others = len(set(used) - set(mentioned))
    in_order = used in (list(mentioned), list(reversed(mentioned)))
    # The order of the question's words (``word_path``), nearest to the start first, when known.
    return differ + misses, misses, unused, others, len(used), _inversions(used, order), int(not in_order)


def best_paths(
    start_type: str,
    mentioned: Sequence[str],
    asks_for: str | None,
    relationships: Sequence[Relationship],
    order: Sequence[str] = (),
    lean: dict[str, float] | None = None,
) -> list[PathOption]:
    """The typed paths from ``start_type`` that fit the plan best (all of them when several tie),
    those whose relationships the question's words lean to by meaning first (``lean``: see
    ``word_leanings``). The loop runs the tied paths in this order and answers from the first that
    finds something: measured on MetaQA's dev split, "who is the author of X" named no
    relationship by its letters, and DIRECTED_BY, WRITTEN_BY and STARRED_ACTORS tied, DIRECTED_BY
    first."""
    options = typed_paths(start_type, relationships)
    if not options:
        return []
    ranks = {o: path_rank(o, mentioned, asks_for, order) for o in options}
    best = min(ranks.values())
    tied = [o for o in options if ranks[o] == best]
    if lean:
        tied.sort(key=lambda o: -sum(lean.get(h[0], 0.0) for h in o.hops))
    return tied


def _rels(value: Any) -> list[str]:
    return [str(r) for r in value] if isinstance(value, list) else []


def _hops(option: PathOption, relationships: Sequence[Relationship]) -> list[dict[str, Any]]:
    """The path's hops as ``query_paths`` takes them. A relationship between entities of one type
    (BORDERS) is followed both ways: a plan names no direction, and a graph may store it one way."""
    same = {r.type for r in relationships if r.source == r.target}
    return [
        {"relationship": r, "direction": "both" if r in same else d, "type": t} for r, d, t in option.hops
    ]


def _and_paths(
    entity: Mention, other: dict[str, Any] | None, end: str, relationships: Sequence[Relationship]
) -> list[PathOption]:
    """The paths from the second named entity to the answers' type: none when the plan names no
    relationship for it ("does A border B": B itself), else the shortest that reach that type,
    those using the relationships it named first. Measured: the model repeated the first path's
    relationships for the second entity ("bordering Malawi speak Tonga": BORDERS, SPEAKS from
    Tonga), which a longest fit would follow."""
    mentioned = _rels(other.get("relationships") if other else None)
    options = [p for p in typed_paths(entity.type, relationships) if p.end == end]
    if not mentioned:
        return [p for p in options if not p.hops]
    options = [p for p in options if p.hops]
    if not options:
        return []
    shortest = min(len(p.hops) for p in options)
    return sorted((p for p in options if len(p.hops) == shortest), key=lambda p: path_rank(p, mentioned, end))


def _ranked(arguments: dict[str, Any], prop: Any, others: Sequence[Mention], shape: str) -> str:
    """A largest/smallest plan: the property ranked by, and the result shape (a list without one)."""
    if prop is None:
        return "entities"
    arguments["property"] = prop
    if others:
        # Two named entities compared: the entities themselves, whatever path was named.
        arguments["hops"] = []
        arguments["start"] += [{"key": k} for m in others for k in m.keys]
    return shape


def _intersect(
    arguments: dict[str, Any],
    others: Sequence[Mention],
    other: dict[str, Any] | None,
    end: str,
    relationships: Sequence[Relationship],
) -> None:
    """Keep only the answers also reached from the second named entity (or both starts' neighbours)."""
    second = [(m, p) for m in others for p in _and_paths(m, other, end, relationships)]
    if not second:
        return
    member, path = second[0]
    within: dict[str, Any] = {"start": [{"key": k} for k in member.keys], "hops": _hops(path, relationships)}
    if arguments["hops"]:
        arguments["hops"][-1]["in_path"] = within
    else:
        arguments["start"] += within["start"]
        arguments["start_match"] = "all"


def _itself(
    shape: str, others: Sequence[Mention], other: dict[str, Any] | None, end: str
) -> dict[str, Any] | None:
    """The second entity's part of a yes/no plan: the entity itself when it is of the type the main
    path reaches ("does A border B": is B among A's neighbours), whatever relationships the plan
    named for it. Measured: "Does Sierra Leone border Liberia?" was planned with BORDERS from
    Liberia too, which asks whether a neighbour of Sierra Leone borders Liberia (Guinea does)."""
    if shape == "exists" and other is not None and all(m.type == end for m in others):
        return {**other, "relationships": []}
    return other


def _reached_other(
    other: dict[str, Any],
    others: Sequence[Mention],
    mentioned: list[str],
    asks_for: str | None,
    relationships: Sequence[Relationship],
) -> dict[str, Any]:
    """The second entity's part of a plan that gives it no relationships though it is not of the type
    asked for: the last of the plan's relationships that reaches its type, moved to its side (the
    answers are not the entity itself, they are related to it). Measured: "which of the
    countries that border Turkmenistan use the Tenge" was planned as BORDERS, USES_CURRENCY with the
    Tenge alone on the other side; as written it asks which currencies are the Tenge."""
    if _rels(other.get("relationships")) or not asks_for or any(m.type == asks_for for m in others):
        return other
    kinds = {m.type for m in others}
    touching = [
        rel for rel in mentioned if any(r.type == rel and kinds & {r.source, r.target} for r in relationships)
    ]
    if not touching or len(touching) == len(mentioned):
        return other
    return {**other, "relationships": touching[-1:]}


def _one_hop_each(
    start_type: str,
    other_type: str,
    mentioned: list[str],
    other: dict[str, Any],
    asks_for: str | None,
    relationships: Sequence[Relationship],
) -> tuple[str, str] | None:
    """The relationship of each side, when a plan names the same ones on both and one hop of each
    reaches the type asked for from its own start, in one way only: (the start's, the other's).
    When the plan asks for the start's own type (or none), any type both sides reach that way.
    Measured: "which of the countries that border Tanzania use the Congolese Franc" was planned from
    the Franc as BORDERS, USES_CURRENCY with Tanzania's side the same (asking for Country in one run,
    for Currency in another); followed as written it names the neighbours of the countries that use
    the Franc. From a currency only USES_CURRENCY reaches a country, and from Tanzania only BORDERS
    does, so each side has one."""
    second = _rels(other.get("relationships"))
    if len(set(mentioned)) < 2 or Counter(mentioned) != Counter(second):
        return None

    def reaching(kind: str, goal: str) -> set[str]:
        return {
            r.type
            for r in relationships
            if r.type in mentioned
            and ((r.source == kind and r.target == goal) or (r.target == kind and r.source == goal))
        }

    everything = {r.source for r in relationships} | {r.target for r in relationships}
    goals = [asks_for] if asks_for and asks_for != start_type else sorted(everything)
    pairs = {
        (a, b)
        for goal in goals
        for a in reaching(start_type, goal)
        for b in reaching(other_type, goal)
        if a != b
    }
    return pairs.pop() if len(pairs) == 1 else None


def _main_relationships(mentioned: list[str], second: list[str]) -> list[str]:
    """The main path's relationships without those the second entity's path names (each relationship
    the question mentions once is followed once). Measured: "which of the countries that border China
    use the Indian Rupee" was planned from the Rupee as USES_CURRENCY, BORDERS with China's BORDERS
    besides, which crosses one border too many. When nothing would be left, the plan stays."""
    left = Counter(mentioned) - Counter(second)
    if not sum(left.values()):
        return mentioned
    kept = []
    for rel in mentioned:
        if left[rel] > 0:
            kept.append(rel)
            left[rel] -= 1
    return kept


def _per_item(
    option: PathOption, used: Sequence[str], hinted: Sequence[str], relationships: Sequence[Relationship]
) -> PathOption | None:
    """A list's path one hop longer, along a relationship the question's words name but the plan left
    out, from the type it reaches ("which countries border X, and what currency does each use":
    BORDERS, then USES_CURRENCY for each); None when there is none."""
    for rel in hinted:
        if rel in used:
            continue
        for r in relationships:
            if r.type == rel and r.source == option.end:
                return PathOption(option.start, (*option.hops, (r.type, "out", r.target)))
            if r.type == rel and r.target == option.end:
                return PathOption(option.start, (*option.hops, (r.type, "in", r.source)))
    return None


def implied_and(
    plan: dict[str, Any], named: Sequence[Mention], hinted: Sequence[str]
) -> dict[str, Any] | None:
    """The second named entity a plan left out: another entity the question names (not part of the
    start's own name) that the answers must also be related to, along the relationships the
    question's words name (none for yes/no: "is X the capital of Y" asks about Y itself); None when
    the plan has one, names no start, is "each" or a comparison, or the question names nothing else.

    Measured: "Is Polokwane the capital of South Africa" was planned from Polokwane as CAPITAL_OF
    with no second entity, so any capital said yes; "which countries border both A and B" and
    "which neighbours of A use the Naira" were planned with "and": null and answered with every
    neighbour of A."""
    start = plan.get("start")
    shape = str(plan.get("answer") or "list")
    if plan.get("and") or not isinstance(start, str) or shape in ("each", "largest", "smallest"):
        return None
    folded = start.casefold()
    for other in named:
        name = other.name.casefold()
        if other.name != start and name not in folded and folded not in name:
            relationships = [] if shape == "yes/no" else list(hinted)
            return {"start": other.name, "relationships": relationships}
    return None


def _from_words(
    question: str,
    start: Mention,
    mentioned: Sequence[str],
    asks_for: str | None,
    relationships: Sequence[Relationship],
    values: Mapping[str, Sequence[str]] | None = None,
) -> tuple[list[str], list[str], str | None]:
    """A chain from one named entity as the question's words say it: the relationships they name
    from the start (``word_path``), then those the plan names more often than they do (words the
    loop cannot match: "what type of film", "how famous", "appears in"); the words' order; and the
    type asked for, a time when the question asks "when". When the words name no relationship and
    the plan names one at most, the relationship they name by its values (``value_path``), with
    the type it reaches asked for, wins over the plan's."""
    order = word_path(question, start.name, relationships)
    if (
        not order
        and len(mentioned) <= 1
        and values
        and (by_values := value_path(question, start, values, relationships))
    ):
        return [by_values.type], [by_values.type], by_values.target
    chain = [*order, *(Counter(mentioned) - Counter(order)).elements()]
    return chain, order, time_type(question, start.name, relationships) or asks_for


def plan_candidates(
    plan: dict[str, Any],
    named: Sequence[Mention],
    relationships: Sequence[Relationship],
    limit: int = 500,
    hinted: Sequence[str] = (),
    question: str = "",
    values: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """The ``query_paths`` arguments of a plan, best first (see ``_candidates``). A plan that leaves
    out another entity the question names (``implied_and``) is tried with it first, as a
    constraint on the answers, and then as written (the loop answers from the first that finds
    something); a yes/no only with it (without, any match would say yes)."""
    implied = implied_and(plan, named, hinted)
    if implied is None:
        return _candidates(plan, named, relationships, limit, hinted, question, values)
    constrained = _candidates({**plan, "and": implied}, named, relationships, limit, hinted, question, values)
    if str(plan.get("answer")) == "yes/no" and constrained:
        return constrained
    plain = _candidates(plan, named, relationships, limit, hinted, question, values)
    return [*constrained, *[c for c in plain if c not in constrained]][: MAX_CANDIDATES + 1]


def _ranked_paths(
    starts: Sequence[Mention],
    mentioned: Sequence[str],
    asks_for: str | None,
    relationships: Sequence[Relationship],
    question: str,
    values: Mapping[str, Sequence[str]] | None = None,
) -> list[tuple[tuple[int, ...], Mention, PathOption]]:
    """The typed paths from each start that fit the plan best, best first; with ``question``, as
    its words name the chain from the start (``_from_words``)."""
    ranked: list[tuple[tuple[int, ...], Mention, PathOption]] = []
    for start in starts:
        chain, order, asked = list(mentioned), list[str](), asks_for
        if question:
            chain, order, asked = _from_words(question, start, mentioned, asks_for, relationships, values)
        if asked == start.type and (len(order) > 1 or all(n == 1 for n in Counter(chain).values())):
            # Measured: the model often names the start's own type ("what kind of film is X": Movie);
            # a path back to that type goes there and back, which it writes as a relationship named
            # twice ("the films with the same director"), so once each it is not followed back; and
            # the question's words say a way there and back themselves ("who wrote movies that
            # share directors with X" was planned as asking for Movie).
            asked = None
        if question and asked in (None, start.type):
            asked = type_named(question, start, relationships) or asked
        lean = word_leanings(question, start.name, relationships) if question else None
        for option in best_paths(start.type, chain, asked, relationships, order, lean):
            ranked.append((path_rank(option, chain, asked, order), start, option))
    # Paths from starts of one name that fit equally well: the one the question writes as its name
    # is written first ("described by jack arnold": the Tag "jack arnold", not the Person).
    ranked.sort(key=lambda item: (item[0], question != "" and item[1].name not in question))
    return ranked


def same_named(named: Sequence[Mention], name: Any) -> list[Mention]:
    """The named entities a plan's start means: every one of that name, case aside, whatever its
    type. Measured on MetaQA: "what movies can be described by jack arnold" named the Person "Jack
    Arnold" and the Tag "jack arnold"; the plan chose the Person, and the loop followed HAS_TAGS
    from that person's films (31 films, none right). Offered both, the paths from each are ranked
    together, so the start whose type the plan's relationships leave from wins."""
    if not isinstance(name, str):
        return []
    folded = name.casefold()
    return [m for m in named if m.name.casefold() == folded]


def _candidates(
    plan: dict[str, Any],
    named: Sequence[Mention],
    relationships: Sequence[Relationship],
    limit: int = 500,
    hinted: Sequence[str] = (),
    question: str = "",
    values: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """The ``query_paths`` arguments of a plan, best first: one per typed path that fits it best
    (several when they tie: the loop answers from the first that finds something); none when the
    plan names no entity of the question. ``hinted``: the relationships the question's words name;
    a list or count from one named entity follows the relationships ``question``'s words name
    from it (``word_path``) where the plan says otherwise; ``values``: a few names of the entities
    each relationship type reaches (``value_path``)."""
    starts = same_named(named, plan.get("start"))
    asks_for = plan.get("asks_for") if isinstance(plan.get("asks_for"), str) else None
    mentioned = _rels(plan.get("relationships"))
    shape = RESULT_SHAPES.get(str(plan.get("answer")), "entities")
    other = plan.get("and") if isinstance(plan.get("and"), dict) else None
    others = [m for m in same_named(named, other.get("start") if other else None) if m not in starts]
    if others and other is not None:
        other = _reached_other(other, others, mentioned, asks_for, relationships)
        if starts and (
            split := _one_hop_each(starts[0].type, others[0].type, mentioned, other, asks_for, relationships)
        ):
            mentioned, other = [split[0]], {**other, "relationships": [split[1]]}
        mentioned = _main_relationships(mentioned, _rels(other.get("relationships")))
    by_words = question if not others and shape in ("entities", "count") else ""
    ranked = _ranked_paths(starts, mentioned, asks_for, relationships, by_words, values)
    candidates = []
    for _, start, option in ranked[:MAX_CANDIDATES]:
        arguments: dict[str, Any] = {
            "start": [{"key": k} for k in start.keys],
            "hops": _hops(option, relationships),
            "limit": limit,
        }
        result = shape
        if shape == "entities" and not others and option.hops:
            longer = _per_item(option, [*mentioned, *[h[0] for h in option.hops]], hinted, relationships)
            if longer is not None:
                option, result = longer, "group"
                arguments["hops"] = _hops(option, relationships)
        if shape in ("max", "min"):
            result = _ranked(
                arguments, plan.get("property") or next(iter(start.numbers), None), others, shape
            )
        elif others:
            _intersect(
                arguments, others, _itself(shape, others, other, option.end), option.end, relationships
            )
        if result == "group" and len(option.hops) < 2:
            result = "entities"
        arguments["result"] = result
        if arguments not in candidates:
            candidates.append(arguments)
    return candidates
