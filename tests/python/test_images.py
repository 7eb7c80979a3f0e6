"""The image functions against the libraries their users compare with:
decode_image against Pillow, resize against torchvision and Pillow, and
the errors of bad files, through image_folder pipelines."""

import io
import os
import struct
import zlib

import numpy as np
import pytest

import sluice

Image = pytest.importorskip("PIL.Image", reason="Pillow (Debian's python3-pil) is not installed")


def photo_like(height, width, seed):
    """Gradients, a few shapes and noise: what JPEG sees in photos."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    image = np.empty((height, width, 3), np.float32)
    for c in range(3):
        a, b = rng.uniform(-1, 1, 2)
        image[..., c] = 128 + 100 * np.sin(a * x / 17 + b * y / 23 + c)
    for _ in range(4):
        cy, cx, r = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(5, 40)
        image[(y - cy) ** 2 + (x - cx) ** 2 < r**2] = rng.uniform(0, 255, 3)
    image += rng.normal(0, 8, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def encode(array, fmt, **options):
    out = io.BytesIO()
    Image.fromarray(array).save(out, format=fmt, **options)
    return out.getvalue()


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "root"
    (root / "cls").mkdir(parents=True)
    images = {
        "a.jpg": encode(photo_like(120, 160, 1), "JPEG", quality=90),
        "b.png": encode(photo_like(50, 70, 2), "PNG"),
        "c.jpg": encode(photo_like(99, 131, 3)[..., 0], "JPEG", quality=75),  # gray
        "d.png": encode(np.dstack([photo_like(20, 30, 4), np.full((20, 30), 7, np.uint8)]), "PNG"),  # RGBA
    }
    for name, data in images.items():
        (root / "cls" / name).write_bytes(data)
    return root


def decoded(ds):
    return {os.path.basename(e["path"]).decode(): e["image"] for e in ds}


def test_decode_image_is_pixel_identical_to_pillow(folder):
    ours = decoded(sluice.Dataset.image_folder(str(folder)).map("decode_image", channels=3))
    assert sorted(ours) == ["a.jpg", "b.png", "c.jpg", "d.png"]
    for name, array in ours.items():
        expected = np.asarray(Image.open(folder / "cls" / name).convert("RGB"))
        assert array.dtype == np.uint8 and array.shape == expected.shape, name
        assert np.array_equal(array, expected), name
    as_stored = decoded(sluice.Dataset.image_folder(str(folder)).map("decode_image"))
    assert as_stored["c.jpg"].shape == (99, 131, 1)
    assert np.array_equal(as_stored["c.jpg"][..., 0], np.asarray(Image.open(folder / "cls" / "c.jpg")))


def test_resize_matches_torchvision_and_pillow(folder):
    torch = pytest.importorskip("torch")
    functional = pytest.importorskip("torchvision.transforms.functional")
    image = decoded(sluice.Dataset.image_folder(str(folder)).map("decode_image", channels=3))["a.jpg"]
    for size in [(60, 80), (37, 101), (224, 224), (240, 320)]:
        ds = sluice.Dataset.from_tensors(image).map("resize", size=list(size))
        ours = next(iter(ds)).astype(np.float64)
        chw = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))
        theirs = functional.resize(chw, list(size), antialias=True).numpy().transpose(1, 2, 0).astype(np.float64)
        assert ours.shape == theirs.shape
        assert np.abs(ours - theirs).mean() <= 1.0, size
        box = np.asarray(Image.fromarray(image).resize((size[1], size[0]), Image.BOX)).astype(np.float64)
        area = next(iter(sluice.Dataset.from_tensors(image).map("resize", size=list(size), method="area")))
        assert np.abs(area.astype(np.float64) - box).mean() <= 1.0, size


def test_normalize_matches_torchvision(folder):
    torch = pytest.importorskip("torch")
    transforms = pytest.importorskip("torchvision.transforms")
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    image = decoded(sluice.Dataset.image_folder(str(folder)).map("decode_image", channels=3))["b.png"]
    ours = next(iter(sluice.Dataset.from_tensors(image).map("normalize", mean=mean, std=std, layout="CHW")))
    theirs = transforms.Normalize(mean, std)(transforms.ToTensor()(image)).numpy()
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (3, 50, 70)
    assert np.allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    half = next(iter(sluice.Dataset.from_tensors(image).map("normalize", mean=mean, std=std, dtype="float16")))
    assert half.dtype == np.float16
    assert np.allclose(half.astype(np.float32), theirs.transpose(1, 2, 0), atol=4e-3)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_claiming(width, height):
    """A small PNG whose header claims width x height: a decompression bomb
    (its few compressed bytes would inflate to gigabytes)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\0" * 4096)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b"")


