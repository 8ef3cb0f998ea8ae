"""The Atlas project and its owner's client (``atlas.py``) for every extraction test here."""

from tests.documents.extraction.atlas import owner_client, project

__all__ = ["owner_client", "project"]
