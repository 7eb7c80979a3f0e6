"""The operator's module of bench/python_transforms.py: torchvision's v1
ImageNet training transforms as a Sluice worker function, and a no-op for
the pool hop's cost."""

import io

import torch
from PIL import Image
from torchvision import transforms

# As in a DataLoader worker: one intra-op thread per process.
torch.set_num_threads(1)

_TRANSFORM = transforms.Compose(
    [
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ]
)


def train(element):
    """image_folder's {image, label, path} to {image: float32 [3, 224, 224], label}."""
    image = Image.open(io.BytesIO(element["image"])).convert("RGB")
    return {"image": _TRANSFORM(image), "label": element["label"]}


def noop(x):
    return x
