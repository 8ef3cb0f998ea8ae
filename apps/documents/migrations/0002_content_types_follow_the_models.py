"""The content types of the moved models follow them to the ``documents`` app (#48): each row of
``django_content_type`` named ``graph_tools.<model>`` is renamed ``documents.<model>``, keeping its
id, so the permissions granted on it and the admin's history of its rows stay attached, and no
stale ``graph_tools`` content type is left behind. A fresh database has none yet (Django creates
them after migrating): nothing to do. Reversible (the rows go back to ``graph_tools``)."""

from django.db import migrations

MODELS = [
    "document",
    "passage",
    "passageembedding",
    "extractionsettings",
    "changeset",
    "changesetitem",
    "mentionname",
    "passagemention",
]


def _relabel(apps, schema_editor, source, target):
    ContentType = apps.get_model("contenttypes", "ContentType")
    types = ContentType.objects.using(schema_editor.connection.alias)
    for model in MODELS:
        moved = types.filter(app_label=source, model=model).first()
        if moved is None:
            continue
        # A row under the new label too (Django made one after a migration back and forth): the
        # older row, with its permissions and history, is kept; the newer one's go with it.
        types.filter(app_label=target, model=model).delete()
        moved.app_label = target
        moved.save(update_fields=["app_label"])


def forwards(apps, schema_editor):
    _relabel(apps, schema_editor, "graph_tools", "documents")


def backwards(apps, schema_editor):
    _relabel(apps, schema_editor, "documents", "graph_tools")


class Migration(migrations.Migration):

    dependencies = [
        ("documents", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        # The rows that point at a content type, deleted with a duplicate one.
        ("auth", "0012_alter_user_first_name_max_length"),
        ("admin", "0003_logentry_add_action_flag_choices"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
