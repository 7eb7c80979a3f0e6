#!/usr/bin/env python3
"""What packing each split on its own costs in padding (issue 49, part 3).

Under exactly_once each split (each JSON-lines file) runs the worker side on
its own, so pack_sequences before `distribute` flushes its open rows at every
file's end rather than once at the epoch's end. This measures, in one run on
one corpus and one tokenizer, the padding fraction (positions with
segment_ids == 0, over all positions) of:

  - one stream: the files packed as one stream, as a local pipeline does;
  - per file: each file packed alone, as exactly_once does, computed locally;
  - service: the README's layout through a local dispatcher and 2 workers
    (distributed_epoch, exactly_once: true), which must equal "per file".

  /usr/bin/python3 bench/pack_per_split.py --files 8 --lines 2000 --length 2048
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import sluice


def padding(rows):
    """(rows, tokens, padding fraction) of pack_sequences' rows."""
    segments = np.stack([row["segment_ids"] for row in rows])
    tokens = int((segments > 0).sum())
    return len(rows), tokens, 1.0 - tokens / segments.size


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--method", default="best_fit")
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as root:
        subprocess.run([sys.executable, os.path.join(here, "make_text_corpus.py"), "--out", root, "--files",
                        str(args.files), "--lines", str(args.lines)], check=True, capture_output=True)
        subprocess.run(["spm_train", f"--input={root}/train.txt", f"--model_prefix={root}/m",
                        "--vocab_size=2000", "--model_type=bpe"], check=True, capture_output=True)
        files = [os.path.join(root, f"part-{i}.jsonl") for i in range(args.files)]
        model = os.path.join(root, "m.model")

        def packed(paths):
            return (sluice.Dataset.json_lines(paths, ["text"]).tokenize(model, add_eos=True, num_parallel_calls=2)
                    .pack_sequences(args.length, args.method))

        variants = {"one stream": list(packed(files))}
        variants["per file"] = [row for path in files for row in packed([path])]
        with sluice.LocalCluster(workers=2) as cluster:
            read = packed(files).distribute("distributed_epoch", cluster.service, exactly_once=True)
            variants["service"] = list(read)
    print(f"{args.files} files of {args.lines} lines, rows of {args.length} tokens, {args.method}, 8 bins")
    print("| packing | rows | tokens | padding |")
    print("| --- | --- | --- | --- |")
    for name, rows in variants.items():
        count, tokens, fraction = padding(rows)
        print(f"| {name} | {count:,} | {tokens:,} | {100 * fraction:.2f}% |")


if __name__ == "__main__":
    main()
