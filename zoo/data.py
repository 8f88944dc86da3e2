"""What a strategy needs from its data module, written as `typing.Protocol`s and checked once, in
the strategy's ``setup``, so a missing method is one line before any step runs, not an
AttributeError mid-run.

`datamodules.PretextDataModule` meets every protocol here; a data module of a user's own meets the
ones its strategy names (`zoo.training.ManualStep.data_needs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Verifies(Protocol):
    """Rewards one completion of an example (GRPO, and every held-out evaluation)."""

    def verify(self, example: Any, completion: str) -> Any: ...


@runtime_checkable
class VerifiesGroups(Protocol):
    """Rewards the G completions of each example together (self-rewards: a majority vote, a
    consistency check). When a data module has it, it is used instead of `Verifies`."""

    def verify_group(self, examples: list, completions: list[list[str]]) -> list[list[Any]]: ...


@runtime_checkable
class Demonstrates(Protocol):
    """Writes what a perfect policy answers (SFT targets, the expert rows of SRFT and LUFFY)."""

    def demonstration(self, example: Any) -> str: ...


@runtime_checkable
class Ballots(Protocol):
    """Reads the answer a completion states in a canonical form (`tasks.Task.canonical_answer`):
    the ballots of majority voting at evaluation (``maj@k``)."""

    def canonical_answer(self, example: Any, completion: str) -> Any: ...


@runtime_checkable
class Refills(Protocol):
    """Draws more prompts for a batch, as a pure function of the batch key and the round (dynamic
    sampling)."""

    def refill(self, key: int, round: int) -> list: ...


@runtime_checkable
class Staged(Protocol):
    """Changes its task mix and task settings at given steps (`callbacks.Curriculum`)."""

    def set_curriculum(self, stages: Any) -> None: ...

    def set_stage_starts(self, starts: Any) -> None: ...


class MissingDataMethod(RuntimeError):
    """A data module lacks a method its strategy or callback calls."""


@dataclass(frozen=True)
class Need:
    """One thing a strategy needs of its data module.

    Attributes:
        protocols: Any one of them will do.
        message: The error when none is met: who needs it, the method and a data module that has it.
    """

    protocols: tuple[type, ...]
    message: str


def meets(datamodule, protocol: type) -> bool:
    """Whether ``datamodule`` has every method of ``protocol`` now. Not ``isinstance``: for
    protocols of methods only it caches the class's first answer, so a method removed later would
    still count."""
    methods = [name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_")]
    return all(callable(getattr(datamodule, name, None)) for name in methods)


def check_data(datamodule, needs: list[Need]) -> None:
    """Raise `MissingDataMethod` with the first unmet need's message (and the data module's
    class)."""
    for need in needs:
        if not any(meets(datamodule, protocol) for protocol in need.protocols):
            raise MissingDataMethod(f"{need.message}; got {type(datamodule).__name__}")


#: Every strategy evaluates (validation during fit, ``zoo validate``, ``zoo test``) through one of
#: these.
REWARDS = Need(
    (VerifiesGroups, Verifies),
    "zoo strategies need a data module with verify(example, completion) "
    "(or verify_group), e.g. datamodules.PretextDataModule",
)
#: SFT's targets, and the expert rows of SRFT and LUFFY.
DEMONSTRATIONS = Need(
    (Demonstrates,),
    "training on demonstrations needs a data module with "
    "demonstration(example), e.g. datamodules.PretextDataModule or "
    "datamodules.ConversationDataModule",
)
#: Majority voting at evaluation (``eval_maj_k``).
BALLOTS = Need(
    (Ballots,),
    "eval_maj_k (majority voting) needs a data module with canonical_answer(example, completion), "
    "e.g. datamodules.PretextDataModule",
)
#: GRPO's dynamic sampling.
REFILLS = Need(
    (Refills,),
    "refill_rounds > 0 (dynamic sampling) needs a data module with refill(key, round), "
    "e.g. datamodules.PretextDataModule",
)

#: `callbacks.Curriculum`'s stages.
STAGES = Need(
    (Staged,),
    "Curriculum needs a data module with curriculum stages (set_curriculum, set_stage_starts), "
    "e.g. datamodules.PretextDataModule",
)


def verify(datamodule, rollout) -> list:
    """One reward per row of ``rollout``: ``verify_group`` of each prompt's G completions when the
    data module has it (self-rewards), else ``verify`` of each."""
    if meets(datamodule, VerifiesGroups):
        g = rollout.num_generations
        groups = [rollout.completions[b * g : (b + 1) * g] for b in range(len(rollout.examples))]
        return [reward for group in datamodule.verify_group(rollout.examples, groups) for reward in group]
    return [datamodule.verify(rollout.example(n), text) for n, text in enumerate(rollout.completions)]
