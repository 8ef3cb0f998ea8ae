"""A project's own ontology (#51): ``kb.graph_ontologies``, one row per project; and the index the
ontology-violations queue pages a relationship type's rows through, in id order. The SQL names the
index with its schema: Django's index operations drop by bare name, which misses the kb schema (as
migrations 0010 and 0014 note)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('graph_tools', '0024_entity_redirects_and_curation_authority'),
        ('projects', '0002_invitations'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ProjectOntology',
            fields=[
                ('project', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='projects.project')),
                ('document', models.JSONField(blank=True, null=True)),
                ('on_violation', models.CharField(choices=[('refuse', 'Refuse a write that breaks the ontology'), ('flag', 'Accept it and flag it for review')], default='refuse', max_length=16)),
                ('draft', models.JSONField(blank=True, null=True)),
                ('draft_notes', models.TextField(blank=True, default='')),
                ('draft_at', models.DateTimeField(blank=True, null=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'db_table': 'kb"."graph_ontologies',
            },
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "CREATE INDEX graph_rel_project_type_id ON kb.graph_relationships (project_id, type, id)",
                    "DROP INDEX kb.graph_rel_project_type_id",
                )
            ],
            state_operations=[
                migrations.AddIndex(
                    model_name='graphrelationship',
                    index=models.Index(fields=['project', 'type', 'id'], name='graph_rel_project_type_id'),
                )
            ],
        ),
        migrations.AddField(
            model_name='projectontology',
            name='updated_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
    ]
