"""Issue 49's rough edges, as a notebook user meets them: a token file set
after the first call, a daemon's refusal told in a whole sentence, lists
from_tensor_slices cannot take, and a drain after `sluice read | head`."""

import os
import signal
import subprocess
import time

import pytest

import sluice
from sluice import local_cluster


def test_a_token_file_set_after_the_first_call_counts_at_the_next(tmp_path, monkeypatch):
    tokens = {}
    for name, token in (("cluster", "cluster-0123456789abcdef"), ("client", "client-fedcba9876543210")):
        tokens[name] = tmp_path / f"{name}.token"
        tokens[name].write_text(token + "\n")
        os.chmod(tokens[name], 0o400)
    flags = ["--auth-cluster-token-file", str(tokens["cluster"]), "--auth-client-token-file", str(tokens["client"])]
    monkeypatch.delenv("SLUICE_TOKEN_FILE", raising=False)
    with sluice.LocalCluster(workers=1, dispatcher_args=flags, worker_args=flags) as cluster:
        ds = sluice.Dataset.range(5).distribute("distributed_epoch", cluster.service)
        with pytest.raises(sluice.Error, match=r"set SLUICE_TOKEN_FILE"):
            list(ds)
        # Set in the running process, as a notebook does: the next
        # connection reads it.
        monkeypatch.setenv("SLUICE_TOKEN_FILE", str(tokens["client"]))
        assert sorted(int(x) for x in ds) == list(range(5))
        # A token file replaced by a wrong one is read again too.
        wrong = tmp_path / "wrong.token"
        wrong.write_text("wrong-0123456789abcdef\n")
        os.chmod(wrong, 0o400)
        monkeypatch.setenv("SLUICE_TOKEN_FILE", str(wrong))
        with pytest.raises(sluice.Error, match=r"GetOrRegisterDataset needs the client token and the call carried a "
                                               r"wrong one"):
            list(ds)


def test_the_refusal_of_client_functions_without_tokens_is_a_whole_sentence(tmp_path):
    dispatcherd = local_cluster._daemon("dispatcherd", "SLUICE_DISPATCHERD")
    config = tmp_path / "dispatcher.yaml"
    config.write_text("python: {allow_client_functions: true}\n")
    done = subprocess.run([dispatcherd, "--config", str(config), "--port", "0", "--bind-address", "127.0.0.1"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert done.stderr.strip().endswith(
        "it needs client authentication (auth.client_token_file or auth.clients), so that only holders of a token "
        "can send code to run here"), done.stderr


def test_mixed_and_ragged_lists_are_refused_with_sluices_own_message():
    with pytest.raises(ValueError) as mixed:
        sluice.Dataset.from_tensor_slices([1, "a", 2])
    assert str(mixed.value) == ("a list that mixes numbers and strings (item [0] is int, item [1] is str): a "
                                "component holds one dtype; make its items all numbers or all strings")
    with pytest.raises(ValueError) as ragged:
        sluice.Dataset.from_tensor_slices([[1, 2], [3, 4, 5]])
    assert str(ragged.value) == ("a ragged list: item [1] has 3 items where another at its depth has 2 items; a "
                                 "component is a rectangular array (pad the rows to one length, or make one "
                                 "element of each)")
    with pytest.raises(ValueError, match=r"a ragged list: item \[1\] is a scalar where another at its depth is a "
                                         r"list"):
        sluice.Dataset.from_tensor_slices({"x": [[1], 2]})
    # Lists that are whole still become what they hold.
    assert [int(x) for x in sluice.Dataset.from_tensor_slices([3, 1, 2])] == [3, 1, 2]
    assert [bytes(x) for x in sluice.Dataset.from_tensor_slices(["a", "bc"])] == [b"a", b"bc"]
    assert [list(x) for x in sluice.Dataset.from_tensor_slices([[1.5, 2.0], [3.0, 4.5]])] == [[1.5, 2.0], [3.0, 4.5]]


def test_a_drain_does_not_wait_for_a_reader_that_left(tmp_path):
    """`sluice read ... | head`, then SIGTERM to the worker: the read ended
    when head left (its job released at once), so the drain has nothing to
    wait for, far within drain_timeout_ms."""
    cli = os.environ.get("SLUICE_CLI")
    if not cli:
        pytest.skip("SLUICE_CLI names the sluice binary (ctest sets it)")
    pipeline = tmp_path / "endless.yaml"
    pipeline.write_text("pipeline:\n  - range: {stop: 1000000000}\n  - distribute: {processing_mode: parallel_epochs}\n")
    with sluice.LocalCluster(workers=1, worker_config={"drain_timeout_ms": 60000}) as cluster:
        piped = subprocess.run(
            ["bash", "-c", f'"{cli}" read "{pipeline}" --service {cluster.service} | head -n 3; '
                           'echo "exit ${PIPESTATUS[0]}"'],
            capture_output=True, text=True, timeout=60)
        assert piped.stdout.splitlines() == ["0", "1", "2", "exit 0"], piped.stderr
        worker = cluster.workers[0]
        started = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
        assert time.monotonic() - started < 10  # the drain found no reader to wait for
        assert "drained: every task was read to its end; leaving" in cluster.log("worker0")
