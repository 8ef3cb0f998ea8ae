"""Rebuild the entity and passage vector indexes with the current HNSW parameters: ``python manage.py vector_index_rebuild``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from apps.graph_tools.embeddings import HNSW_EF_CONSTRUCTION, HNSW_M, vector_indexes_rebuild


class Command(BaseCommand):
    help = (
        f"Rebuild every HNSW index of entity and passage vectors with m {HNSW_M}, ef_construction {HNSW_EF_CONSTRUCTION} "
        "(REINDEX CONCURRENTLY: searches and writes go on; about 25 minutes at 1M vectors on 2 cores)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        rebuilt = vector_indexes_rebuild()
        for name, seconds in rebuilt:
            self.stdout.write(f"rebuilt {name} in {seconds:.1f} s")
        if not rebuilt:
            self.stdout.write("no HNSW index of entity or passage vectors")
