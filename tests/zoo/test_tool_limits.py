"""What multi-turn tool rollouts refuse: a hybrid (guidance) on a data module with tool tasks."""

from types import SimpleNamespace

import pytest

from zoo import GRPOStrategy
from zoo.hybrid import CHORD, LUFFY
from zoo.training import ManualStep


@pytest.mark.parametrize("guidance", [LUFFY, CHORD], ids=lambda c: c.__name__)
def test_a_hybrid_refuses_a_data_module_with_tool_tasks_before_any_step(guidance, monkeypatch):
    checked = []
    monkeypatch.setattr(ManualStep, "setup", lambda self, trainer: checked.append(trainer))
    tools, plain = SimpleNamespace(uses_tools=True), SimpleNamespace(uses_tools=False)

    def setup(strategy, datamodule, fn="fit"):
        trainer = SimpleNamespace(datamodule=datamodule, state=SimpleNamespace(fn=fn))
        strategy.setup(trainer)

    with pytest.raises(ValueError, match=rf"^guidance {guidance.__name__} cannot train .* tool tasks"):
        setup(GRPOStrategy(num_generations=4, guidance=guidance()), tools)
    assert not checked
    setup(GRPOStrategy(num_generations=4, guidance=guidance()), plain)  # no tools: as before
    setup(GRPOStrategy(num_generations=4, guidance=guidance()), tools, fn="validate")  # evaluation has no guidance
    setup(GRPOStrategy(num_generations=4), tools)  # plain GRPO trains tool tasks
    assert len(checked) == 3
