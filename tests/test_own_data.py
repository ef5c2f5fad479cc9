"""A user's own data (``data/own_data.py``): an image folder or a saved Hugging Face dataset as ``dataset``, what is
read from it, its cache, its refusals at start, its pretraining cache entry and its per-node folders."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset
from PIL import Image

from data import own_data
from data.federated import load_client_partition, load_public_split
from data.node_data import PARTITION_FILE, export_partitions, node_dataset_info, read_node_data
from data.own_data import TEST_FRACTION, own_dataset
from data.transforms import to_model_input
from run_config import federated_split
from server_app.pretraining import cache_path
from simulation.__main__ import main as launcher
from tests.conftest import make_config
from tests.in_process import run_in_process, small_run_config
from tests.own_data_files import CLASSES, write_hf_dataset, write_image_folder

FOLDER_CLASSES = sorted(CLASSES)  # a folder's classes are its sub-folders, sorted


@pytest.fixture(autouse=True)
def _forget_own_data():
    """Every test reads its data afresh (the process keeps what it read, by path, and tests reuse paths)."""
    own_dataset.cache_clear()
    own_data._KNOWN.clear()
    yield
    own_dataset.cache_clear()
    own_data._KNOWN.clear()


def test_an_image_folder_gives_its_size_channels_classes_test_share_and_statistics(tmp_path: Path) -> None:
    folder = write_image_folder(tmp_path / "shapes", count=100, size=24)
    data = own_dataset(str(folder))
    info = data.info
    assert (info.channels, info.image_size, info.input_shape) == (3, (24, 24), (3, 24, 24))
    assert info.class_names == tuple(FOLDER_CLASSES) and info.num_classes == 4
    assert (info.train_samples, info.test_samples) == (80, 20)  # a stratified fifth held out
    assert len(data.splits.test) == round(TEST_FRACTION * 100)
    assert sorted(np.bincount(data.splits.test.labels)) == [5, 5, 5, 5]
    train = data.splits.train.images.astype(np.float64) / 255
    np.testing.assert_allclose(info.mean, train.mean(axis=(0, 2, 3)), rtol=1e-9)
    np.testing.assert_allclose(info.std, train.std(axis=(0, 2, 3)), rtol=1e-9)
    inputs = to_model_input(data.splits.train.images, info)  # normalised with them
    np.testing.assert_allclose(inputs.mean(dim=(0, 2, 3)).numpy(), 0, atol=1e-5)
    # what a file holds reaches the model: the image at 'north-east/<i>.png' is that class's, pixel for pixel
    first = sorted((folder / "north-east").iterdir())[0]
    pixels = np.asarray(Image.open(first)).transpose(2, 0, 1)
    everything = np.concatenate([data.splits.train.images, data.splits.test.images])
    labels = np.concatenate([data.splits.train.labels, data.splits.test.labels])
    matches = [i for i in range(len(everything)) if np.array_equal(everything[i], pixels)]
    assert matches and {FOLDER_CLASSES[labels[i]] for i in matches} == {"north-east"}


def test_greyscale_stays_one_channel_a_colour_image_makes_all_rgb_and_28x28_is_padded(tmp_path: Path) -> None:
    grey = write_image_folder(tmp_path / "grey", count=40, size=28, channels=1)
    info = own_dataset(str(grey)).info
    assert (info.channels, info.image_size, info.input_shape, info.pad_to_32) == (1, (28, 28), (1, 32, 32), True)
    Image.new("RGBA", (28, 28), (200, 10, 10, 128)).save(grey / "north-east" / "colour.png")
    own_dataset.cache_clear()
    mixed = own_dataset(str(grey))
    assert mixed.info.channels == 3
    images = np.concatenate([mixed.splits.train.images, mixed.splits.test.images])
    assert any(np.array_equal(image[:, 0, 0], [200, 10, 10]) for image in images)  # alpha dropped
    assert sum(bool(np.all(image[0] == image[1])) for image in images) == 40  # grey ones: three equal channels


def test_train_and_test_folders_are_used_as_given(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "split" / "train", count=40)
    write_image_folder(tmp_path / "split" / "test", count=12, seed=1)
    info = own_dataset(str(tmp_path / "split")).info
    assert (info.train_samples, info.test_samples, info.num_classes) == (40, 12, 4)


def test_decoded_data_and_statistics_are_cached_once_per_machine(tmp_path: Path, monkeypatch) -> None:
    folder = write_image_folder(tmp_path / "shapes", count=40)
    cache = tmp_path / "arrays"
    first = own_dataset(str(folder), cache=cache).info
    own_dataset.cache_clear()

    def no_decoding(*args: object) -> None:
        raise AssertionError("decoded again")

    monkeypatch.setattr(own_data, "_decode_all", no_decoding)
    assert own_dataset(str(folder), cache=cache).info == first  # read back from the cache, not decoded
    (folder / "north-east" / "0.png").touch()  # a changed file is another entry
    own_dataset.cache_clear()
    with pytest.raises(AssertionError, match="decoded again"):
        own_dataset(str(folder), cache=cache)


def test_a_saved_hugging_face_dataset_with_a_test_split(tmp_path: Path) -> None:
    folder = write_hf_dataset(tmp_path / "hf", count=60, size=16, test=20)
    data = own_dataset(str(folder), ("img", "fine"))
    assert (data.info.channels, data.info.image_size, data.info.class_names) == (3, (16, 16), CLASSES)
    assert (len(data.splits.train), len(data.splits.test)) == (60, 20)
    with pytest.raises(own_data.DataFormatError, match=r"has no column 'image' \(its columns: img, fine\): set 'image"):
        own_dataset(str(folder))


def test_a_single_dataset_with_plain_labels_gets_a_test_share_and_sorted_classes(tmp_path: Path) -> None:
    images = np.random.default_rng(0).integers(0, 255, size=(30, 8, 8), dtype=np.uint8)
    names = ["zebra", "ant", "moth"] * 10
    Dataset.from_dict({"image": [Image.fromarray(i) for i in images], "label": names}).save_to_disk(str(tmp_path / "d"))
    data = own_dataset(str(tmp_path / "d"))
    assert data.info.class_names == ("ant", "moth", "zebra") and data.info.channels == 1
    assert (len(data.splits.train), len(data.splits.test)) == (24, 6)


def _unreadable(folder: Path) -> str:
    (folder / "north-west" / "broken.png").write_bytes(b"not a png")
    return "'north-west/broken.png' is no readable image"


def _mixed_sizes(folder: Path) -> str:
    Image.new("RGB", (40, 30)).save(folder / "south-east" / "big.png")
    return r"holds images of several sizes \(32x32: 40 .*, 40x30: 1 \(e.g. 'south-east/big.png'\)\): resize them"


def _one_class(folder: Path) -> str:
    for name in FOLDER_CLASSES[1:]:
        shutil.rmtree(folder / name)
    return r"holds one class \('north-east'\): a classifier needs at least two"


def _no_images(folder: Path) -> str:
    for path in folder.rglob("*.png"):
        path.rename(path.with_suffix(".txt"))
    return "holds no images: put PNG or JPEG files in one sub-folder per class"


@pytest.mark.parametrize("spoil", [_unreadable, _mixed_sizes, _one_class, _no_images])
def test_bad_folders_are_refused_before_flower_starts_in_one_line_naming_the_folder(tmp_path, capsys, spoil) -> None:
    folder = write_image_folder(tmp_path / "shapes", count=40)
    problem = spoil(folder)
    code = launcher(["--num-supernodes", "2", "--run-config", f"dataset='{folder}' pretrain='public'"])
    error = capsys.readouterr().err.strip()
    assert code == 2 and len(error.splitlines()) == 1, error
    assert error.startswith(f"error: run config 'dataset': image folder '{folder}'")
    assert re.search(problem, error), error


def test_a_path_that_is_no_folder_and_a_relative_name_are_refused(tmp_path: Path, capsys) -> None:
    assert launcher(["--run-config", f"dataset='{tmp_path / 'nowhere'}'"]) == 2
    assert "is not a folder on this machine: give the absolute path of an image folder" in capsys.readouterr().err
    assert launcher(["--run-config", "dataset='my-images'"]) == 2
    assert "or the absolute path of your own data" in capsys.readouterr().err


def test_a_source_of_other_images_is_refused_with_the_fix(tmp_path: Path, capsys) -> None:
    folder = write_image_folder(tmp_path / "shapes", count=40)
    assert launcher(["--num-supernodes", "2", "--run-config", f"dataset='{folder}' model='lenet5'"]) == 2
    error = capsys.readouterr().err.strip()
    assert (
        f"error: run config 'pretrain-dataset' = 'mnist' has 1-channel 32x32 images but dataset '{folder}' has "
        "3-channel 32x32 images: pretrain on the dataset's own held-out share (pretrain='public'), on a dataset of "
        "such images (pretrain-dataset='cifar10'), from a state dict (pretrain='checkpoint' pretrain-checkpoint=...) "
        "or not at all (pretrain='none')"
    ) == error


def test_a_model_that_cannot_take_the_images_is_refused(tmp_path: Path, capsys) -> None:
    folder = write_image_folder(tmp_path / "shapes", count=40, size=20)
    assert launcher(["--run-config", f"dataset='{folder}' model='lenet5' pretrain='public'"]) == 2
    assert f"error: run config 'model' = 'lenet5' cannot take dataset '{folder}''s images (3x20x20)" in (
        capsys.readouterr().err
    )


def test_two_different_folders_never_share_a_pretraining_cache_entry(tmp_path: Path) -> None:
    first = write_image_folder(tmp_path / "a" / "shapes", count=40)
    second = shutil.copytree(first, tmp_path / "b" / "shapes")  # the same images, elsewhere
    third = write_image_folder(tmp_path / "c" / "shapes", count=40, seed=1)

    def entry(folder: Path) -> Path:
        return cache_path(make_config(dataset=str(folder), pretrain="public", pretrain_cache_dir=str(tmp_path)))

    assert len({entry(first), entry(second), entry(third)}) == 3
    assert entry(first) == entry(first) and entry(first).parent == tmp_path and "-public-shapes-" in entry(first).name
    before = entry(first)
    Image.new("RGB", (32, 32)).save(first / "north-east" / "0.png")  # a file changed in place
    assert entry(first) != before


def test_partitions_and_node_folders_of_own_data(tmp_path: Path) -> None:
    folder = write_image_folder(tmp_path / "shapes", count=120, size=16)
    split = federated_split(make_config(dataset=str(folder), dirichlet_alpha=0.5, min_partition_size=5))
    exported = export_partitions(split, 3, tmp_path / "export")
    info = split.info
    expected = [load_client_partition(split, pid, 3) for pid in range(3)]
    assert sum(len(part) for part in expected) + len(load_public_split(split)) == info.train_samples
    own_data._KNOWN.clear()  # a node: it knows nothing of the data but its folder
    own_dataset.cache_clear()
    shutil.rmtree(folder)
    assert node_dataset_info(exported[1], str(folder)) == info
    for pid, node_folder in enumerate(exported):
        data = read_node_data(node_folder, str(folder))
        np.testing.assert_array_equal(data.images, expected[pid].images)
        assert json.loads((node_folder / PARTITION_FILE).read_text())["info"]["class-names"] == FOLDER_CLASSES


def _final(tmp_path: Path, run: str) -> tuple[dict, list[float]]:
    folder = tmp_path / "results" / run
    rounds = [json.loads(line) for line in (folder / "rounds.jsonl").read_text().splitlines()]
    return json.loads((folder / "summary.json").read_text()), [r["accuracy"] for r in rounds]


#: The server pretrains on the folder's public split (30 epochs: its ~50 images are one batch an epoch) and the test
#: split scores every round, so accuracy above chance means the images and labels were read alike in every split
#: (3 epochs left the model at chance, 1.38 ≈ ln 4, and FedFT-EDS's 10% of ~60 images a client cannot lift it).
RUN = {"pretrain": "public", "pretrain-epochs": 30, "num-server-rounds": 2, "local-epochs": 2}


@pytest.mark.parametrize("method", ["fedft-eds", "fedavg"])
def test_an_image_folder_runs_end_to_end(tmp_path: Path, method: str) -> None:
    folder = write_image_folder(tmp_path / "shapes", count=240)
    run_in_process(small_run_config(tmp_path, dataset=str(folder), method=method, **RUN), 3)
    summary, accuracies = _final(tmp_path, "run")
    assert summary["status"] == "completed" and summary["rounds_aggregated"] == 2
    assert accuracies[-1] > 0.5, accuracies  # 4 classes: chance is 0.25


@pytest.mark.parametrize("method", ["fedprox", "moon"])
def test_a_saved_hugging_face_dataset_runs_end_to_end(tmp_path: Path, method: str) -> None:
    folder = write_hf_dataset(tmp_path / "hf", count=240, test=60)
    overrides = {"image-column": "img", "label-column": "fine", **RUN}
    run_in_process(small_run_config(tmp_path, dataset=str(folder), method=method, **overrides), 3)
    summary, accuracies = _final(tmp_path, "run")
    assert summary["status"] == "completed" and summary["rounds_aggregated"] == 2
    assert accuracies[-1] > 0.5, accuracies
