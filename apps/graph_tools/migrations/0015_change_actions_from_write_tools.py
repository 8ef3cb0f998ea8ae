"""GraphChange.action without choices: the change actions come from the write tools' one list
(``apps/graph_tools/writes.py``, ``WRITE_KINDS``) and the admin's filter reads them there, so adding
a write tool needs no migration."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("graph_tools", "0014_entity_name_lower_index"),
    ]

    operations = [
        migrations.AlterField(
            model_name="graphchange",
            name="action",
            field=models.CharField(max_length=32),
        ),
    ]
