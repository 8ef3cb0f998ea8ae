"""GraphChange.action's choices come from the write tools' one list (apps/graph_tools/writes.py):
the field names a function, so adding a write tool needs no migration."""

import apps.graph_tools.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('graph_tools', '0013_hnsw_ef_construction'),
    ]

    operations = [
        migrations.AlterField(
            model_name='graphchange',
            name='action',
            field=models.CharField(choices=apps.graph_tools.models.change_actions, max_length=32),
        ),
    ]
