"""Answer-consistency rewards for lettered tasks, set as a task's ``self_reward`` option.

- `ACRE`: each question is asked twice in the same batch, the second time with its options in
  another order; a completion is paid only when its answer is right *and* is the option the other
  asking's completions chose (ACRE, "Answer-Consistent Chain-of-thought Reinforcement Learning for
  Multi-modal Large Language Models", arXiv 2510.10104).

Unlike `tasks.self_rewards`, the answer is read: consistency gates the accuracy, it does not replace
it.
"""

from __future__ import annotations

import random
from typing import Any

from tasks.base import Example, Reward, SelfReward, Task
from tasks.self_rewards import ballots, check_pairs, paid, winner

#: ``Example.meta`` key marking the two askings of an ACRE pair: ``"asked"``, then ``"reasked"``.
ASKING_KEY = "acre"


class ACRE(SelfReward):
    """ACRE's consistency-verified reward: every question is trained beside a second asking with its
    options shuffled (the task's ``reask``; `tasks.MultipleChoice` has one), so the data module's
    batches hold ``batch_size`` questions and their re-askings. A completion earns its accuracy only
    when the option it chose (its ballot, `tasks.Task.canonical_answer`: the option's text, so the
    same option under another letter is the same ballot) is also the majority choice of the other
    asking's G completions; otherwise it earns only the format reward. A right answer the other
    asking does not reach, a tie there, or an answer that only matches by letter earns no accuracy:
    a guess that depends on where the right option is listed is not paid.

    Where zoo differs from the paper: ACRE re-asks the shuffled question after the model's own
    reasoning, checks the two answers of one rollout and grades the other cases with lower rewards;
    zoo asks the two versions as independent prompts of the same batch (one generation pass), checks
    each completion against the other asking's majority, as `tasks.CoReward` does, and pays no
    accuracy otherwise. Logged beside the true parts: ``consistent`` (share
    of the group's completions choosing the other asking's majority option) and ``abstained`` (the
    other asking elected no option: nothing valid, or a tie).
    """

    def check(self, task: Task) -> None:
        if not callable(getattr(task, "reask", None)):
            raise ValueError(
                f"ACRE needs a lettered task that can re-ask an example with its options shuffled (a "
                f"reask method, as tasks.MultipleChoice has); {type(task).__name__} has none"
            )

    def examples(self, task: Task, item: Any, rng: random.Random) -> list[Example]:
        question = task.make_example(item, rng)
        reasked = task.reask(question, rng)
        question.meta[ASKING_KEY], reasked.meta[ASKING_KEY] = "asked", "reasked"
        return [question, reasked]

    def rewards(self, task: Task, examples: list[Example], completions: list[list[str]]) -> list[list[Reward]]:
        check_pairs("ACRE", task, examples, ASKING_KEY, ("asked", "reasked"), "its re-asking")
        cast = [ballots(task, example, group) for example, group in zip(examples, completions, strict=True)]
        labels = [winner(cast[b ^ 1][1], 0.0)[0] for b in range(len(cast))]  # the other asking's majority
        return [_verified(task, *group, label) for group, label in zip(cast, labels, strict=True)]


def _verified(task: Task, truths: list[Reward], keys: list, label) -> list[Reward]:
    """Rewards of one asking's completions: accuracy paid when the ballot is the other asking's
    majority ``label`` (None: it elected none, and nothing is paid)."""
    agree = [label is not None and key == label for key in keys]
    logged = {"consistent": sum(agree) / len(keys), "abstained": float(label is None)}
    return [
        paid(task, truth, truth.parts["accuracy"] * float(ok), **logged)
        for truth, ok in zip(truths, agree, strict=True)
    ]
