"""The background worker's extraction step (``DocumentsConfig.ready`` registers it with
``apps.core.jobs``): claim waiting passages, ask the model about a few at once through
``apps.agents.structured`` and store the answers. Tests and ``manage.py extract_document`` call it
directly, with a scripted model if they like."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings

from apps.agents.structured import JsonQuestion, LLMError, Provider, StructuredModel, structured_model
from apps.documents.extraction.answers import extraction_output_clean, guided_output
from apps.documents.extraction.compact import compact_fits, compact_output, compact_question
from apps.documents.extraction.guide import PassageGuide, passage_guide
from apps.documents.extraction.queue import (
    ClaimedPassage,
    extraction_claim,
    extraction_fail,
    extraction_store,
)
from apps.documents.extraction.spec import ExtractionSpec, extraction_question, extraction_spec

log = logging.getLogger("kgchat.extraction")

# A step claims at most this many passages a slot: the worker embeds what waits between two steps.
PASSAGES_PER_SLOT = 4


class _ModelCalls:
    """An event loop in a thread of its own for one step's model calls: the step's thread claims,
    stores and records failures (all of the database work) while the calls run there."""

    def __enter__(self) -> _ModelCalls:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="kgchat-extraction-calls", daemon=True
        )
        self.thread.start()
        return self

    def submit(self, coroutine: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def __exit__(self, *exc_info: object) -> None:
        # Calls still running (the step ended by an error of its own) are cancelled: their passages'
        # leases lapse and they are tried again.
        asyncio.run_coroutine_threadsafe(_cancel_others(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def _cancel_others() -> None:
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


def extraction_step(*, provider: Provider | None = None, after_each: Callable[[], None] | None = None) -> int:
    """Extract waiting passages, asking the model about up to ``KGCHAT_EXTRACTION_CONCURRENCY`` of
    them at once, and return how many were claimed (0 when none waited).

    A slot that is answered takes the next waiting passage at once (a pool, not rounds that wait for
    their slowest), up to ``PASSAGES_PER_SLOT`` passages a slot in one step, so the worker still
    embeds what waits between steps. Claims, stores and failures are this thread's database work;
    only the model calls overlap (``_ModelCalls``). ``after_each`` is called after each passage is
    stored or its failure recorded (the command's progress). A call that breaks unexpectedly
    (not an ``LLMError``) stops the claiming, leaves the others' answers stored and is raised once
    they are; its passage's lease lapses and it is tried again.

    Measured (docs/evals.md, ``make eval --set extraction --countries 6``, the offline default): two
    at a time, 1.2-1.5 times the passages a minute of one at a time; as a pool instead of rounds
    that waited for their slowest, 3.0 -> 3.7 passages a minute."""
    slots = max(1, settings.KGCHAT_EXTRACTION_CONCURRENCY)
    budget = slots * PASSAGES_PER_SLOT
    specs: dict[Any, ExtractionSpec] = {}  # one read per project, not per passage
    pending: dict[
        concurrent.futures.Future[Any], tuple[ClaimedPassage, ExtractionSpec, PassageGuide | None]
    ] = {}
    claimed = 0
    waiting = True  # a passage may still wait: none has been found missing in this step
    unexpected: Exception | None = None
    with _ModelCalls() as calls:
        while True:
            while waiting and unexpected is None and len(pending) < slots and claimed < budget:
                passage = extraction_claim()
                if passage is None:
                    waiting = False
                    break
                claimed += 1
                if passage.project_id not in specs:
                    specs[passage.project_id] = extraction_spec(project_id=passage.project_id)
                spec = specs[passage.project_id]
                try:
                    model = _model(passage, provider)
                except LLMError as exc:  # no such model: its failure recorded without a call
                    _failed(passage, exc)
                    if after_each is not None:
                        after_each()
                    continue
                question, guide = _question(passage, spec, model)
                pending[calls.submit(model.answer(question))] = (passage, spec, guide)
            if not pending:
                break
            answered, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in answered:
                passage, spec, guide = pending.pop(future)
                try:
                    _settle(passage, spec, guide, future)
                except Exception as exc:
                    log.exception("extraction of passage %s failed unexpectedly", passage.id)
                    unexpected = unexpected or exc
                if after_each is not None:
                    after_each()
    if unexpected is not None:
        raise unexpected
    return claimed


def _question(
    passage: ClaimedPassage, spec: ExtractionSpec, model: StructuredModel
) -> tuple[JsonQuestion, PassageGuide | None]:
    """What the model is asked about a passage, and the passage's mentions when it is guided: the
    compact answer (``compact.py``) from a model that answers under a grammar, in a project whose
    types allow it, with ``KGCHAT_EXTRACTION_GUIDED``; else the entities and relationships."""
    if settings.KGCHAT_EXTRACTION_GUIDED and model.in_rows and compact_fits(spec):
        guide = passage_guide(passage_id=passage.id)
        return compact_question(passage, spec, guide), guide
    return extraction_question(passage, spec, rows=model.in_rows), None


def _model(passage: ClaimedPassage, provider: Provider | None) -> StructuredModel:
    """The model a passage's change set names (``LLMError``: no such model), or the caller's."""
    return structured_model(passage.model, provider=provider)


def _settle(
    passage: ClaimedPassage,
    spec: ExtractionSpec,
    guide: PassageGuide | None,
    answered: concurrent.futures.Future[Any],
) -> None:
    """Store a passage's answer, or record its model call's failure; anything else is raised."""
    failure = answered.exception()
    if isinstance(failure, LLMError):
        _failed(passage, failure)
    elif failure is not None:
        raise failure
    else:
        answer = answered.result()
        if guide is None:
            output = extraction_output_clean(answer, spec, text=passage.text)
        else:
            answer = compact_output(answer, spec, guide)
            output = guided_output(extraction_output_clean(answer, spec, text=passage.text), guide)
        extraction_store(passage_id=passage.id, output=output)


def _failed(passage: ClaimedPassage, exc: LLMError) -> None:
    state = extraction_fail(passage_id=passage.id, error=str(exc), attempt=passage.attempt)
    log.warning(
        "extraction of passage %s failed (attempt %d, now %s): %s", passage.id, passage.attempt, state, exc
    )


def extraction_run_until_idle(*, provider: Provider | None = None, limit: int = 100_000) -> int:
    """Extract waiting passages until none waits now (a passage in backoff waits); return how many."""
    done = 0
    while done < limit and (extracted := extraction_step(provider=provider)):
        done += extracted
    return done
