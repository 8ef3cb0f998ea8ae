"""The documents app's models (#48), formerly the ``graph_tools`` app's: created in the state only,
over the ``kb.`` tables graph_tools' migrations 0016 to 0022 made (a fresh database) or made long
ago (an existing one); ``graph_tools`` 0023 forgets them first. Nothing is written to the database."""

import apps.graph_tools.text_search
import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.deletion
import django.db.models.functions.text
import pgvector.django.vector
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('graph_tools', '0023_documents_move_to_their_app'),
        ('projects', '0002_invitations'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ExtractionSettings',
                    fields=[
                        ('project', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='projects.project')),
                        ('allow_new_types', models.BooleanField(default=False)),
                        ('owners_auto_approve', models.BooleanField(default=False)),
                    ],
                    options={
                        'db_table': 'kb"."extraction_settings',
                    },
                ),
                migrations.CreateModel(
                    name='Document',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('name', models.CharField(max_length=300)),
                        ('format', models.CharField(choices=[('text', 'Plain text'), ('markdown', 'Markdown'), ('html', 'HTML (text only)'), ('pdf', 'PDF')], max_length=16)),
                        ('content_hash', models.CharField(max_length=64)),
                        ('size_bytes', models.BigIntegerField()),
                        ('page_count', models.IntegerField(blank=True, null=True)),
                        ('text', models.TextField()),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='documents', to='projects.project')),
                        ('uploaded_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'kb"."documents',
                    },
                ),
                migrations.CreateModel(
                    name='ChangeSet',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('status', models.CharField(choices=[('running', 'Running'), ('review', 'Waiting for review'), ('applied', 'Decided'), ('empty', 'Nothing found')], default='running', max_length=16)),
                        ('model', models.CharField(blank=True, default='', max_length=200)),
                        ('passage_ids', models.JSONField(default=list)),
                        ('auto_approve', models.BooleanField(default=False)),
                        ('decided_at', models.DateTimeField(blank=True, null=True)),
                        ('graph_version', models.BigIntegerField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='projects.project')),
                        ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('document', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='change_sets', to='documents.document')),
                    ],
                    options={
                        'db_table': 'kb"."extraction_change_sets',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='MentionName',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('normalised', models.TextField()),
                        ('name', models.TextField()),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('entity', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='graph_tools.graphobject')),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='projects.project')),
                    ],
                    options={
                        'db_table': 'kb"."mention_names',
                    },
                ),
                migrations.CreateModel(
                    name='Passage',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('ordinal', models.IntegerField()),
                        ('text', models.TextField()),
                        ('content_hash', models.CharField(max_length=64)),
                        ('char_start', models.IntegerField()),
                        ('char_end', models.IntegerField()),
                        ('page', models.IntegerField(blank=True, null=True)),
                        ('embedding_pending', models.BooleanField(db_default=True, default=True)),
                        ('extraction_state', models.CharField(blank=True, default='', max_length=16)),
                        ('extraction_attempts', models.IntegerField(default=0)),
                        ('extraction_error', models.TextField(blank=True, default='')),
                        ('extraction_not_before', models.DateTimeField(blank=True, null=True)),
                        ('extracted', models.JSONField(blank=True, null=True)),
                        ('search_vector', models.GeneratedField(db_persist=True, expression=django.contrib.postgres.search.SearchVector(apps.graph_tools.text_search.SearchText(django.db.models.functions.text.Left('text', 100000)), config='english', weight=None), output_field=django.contrib.postgres.search.SearchVectorField())),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('document', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='passages', to='documents.document')),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='projects.project')),
                    ],
                    options={
                        'db_table': 'kb"."document_passages',
                        'ordering': ['document', 'ordinal'],
                    },
                ),
                migrations.CreateModel(
                    name='ChangeSetItem',
                    fields=[
                        ('id', models.BigAutoField(primary_key=True, serialize=False)),
                        ('ordinal', models.IntegerField()),
                        ('action', models.CharField(max_length=32)),
                        ('values', models.JSONField(default=dict)),
                        ('entity_id', models.UUIDField(blank=True, null=True)),
                        ('evidence', models.JSONField(default=dict)),
                        ('status', models.CharField(default='pending', max_length=16)),
                        ('result', models.JSONField(blank=True, null=True)),
                        ('change_set', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='items', to='documents.changeset')),
                        ('passage', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='documents.passage')),
                    ],
                    options={
                        'db_table': 'kb"."extraction_change_set_items',
                        'ordering': ['change_set', 'ordinal'],
                    },
                ),
                migrations.CreateModel(
                    name='PassageEmbedding',
                    fields=[
                        ('pk', models.CompositePrimaryKey('passage_id', 'model', blank=True, editable=False, primary_key=True, serialize=False)),
                        ('model', models.CharField(max_length=200)),
                        ('embedding', pgvector.django.vector.VectorField()),
                        ('passage', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='embeddings', to='documents.passage')),
                        ('project', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='projects.project')),
                    ],
                    options={
                        'db_table': 'kb"."document_passage_embeddings',
                    },
                ),
                migrations.CreateModel(
                    name='PassageMention',
                    fields=[
                        ('id', models.BigAutoField(primary_key=True, serialize=False)),
                        ('surface', models.TextField()),
                        ('kind', models.CharField(max_length=16)),
                        ('char_start', models.IntegerField()),
                        ('char_end', models.IntegerField()),
                        ('mention_name', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='mentions', to='documents.mentionname')),
                        ('passage', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='mentions', to='documents.passage')),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='projects.project')),
                    ],
                    options={
                        'db_table': 'kb"."passage_mentions',
                        'ordering': ['passage', 'char_start'],
                    },
                ),
                migrations.AddIndex(
                    model_name='document',
                    index=models.Index(fields=['project', '-updated_at'], name='document_project_updated'),
                ),
                migrations.AddConstraint(
                    model_name='document',
                    constraint=models.UniqueConstraint(fields=('project', 'name'), name='uniq_document_project_name'),
                ),
                migrations.AddIndex(
                    model_name='changeset',
                    index=models.Index(fields=['status'], name='change_set_status'),
                ),
                migrations.AddIndex(
                    model_name='mentionname',
                    index=django.contrib.postgres.indexes.GinIndex(fields=['normalised'], name='mention_name_trgm', opclasses=['gin_trgm_ops']),
                ),
                migrations.AddIndex(
                    model_name='mentionname',
                    index=models.Index(fields=['entity'], name='mention_name_entity'),
                ),
                migrations.AddConstraint(
                    model_name='mentionname',
                    constraint=models.UniqueConstraint(fields=('project', 'normalised'), name='mention_name_project_normalised'),
                ),
                migrations.AddIndex(
                    model_name='passage',
                    index=models.Index(fields=['document', 'ordinal'], name='passage_document_ordinal'),
                ),
                migrations.AddIndex(
                    model_name='passage',
                    index=models.Index(fields=['document', 'content_hash'], name='passage_document_hash'),
                ),
                migrations.AddIndex(
                    model_name='passage',
                    index=django.contrib.postgres.indexes.GinIndex(fields=['search_vector'], name='passage_search_vector'),
                ),
                migrations.AddIndex(
                    model_name='passage',
                    index=models.Index(condition=models.Q(('embedding_pending', True)), fields=['project'], name='passage_embed_pending'),
                ),
                migrations.AddIndex(
                    model_name='passage',
                    index=models.Index(condition=models.Q(('extraction_state', 'pending')), fields=['extraction_not_before'], name='passage_extract_pending'),
                ),
                migrations.AddIndex(
                    model_name='passageembedding',
                    index=models.Index(fields=['project', 'model'], name='passage_emb_project_model'),
                ),
                migrations.AddIndex(
                    model_name='passagemention',
                    index=models.Index(fields=['passage', 'char_start'], name='passage_mention_passage'),
                ),
                migrations.AddIndex(
                    model_name='passagemention',
                    index=models.Index(fields=['mention_name', 'passage'], name='passage_mention_name'),
                ),
            ],
            database_operations=[],
        ),
    ]
