#!/usr/bin/env python3
"""Writes a JSON-lines corpus, and the plain text to train a tokenizer on.

Each line is {"id": N, "text": "..."}, a sentence of 4 to 60 words drawn
from a fixed vocabulary with Zipf-like frequencies, so that token counts
vary as in real text. The same arguments give the same files.

  make_text_corpus.py --out DIR --files 4 --lines 1000
    -> DIR/part-0.jsonl ... DIR/part-3.jsonl, DIR/train.txt
"""
import argparse
import json
import os
import random

SYLLABLES = ["da", "ta", "ser", "vi", "ce", "tra", "in", "mo", "del", "to", "ken", "se", "quen",
             "pack", "wor", "ker", "rea", "der", "ep", "och", "bat", "ch", "spli", "stre", "am"]


def vocabulary(rng, size):
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--lines", type=int, default=1000, help="lines per file")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    words = vocabulary(rng, 2000)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]
    os.makedirs(args.out, exist_ok=True)
    line_id = 0
    with open(os.path.join(args.out, "train.txt"), "w") as train:
        for part in range(args.files):
            with open(os.path.join(args.out, f"part-{part}.jsonl"), "w") as out:
                for _ in range(args.lines):
                    text = " ".join(rng.choices(words, weights, k=rng.randint(4, 60)))
                    out.write(json.dumps({"id": line_id, "text": text}) + "\n")
                    if part == 0:
                        train.write(text + "\n")
                    line_id += 1
    print(f"{args.files} files of {args.lines} lines in {args.out}")


if __name__ == "__main__":
    main()
