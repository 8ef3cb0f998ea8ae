"""GIN indexes for full-text search over conversation titles and message text (apps/chat/search.py).

Expression indexes, so existing rows are indexed as they are and nothing is rewritten. The
expressions must match those in apps/chat/search.py exactly.
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
                'CREATE INDEX chat_msg_content_fts ON "kb"."chat_messages" '
                "USING gin (to_tsvector('english'::regconfig, left(content, 100000))) "
                "WHERE role IN ('user', 'assistant')",
            ],
            reverse_sql=[
                'DROP INDEX IF EXISTS "kb"."chat_conv_title_fts"',
                'DROP INDEX IF EXISTS "kb"."chat_msg_content_fts"',
            ],
        ),
    ]
