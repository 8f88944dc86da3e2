"""``zoo select``: pass rates of canned completions by hand, the keep rules, the file SelectedItems
reads back (checked against its source), and the command end to end on a tiny model with seeded
completions."""

import json

import pytest

from datamodules import PretextDataModule, SelectedItems, SyntheticScenes
from datamodules.streams import ITEM_KEY
from tasks import Rotation
from tests.datamodules.test_pretext_datamodule import Numbers, Tag
from zoo.cli import main
from zoo.tools.select import kept, score_items, selection

CONFIG = "configs/quickstart.yaml"


def numbers(n=10, val=2):
    return PretextDataModule(Numbers(n), Tag(), batch_size=2, val_size=val, epoch_size=n - val)


def canned(batch):
    """Four completions per example: item i is answered right ``i % 5`` times (0, 1, 2, 3, 4 of
    4)."""
    return [[f"<answer>{e.answer}</answer>" if k < e.meta[ITEM_KEY] % 5 else "wrong" for k in range(4)] for e in batch]


def test_pass_rates_of_canned_completions_and_the_keep_rules():
    rates = score_items(numbers(), canned)
    assert rates == {"image": {i: (i % 5) / 4 for i in range(8)}}  # every training item once, none held out
    image = rates["image"]
    assert kept(image) == [1, 2, 3, 6, 7]  # neither 0 nor 1: items 0 and 5 never, 4 always solved
    assert kept(image, lo=0.3, hi=0.8) == [2, 3, 7]
    assert kept(image, top=0.25) == [2, 7]  # p (1 - p) = 0.25 for p = 0.5, then 0.1875 for 1, 3, 6
    assert score_items(numbers(), canned, passes=2) == rates  # canned completions do not change


def test_the_file_reads_back_as_the_kept_items_and_the_held_out_ones(tmp_path):
    dm = numbers()
    rates = score_items(dm, canned)
    path = tmp_path / "selection.json"
    path.write_text(json.dumps(selection(dm, rates, {"n": 4})))
    source = Numbers(10)
    train, val = SelectedItems(source, str(path)), SelectedItems(source, str(path), part="held_out")
    assert [train[i] for i in range(len(train))] == [1, 2, 3, 6, 7] and [val[i] for i in range(2)] == [8, 9]
    assert train.describe(0) == "number-1" and train.modality == "image"
    again = PretextDataModule(train, Tag(), batch_size=1, val_source=val, val_size=2)
    assert sorted(int(e.answer) for b in again.train_dataloader() for e in b) == [1, 2, 3, 6, 7]
    with pytest.raises(ValueError, match="written for Numbers with 10 items"):
        SelectedItems(Numbers(11), str(path))
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a selection file"):
        SelectedItems(source, str(tmp_path / "bad.json"))


def test_zoo_select_scores_a_tiny_policy_and_writes_what_it_kept(tmp_path, capsys):
    out = tmp_path / "kept.json"
    main(
        [
            "select",
            "--config",
            CONFIG,
            "--data.init_args.source.init_args.size",
            "12",
            "--data.init_args.val_size",
            "4",
            "--data.init_args.test_size",
            "0",
            "--data.init_args.batch_size",
            "4",
            "--n",
            "6",
            "--out",
            str(out),
            "--device",
            "cpu",
            "--top",
            "0.5",
        ]
    )
    entry = json.loads(out.read_text())["modalities"]["image"]
    rates = {int(i): p for i, p in entry["pass_rates"].items()}
    assert sorted(rates) == list(range(8)) and entry["held_out"] == [8, 9, 10, 11]
    assert all(p in {k / 6 for k in range(7)} for p in rates.values())  # 6 completions each
    assert entry["kept"] == kept(rates, top=0.5) and len(entry["kept"]) == 4
    assert "kept 4 of 8 scored items" in capsys.readouterr().out
    source = SyntheticScenes(size=12, image_size=56)
    dm = PretextDataModule(
        SelectedItems(source, str(out)),
        Rotation(labels="letters", answer_format="bare"),
        batch_size=2,
        val_source=SelectedItems(source, str(out), part="held_out"),
        val_size=4,
    )
    trained = {e.meta[ITEM_KEY] for b in dm.train_dataloader() for e in b}  # indices into the selection
    assert trained == {0, 1, 2, 3} and dm.item_splits()["image"] == ([0, 1, 2, 3], [])


def test_bad_options_are_one_line_errors():
    with pytest.raises(SystemExit, match="--lo < --hi"):
        main(["select", "--config", CONFIG, "--lo", "0.9", "--hi", "0.1"])


GOOD = {"source": "Numbers", "length": 10, "kept": [1, 2, 3], "held_out": [8, 9], "pass_rates": {}}


def of(entry) -> dict:
    return {"format": 1, "modalities": {"image": entry}}


# before: the first five raised RecursionError, AttributeError (2), KeyError and TypeError
# tracebacks; the last four were accepted (True read as item 1, items listed twice, held-out items
# trained on)
BAD_SELECTIONS = {
    "nested too deep": ("[" * 100_000 + "]" * 100_000, "cannot read"),
    "modalities a list": ({"format": 1, "modalities": []}, "'modalities' must map"),
    "entry a list": (of([]), "must be an object"),
    "no kept": (of({k: v for k, v in GOOD.items() if k != "kept"}), "'kept' must be a list"),
    "kept a number": (of({**GOOD, "kept": 3}), "'kept' must be a list"),
    "an index true": (of({**GOOD, "kept": [True]}), "integers"),
    "an index twice": (of({**GOOD, "kept": [1, 1]}), "more than once"),
    "held out twice": (of({**GOOD, "held_out": [9, 9]}), "more than once"),
    "kept and held out": (of({**GOOD, "held_out": [3, 9]}), r"items \[3\] are both kept and held"),
}


@pytest.mark.parametrize("bad", BAD_SELECTIONS, ids=str)
def test_a_malformed_or_inconsistent_selection_is_refused_at_load_in_one_line(tmp_path, bad):
    content, reason = BAD_SELECTIONS[bad]
    path = tmp_path / "selection.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    for part in ("kept", "held_out"):
        with pytest.raises(ValueError, match=reason) as err:
            SelectedItems(Numbers(10), str(path), part=part)
        assert str(path) in str(err.value) and "\n" not in str(err.value)
    path.write_text(json.dumps(of(GOOD)))
    assert len(SelectedItems(Numbers(10), str(path))) == 3
