"""Entities found by their aliases: ``kb.entity_aliases(properties)`` and its partial GIN index.

An entity's aliases are ``properties["aliases"]`` (a list of names; extraction keeps there the
name a mention had when it was linked or merged into the entity under another name,
``apps/graph_tools/names.py``). The function is their lower-cased array (empty when the property
is missing or not a list); the index covers only the entities that have the property, so it costs
nothing in a graph without aliases. ``hybrid_search``, ``query_paths``' starts by name and the
names a text mentions, and extraction's entity resolution look aliases up through it, with the
index's expression and predicate exactly (``names.ALIAS_MATCH``). The SQL names the index with its
schema (Django's index operations drop by bare name, which misses the kb schema; see 0014).
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION kb.entity_aliases(properties jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(lower(alias)), '{}')
    FROM jsonb_array_elements_text(
        CASE WHEN jsonb_typeof(properties -> 'aliases') = 'array' THEN properties -> 'aliases'
             ELSE '[]'::jsonb END
    ) AS alias
$$
"""

INDEX = (
    "CREATE INDEX graph_obj_aliases ON kb.graph_objects USING gin (kb.entity_aliases(properties)) "
    "WHERE properties ? 'aliases'"
)


class Migration(migrations.Migration):
    dependencies = [
        ("graph_tools", "0018_resumable_turns"),
    ]

    operations = [
        migrations.RunSQL(FUNCTION, "DROP FUNCTION kb.entity_aliases(jsonb)"),
        migrations.RunSQL(INDEX, "DROP INDEX kb.graph_obj_aliases"),
    ]
