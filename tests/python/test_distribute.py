"""distribute_dataset and distribute_datasets_from_function: one value per
replica, the partial last batch, the end of the input, and errors."""

import numpy as np
import pytest

import sluice


def steps(distributed):
    return [{name: value.tolist() for name, value in step.items()} for step in distributed]


def test_each_step_has_a_value_per_replica_and_the_partial_batch_splits_unevenly():
    dist = sluice.distribute_dataset(sluice.Dataset.range(5).batch(4), replicas=["CPU:0", "CPU:1"])
    assert dist.replicas == ["CPU:0", "CPU:1"]
    assert dist.num_replicas_in_sync == 2
    assert steps(dist) == [{"CPU:0": [0, 1], "CPU:1": [2, 3]}, {"CPU:0": [4], "CPU:1": []}]
    step = next(iter(dist))
    assert isinstance(step["CPU:0"], np.ndarray) and step["CPU:0"].dtype == np.int64


def test_get_next_and_get_next_as_optional_at_the_end():
    it = iter(sluice.distribute_dataset(sluice.Dataset.range(4).batch(4), replicas=["CPU:0", "CPU:1"]))
    assert {k: v.tolist() for k, v in it.get_next().items()} == {"CPU:0": [0, 1], "CPU:1": [2, 3]}
    assert it.get_next_as_optional() is None
    with pytest.raises(StopIteration):
        it.get_next()


def test_named_components_and_device_name_spellings():
    ds = sluice.Dataset.from_tensor_slices({"x": np.arange(4.0), "y": np.arange(4)}).batch(4)
    step = next(iter(sluice.distribute_dataset(ds, replicas=["cpu:0", "/device:CPU:1"])))
    assert list(step) == ["cpu:0", "/device:CPU:1"]
    assert step["cpu:0"]["x"].tolist() == [0.0, 1.0]
    assert step["/device:CPU:1"]["y"].tolist() == [2, 3]


def test_several_input_pipelines_shard_and_rebatch():
    ds = sluice.Dataset.range(16).batch(8)
    seen = []
    for pipeline in range(2):
        dist = sluice.distribute_dataset(ds, ["CPU:0", "CPU:1"], num_input_pipelines=2, input_pipeline_id=pipeline)
        assert dist.num_replicas_in_sync == 4
        for step in steps(dist):
            assert [len(v) for v in step.values()] == [2, 2]
            seen += step["CPU:0"] + step["CPU:1"]
    assert sorted(seen) == list(range(16))


def test_distribute_datasets_from_function_gets_the_input_context():
    contexts = []

    def make(context):
        contexts.append(context)
        return sluice.Dataset.range(5).batch(context.get_per_replica_batch_size(4))

    dist = sluice.distribute_datasets_from_function(make, replicas=["CPU:0", "CPU:1"])
    assert repr(contexts[0]) == "InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=2)"
    assert steps(dist) == [{"CPU:0": [0, 1], "CPU:1": [2, 3]}, {"CPU:0": [4], "CPU:1": []}]
    with pytest.raises(ValueError, match="global batch size 5 is not divisible by 2 replicas in sync"):
        contexts[0].get_per_replica_batch_size(5)
    with pytest.raises(ValueError, match="the dataset function raised RuntimeError: no data"):
        sluice.distribute_datasets_from_function(lambda c: (_ for _ in ()).throw(RuntimeError("no data")), ["CPU:0"])
    with pytest.raises(ValueError, match="the dataset function must return a sluice.Dataset"):
        sluice.distribute_datasets_from_function(lambda c: 3, ["CPU:0"])


def test_distribute_errors():
    with pytest.raises(ValueError, match="device 'TPU:0' is not CPU:N, GPU:N or cuda:N"):
        sluice.distribute_dataset(sluice.Dataset.range(4).batch(2), ["TPU:0"])
    with pytest.raises(ValueError, match="the pipeline has no batch step"):
        sluice.distribute_dataset(sluice.Dataset.range(4), ["CPU:0"])
    with pytest.raises(ValueError, match="auto_shard_policy 'SOME' is not one of: AUTO, FILE, DATA, OFF"):
        sluice.distribute_dataset(sluice.Dataset.range(4).batch(2), ["CPU:0"], auto_shard_policy="SOME")


def gpu_count():
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        return 0


def test_a_missing_gpu_is_named():
    if gpu_count() > 0:
        pytest.skip("this machine has a GPU; the test needs one without")
    with pytest.raises(sluice.Error) as missing:
        iter(sluice.distribute_dataset(sluice.Dataset.range(4).batch(2), ["cuda:0"]))
    assert missing.value.code == "FAILED_PRECONDITION"
    assert "GPU:0" in str(missing.value)


@pytest.mark.skipif(gpu_count() == 0, reason="no CUDA GPU visible to PyTorch on this machine")
def test_gpu_replicas_yield_device_arrays_that_torch_reads_on_its_stream():
    import torch

    dist = sluice.distribute_dataset(sluice.Dataset.range(8).batch(4), replicas=["cuda:0"])
    values = []
    for step in dist:
        array = step["cuda:0"]
        assert array.device == "GPU:0" and array.dtype == "int64"
        tensor = torch.from_dlpack(array)
        assert tensor.device == torch.device("cuda:0")
        values += tensor.cpu().tolist()
    assert values == list(range(8))
