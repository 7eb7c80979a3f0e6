#!/usr/bin/python3
"""Generate an ImageNet-like image folder for the image-pipeline benchmarks.

Layout (torchvision ImageFolder): OUT/class_00/img_0000.jpg, ...; image i goes
to class i * classes // images, so the classes get contiguous, nearly equal
blocks. Each image is RGB, width and height drawn independently in
[min-side, max-side], with photo-like content (a smooth gradient, a few
soft-edged shapes, Gaussian noise) so that JPEGs at quality 90 have about the
entropy of real photos.

Deterministic: image i depends only on (seed, i), so the output is the same
whatever --jobs is. Running it again on a complete folder does nothing.

    /usr/bin/python3 bench/make_image_folder.py --out /tmp/imgs --images 2000
"""

import argparse
import json
import multiprocessing
import os
import re
import sys
import time

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

# Written last; a folder whose stamp differs from the requested parameters is
# regenerated. Dot-file at the root, so ImageFolder (which lists directories
# only) ignores it.
STAMP = ".make_image_folder.json"
# The files this script writes, and the only ones it ever deletes.
OWN_FILE = re.compile(r"^img_\d+\.(jpg|png)$")
OWN_DIR = re.compile(r"^class_\d+$")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-side", type=int, default=250)
    p.add_argument("--max-side", type=int, default=500)
    p.add_argument("--quality", type=int, default=90, help="JPEG quality")
    p.add_argument("--png-fraction", type=float, default=0.0,
                   help="fraction of images written as PNG instead (for tests)")
    p.add_argument("--noise-sigma", type=float, default=8.0)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="worker processes (default: all cores)")
    a = p.parse_args()
    if a.images < 1 or a.classes < 1 or a.classes > a.images:
        p.error("need 1 <= classes <= images")
    if not 16 <= a.min_side <= a.max_side:
        p.error("need 16 <= min-side <= max-side")
    if not 0.0 <= a.png_fraction <= 1.0:
        p.error("--png-fraction must be in [0, 1]")
    return a


def rel_path(i, a):
    """Relative path of image i; the extension is drawn from its own stream."""
    cls = i * a.classes // a.images
    is_png = np.random.default_rng([a.seed, i, 1]).random() < a.png_fraction
    width = max(4, len(str(a.images - 1)))
    return os.path.join(f"class_{cls:02d}", f"img_{i:0{width}d}.{'png' if is_png else 'jpg'}")


_noise_bank = {}


def noise_bank(a):
    """A block of Gaussian noise, made once per process from the seed alone.

    Images add a window of it at a random offset: drawing fresh noise for each
    image would cost as much as everything else together, and JPEG cannot
    tell the difference."""
    key = (a.seed, a.max_side, a.noise_sigma)
    if key not in _noise_bank:
        rng = np.random.default_rng([a.seed, 0x6e6f697365])
        n = a.max_side + 64
        noise = rng.standard_normal((n, n, 3), dtype=np.float32) * np.float32(a.noise_sigma)
        _noise_bank[key] = np.round(noise).astype(np.int16)
    return _noise_bank[key]


def render(i, a):
    """Returns image i as an HxWx3 uint8 array."""
    rng = np.random.default_rng([a.seed, i])
    w = int(rng.integers(a.min_side, a.max_side + 1))
    h = int(rng.integers(a.min_side, a.max_side + 1))

    # The smooth part (gradient and shapes) is drawn at half resolution and
    # scaled up: cheaper, and the bilinear upscale plus a small blur give the
    # shapes soft edges, as out-of-focus objects in a photo.
    hw, hh = (w + 1) // 2, (h + 1) // 2

    # Background: a linear gradient between two random colours in a random
    # direction: colour = c0 + t * (c1 - c0), t in [0, 1] along the direction.
    theta = rng.uniform(0, 2 * np.pi)
    dx, dy = np.cos(theta), np.sin(theta)
    span = abs(dx) * (hw - 1) + abs(dy) * (hh - 1) or 1.0
    t0 = min(0.0, dx * (hw - 1)) + min(0.0, dy * (hh - 1))
    xs = ((np.arange(hw) * dx - t0) / span).astype(np.float32)[None, :, None]
    ys = (np.arange(hh) * dy / span).astype(np.float32)[:, None, None]
    c0 = rng.uniform(0, 255, 3).astype(np.float32)
    dc = rng.uniform(0, 255, 3).astype(np.float32) - c0
    grad = c0 + (xs + ys) * dc
    pil = Image.fromarray(np.clip(grad, 0, 255).astype(np.uint8), "RGB")

    # Shapes: filled ellipses, rectangles and polygons in random colours.
    draw = ImageDraw.Draw(pil)
    for _ in range(int(rng.integers(3, 8))):
        kind = int(rng.integers(3))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        cx, cy = rng.uniform(0, hw), rng.uniform(0, hh)
        rx, ry = rng.uniform(0.05, 0.35) * hw, rng.uniform(0.05, 0.35) * hh
        if kind == 0:
            draw.ellipse([cx - rx, cy - ry, cx + rx, cy + ry], fill=colour)
        elif kind == 1:
            draw.rectangle([cx - rx, cy - ry, cx + rx, cy + ry], fill=colour)
        else:
            n = int(rng.integers(3, 7))
            ang = np.sort(rng.uniform(0, 2 * np.pi, n))
            rad = rng.uniform(0.4, 1.0, n)
            draw.polygon([(cx + rx * r * np.cos(q), cy + ry * r * np.sin(q))
                          for q, r in zip(ang, rad)], fill=colour)
    pil = pil.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(0.5, 1.5))))
    pil = pil.resize((w, h), Image.BILINEAR)

    # Sensor-like noise: i.i.d. Gaussian per pixel and channel.
    bank = noise_bank(a)
    oy = int(rng.integers(0, bank.shape[0] - h + 1))
    ox = int(rng.integers(0, bank.shape[1] - w + 1))
    out = np.asarray(pil).astype(np.int16)
    out += bank[oy:oy + h, ox:ox + w]
    np.clip(out, 0, 255, out=out)
    return out.astype(np.uint8)


