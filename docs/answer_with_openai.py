"""Answer exported EvenHand items with any OpenAI-compatible chat API and write ``item_id,text`` CSV.

Works with a local vLLM server (``vllm serve Qwen/Qwen2.5-7B-Instruct`` serves
``http://localhost:8000/v1``), llama.cpp's or Ollama's OpenAI endpoint, or a hosted API (key in
``OPENAI_API_KEY``). Each item's ``prompt`` is sent as one user message, greedy (temperature 0);
the raw answer text is written, and ``evenhand score`` parses it. Standard library only.

    evenhand suite export --subset smoke --out items.jsonl
    python docs/answer_with_openai.py items.jsonl answers.csv --base-url http://localhost:8000/v1 \
        --model Qwen/Qwen2.5-7B-Instruct
    evenhand score answers.csv
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def answer(prompt: str, a: argparse.Namespace) -> str:
    """The model's reply to ``prompt`` (one chat turn, greedy)."""
    body = {"model": a.model, "messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "max_tokens": a.max_tokens}
    req = urllib.request.Request(a.base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'none')}"})
    with urllib.request.urlopen(req, timeout=a.timeout) as resp:
        return json.load(resp)["choices"][0]["message"]["content"] or ""


def main(argv: list[str] | None = None) -> int:
    """Answer every item of ITEMS (JSONL from `evenhand suite export`) and write OUT (CSV: item_id,text)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("items", help="items.jsonl from `evenhand suite export`")
    p.add_argument("out", help="answers.csv to write (item_id,text)")
    p.add_argument("--base-url", default="http://localhost:8000/v1")
    p.add_argument("--model", required=True)
    p.add_argument("--max-tokens", type=int, default=16, help="raise it for reasoning models")
    p.add_argument("--workers", type=int, default=8, help="requests in flight at once")
    p.add_argument("--timeout", type=float, default=120.0)
    a = p.parse_args(argv)
    with open(a.items, encoding="utf-8") as fh:
        items = [json.loads(line) for line in fh if line.strip()]
    with ThreadPoolExecutor(a.workers) as pool:
        texts = list(pool.map(lambda it: answer(it["prompt"], a), items))
    with open(a.out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "text"])
        w.writerows([it["item_id"], t] for it, t in zip(items, texts))
    print(f"wrote {len(items):,} answers to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
