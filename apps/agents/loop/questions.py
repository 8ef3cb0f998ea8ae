"""The grammar of a question read against passages (issue #48): the nested description a hop must
resolve first, and the comparison of two named things.

A multi-hop question names one thing and describes the rest through it: "Where was **the
director of film Palo Alto** born?", "Who leads **the state where Shringarpur is located**?",
"When did **Izgoy's performer** die?". The innermost such description (``nested_description``) is
a question of its own ("What is the director of film Palo Alto?"); once a passage answers it, the
name replaces the description (``resolved``) and the question has one hop less, as the graph loop
chains a path's hops. A question whose whole subject is the description ("Who is the father of
X?") is read as it is.

Comparisons of two named things are read in ``comparisons``.

Rules over English, not a parser: the names are the mention recognizer's (``recognizer``), and
what the rules do not recognise is read as the whole question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.graph_tools.recognizer import Mention, mentions_find

# Nouns that name what kind of thing a name is ("the director of film X"): left in the description.
KIND_WORDS = (
    "film|movie|song|album|single|book|novel|band|series|show|game|company|play|poem|opera|river|city"
    "|state|country|station|team|school|university|painting|ship|town|village"
)
# A relative clause goes on after its name by an auxiliary and a participle ("where X is located",
# "where X was born", "where X died"), or by "is a <noun>" ("where X is a citizen").
CLAUSE_AUXILIARIES = frozenset("is was are were".split())
# A common noun written in lower case after a name, as part of it ("the range that Norris mountain
# is part of"): the clause goes on after it.
NAME_NOUNS = frozenset(
    "mountain mountains river lake island islands county city bay peak valley park bridge street castle "
    "church cathedral university college school station airport desert sea ocean strait canal forest "
    "hill hills range falls dam creek".split()
)
CLAUSE_VERBS = frozenset(
    "located situated based born died lived buried found formed founded headquartered released set held "
    "made fought".split()
)
# Words that a possessive's noun can start with and go on after ("X's birth country", "X's alma mater").
NOUN_MODIFIERS = frozenset(
    "first last birth alma home native current former official national physical middle maiden eldest "
    "oldest youngest elder younger older second third".split()
)
MAX_POSSESSED_WORDS = 3

_OF_BEFORE = re.compile(
    rf"(?:the|a|an)\s+(?:[\w-]+\s+){{0,3}}?(?:of|by|for)\s+(?:the\s+)?(?:(?:{KIND_WORDS})\s+)?"
    r"(?:(?:The|A|An|I|\d+)\s+)?$",
    re.IGNORECASE,
)
_CLAUSE_BEFORE = re.compile(
    r"the\s+(?:[\w-]+\s+){0,2}?(?:where|in which|that|which|whose|who)\s+(?:[\w-]+\s+){0,3}?"
    r"(?:(?:The|A|An|the|a|an|\d+)\s+)?$",
    re.IGNORECASE,
)
_NOT_NESTED = re.compile(r"^(?:the|a|an)\s+(?:same|first|last|most|only)\b", re.IGNORECASE)
_QUALIFIER_AFTER = re.compile(r"\s*\([^)]{1,60}\)")
# A title's words that the recognizer leaves out of the name it found, joined by a small word
# ("Jump| for Glory", "Bastien| und Bastienne", "Judiciary Act| of 1869", "Meet Me| in St. Louis"):
# each a lower-case joiner (optionally with "the") and a capitalised word or a number. Not "and" or
# "or", which join two things compared.
_JOINED_TITLE = re.compile(
    r"(?:\s+(?:for|und|of|in|on|at|to|from|with|de|del|la|le|les|du|des|von|van|der|den|di|da|y)"
    r"(?:\s+the)?\s+[A-Z0-9][\w'’.-]*(?:\s+[A-Z][\w'’.-]*)*)+"
)
# A noble title after a name is part of it ("John Ernest, Duke Of Saxe-Eisenach", "Albert, King of Sweden").
_TITLE_AFTER = re.compile(
    r",\s+(?:Duke|Duchess|King|Queen|Prince|Princess|Count|Countess|Earl|Lord|Lady|Emperor|Empress|"
    r"Archduke|Archduchess|Grand Duke|Margrave|Landgrave|Elector|Bishop|Archbishop|Marquess|Baron)"
    r"\s+[Oo]f\s+[A-Z][\w'’]*(?:[\s-]+[A-Z][\w'’]*)*"
)
_POSSESSED = re.compile(r"\s+([a-z][\w-]*)")
_ARTICLE = re.compile(r"\b(?:the|a|an)\b", re.IGNORECASE)
# Where a description's head noun phrase ends: "the director | of film X", "the state | where …".
_HEAD_END = re.compile(r"\s(?:of|where|that|which|who|whose|in|on|by|for|with)\s")
# A capitalised article, "I" or a number the recognizer left out of a name it starts ("A Romance
# Of Seville", "I Cover The Underworld", "45 Calibre Echo").
_NAME_HEAD = re.compile(r"(?:\b(?:The|A|An|I)|\b\d+)\s+$")
# "Who is | the father of X?", "What is the name of | the southern tip of Africa?"
_WHOLE_SUBJECT = re.compile(
    r"^\s*(?:who|what|which)\s+(?:is|was|are|were)\s+(?:the\s+(?:name|title)\s+of\s+)?$", re.IGNORECASE
)


@dataclass(frozen=True)
class Nested:
    """A description inside a question: ``text`` spans ``[start, end)`` of it and names ``anchor``."""

    start: int
    end: int
    text: str
    anchor: str

    def sub_question(self) -> str:
        """The description as a question of its own: "Who is the director of film X?" when it
        names a person's role (``PERSON_ROLES``), "What is the capital of X?" otherwise; "Who"
        also tells the reading the answer is a name (``answer_kind``)."""
        text = self.text[0].lower() + self.text[1:] if _ARTICLE.match(self.text) else self.text
        asks = "Who" if self.head().rstrip("s") in PERSON_ROLES else "What"
        return f"{asks} is {text}?"

    def head(self) -> str:
        """The description's head word, lower case: "director" of "the director of film X",
        "state" of "the state where X is located", "country" of "X's country"; "" when none."""
        words = _ARTICLE.sub("", _HEAD_END.split(self.text.lower())[0]).split()
        return words[-1] if words else ""


# The head words of a description that is a person ("the director of film X", "the spouse of Y").
PERSON_ROLES = frozenset(
    "director composer author writer screenwriter producer performer singer songwriter founder "
    "president spouse wife husband father mother child son daughter brother sister sibling parent "
    "creator actor actress star leader mayor governor king queen ruler monarch emperor chairman "
    "architect designer inventor editor lyricist presenter host coach manager captain successor "
    "predecessor grandfather grandmother uncle aunt nephew niece cousin partner".split()
)

# A name between "the" and a person's role is a description too: "the It'll Be Me singer", "the
# Vertigo director".
_THE_BEFORE = re.compile(r"\bthe\s+$", re.IGNORECASE)
_ROLE_AFTER = re.compile(rf"\s+(?:{'|'.join(sorted(PERSON_ROLES))})\b")


def named_mentions(question: str) -> list[Mention]:
    return [m for m in mentions_find(question) if m.kind in ("name", "quoted")]


def name_end(question: str, mention: Mention) -> int:
    """Where a name ends, with a parenthesised qualifier ("Palo Alto (2013 Film)") or a noble title
    (``_TITLE_AFTER``) after it."""
    end = mention.end
    joined = _JOINED_TITLE.match(question, end)
    if joined is not None:
        end = joined.end()
    after = _QUALIFIER_AFTER.match(question, end) or _TITLE_AFTER.match(question, end)
    return after.end() if after else end


def name_start(question: str, mention: Mention) -> int:
    """Where a name starts, with a capitalised article or number the recognizer left out."""
    head = _NAME_HEAD.search(question[: mention.start])
    return head.start() if head else mention.start


def _possessive(question: str, mention: Mention) -> tuple[int, int] | None:
    """ "X's mother", "X's birth country": the name with the noun after its possessive."""
    if not mention.surface.endswith(("'s", "’s")):
        return None
    end = mention.end
    for _ in range(MAX_POSSESSED_WORDS):
        noun = _POSSESSED.match(question, end)
        if noun is None:
            break
        end = noun.end()
        if noun.group(1) not in NOUN_MODIFIERS:
            break
    return (mention.start, end) if end > mention.end else None


def _rightmost(pattern: re.Pattern[str], before: str) -> re.Match[str] | None:
    """The match of ``pattern`` that ends ``before`` and starts at its last possible article: the
    innermost of descriptions inside one another ("the country where the city where X …")."""
    for article in reversed(list(_ARTICLE.finditer(before))):
        if (match := pattern.match(before, article.start())) is not None:
            return match
    return None


def _words_after(question: str, end: int, count: int) -> list[tuple[str, int]]:
    """The next ``count`` lower-case words right after ``end``, each with where it ends."""
    words = []
    for _ in range(count):
        word = re.match(r"\s+([a-z]+)\b", question[end:])
        if word is None:
            break
        end += word.end()
        words.append((word.group(1), end))
    return words


def _clause_end(question: str, end: int) -> int:
    """The end of a relative clause whose name ends at ``end``: an auxiliary and a participle of
    ``CLAUSE_VERBS``, one of them alone, or "is a <noun>"."""
    words = _words_after(question, end, 3)
    said = [w for w, _ in words]
    if said[:1] and said[0] in NAME_NOUNS and said[1:2] and said[1] in CLAUSE_AUXILIARIES:
        return _clause_end(question, words[0][1])  # "the range that Norris mountain is part of"
    if said[:2] in (["will", "be"], ["would", "be"], ["can", "be"]) and said[2:3] and said[2] in CLAUSE_VERBS:
        return words[2][1]  # "where the next winter Olympics will be held"
    if said[:1] and said[0] in CLAUSE_AUXILIARIES:
        if said[1:3] == ["part", "of"]:
            return words[2][1]  # "the district that Knott is part of"
        if len(said) >= 3 and said[1] in ("a", "an"):
            return words[2][1]
        if len(said) >= 2 and said[1] in CLAUSE_VERBS:
            return words[1][1]
        return words[0][1]
    return words[0][1] if said[:1] and said[0] in CLAUSE_VERBS else end


def _around(question: str, mention: Mention) -> tuple[int, int] | None:
    """The description built on ``mention``: its possessive, "the R of X" or "the N where X …"."""
    if (span := _possessive(question, mention)) is not None:
        return span
    before = question[: mention.start]
    end = name_end(question, mention)
    if (the := _THE_BEFORE.search(before)) is not None and (role := _ROLE_AFTER.match(question, end)):
        return the.start(), role.end()  # "the It'll Be Me singer"
    of = _rightmost(_OF_BEFORE, before)
    clause = _rightmost(_CLAUSE_BEFORE, before)
    if (
        of is not None
        and not _NOT_NESTED.match(of.group(0))
        and (clause is None or of.start() >= clause.start())
    ):
        return of.start(), end
    if clause is not None and not _NOT_NESTED.match(clause.group(0)):
        return clause.start(), _clause_end(question, end)
    return None


def nested_description(question: str) -> Nested | None:
    """The innermost description a hop must resolve before ``question`` can be answered, or None
    when there is none or it is the question's whole subject ("Who is the father of X?"). Of two,
    the one that is not the question's subject, else the shorter. A description that names nothing
    (``_unnamed``) is taken only when no named one is found."""
    found = [
        (span[0], span[1], m) for m in named_mentions(question) if (span := _around(question, m)) is not None
    ]
    if not found:
        return _unnamed(question)
    # The question's own subject ("What is the area code for Cincinnati | in the state where …") is
    # resolved last: a description inside its modifiers first, then the shortest.
    found.sort(key=lambda f: (bool(_WHOLE_SUBJECT.match(question[: f[0]])), f[1] - f[0]))
    start, end, mention = found[0]
    rest = question[end:].strip()
    if _WHOLE_SUBJECT.match(question[:start]) and rest in ("", "?"):
        return None
    anchor = question[mention.start : name_end(question, mention)]
    return Nested(start=start, end=end, text=question[start:end].strip(), anchor=anchor)


# A description that names nothing, only a kind of thing and what sets it apart: "the state whose
# official sport is jousting", or one that runs to the question's end ("… of the continent with the
# lowest average temperature?", "… of the continent where most of the globe gets its coffee?"), after
# a preposition.
_WHOSE_IS = re.compile(
    r"\bthe\s+(?:[\w-]+\s+)?[\w-]+\s+whose\s+(?:[\w-]+\s+){1,3}?(?:is|was|are|were)\s+[\w-]+",
    re.IGNORECASE,
)
_TO_THE_END = re.compile(
    r"the\s+(?:[a-z][\w-]*\s+){0,2}?[a-z][\w-]*\s+(?:where|whose|with|that|which|in which)\s+[^?A-Z]{3,}?(?=\s*\?\s*$)"
)
_AFTER_PREPOSITION = re.compile(r"\b(?:of|in|on|to|for|from|at|by|into)\s+$", re.IGNORECASE)


def _unnamed(question: str) -> Nested | None:
    """A description with no name in it (``_WHOSE_IS``, ``_TO_THE_END``; the innermost), unless it
    is the question's whole subject. Its anchor is "": the first search, with the whole question,
    is what the description is read from."""
    spans = [(m.start(), m.end()) for m in _WHOSE_IS.finditer(question)]
    if not spans:
        spans = [
            (m.start(), m.end())
            for a in _ARTICLE.finditer(question)
            if _AFTER_PREPOSITION.search(question[: a.start()])
            and (m := _TO_THE_END.match(question, a.start()))
        ]
    spans = [
        (start, end)
        for start, end in spans
        # one clause: "the state where monster trucks is set are the badlands" is two
        if not _WHOLE_SUBJECT.match(question[:start])
        and sum(w in CLAUSE_AUXILIARIES for w in question[start:end].lower().split()) <= 1
    ]
    if not spans:
        return None
    start, end = min(spans, key=lambda span: span[1] - span[0])
    return Nested(start=start, end=end, text=question[start:end].strip(), anchor="")


def whole_names(text: str) -> list[str]:
    """The names ``text`` holds, each whole and once: with a capitalised article or number before it
    and a title's joined words, qualifier or noble title after it ("Jump for Glory", not "Jump" and
    "Glory"; "45 Calibre Echo")."""
    names: list[str] = []
    end = 0
    for mention in named_mentions(text):
        if mention.start < end:
            continue  # inside the name before it
        start, end = name_start(text, mention), name_end(text, mention)
        names.append(text[start:end].removesuffix("'s").removesuffix("’s"))
    return names


def resolved(question: str, nested: Nested, name: str) -> str:
    """``question`` with its nested description replaced by the ``name`` a passage gave for it."""
    return f"{question[: nested.start]}{name.strip()}{question[nested.end :]}"


# --- what kind of answer a question asks for ------------------------------------------------------

_KINDS: tuple[tuple[str, str], ...] = (
    (r"^\s*when\b|\b(?:date|year|when|what time)\b", "a date"),
    (
        r"^\s*where\b|\bplace of\b|\b(?:birthplace|hometown)\b"
        r"|\b(?:which|what) (?:country|city|town|state|place|region|continent)\b",
        "a place",
    ),
    (r"^\s*how (?:many|much|long|old|tall|high|far)\b|\b(?:population|number of)\b", "a number"),
    (r"^\s*(?:who|whom|whose)\b|\bwhich (?:person|man|woman|actor|actress|singer|player)\b", "a name"),
    (r"^\s*(?:is|are|was|were|do|does|did|has|have|had|can|could)\b", "yes or no"),
)


def answer_kind(question: str) -> str | None:
    """What kind of answer ``question`` asks for ("a place" for "Where was X born?" or "the place
    of birth of X"), or None when its words do not say. Measured on the docqa dev sample: asked
    "What is the place of birth of X?", the 1.5B model answered X's date of birth."""
    for pattern, kind in _KINDS:
        if re.search(pattern, question, re.IGNORECASE):
            return kind
    return None


# --- kinship words that are two relations --------------------------------------------------------

# "the father-in-law of X" is "the father of the spouse of X": words a passage rarely writes, as the
# relations it does write, so each hop is one a passage can answer.
KINSHIP = {
    "father-in-law": "father of the spouse",
    "mother-in-law": "mother of the spouse",
    "son-in-law": "husband of the child",
    "daughter-in-law": "wife of the child",
    "child-in-law": "spouse of the child",
    "brother-in-law": "brother of the spouse",
    "sister-in-law": "sister of the spouse",
    "stepmother": "wife of the father",
    "stepfather": "husband of the mother",
    "paternal grandfather": "father of the father",
    "paternal grandmother": "mother of the father",
    "maternal grandfather": "father of the mother",
    "maternal grandmother": "mother of the mother",
    "grandfather": "father of the parent",
    "grandmother": "mother of the parent",
}
_KINSHIP_OF = re.compile(rf"\bthe ({'|'.join(sorted(KINSHIP, key=len, reverse=True))}) of\b", re.IGNORECASE)
_KINSHIP_POSSESSIVE = re.compile(
    rf"((?:[A-Z][\w.-]*\s)*[A-Z][\w.-]*)['’]s ({'|'.join(sorted(KINSHIP, key=len, reverse=True))})\b"
)


def as_plain_relations(question: str) -> str:
    """``question`` with a kinship word that is two relations written as them: "Who is X's
    father-in-law?" -> "Who is the father of the spouse of X?"."""
    question = _KINSHIP_OF.sub(lambda m: f"the {KINSHIP[m.group(1).lower()]} of", question)
    return _KINSHIP_POSSESSIVE.sub(lambda m: f"the {KINSHIP[m.group(2).lower()]} of {m.group(1)}", question)
