"""A run's ``started_at`` is set when its row is built, or given, instead of on insert
(``auto_now_add``): a plain answer's record is inserted with its answer and started with its turn
(#50). Django's state only: the column is unchanged (``sqlmigrate``: no-op both ways)."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0008_default_curator_merges"),
    ]

    operations = [
        migrations.AlterField(
            model_name="agentrun",
            name="started_at",
            field=models.DateTimeField(default=django.utils.timezone.now, editable=False),
        ),
    ]
