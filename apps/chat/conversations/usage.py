"""Tokens and cost of answers and conversations, from the usage their runs recorded.

Runs store the tokens a model reported (``kb.agent_runs.input_tokens/output_tokens``): an agent
turn's run, and a plain answer's record of its model call (``agents.services.agent_run_plain``,
stored with the answer); an answer names its run (``agent_run_id``; a plain answer its record,
``usage_run_id``). An answer without one (a plain answer stored before #50, or one a takeover
ended) shows none. Cost comes
from ``KGCHAT_MODEL_PRICES`` (per million input/output tokens by model name); a model without
a price shows its tokens and a null cost, and so does a conversation with any such run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings

from apps.agents.models import AgentRun
from apps.chat.models import Conversation, Message

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cost: float | None  # in the price table's currency; None when a model has no price


def _price(value: Any) -> Decimal | None:
    try:
        price = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return price if price.is_finite() and price >= 0 else None


def model_price(model: str) -> tuple[Decimal, Decimal] | None:
    """(input, output) price per million tokens of ``model``, or None when the table has none."""
    prices = getattr(settings, "KGCHAT_MODEL_PRICES", {}) or {}
    entry = prices.get(model) if isinstance(prices, dict) else None
    if not isinstance(entry, dict):
        return None
    p_in, p_out = _price(entry.get("input")), _price(entry.get("output"))
    if p_in is None or p_out is None:
        return None
    return p_in, p_out


def run_cost(model: str, input_tokens: int, output_tokens: int) -> Decimal | None:
    price = model_price(model)
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / MILLION


def _usage(runs: list[tuple[str, int, int]]) -> Usage:
    costs = [run_cost(model, i, o) for model, i, o in runs]
    total = None if any(c is None for c in costs) else sum((c for c in costs if c is not None), Decimal(0))
    return Usage(
        input_tokens=sum(i for _, i, _ in runs),
        output_tokens=sum(o for _, _, o in runs),
        cost=float(round(total, 6)) if total is not None else None,
    )


def answer_run_id(message: Message) -> uuid.UUID | None:
    """The run an answer's tokens were recorded on: an agent answer's run, or a plain answer's record."""
    context = message.retrieval_context
    value = (
        (context.get("agent_run_id") or context.get("usage_run_id")) if isinstance(context, dict) else None
    )
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


def answer_usage(*, messages: list[Message]) -> dict[uuid.UUID, Usage]:
    """Tokens and cost of each answer among ``messages`` that names its run, by message id."""
    run_of = {m.id: rid for m in messages if (rid := answer_run_id(m)) is not None}
    runs = {
        r[0]: r[1:]
        for r in AgentRun.objects.filter(id__in=set(run_of.values())).values_list(
            "id", "model", "input_tokens", "output_tokens"
        )
    }
    return {mid: _usage([runs[rid]]) for mid, rid in run_of.items() if rid in runs}


def conversation_usage(*, conversation: Conversation) -> Usage:
    """Tokens and cost of every run of a conversation, plain answers' included (one indexed query)."""
    runs = list(
        AgentRun.objects.filter(conversation_id=conversation.id).values_list(
            "model", "input_tokens", "output_tokens"
        )
    )
    return _usage(runs)