def test_bad_files_are_errors_naming_the_file(tmp_path):
    good = encode(photo_like(40, 40, 5), "JPEG", quality=90)
    png = encode(photo_like(40, 40, 6), "PNG")
    corrupt = bytearray(good)
    corrupt[len(corrupt) // 2 : len(corrupt) // 2 + 64] = bytes(range(64))
    cases = {
        "corrupt.jpg": bytes(corrupt),
        "truncated.png": png[: len(png) // 2],
        "empty.jpg": b"",
        "bomb.png": png_claiming(30000, 30000),
        "text.png": b"hello, not an image",
    }
    for name, data in cases.items():
        root = tmp_path / name / "root"
        (root / "cls").mkdir(parents=True)
        (root / "cls" / name).write_bytes(data)
        with pytest.raises(ValueError) as error:
            list(sluice.Dataset.image_folder(str(root)).map("decode_image"))
        message = str(error.value)
        assert f"decode_image: component 'image' ('{root}/cls/{name}'): " in message, message
        if name == "bomb.png":
            assert "30000x30000" in message and "max_pixels" in message
        if name == "empty.jpg":
            assert "empty image (0 bytes)" in message
        # ignore_errors drops it, and the good ones stay.
        (root / "cls" / "good.jpg").write_bytes(good)
        kept = list(sluice.Dataset.image_folder(str(root)).map("decode_image").ignore_errors(quiet=True))
        assert [os.path.basename(e["path"]) for e in kept] == [b"good.jpg"]


def test_the_imagenet_pipeline_through_the_service(folder):
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]

    def pipeline():
        return (
            sluice.Dataset.image_folder(str(folder))
            .map("decode_and_random_crop", size=[32, 32], seed=5, num_parallel_calls=2)
            .map("random_flip_left_right", seed=5)
            .map("normalize", mean=mean, std=std, layout="CHW")
            .batch(2)
        )

    local = list(pipeline())
    assert [b["image"].shape for b in local] == [(2, 3, 32, 32), (2, 3, 32, 32)]
    with sluice.LocalCluster(workers=1) as cluster:
        remote = list(pipeline().distribute("distributed_epoch", cluster.service))
    # Seeded: the same bytes through the service (one worker keeps the order).
    assert len(remote) == 2
    for a, b in zip(local, remote):
        assert np.array_equal(a["image"], b["image"])
        assert np.array_equal(a["label"], b["label"])


def test_webdataset_shards_written_by_python_tarfile(tmp_path):
    import tarfile

    samples = {
        "shard/000": {"jpg": encode(photo_like(32, 48, 7), "JPEG", quality=90), "cls": b"4"},
        "shard/" + "long" * 40: {"jpg": encode(photo_like(20, 20, 8), "JPEG", quality=90), "cls": b"9"},
    }
    path = tmp_path / "data-000.tar"
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for key, parts in samples.items():
            for extension, data in parts.items():
                info = tarfile.TarInfo(f"{key}.{extension}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    ds = sluice.Dataset.webdataset([str(path)]).map("decode_image", component="jpg")
    elements = list(ds)
    assert [e["__key__"].decode() for e in elements] == list(samples)
    assert [e["cls"] for e in elements] == [b"4", b"9"]
    assert elements[0]["jpg"].shape == (32, 48, 3)
    expected = np.asarray(Image.open(io.BytesIO(samples["shard/000"]["jpg"])).convert("RGB"))
    assert np.array_equal(elements[0]["jpg"], expected)
