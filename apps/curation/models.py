"""A project's curation settings (#51)."""

from __future__ import annotations

from django.db import models

from apps.projects.models import Project


class CurationSettings(models.Model):
    """How a project reviews its curation change sets: by default another editor or owner approves
    a member's change set; with ``authors_approve_own`` its author may approve it too (a project of
    one editor, or one that trusts its editors)."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, primary_key=True, related_name="+")
    authors_approve_own = models.BooleanField(default=False)

    class Meta:
        db_table = 'kb"."curation_settings'

    def __str__(self) -> str:
        return f"{self.project_id}"