def write_one(job):
    """Renders and writes image i; returns (bytes, pixels)."""
    i, a = job
    rel = rel_path(i, a)
    path = os.path.join(a.out, rel)
    tmp = path + ".tmp"
    im = Image.fromarray(render(i, a), "RGB")
    pixels = im.width * im.height
    if rel.endswith(".png"):
        im.save(tmp, format="PNG")
    else:
        # PIL's defaults otherwise: 4:2:0 chroma subsampling, baseline, no
        # optimised Huffman tables (what most cameras and datasets have).
        im.save(tmp, format="JPEG", quality=a.quality)
    os.replace(tmp, path)  # a killed run never leaves a truncated image
    return os.path.getsize(path), pixels


def existing_images(out):
    """Paths (relative) of the images this script would have written."""
    found = []
    if not os.path.isdir(out):
        return found
    for d in sorted(os.listdir(out)):
        if OWN_DIR.match(d) and os.path.isdir(os.path.join(out, d)):
            found += [os.path.join(d, f) for f in sorted(os.listdir(os.path.join(out, d)))
                      if OWN_FILE.match(f)]
    return found


def main():
    a = parse_args()
    params = {k: getattr(a, k) for k in ("images", "classes", "seed", "min_side", "max_side",
                                         "quality", "png_fraction", "noise_sigma")}
    stamp_path = os.path.join(a.out, STAMP)
    expected = sorted(rel_path(i, a) for i in range(a.images))
    have = existing_images(a.out)
    stamp = None
    if os.path.exists(stamp_path):
        with open(stamp_path) as f:
            stamp = json.load(f)
    if have == expected and stamp == params:
        sizes = [os.path.getsize(os.path.join(a.out, p)) for p in have]
        print(f"{a.out} already holds the {len(have)} expected images; not regenerating "
              f"(mean {np.mean(sizes) / 1e3:.1f} KB)")
        return 0

    # Start over: delete only files this script writes, then the stamp.
    if have:
        print(f"{a.out}: {len(have)} images from other parameters; regenerating", file=sys.stderr)
    if os.path.exists(stamp_path):
        os.remove(stamp_path)
    for p in have:
        os.remove(os.path.join(a.out, p))
    for c in range(a.classes):
        os.makedirs(os.path.join(a.out, f"class_{c:02d}"), exist_ok=True)

    start = time.monotonic()
    jobs = [(i, a) for i in range(a.images)]
    if a.jobs > 1:
        with multiprocessing.Pool(a.jobs) as pool:
            written = pool.map(write_one, jobs, chunksize=16)
    else:
        written = [write_one(j) for j in jobs]
    sizes = [s for s, _ in written]
    seconds = time.monotonic() - start
    with open(stamp_path, "w") as f:
        json.dump(params, f)

    # JPEG size also scaled to a 375x500 image (ImageNet's typical size), the
    # figure to compare with real photos.
    jpeg = [(s, px) for (s, px), p in zip(written, (rel_path(i, a) for i in range(a.images)))
            if p.endswith(".jpg")]
    jpeg_note = ""
    if jpeg:
        per_375x500 = np.mean([s / px for s, px in jpeg]) * 375 * 500
        jpeg_note = (f", mean JPEG {np.mean([s for s, _ in jpeg]) / 1e3:.1f} KB"
                     f" ({per_375x500 / 1e3:.1f} KB per 375x500)")
    print(f"wrote {len(sizes)} images in {a.classes} classes to {a.out}: mean {np.mean(sizes) / 1e3:.1f} KB"
          f"{jpeg_note}, total {sum(sizes) / 1e6:.1f} MB, {seconds:.1f} s ({a.jobs} jobs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
