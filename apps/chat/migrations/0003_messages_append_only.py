from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION kb.chat_messages_refuse_update() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'kb.chat_messages is append-only: message % cannot be updated', OLD.id
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER chat_messages_append_only
    BEFORE UPDATE ON kb.chat_messages
    FOR EACH ROW EXECUTE FUNCTION kb.chat_messages_refuse_update();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS chat_messages_append_only ON kb.chat_messages;
DROP FUNCTION IF EXISTS kb.chat_messages_refuse_update();
"""


class Migration(migrations.Migration):
    dependencies = [("chat", "0002_conversation_agent_definition")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
