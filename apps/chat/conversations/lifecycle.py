"""Renaming and deleting one of my conversations (deleting one stops the turn running in it)."""

from __future__ import annotations

import logging
import uuid

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from apps.chat import selectors
from apps.chat.models import Conversation
from apps.chat.streams.bus import get_bus
from apps.core.inputs import InvalidInput
from apps.projects.selectors import Principal

log = logging.getLogger("kgchat.chat")

MAX_TITLE = Conversation._meta.get_field("title").max_length or 200


def conversation_rename(*, principal: Principal, conversation_id: object, title: str) -> Conversation:
    conversation = selectors.conversation_get(principal=principal, conversation_id=conversation_id)
    title = (title or "").strip()
    if not title or len(title) > MAX_TITLE:
        raise InvalidInput(f"title: 1 to {MAX_TITLE} characters", field="title")
    Conversation.objects.filter(id=conversation.id).update(title=title, updated_at=timezone.now())
    conversation.refresh_from_db()
    return conversation


def _delete(conversation_id: uuid.UUID) -> bool:
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(id=conversation_id)
        running = conversation.active_turn_id is not None
        conversation.delete()
    return running


async def conversation_delete(*, principal: Principal, conversation_id: object) -> None:
    """Delete one of my conversations with its messages, at once, even while a turn runs in it.

    The running turn (in whichever process) is cancelled: it ends with an ``error`` frame of code
    ``conversation_deleted`` and ``done``, stores nothing, and its run is ``cancelled``.
    """
    conversation = await selectors.aconversation_get(principal=principal, conversation_id=conversation_id)
    if await sync_to_async(_delete)(conversation.id):
        await get_bus().cancel(str(conversation.id))
