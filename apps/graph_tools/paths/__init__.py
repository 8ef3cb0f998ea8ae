"""``query_paths``: a declarative path query, for answers of any shape (PROTOCOL §6).

A query names its start entities (by name, key or id, a search, or the names a text mentions),
follows up to ``MAX_HOPS`` hops (a relationship type or any, in a direction) with filters at any
step (an entity type, a property compared with a value, membership in another path's result), and
shapes the result: the entities with the path that reaches each, their count, whether any exists,
groups with counts, or the minimum or maximum of a numeric property.

A path never passes through its own start entities again: "who co-starred with X" does not answer
X, "the neighbours of Benin's neighbours" does not answer Benin. (This is also how MetaQA's answers
are defined: its dev answers are reproduced exactly by it.)

Bounds: every value from the caller is a query parameter (relationship and entity types, property
names and values; the comparison operators are chosen from a fixed table); one hop follows at most
``HOP_EDGE_LIMIT`` relationships (more: ``truncated``, and the reason says which hop); every
statement runs under a ``STATEMENT_TIMEOUT_MS`` timeout; an unknown relationship or entity type is
an ``invalid_arguments`` error naming the argument and the project's types.
"""

from apps.graph_tools.paths.args import MAX_HOPS, PathQueryTimeout, QueryPathsArgs, paths_schema
from apps.graph_tools.paths.result import paths_query

__all__ = ["MAX_HOPS", "PathQueryTimeout", "QueryPathsArgs", "paths_query", "paths_schema"]
