"""Conversation search reads the words inside angle brackets (#47): the messages' ``search_vector``
and the titles' expression index rebuilt through ``kb.search_text`` (graph_tools 0021).

A message about ``List<String>`` was indexed as 'list' only (PostgreSQL's parser drops what looks
like a tag), so searching "String" did not find it. The expressions are those
``apps/graph_tools/text_search.tsvector_sql`` builds for ``apps/chat/conversations/search.py``.

Cost: ``chat_messages`` is rewritten once under an ACCESS EXCLUSIVE lock (every message's vector
computed again, every index of the table rebuilt; the append-only trigger fires on UPDATE only, so
not here), then the messages' and the titles' GIN indexes are built. Turns cannot be stored
meanwhile. Not measured on messages; passages of ~600 characters took about 0.3 ms each to
rebuild (graph_tools 0021), so 100,000 messages take about half a minute.
"""

from django.db import migrations

NEW, OLD = "kb.search_text({})", "{}"


def _rebuild(text: str) -> list[str]:
    vector = f"to_tsvector('english'::regconfig, {text.format('left(content, 100000)')})"
    title = f"to_tsvector('english'::regconfig, {text.format('title')})"
    return [
        'ALTER TABLE "kb"."chat_messages" DROP COLUMN search_vector, '
        f"ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ({vector}) STORED",
        'CREATE INDEX chat_msg_search_vector ON "kb"."chat_messages" '
        "USING gin (search_vector) WHERE role IN ('user', 'assistant')",
        'ANALYZE "kb"."chat_messages" (search_vector)',
        'DROP INDEX "kb"."chat_conv_title_fts"',
        f'CREATE INDEX chat_conv_title_fts ON "kb"."chat_conversations" USING gin ({title})',
    ]


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0011_active_turn_shown"),
        ("graph_tools", "0021_search_reads_words_in_angle_brackets"),
    ]

    operations = [migrations.RunSQL(_rebuild(NEW), _rebuild(OLD))]
