"""Documents move to an app of their own, ``apps.documents`` (#48): this app forgets their models
(state only: the ``kb.`` tables, their rows, indexes and constraints stay as they are) and the
``documents`` app's ``0001_initial`` takes them over under the same table names. Migrations 0016
to 0022 still create and change those tables, as they always did."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('graph_tools', '0022_mention_index'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='changesetitem',
                    name='change_set',
                ),
                migrations.RemoveField(
                    model_name='changesetitem',
                    name='passage',
                ),
                migrations.RemoveField(
                    model_name='document',
                    name='project',
                ),
                migrations.RemoveField(
                    model_name='document',
                    name='uploaded_by',
                ),
                migrations.RemoveField(
                    model_name='passage',
                    name='document',
                ),
                migrations.RemoveField(
                    model_name='extractionsettings',
                    name='project',
                ),
                migrations.RemoveField(
                    model_name='mentionname',
                    name='entity',
                ),
                migrations.RemoveField(
                    model_name='mentionname',
                    name='project',
                ),
                migrations.RemoveField(
                    model_name='passagemention',
                    name='mention_name',
                ),
                migrations.RemoveField(
                    model_name='passage',
                    name='project',
                ),
                migrations.RemoveField(
                    model_name='passageembedding',
                    name='passage',
                ),
                migrations.RemoveField(
                    model_name='passagemention',
                    name='passage',
                ),
                migrations.RemoveField(
                    model_name='passageembedding',
                    name='project',
                ),
                migrations.RemoveField(
                    model_name='passagemention',
                    name='project',
                ),
                migrations.DeleteModel(
                    name='ChangeSet',
                ),
                migrations.DeleteModel(
                    name='ChangeSetItem',
                ),
                migrations.DeleteModel(
                    name='Document',
                ),
                migrations.DeleteModel(
                    name='ExtractionSettings',
                ),
                migrations.DeleteModel(
                    name='MentionName',
                ),
                migrations.DeleteModel(
                    name='Passage',
                ),
                migrations.DeleteModel(
                    name='PassageEmbedding',
                ),
                migrations.DeleteModel(
                    name='PassageMention',
                ),
            ],
            database_operations=[],
        ),
    ]
