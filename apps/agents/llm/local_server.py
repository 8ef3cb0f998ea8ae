"""Serve the offline default model over an OpenAI-compatible HTTP endpoint on loopback.

``python -m apps.agents.llm.local_server --model <gguf> --alias qwen2.5-1.5b --port 8012
--api-key-file .data/llm/api_key`` starts llama.cpp's own server (through the prebuilt ``xllamacpp``
wheel) and blocks until SIGTERM or SIGINT. ``scripts/local_llm.sh serve`` starts it in the background for ``make run``; every app
process then talks to this one process (``local/<alias>`` in ``apps.agents.llm.resolve``) instead of
loading 2 GB of weights each.

It listens on 127.0.0.1 only, and no browser origin may call it (CORS off): the only clients are
kgchat's own processes on this machine. CORS only keeps a web page from reading an answer, though:
a page in the user's browser can still send a "simple" POST to loopback and make the model work.
So every request but ``/health`` must carry the key of ``--api-key-file`` (``Authorization: Bearer
<key>``; 401 otherwise), a file ``scripts/local_llm.sh`` makes once, readable by its owner only,
that kgchat's local provider reads too. The key is read from a file, never taken on the command
line, which every local user can read (``ps``).

Three slots (``n_parallel=3``) sharing one KV cache of ``--ctx`` tokens (``kv_unified``: a slot may
use what the others leave): a slot keeps its previous prompt's cache, so a turn's system prompt and
tool list, which stay the same from step to step and from turn to turn, are read once
(``cache_prompt``), and the server puts a request in the idle slot whose cached prompt it shares
most. Requests at once are decoded together (measured on 2 cores, docs/evals.md: 5.9
generated tokens/s one request at a time, 12.5 two at a time, 11.7 four at a time). The extraction
worker asks two at a time (``KGCHAT_EXTRACTION_CONCURRENCY``) and the third slot keeps a chat
turn's prompt: beside the worker, with two slots, two turns of five lost their cached system prompt
to an extraction prompt and took 66-79 s; with three, 12-18 s (alone 12-16 s).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any


def api_key_read(path: str) -> str:
    """The key in ``path`` (its first line), or ``""`` when the file is missing or empty."""
    try:
        with open(path, encoding="utf-8") as key_file:
            return key_file.readline().strip()
    except FileNotFoundError:
        return ""


def build_params(args: argparse.Namespace) -> Any:
    """llama.cpp server parameters for a small model on a few shared CPU cores."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.cors_origins = ""
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.kv_unified = True
    params.cache_prompt = True
    params.n_predict = args.max_tokens
    # Half the cores: llama.cpp's threads wait for one another, so on cores that the app, the
    # database and the embedder also use, one busy core stalls them all (measured on two busy
    # cores: 0.2 tokens/s with two threads; see the README for one).
    threads = args.threads or max(1, (os.cpu_count() or 2) // 2)
    params.cpuparams.n_threads = threads
    # Reading a prompt is arithmetic that every core speeds up (measured on 2 idle cores: 35 prompt
    # tokens/s with one thread, 56 with two); generating is bound by memory and gains little.
    params.cpuparams_batch.n_threads = args.batch_threads or max(threads, os.cpu_count() or 1)
    params.api_keys = [args.api_key]
    params.ui = False
    params.verbosity = 1
    return params


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="path of the GGUF file")
    parser.add_argument("--alias", required=True, help="the model name clients ask for")
    parser.add_argument("--port", type=int, default=8012)
    parser.add_argument("--ctx", type=int, default=8192, help="context window in tokens")
    parser.add_argument("--max-tokens", type=int, default=1024, help="longest answer in tokens")
    parser.add_argument("--parallel", type=int, default=3, help="requests decoded together (slots)")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: half the cores)")
    parser.add_argument(
        "--batch-threads", type=int, default=0, help="CPU threads reading prompts (0: all the cores)"
    )
    parser.add_argument(
        "--api-key-file", required=True, help="file holding the key every request must send (Bearer)"
    )
    args = parser.parse_args(argv)
    if not os.path.isfile(args.model):
        print(f"local_server: no model file at {args.model}", file=sys.stderr)
        return 2
    args.api_key = api_key_read(args.api_key_file)
    if not args.api_key:
        print(f"local_server: no API key in {args.api_key_file}", file=sys.stderr)
        return 2

    import xllamacpp

    server = xllamacpp.Server(build_params(args))
    print(f"local_server: serving {args.alias} on {server.listening_address}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    print("local_server: stopping", flush=True)
    return 0


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    sys.exit(main())
