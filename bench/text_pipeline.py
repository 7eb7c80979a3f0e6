#!/usr/bin/env python3
"""text_pipeline.py: the language-model input pipeline, side by side on the
same cores in one run. Each variant does the same work over the same
corpus: parse JSON lines, tokenize the "text" field with the same
SentencePiece model, pack into rows of --length tokens (first fit, 8 open
rows), batch 8 rows.

  python          json.loads, python3-sentencepiece's encode (its C++
                  encoder, called once per line), the same first-fit loop
                  into NumPy rows, np.stack for batches: one process
  encoder         bench/tokenize_baseline: SentencePiece's C++ encoder
                  alone over the texts in memory, no JSON, no packing: the
                  physical reference (1 thread, then --workers threads)
  sluice-local    Sluice in this process (import sluice): tokenize on one
                  thread, then on --workers threads (num_parallel_calls)
  sluice-service  through a local dispatcherd and --workers workerds,
                  distributed_epoch (each file a split), tokenize with
                  num_parallel_calls -1 on each, read here

Tokens are the packed tokens delivered (segment_ids > 0); each Sluice
variant also prints its padding fraction. Run from the repository root:

  PYTHONPATH=build/python /usr/bin/python3 bench/text_pipeline.py [--files 8 --lines 4000]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def make_corpus(out, files, lines, vocab):
    subprocess.run([sys.executable, os.path.join(HERE, "make_text_corpus.py"), "--out", out, "--files",
                    str(files), "--lines", str(lines)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["spm_train", f"--input={out}/train.txt", f"--model_prefix={out}/tokenizer",
                    f"--vocab_size={vocab}", "--model_type=bpe", "--hard_vocab_limit=false"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    texts = os.path.join(out, "all.txt")
    with open(texts, "w") as all_text:
        for part in range(files):
            with open(os.path.join(out, f"part-{part}.jsonl")) as f:
                for line in f:
                    all_text.write(json.loads(line)["text"] + "\n")
    return [os.path.join(out, f"part-{p}.jsonl") for p in range(files)], os.path.join(out, "tokenizer.model"), texts


def python_loop(files, model, length, bins=8, batch=8):
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=model)
    open_rows = []  # [tokens list, segment lengths]
    tokens = 0
    batches = 0
    rows = []

    def emit(row):
        nonlocal tokens, batches
        ids = np.full(length, 0, dtype=np.int32)
        segments = np.zeros(length, dtype=np.int32)
        positions = np.zeros(length, dtype=np.int32)
        at = 0
        for number, size in enumerate(row[1], start=1):
            ids[at:at + size] = row[0][at:at + size]
            segments[at:at + size] = number
            positions[at:at + size] = np.arange(size)
            at += size
        tokens += at
        rows.append((ids, segments, positions))
        if len(rows) == batch:
            np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows]), np.stack([r[2] for r in rows])
            batches += 1
            rows.clear()

    def place(piece):
        for row in open_rows:
            if length - len(row[0]) >= len(piece):
                row[0].extend(piece)
                row[1].append(len(piece))
                return
        if len(open_rows) == bins:
            fullest = min(range(len(open_rows)), key=lambda i: length - len(open_rows[i][0]))
            emit(open_rows.pop(fullest))
        open_rows.append([list(piece), [len(piece)]])

    start = time.perf_counter()
    for path in files:
        with open(path) as f:
            for line in f:
                ids = processor.encode(json.loads(line)["text"])
                for begin in range(0, len(ids), length):
                    place(ids[begin:begin + length])
    for row in open_rows:
        emit(row)
    if rows:
        batches += 1
    return tokens, time.perf_counter() - start


def sluice_pipeline(sluice, files, model, length, parallel=0):
    return (sluice.Dataset.json_lines(files, ["text"]).tokenize(model, num_parallel_calls=parallel)
            .pack_sequences(length, "first_fit").batch(8))


def read_all(dataset):
    tokens = 0
    padding = 0
    start = time.perf_counter()
    for batch in dataset:
        segments = batch["segment_ids"]
        used = int(np.count_nonzero(segments))
        tokens += used
        padding += segments.size - used
    elapsed = time.perf_counter() - start
    return tokens, elapsed, padding / max(tokens + padding, 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--lines", type=int, default=4000, help="lines per file")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0, help="encoder baseline run time")
    parser.add_argument("--build", default=os.environ.get("BUILD", os.path.join(ROOT, "build")))
    args = parser.parse_args()
    import sluice

    with tempfile.TemporaryDirectory() as work:
        files, model, texts = make_corpus(work, args.files, args.lines, args.vocab)
        results = []
        tokens, seconds = python_loop(files, model, args.length)
        results.append(("python", tokens / seconds, ""))
        baseline = os.path.join(args.build, "bench", "tokenize_baseline")
        for threads in sorted({1, args.workers}):
            out = subprocess.run([baseline, model, texts, str(args.seconds), str(threads)], check=True,
                                 capture_output=True, text=True).stdout.split()
            results.append((f"encoder ({threads} thread{'s' if threads > 1 else ''})", float(out[1]), ""))
        tokens, seconds, padding = read_all(sluice_pipeline(sluice, files, model, args.length))
        results.append(("sluice-local (1 thread)", tokens / seconds, f"padding {padding:.1%}"))
        tokens, seconds, padding = read_all(sluice_pipeline(sluice, files, model, args.length, args.workers))
        results.append((f"sluice-local ({args.workers} threads)", tokens / seconds, f"padding {padding:.1%}"))
        with sluice.LocalCluster(workers=args.workers) as cluster:
            dataset = sluice_pipeline(sluice, files, model, args.length, -1).distribute("distributed_epoch",
                                                                                          cluster.service)
            read_all(dataset)  # warm: the workers load the model once
            tokens, seconds, padding = read_all(dataset)
        results.append((f"sluice-service ({args.workers} workers)", tokens / seconds, f"padding {padding:.1%}"))
    python_rate = results[0][1]
    print(f"{'variant':<28}{'tokens/s':>14}{'x python':>10}  note")
    for name, rate, note in results:
        print(f"{name:<28}{rate:>14,.0f}{rate / python_rate:>10.2f}  {note}")


if __name__ == "__main__":
    main()
