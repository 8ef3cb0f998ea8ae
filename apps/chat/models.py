"""Conversations and their append-only messages (``kb.chat_*``)."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.agents.models import AgentDefinition, AgentRun
from apps.projects.models import Project


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="conversations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True, default="")
    agent_definition = models.ForeignKey(
        AgentDefinition, on_delete=models.SET_NULL, null=True, blank=True, related_name="conversations"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # The turn in progress, claimed atomically so that turns of one conversation never overlap,
    # even across server processes; cleared when the turn ends (or found stale after a crash).
    active_turn_id = models.UUIDField(null=True, blank=True, editable=False)
    active_turn_started_at = models.DateTimeField(null=True, blank=True, editable=False)
    active_turn_worker = models.CharField(max_length=200, blank=True, default="", editable=False)
    # The turn's lease: the process running it renews it every few seconds (``claim.py``); once it
    # has lapsed, any process may take the turn over (an agent turn resumes, a plain one ends).
    active_turn_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    # A user asked to stop the turn: its process stops it, and a takeover ends it instead of resuming.
    active_turn_cancelled = models.BooleanField(default=False, editable=False)
    # What a plain turn has streamed so far, saved as it goes (an agent turn saves it on its run), so
    # that a turn whose process dies keeps the text the user saw (see ``chat.turns.recovery``).
    active_turn_text = models.TextField(blank=True, default="", editable=False)
    # Where the turn's frames were when it last saved its text (``turn.TurnProgress``): the last
    # ``seq`` published, how many characters its ``token`` frames carried, the tool calls shown
    # completed. A process taking the turn over goes on after them when the frames themselves died
    # with their process (one process, no Redis): {"seq": int, "chars": int, "calls": [str]}.
    active_turn_shown = models.JSONField(default=dict, blank=True, editable=False)
    # Entities tools returned in this conversation ({id: {id, key, type, name}}): the citations an
    # answer may keep. Kept here so a turn reads one row instead of every earlier tool result.
    known_entities = models.JSONField(default=dict, blank=True, editable=False)

    class Meta:
        db_table = 'kb"."chat_conversations'
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["user", "project", "-updated_at"], name="chat_conv_user_project_upd")]

    def __str__(self) -> str:
        return self.title or str(self.id)


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    TOOL = "tool", "Tool"


class Message(models.Model):
    """One message of a conversation. Rows are never updated (a database trigger refuses it)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=MessageRole.choices)
    content = models.TextField(blank=True, default="")
    tool_calls = models.JSONField(default=list, blank=True)
    retrieval_context = models.JSONField(null=True, blank=True)
    citations = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = 'kb"."chat_messages'
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["conversation", "created_at"], name="chat_msg_conv_created")]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"


# Full-text search over conversations (apps/chat/search.py). The expressions here and in the
# search query must match exactly for PostgreSQL to use the GIN indexes.
SEARCH_CONFIG = "english"
SEARCH_MESSAGE_CHARS = 100_000


class ConversationShare(models.Model):
    """A read-only link to a conversation for the members of its project; only a hash of its token is kept."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="shares")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversation_shares"
    )
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = 'kb"."chat_conversation_shares'
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"share of {self.conversation_id}"

    def status_at(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


class Rating(models.TextChoices):
    UP = "up", "Up"
    DOWN = "down", "Down"


class MessageFeedback(models.Model):
    """One user's thumbs up/down (and comment) on one assistant answer, with the run that wrote it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="feedback")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="message_feedback"
    )
    # Copied from the answer's retrievalContext so the admin can filter by agent and model and link
    # to the trace; null for plain answers (no run).
    agent_run = models.ForeignKey(
        AgentRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="feedback"
    )
    rating = models.CharField(max_length=8, choices=Rating.choices)
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = 'kb"."chat_message_feedback'
        ordering = ["-updated_at"]
        constraints = [models.UniqueConstraint(fields=["message", "user"], name="uniq_feedback_message_user")]
        verbose_name_plural = "message feedback"

    def __str__(self) -> str:
        return f"{self.rating} on {self.message_id}"


class ClientThread(models.Model):
    """A thread of an OpenAI-compatible client (``/v1/chat/completions``) mapped to a conversation.

    Such clients resend the whole history with every message; ``key`` is the SHA-256 of what
    names the thread (docs/protocol.md, "/v1"): the earlier messages as kgchat sent and received
    them, or an id the client sends in ``X-Kgchat-Conversation``, each with its user and model. A
    thread that goes on gets a new key per answer; the old ones stay (an edited message resent
    from an earlier point lands where that point was)."""

    key = models.CharField(primary_key=True, max_length=64, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="client_threads")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = 'kb"."chat_client_threads'

    def __str__(self) -> str:
        return f"client thread of {self.conversation_id}"
