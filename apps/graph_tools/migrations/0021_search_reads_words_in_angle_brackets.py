"""Full-text search reads the words inside angle brackets (#47): ``kb.search_text`` and the entities'
and passages' search vectors rebuilt through it.

PostgreSQL's default parser drops anything shaped like a tag: an entity named ``List<String>`` was
indexed as 'list' only, ``<img src=x onerror=…>`` as nothing, and a passage quoting code lost its
generics. ``kb.search_text(text)`` makes ``<`` and ``>`` spaces (``apps/graph_tools/text_search.py``
builds every full-text expression through it, on the stored and on the query side). It is
IMMUTABLE, PARALLEL SAFE and one SQL expression, so the planner inlines it: it costs a
``translate`` per text.

A generated column's expression cannot be altered before PostgreSQL 17, so each ``search_vector``
is dropped and added again in one ``ALTER TABLE`` (one rewrite of the table), its GIN index made
again (the entities' with the bounded pending list of migration 0006), and the column analyzed:
hybrid_search tells common words by the column's statistics (``search.COMMON_WORD_ROWS``), which
a new column does not have until the next ANALYZE.

Cost: each table is rewritten under an ACCESS EXCLUSIVE lock (no search, import or write of the
graph meanwhile) and needs room for a second copy of itself and its indexes: every row's vector is
computed again and every index of the table rebuilt. Measured on the embedded PostgreSQL 18 with
its tuning (maintenance_work_mem 2 GB; a server left at PostgreSQL's 64 MB builds the GIN indexes
more slowly), on 2 cores shared with a load average of 13,
entities with 8-word descriptions as the bench makes them: 100,000 entities 4.1-5.7 s, 300,000
16.3 s (rewrite 12.9, GIN index 2.8, analyze 0.4): linear, so about a minute for bench scale's 1M
entities (a ~0.8 GB table), less on an idle machine. ``kb.search_text`` itself costs nothing
measurable (the old expression took 4.1-5.7 s too). Passages of ~600 characters: 20,000 in
4.4-6.1 s, about 0.3 ms each. Run it when a minute without the graph is acceptable.
"""

from django.db import migrations, models

import apps.graph_tools.text_search
import django.contrib.postgres.search
import django.db.models.functions.text

FUNCTION = """
CREATE OR REPLACE FUNCTION kb.search_text(text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT translate($1, '<>', '  ') $$
"""


def _entity_vector(text: str) -> str:
    return (
        f"setweight(to_tsvector('english'::regconfig, coalesce({text.format('name')}, '')), 'A') || "
        f"setweight(to_tsvector('english'::regconfig, coalesce({text.format('left(description, 100000)')}, '')), 'B')"
    )


def _passage_vector(text: str) -> str:
    return f"to_tsvector('english'::regconfig, coalesce({text.format('left(text, 100000)')}, ''))"


def _rebuild(table: str, vector: str, index: str, with_: str = "") -> list[str]:
    return [
        f"ALTER TABLE kb.{table} DROP COLUMN search_vector, "
        f"ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ({vector}) STORED",
        f"CREATE INDEX {index} ON kb.{table} USING gin (search_vector){with_}",
        f"ANALYZE kb.{table} (search_vector)",
    ]


NEW, OLD = "kb.search_text({})", "{}"
PENDING_LIST = " WITH (gin_pending_list_limit = 256)"


class Migration(migrations.Migration):
    dependencies = [
        ("graph_tools", "0020_passage_vector_indexes"),
    ]

    operations = [
        migrations.RunSQL(FUNCTION, "DROP FUNCTION kb.search_text(text)"),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    _rebuild("graph_objects", _entity_vector(NEW), "graph_obj_search_vector", PENDING_LIST),
                    _rebuild("graph_objects", _entity_vector(OLD), "graph_obj_search_vector", PENDING_LIST),
                ),
                migrations.RunSQL(
                    _rebuild("document_passages", _passage_vector(NEW), "passage_search_vector"),
                    _rebuild("document_passages", _passage_vector(OLD), "passage_search_vector"),
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="graphobject",
                    name="search_vector",
                    field=models.GeneratedField(
                        db_persist=True,
                        expression=django.contrib.postgres.search.CombinedSearchVector(
                            django.contrib.postgres.search.SearchVector(
                                apps.graph_tools.text_search.SearchText(models.F("name")),
                                config="english",
                                weight="A",
                            ),
                            "||",
                            django.contrib.postgres.search.SearchVector(
                                apps.graph_tools.text_search.SearchText(
                                    django.db.models.functions.text.Left("description", 100000)
                                ),
                                config="english",
                                weight="B",
                            ),
                            django.contrib.postgres.search.SearchConfig("english"),
                        ),
                        output_field=django.contrib.postgres.search.SearchVectorField(),
                    ),
                ),
                migrations.AlterField(
                    model_name="passage",
                    name="search_vector",
                    field=models.GeneratedField(
                        db_persist=True,
                        expression=django.contrib.postgres.search.SearchVector(
                            apps.graph_tools.text_search.SearchText(
                                django.db.models.functions.text.Left("text", 100000)
                            ),
                            config="english",
                            weight=None,
                        ),
                        output_field=django.contrib.postgres.search.SearchVectorField(),
                    ),
                ),
            ],
        ),
    ]
