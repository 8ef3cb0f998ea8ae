from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0010_resumable_turns"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="active_turn_shown",
            field=models.JSONField(blank=True, default=dict, editable=False),
        ),
    ]
