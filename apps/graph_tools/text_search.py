"""How full-text search reads text: its configuration, how much of a long text it reads, and the SQL
of every full-text vector and query kgchat makes (entities, passages, conversations).

PostgreSQL's default text parser reads anything shaped like an HTML or XML tag as markup and drops
it whole: ``to_tsvector('english', 'List<String>')`` keeps only 'list', ``<img src=x onerror=…>``
gives nothing, and a query is parsed the same way. So every text full-text search reads, stored or
asked, goes through ``kb.search_text`` first (``SEARCH_TEXT_FUNCTION``, migration 0021 of
graph_tools): it makes ``<`` and ``>`` spaces, and the words inside the brackets are words again
("List<String>" is 'list' 'string', next to each other, so a quoted "List<String>" still matches
it as a phrase). HTML entities (``&amp;``, ``&nbsp;``) are still dropped: they are not words.

The SQL below is the only place the expressions are written: the stored vectors (the generated
columns of ``GraphObject`` and ``Passage``, the message column and title index of the chat's
migrations) and the queries must agree exactly, or a query misses words its rows hold, or the
planner does not use the title's expression index. Changing ``kb.search_text`` or the
configuration needs a migration that rebuilds every stored vector (as 0021 of graph_tools and 0012
of chat do).
"""

from __future__ import annotations

from django.contrib.postgres.search import SearchVector
from django.db.models import Expression, F, Func, TextField

# The text search configuration for full-text search. 'simple' would not stem; 'english'
# stems and drops stop words, which suits the descriptions people write.
TEXT_SEARCH_CONFIG = "english"

# Full-text search reads the first this many characters of a description. PostgreSQL refuses a
# tsvector whose lexemes exceed 1 MB ("string is too long for tsvector"), which a long enough
# description reaches; capped, 100,000 characters hold at most 400 kB of lexemes. The whole
# description is still stored, shown and embedded.
SEARCH_DESCRIPTION_CHARS = 100_000

# The text as full-text search reads it, angle brackets made spaces (migration 0021 defines it:
# IMMUTABLE, so generated columns and indexes may use it, and one SQL expression, which the
# planner inlines).
SEARCH_TEXT_FUNCTION = "kb.search_text"


def tsvector_sql(text: str) -> str:
    """The SQL of the full-text vector of ``text`` (an SQL expression), as every index stores it."""
    return f"to_tsvector('{TEXT_SEARCH_CONFIG}'::regconfig, {SEARCH_TEXT_FUNCTION}({text}))"


def websearch_tsquery_sql(text: str) -> str:
    """The SQL of the query ``text`` (an SQL expression) in web-search syntax: all its words, quotes
    make phrases, ``or`` and ``-`` work, and no input is a syntax error."""
    return f"websearch_to_tsquery('{TEXT_SEARCH_CONFIG}'::regconfig, {SEARCH_TEXT_FUNCTION}({text}))"


def any_word_tsquery_sql(text: str) -> str:
    """The SQL of a query matching any of the words of ``text`` (an SQL expression)."""
    words = f"plainto_tsquery('{TEXT_SEARCH_CONFIG}'::regconfig, {SEARCH_TEXT_FUNCTION}({text}))"
    return f"to_tsquery('{TEXT_SEARCH_CONFIG}'::regconfig, replace({words}::text, ' & ', ' | '))"


def headline_sql(text: str, query: str, options: str) -> str:
    """The SQL of ``text`` with the words of ``query`` marked (``ts_headline``; SQL expressions)."""
    return f"ts_headline('{TEXT_SEARCH_CONFIG}'::regconfig, {text}, {query}, {options})"


class SearchText(Func):
    """``kb.search_text(expression)`` in a Django expression (a generated column's)."""

    function = SEARCH_TEXT_FUNCTION
    output_field = TextField()


def text_search_vector(expression: Expression | str, *, weight: str | None = None) -> SearchVector:
    """A model's stored full-text vector of ``expression`` (a field name or an expression)."""
    text = F(expression) if isinstance(expression, str) else expression
    return SearchVector(SearchText(text), config=TEXT_SEARCH_CONFIG, weight=weight)
