"""The README's language-model pipeline in a real PyTorch trainer (issue 49,
part 3): made with IterableDataset(checkpointable=True), saved mid-epoch,
killed with SIGKILL and restored; and the layouts that cannot be saved,
refused when the loader is made, each naming the step and a fix that works
when followed. Part of the real-trainer matrix (ctest python_trainer_tests)."""

import collections
import json
import os
import re
import signal
import subprocess
import sys

import pytest
import yaml

torch = pytest.importorskip("torch", reason="PyTorch (Debian's python3-torch) is not installed")

import sluice  # noqa: E402
from sluice.torch import IterableDataset  # noqa: E402

SOURCE_DIR = os.environ.get("SLUICE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
WORDS = "data service train model token sequence pack worker reader epoch batch split stream".split()
LENGTH = 48  # tokens a row: a few lines each


def readme_lm_pipeline():
    """The README's language-model pipeline, as written there."""
    text = open(os.path.join(SOURCE_DIR, "README.md")).read()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    (block,) = [b for b in blocks if "pack_sequences" in b]
    return yaml.safe_load(block)["pipeline"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Four JSON-lines files of 30 distinct lines, and a BPE model of them."""
    root = tmp_path_factory.mktemp("lm")
    lines = [f"line {i} " + " ".join(WORDS[(i * 5 + j * 3) % len(WORDS)] for j in range(2 + i % 11))
             for i in range(120)]
    (root / "train.txt").write_text("\n".join(lines) + "\n")
    files = []
    for part in range(4):
        path = root / f"part-{part}.jsonl"
        path.write_text("".join(json.dumps({"text": line}) + "\n" for line in lines[part * 30:part * 30 + 30]))
        files.append(str(path))
    subprocess.run(["spm_train", f"--input={root}/train.txt", f"--model_prefix={root}/m", "--vocab_size=80",
                    "--model_type=bpe"], check=True, capture_output=True)
    return {"root": root, "files": files, "model": str(root / "m.model")}


@pytest.fixture(scope="module")
def cluster():
    with sluice.LocalCluster(workers=2) as running:
        yield running


def write_pipeline(corpus, service, path, **distribute_overrides):
    """The README's pipeline with this corpus, model, row length and
    service; nothing else changed unless asked."""
    steps = readme_lm_pipeline()
    for step in steps:
        (op, args), = step.items()
        if op == "json_lines":
            args["files"] = corpus["files"]
        elif op == "tokenize":
            args["model"] = corpus["model"]
        elif op == "pack_sequences":
            args["length"] = LENGTH
        elif op == "distribute":
            args["service"] = service
            args.update(distribute_overrides)
        elif op == "batch":
            step["batch"] = 3
    path.write_text(yaml.safe_dump({"pipeline": steps}))
    return str(path)


TRAINER = """
import json, os, pickle, signal, sys, torch
import sluice
from sluice.torch import IterableDataset

pipeline, out, phase = sys.argv[1], sys.argv[2], sys.argv[3]
dataset = IterableDataset(sluice.Dataset.from_yaml(pipeline), checkpointable=True)
if phase == "resumed":
    with open(os.path.join(out, "state.pkl"), "rb") as f:
        dataset.load_state_dict(pickle.load(f))
rows = []
for step, batch in enumerate(torch.utils.data.DataLoader(dataset, batch_size=None)):
    rows.append([[t.tolist(), s.tolist()] for t, s in zip(batch["tokens"], batch["segment_ids"])])
    if phase == "first" and step == 3:
        with open(os.path.join(out, "state.pkl"), "wb") as f:
            pickle.dump(dataset.state_dict(), f)
        with open(os.path.join(out, "first.json"), "w") as f:
            json.dump(rows, f)
        os.kill(os.getpid(), signal.SIGKILL)  # the trainer dies mid-epoch, after its save
with open(os.path.join(out, phase + ".json"), "w") as f:
    json.dump(rows, f)
"""


def run_trainer(tmp_path, pipeline, phase):
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    done = subprocess.run([sys.executable, str(script), pipeline, str(tmp_path), phase], capture_output=True,
                          text=True, env=os.environ, timeout=120)
    if phase == "first":
        assert done.returncode == -signal.SIGKILL, done.stderr
    else:
        assert done.returncode == 0, done.stderr
    return json.loads((tmp_path / f"{phase}.json").read_text())


def rows_of(batches):
    return collections.Counter(json.dumps(row) for batch in batches for row in batch)


@pytest.mark.parametrize("order", ["as_written", "deterministic"])
def test_the_readme_lm_pipeline_resumes_after_sigkill_with_the_uninterrupted_runs_rows(corpus, cluster, tmp_path,
                                                                                     order):
    overrides = {"deterministic": True} if order == "deterministic" else {}
    pipeline = write_pipeline(corpus, cluster.service, tmp_path / "lm.yaml", **overrides)
    whole = run_trainer(tmp_path, pipeline, "whole")
    # Every token of the corpus once: the rows hold each line's tokens and
    # its end-of-sequence token, and nothing else but padding.
    tokens = sum(sum(1 for s in segments if s) for batch in whole for _, segments in batch)
    lines = [json.loads(line)["text"] for path in corpus["files"] for line in open(path)]
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=corpus["model"])
    assert tokens == sum(len(processor.encode(line)) + 1 for line in lines)
    assert len(whole) > 5 and all(len(batch) == 3 for batch in whole[:-1])
    first = run_trainer(tmp_path, pipeline, "first")
    assert len(first) == 4
    resumed = run_trainer(tmp_path, pipeline, "resumed")
    # Each row of the epoch once across the kill, none twice, none lost.
    assert rows_of(first) + rows_of(resumed) == rows_of(whole)
    if order == "deterministic":
        assert first + resumed == whole  # the very batches of the uninterrupted run


UNSAVABLE = "grpc://127.0.0.1:1"  # never contacted: the check reads the definition


def lm(corpus):
    return (sluice.Dataset.json_lines(corpus["files"], ["text"])
            .tokenize(corpus["model"], add_eos=True, num_parallel_calls=-1)
            .pack_sequences(LENGTH, "best_fit"))


EXACTLY_ONCE_PREFIX = (
    "IterableDataset(checkpointable=True): step {step} (distribute): exactly_once runs the worker side once per "
    "split, so that every element comes from one split and is the same on every run; it takes a splittable "
    "source, then map, filter, tokenize, pack_sequences, prefetch and at most one batch or padded_batch "
    "(docs/pipeline.md): step ")


def test_checkpointable_refuses_each_unsavable_layout_when_made_and_its_advice_works(corpus, tmp_path):
    def refusal(dataset, **kwargs):
        with pytest.raises(ValueError) as refused:
            IterableDataset(dataset, checkpointable=True, **kwargs)
        return str(refused.value)

    def accepted(dataset, **kwargs):
        IterableDataset(dataset, checkpointable=True, **kwargs)  # raises if refused

    # The README's pipeline without exactly_once: the advice is to add it.
    assert refusal(lm(corpus).distribute("distributed_epoch", UNSAVABLE).batch(3)) == (
        "IterableDataset(checkpointable=True): step 4 (distribute): saving a distributed_epoch read needs "
        "exactly_once: true, which tags each element with its split and position so that a restore knows what "
        "was delivered")
    accepted(lm(corpus).distribute("distributed_epoch", UNSAVABLE, exactly_once=True).batch(3))
    # The README's old layout, batching on the workers: batch after distribute.
    assert refusal(lm(corpus).batch(3).distribute("distributed_epoch", UNSAVABLE, exactly_once=True)) == (
        EXACTLY_ONCE_PREFIX.format(step=5) + "4 is a batch after pack_sequences, whose rows per split vary, so "
        "that every split would end in a short batch: batch after distribute")
    # A shuffle buffer on the workers mixes splits: shuffle the source.
    shuffled = sluice.Dataset.range(100).shuffle(10).batch(4)
    assert refusal(shuffled.distribute("distributed_epoch", UNSAVABLE, exactly_once=True)) == (
        EXACTLY_ONCE_PREFIX.format(step=4) + "2 is shuffle, whose output depends on more than one split (shuffle "
        "the source with a seed instead)")
    files = sluice.Dataset.list_files([str(corpus["root"] / "*.jsonl")], shuffle=True, seed=5)
    accepted(files.distribute("distributed_epoch", UNSAVABLE, exactly_once=True))
    # parallel_epochs: the worker side must repeat exactly.
    assert refusal(sluice.Dataset.range(100).shuffle(10).distribute("parallel_epochs", UNSAVABLE)) == (
        "IterableDataset(checkpointable=True): step 3 (distribute): a parallel_epochs read restores only when "
        "its workers' pipeline gives the same elements in the same order on every run, so that each worker "
        "can pass over what was delivered; step 2 is a shuffle without a seed (seed it or make it "
        "deterministic: true, or use distributed_epoch with exactly_once: true)")
    accepted(sluice.Dataset.range(100).shuffle(10, seed=3).distribute("parallel_epochs", UNSAVABLE))
    # Reads that keep no epoch position.
    endless = sluice.Dataset.range(100).repeat()
    assert refusal(endless.distribute("parallel_epochs", UNSAVABLE, job_name="sweep",
                                      cross_trainer_cache={"trainer_id": "a", "max_bytes": 1 << 20})) == (
        "IterableDataset(checkpointable=True): step 3 (distribute): a cross_trainer_cache read cannot be saved "
        "or restored: it reads one stream from where its trainer is, shared with other trainers, not an epoch "
        "whose position could be kept")
    assert refusal(endless.distribute("parallel_epochs", UNSAVABLE, job_name="j", num_consumers=2,
                                      consumer_index=0)) == (
        "IterableDataset(checkpointable=True): step 3 (distribute): a coordinated read (num_consumers) cannot "
        "be saved or restored yet")
    # The layout: saving is built for CPU batches, whole to each rank.
    saved = sluice.Dataset.range(10).batch(2)
    assert refusal(saved, device="cuda:0").startswith(
        "IterableDataset(checkpointable=True): device='cuda:0' with batch='per_rank' reads through "
        "distribute_dataset, which does not save its position")
    assert "(move each batch to the GPU in the training loop)" in refusal(saved, batch="global")
    accepted(saved)
    IterableDataset(sluice.Dataset.range(100).shuffle(10).distribute("parallel_epochs", UNSAVABLE))  # unchecked
