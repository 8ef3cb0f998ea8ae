"""The docqa set (issue #48): multi-hop questions over Wikipedia passages, scored as the papers do.

The data is the developers' sample of ``../shared/data/docqa/`` (beside the clone; its README gives
the sources, licences and the published table): ``corpus.jsonl`` (725 passages ``{id, title,
text}``) and ``questions.jsonl`` (50 2WikiMultihopQA and 50 MuSiQue questions ``{id, dataset,
question, answers, supporting, type}``). It is read, never copied into the repository.

This module holds what needs no database: reading the files, and the scores.

- **Answers** are normalised as SQuAD does (lower case, punctuation and the articles a/an/the
  dropped, single spaces). An answer is right if it *contains* a gold answer as whole words (max
  over the answers); a yes/no gold also needs the other word absent ("yes" in "no, not yes" is not
  a yes). **F1** is SQuAD's token F1 of the answer's first sentence, max over the answers.
- **Passages**: Recall@k is the share of a question's supporting passages among the first k
  retrieved; ``all_found`` is whether every one of them is.

Citations in an answer are Markdown links (``[label](passage:<id>)``); only their labels are read.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

DATASETS = ("2wikimultihopqa", "musique")
SHORT = {"2wikimultihopqa": "2Wiki", "musique": "MuSiQue"}
DEFAULT_PER_DATASET = 10

# HippoRAG 2 (ICML 2025, arXiv 2502.14802, Tables 8-9; Llama-3.3-70B reader, 1,000 questions over
# 6-12k passages), as the data's README quotes it: (system, {dataset: (EM, F1, R@5)}), in percent.
PUBLISHED: tuple[tuple[str, dict[str, tuple[float, float, float | None]]], ...] = (
    ("no retrieval", {"musique": (17.6, 26.1, None), "2wikimultihopqa": (36.5, 42.8, None)}),
    ("BM25", {"musique": (20.3, 28.8, 43.5), "2wikimultihopqa": (47.9, 51.2, 65.3)}),
    ("NV-Embed-v2 (7B), dense RAG", {"musique": (34.7, 45.7, 69.7), "2wikimultihopqa": (57.5, 61.5, 76.5)}),
    ("RAPTOR", {"musique": (20.7, 28.9, 57.8), "2wikimultihopqa": (47.3, 52.1, 66.2)}),
    ("GraphRAG (local)", {"musique": (27.3, 38.5, None), "2wikimultihopqa": (51.4, 58.6, None)}),
    ("LightRAG (local)", {"musique": (0.5, 1.6, None), "2wikimultihopqa": (9.4, 11.6, None)}),
    ("HippoRAG", {"musique": (26.2, 35.1, 53.2), "2wikimultihopqa": (65.0, 71.8, 90.4)}),
    ("HippoRAG 2", {"musique": (37.2, 48.6, 74.7), "2wikimultihopqa": (65.0, 71.0, 90.4)}),
)
# fast-graphrag's benchmarks/README.md: share of the first 51 of HippoRAG's 2Wiki questions with all
# supporting passages retrieved, the corpus being only their contexts.
PUBLISHED_ALL_FOUND_2WIKI: tuple[tuple[str, float], ...] = (
    ("vector DB", 0.49),
    ("LightRAG", 0.47),
    ("GraphRAG", 0.75),
    ("fast-graphrag", 0.96),
)


class DocqaDataMissing(Exception):
    """the docqa sample is not where it was looked for"""


@dataclass(frozen=True)
class DocPassage:
    id: str
    title: str
    text: str

    def document_text(self) -> str:
        """What is uploaded for the passage: ``Title: text``."""
        return f"{self.title}: {self.text}"


@dataclass(frozen=True)
class DocQuestion:
    id: str
    dataset: str
    question: str
    answers: tuple[str, ...]
    supporting: tuple[str, ...]
    type: str


@dataclass(frozen=True)
class DocqaData:
    directory: Path
    passages: tuple[DocPassage, ...]
    questions: tuple[DocQuestion, ...]
    # The first 8 hex digits of each file's sha256 (the README quotes them), so figures name their data.
    digests: dict[str, str]


def default_data_dir() -> Path:
    """``../shared/data/docqa`` beside the clone (CI puts the shared folder there)."""
    return Path(settings.BASE_DIR).resolve().parent / "shared" / "data" / "docqa"


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def docqa_load(directory: Path | None = None) -> DocqaData:
    """The sample's passages and questions; ``DocqaDataMissing`` names the folder when it is not there."""
    directory = directory or default_data_dir()
    corpus, questions = directory / "corpus.jsonl", directory / "questions.jsonl"
    if not corpus.is_file() or not questions.is_file():
        raise DocqaDataMissing(
            f"the docqa sample is not in {directory} (corpus.jsonl and questions.jsonl): put the shared "
            "folder beside the clone (../shared/data/docqa) or pass --docqa-data"
        )
    passages = tuple(
        DocPassage(id=str(r["id"]), title=str(r["title"]), text=str(r["text"])) for r in _jsonl(corpus)
    )
    asked = tuple(
        DocQuestion(
            id=str(r["id"]),
            dataset=str(r["dataset"]),
            question=str(r["question"]),
            answers=tuple(str(a) for a in r["answers"]),  # type: ignore[attr-defined]
            supporting=tuple(str(s) for s in r["supporting"]),  # type: ignore[attr-defined]
            type=str(r.get("type", "")),
        )
        for r in _jsonl(questions)
    )
    digests = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:8] for p in (corpus, questions)}
    return DocqaData(directory=directory, passages=passages, questions=asked, digests=digests)


