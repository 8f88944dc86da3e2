"""What a strategy needs from its data module (`zoo.data`): protocols checked once in ``setup``, one
line."""

import pytest

from datamodules import PretextDataModule
from zoo import GRPOStrategy
from zoo import data as D
from zoo.errors import user_error
from zoo.hybrid import LUFFY
from zoo.sft import SFTStrategy


class Verifying:
    def verify(self, example, completion):
        return None


class GroupVerifying:
    def verify_group(self, examples, completions):
        return []


class Demonstrating(Verifying):
    def demonstration(self, example):
        return ""


def test_the_pretext_data_module_meets_every_protocol():
    for protocol in (D.Verifies, D.VerifiesGroups, D.Demonstrates, D.Refills, D.Staged):
        assert issubclass(PretextDataModule, protocol), protocol.__name__


@pytest.mark.parametrize("datamodule", [Verifying(), GroupVerifying()], ids=type)
def test_either_way_of_verifying_meets_the_reward_need(datamodule):
    D.check_data(datamodule, [D.REWARDS])


def test_an_unmet_need_is_one_line_naming_the_method_and_the_data_module():
    with pytest.raises(D.MissingDataMethod, match=r"demonstration\(example\).*; got Verifying$") as caught:
        D.check_data(Verifying(), [D.REWARDS, D.DEMONSTRATIONS])
    assert user_error(caught.value) == str(caught.value)  # the CLI prints it as one line, no traceback
    with pytest.raises(D.MissingDataMethod, match=r"verify\(example, completion\).*; got NoneType"):
        D.check_data(None, [D.REWARDS])


def test_each_strategy_names_what_its_settings_need():
    assert GRPOStrategy().data_needs() == [D.REWARDS]
    assert GRPOStrategy(refill_rounds=2).data_needs() == [D.REWARDS, D.REFILLS]
    assert GRPOStrategy(guidance=LUFFY()).data_needs() == [D.REWARDS, D.DEMONSTRATIONS]
    assert SFTStrategy().data_needs() == [D.REWARDS, D.DEMONSTRATIONS]


def test_a_method_removed_after_a_first_check_is_missing():
    """``isinstance`` on a protocol of methods caches the class's first answer; the check must
    not."""

    class Refilling(Verifying):
        def refill(self, key, round):
            return []

    D.check_data(Refilling(), [D.REFILLS])
    del Refilling.refill
    with pytest.raises(D.MissingDataMethod, match="refill"):
        D.check_data(Refilling(), [D.REFILLS])
