"""Issue 49, part 2: the steps after a Python function see its output.
`image_folder → py:MODULE.FUNCTION → normalize → batch` through real daemons,
and the same with a callable shipped to the workers: without a declaration
the build says to declare output_spec; with it (the advice followed) the
pipeline runs, and normalize finds the function's `image`."""

import json
import subprocess
import sys

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image", reason="Pillow (Debian's python3-pil) is not installed")

import sluice  # noqa: E402
from conftest import write_tokens  # noqa: E402  (pytest puts this folder on sys.path)

MODULE = '''
import io
import numpy as np
from PIL import Image

def jitter(element):
    """Decodes the image and shifts it by one pixel, as an augmentation would."""
    image = np.asarray(Image.open(io.BytesIO(element["image"])).convert("RGB"))
    return {"image": np.roll(image, 1, axis=1), "label": element["label"]}
'''

SPEC = {"image": "uint8[?,?,3]", "label": "int64"}
MEAN, STD = [0.5, 0.4, 0.3], [0.2, 0.25, 0.3]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """Six PNGs (lossless: exact pixels), three classes."""
    root = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(3)
    pixels = {}
    for i in range(6):
        folder = root / f"class{i % 3}"
        folder.mkdir(exist_ok=True)
        array = rng.integers(0, 255, (4, 5, 3), dtype=np.uint8)
        Image.fromarray(array).save(folder / f"img{i}.png")
        pixels[(i % 3, array.tobytes())] = array
    return str(root), pixels


def same_images(pairs, pixels):
    """Whether (label, image) pairs are the jittered, normalized images
    (normalize scales uint8 to [0, 1], then (x - mean) / std), each once."""
    wanted = [(label, (np.roll(array, 1, axis=1) / 255.0 - MEAN) / STD) for (label, _), array in pixels.items()]
    if len(pairs) != len(wanted):
        return False
    for label, image in pairs:
        matches = [i for i, (l, w) in enumerate(wanted) if l == label and np.allclose(image, w, atol=1e-5)]
        if len(matches) != 1:
            return False
        wanted.pop(matches[0])
    return not wanted


def read_pairs(dataset, service):
    pairs = []
    for batch in dataset.distribute("parallel_epochs", service):
        assert batch["image"].dtype == np.float32 and batch["image"].shape[1:] == (4, 5, 3)
        pairs += [(int(label), image) for label, image in zip(batch["label"], batch["image"])]
    return pairs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("modules")
    (folder / "myaug.py").write_text(MODULE)
    python = {"path": [str(folder)], "modules": ["myaug"], "processes": 1}
    with sluice.LocalCluster(workers=1, worker_config={"python": python}, dispatcher_config={"python": python}) as c:
        yield c


def test_a_py_function_declares_its_output_and_normalize_finds_the_image(images, cluster):
    root, pixels = images

    def pipeline(**declared):
        return (sluice.Dataset.image_folder(root).map("py:myaug.jitter", **declared)
                .map("normalize", mean=MEAN, std=STD).batch(4))

    # Undeclared: the dispatcher's build says what to do, in the step's words.
    with pytest.raises(ValueError) as refused:
        list(pipeline().distribute("parallel_epochs", cluster.service))
    assert str(refused.value).endswith(
        "step 3 (map): normalize: the element has 0 components and none named 'image'; say which with component: "
        "INDEX or component: NAME; the components of step 2's output (map py:myaug.jitter) are known only when it "
        "runs, so the steps after it see none: declare them with output_spec, for example output_spec: {image: "
        "\"float32[?,?,3]\", label: int64} (docs/pipeline.md, \"Python functions on the workers\")")
    # Declared: the advice followed works, and the values are exact.
    declared = pipeline(output_spec=SPEC)
    assert same_images(read_pairs(declared, cluster.service), pixels)
    spec = declared.distribute("parallel_epochs", cluster.service).element_spec
    assert list(spec) == ["image", "label"]
    assert (spec["image"].shape, spec["image"].dtype) == ((None, None, None, 3), "float32")
    # A function that breaks its declaration is its error, naming it.
    wrong = sluice.Dataset.image_folder(root).map("py:myaug.jitter", output_spec={"image": "float32[?,?,3]",
                                                                                   "label": "int64"})
    with pytest.raises(ValueError, match=r"py:myaug.jitter returned \{image: TensorSpec\(shape=\[4, 5, 3\], "
                                         r"dtype=uint8\)"):
        list(wrong.distribute("parallel_epochs", cluster.service))


def test_a_yaml_py_function_declares_its_output(images, cluster, tmp_path):
    root, pixels = images
    path = tmp_path / "p.yaml"
    path.write_text(f"""pipeline:
  - image_folder: {{root: {root}}}
  - map: {{fn: py:myaug.jitter, output_spec: {{image: "uint8[?,?,3]", label: int64}}}}
  - map: {{fn: normalize, mean: {MEAN}, std: {STD}}}
  - batch: 4
""")
    assert same_images(read_pairs(sluice.Dataset.from_yaml(str(path)), cluster.service), pixels)


CALLABLE_SCRIPT = '''
import io, json, sys
import numpy as np
from PIL import Image
import sluice
root, mean, std, flags = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4:]

def jitter(element):
    image = np.asarray(Image.open(io.BytesIO(element["image"])).convert("RGB"))
    return {"image": np.roll(image, 1, axis=1), "label": element["label"]}

python = {"allow_client_functions": True, "processes": 1}
with sluice.LocalCluster(workers=1, dispatcher_args=flags, worker_args=flags,
                         worker_config={"python": python}, dispatcher_config={"python": python}) as c:
    def read(**declared):
        ds = sluice.Dataset.image_folder(root).map(jitter, **declared).map("normalize", mean=mean, std=std).batch(4)
        return [[int(l), i.tolist()] for b in ds.distribute("parallel_epochs", c.service)
                for l, i in zip(b["label"], b["image"])]
    try:
        read()
        undeclared = "no error"
    except ValueError as error:
        undeclared = str(error)
    print(json.dumps([undeclared, read(output_spec={"image": "uint8[?,?,3]", "label": "int64"})]))
'''


def test_a_shipped_callable_declares_its_output(images, tmp_path):
    root, pixels = images
    flags, env = write_tokens(tmp_path)
    done = subprocess.run([sys.executable, "-c", CALLABLE_SCRIPT, root, json.dumps(MEAN), json.dumps(STD)] + flags,
                          capture_output=True, text=True, env=env, timeout=100)
    assert done.returncode == 0, done.stderr
    undeclared, rows = json.loads(done.stdout.strip().splitlines()[-1])
    assert undeclared.endswith(
        "the components of step 2's output (map a shipped Python callable) are known only when it runs, so the "
        "steps after it see none: declare them with output_spec, for example output_spec: {image: "
        "\"float32[?,?,3]\", label: int64} (docs/pipeline.md, \"Python functions on the workers\")")
    assert same_images([(label, np.array(image, dtype=np.float32)) for label, image in rows], pixels)