def questions_to_answer(questions: Iterable[DocQuestion], per_dataset: int) -> list[DocQuestion]:
    """The first ``per_dataset`` questions of each dataset in the file's order (0: all of them)."""
    chosen: list[DocQuestion] = []
    for dataset in DATASETS:
        of_dataset = [q for q in questions if q.dataset == dataset]
        chosen += of_dataset[:per_dataset] if per_dataset > 0 else of_dataset
    return chosen


# --- scores ------------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_LINK = re.compile(r"\[([^\[\]\n]*)\]\((?:entity|passage):[^()\s]*\)")
_BARE_REF = re.compile(r"\(?(?:entity|passage):[^()\s]+\)?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def squad_normalise(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def answer_text(answer: str) -> str:
    """The answer as read: each citation link replaced by its label, bare refs dropped."""
    return _BARE_REF.sub("", _LINK.sub(r"\1", answer)).strip()


def first_sentence(answer: str) -> str:
    text = answer_text(answer)
    return _SENTENCE_END.split(text, maxsplit=1)[0] if text else ""


def _contains(haystack: str, needle: str) -> bool:
    return bool(needle) and f" {needle} " in f" {haystack} "


def contains_gold(answer: str, golds: Sequence[str]) -> bool:
    """Whether the normalised answer contains a normalised gold answer as whole words (a yes/no gold:
    and not the other word)."""
    said = squad_normalise(answer_text(answer))
    for gold in golds:
        wanted = squad_normalise(gold)
        if wanted in ("yes", "no"):
            other = "no" if wanted == "yes" else "yes"
            if _contains(said, wanted) and not _contains(said, other):
                return True
        elif _contains(said, wanted):
            return True
    return False


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD's token F1 of two texts (after ``squad_normalise``)."""
    predicted, expected = squad_normalise(prediction).split(), squad_normalise(gold).split()
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def answer_f1(answer: str, golds: Sequence[str]) -> float:
    """Token F1 of the answer's first sentence, max over the gold answers."""
    sentence = first_sentence(answer)
    return max((token_f1(sentence, gold) for gold in golds), default=0.0)


def recall_at(ranked: Sequence[str], supporting: Sequence[str], k: int) -> float:
    """The share of ``supporting`` among the first ``k`` of ``ranked``."""
    if not supporting:
        return 0.0
    top = set(ranked[:k])
    return sum(1 for s in set(supporting) if s in top) / len(set(supporting))


def all_found(ranked: Sequence[str], supporting: Sequence[str], k: int) -> bool:
    return set(supporting) <= set(ranked[:k])
