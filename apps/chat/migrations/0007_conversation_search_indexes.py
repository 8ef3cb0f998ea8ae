"""Full-text search over conversation titles and message text (apps/chat/search.py).

Messages get a stored generated ``search_vector`` column (PostgreSQL computes it, for existing
rows when this runs and for every new row; no application code writes it, so the model does not
declare it) with a GIN index over user messages and answers: ranking then reads the stored
vector instead of parsing every matching message again. Titles are short, so they have an
expression index. The expressions must match those in apps/chat/search.py exactly. Adding the
column rewrites the table without firing the append-only trigger (it fires on UPDATE only).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0006_conversation_active_turn_text"),
    ]

    operations = [
        migrations.RunSQL(
            sql=[
                'CREATE INDEX chat_conv_title_fts ON "kb"."chat_conversations" '
                "USING gin (to_tsvector('english'::regconfig, title))",
                'ALTER TABLE "kb"."chat_messages" ADD COLUMN search_vector tsvector '
                "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, left(content, 100000))) STORED",
                'CREATE INDEX chat_msg_search_vector ON "kb"."chat_messages" '
                "USING gin (search_vector) WHERE role IN ('user', 'assistant')",
            ],
            reverse_sql=[
                'DROP INDEX IF EXISTS "kb"."chat_conv_title_fts"',
                'DROP INDEX IF EXISTS "kb"."chat_msg_search_vector"',
                'ALTER TABLE "kb"."chat_messages" DROP COLUMN IF EXISTS search_vector',
            ],
        ),
    ]
