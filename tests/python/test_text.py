"""The text ops in Python: json_lines, tokenize (against python3-sentencepiece)
and pack_sequences, locally and through real daemons."""

import json
import subprocess

import numpy as np
import pytest
import sentencepiece

import sluice

WORDS = "data service train model token sequence pack worker reader epoch batch split stream".split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Two JSON-lines files of 40 lines, and a BPE model spm_train makes from them."""
    root = tmp_path_factory.mktemp("text")
    lines = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(3 + i % 9)) for i in range(80)]
    (root / "train.txt").write_text("\n".join(lines) + "\n")
    for part in range(2):
        with open(root / f"part-{part}.jsonl", "w") as f:
            for i in range(part * 40, part * 40 + 40):
                f.write(json.dumps({"id": i, "text": lines[i]}) + "\n")
    subprocess.run(["spm_train", f"--input={root}/train.txt", f"--model_prefix={root}/m", "--vocab_size=60",
                    "--model_type=bpe"], check=True, capture_output=True)
    return {"files": [str(root / "part-0.jsonl"), str(root / "part-1.jsonl")], "model": str(root / "m.model"),
            "lines": lines}


def test_json_lines_gives_named_fields(corpus):
    rows = list(sluice.Dataset.json_lines(corpus["files"], ["id", "text"]).take(2))
    assert rows == [{"id": b"0", "text": corpus["lines"][0].encode()}, {"id": b"1", "text": corpus["lines"][1].encode()}]


def test_json_lines_typed_fields_give_numbers_through_the_service(tmp_path):
    """Issue 49: `{"id": 3}` was b"3"; declared types give tensors, and a
    value of another type names the file, line and field."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": 3, "text": "a", "score": 0.5, "ids": [1, 2]}\n'
                    '{"id": 4, "text": "b", "score": 1.5, "ids": []}\n')
    fields = {"id": "int64", "text": "string", "score": "float32", "ids": "int32[]"}
    ds = sluice.Dataset.json_lines([str(path)], fields)
    with sluice.LocalCluster(workers=1) as cluster:
        rows = list(ds.distribute("parallel_epochs", cluster.service))
        assert [list(row) for row in rows] == [["id", "text", "score", "ids"]] * 2
        assert [int(row["id"]) for row in rows] == [3, 4]
        assert rows[0]["id"].dtype == np.int64 and rows[0]["score"].dtype == np.float32
        assert [float(row["score"]) for row in rows] == [0.5, 1.5]
        assert [row["text"] for row in rows] == [b"a", b"b"]
        assert rows[0]["ids"].dtype == np.int32
        assert [row["ids"].tolist() for row in rows] == [[1, 2], []]
        path.write_text('{"id": "3", "text": "a", "score": 0.5, "ids": [1]}\n')
        with pytest.raises(ValueError) as wrong:
            list(ds.distribute("parallel_epochs", cluster.service))
        assert str(wrong.value).endswith(f"json_lines: '{path}' line 1: field 'id' is a string where int64 is declared")


def test_tokenize_matches_sentencepiece(corpus):
    processor = sentencepiece.SentencePieceProcessor(model_file=corpus["model"])
    ids = list(sluice.Dataset.json_lines(corpus["files"], ["text"]).tokenize(corpus["model"], add_eos=True))
    assert len(ids) == 80
    for row, text in zip(ids, corpus["lines"]):
        assert row["text"].dtype == np.int32
        assert row["text"].tolist() == processor.encode(text) + [processor.eos_id()]


def test_pack_sequences_rows_hold_every_token_once(corpus):
    processor = sentencepiece.SentencePieceProcessor(model_file=corpus["model"])
    expected = sorted(t for text in corpus["lines"] for t in processor.encode(text))
    packed = list(sluice.Dataset.json_lines(corpus["files"], ["text"]).tokenize(corpus["model"])
                  .pack_sequences(32, "best_fit").batch(4))
    tokens = []
    for batch in packed:
        assert batch["tokens"].shape[1:] == (32,)
        segments, positions = batch["segment_ids"], batch["positions"]
        tokens += batch["tokens"][segments > 0].tolist()
        # Positions count from 0 within each segment.
        for row_segments, row_positions in zip(segments, positions):
            for segment in set(row_segments.tolist()) - {0}:
                assert row_positions[row_segments == segment].tolist() == list(range(int((row_segments == segment).sum())))
    assert sorted(tokens) == expected


def test_the_service_tokenizes_each_file_once(corpus):
    processor = sentencepiece.SentencePieceProcessor(model_file=corpus["model"])
    with sluice.LocalCluster(workers=2) as cluster:
        rows = list(sluice.Dataset.json_lines(corpus["files"], ["id", "text"]).tokenize(corpus["model"], 1)
                    .distribute("distributed_epoch", cluster.service))
    by_id = {int(row["id"]): row["text"].tolist() for row in rows}
    assert len(rows) == 80 and sorted(by_id) == list(range(80))
    assert all(by_id[i] == processor.encode(corpus["lines"][i]) for i in range(80))


def test_errors_name_the_file_and_line(corpus, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a"}\n{"text": \n')
    with pytest.raises(sluice.Error, match=f"json_lines: '{bad}' line 2: not valid JSON") as lost:
        list(sluice.Dataset.json_lines([str(bad)], ["text"]))
    assert lost.value.code == "DATA_LOSS"
    with pytest.raises(ValueError, match=r"step 3 \(pack_sequences\): method must be first_fit or best_fit, got 'x'"):
        list(sluice.Dataset.json_lines(corpus["files"], ["text"]).tokenize(corpus["model"]).pack_sequences(8, "x"))


def test_padded_batch_pads_token_vectors(corpus):
    processor = sentencepiece.SentencePieceProcessor(model_file=corpus["model"])
    tokenized = sluice.Dataset.json_lines(corpus["files"], ["text"]).tokenize(corpus["model"])
    first = next(iter(tokenized.padded_batch(4, padding_values=[np.int32(-1)])))["text"]
    expected = [processor.encode(text) for text in corpus["lines"][:4]]
    longest = max(len(ids) for ids in expected)
    assert first.dtype == np.int32 and first.shape == (4, longest)
    assert first.tolist() == [ids + [-1] * (longest - len(ids)) for ids in expected]
    fixed = next(iter(tokenized.padded_batch(2, padded_shapes=[[40]], drop_remainder=True)))["text"]
    assert fixed.shape == (2, 40)
    assert fixed[0].tolist() == expected[0] + [0] * (40 - len(expected[0]))
