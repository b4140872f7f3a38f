"""The learning-rate schedules: warmup, inverse_sqrt, cosine, plateau; and the stop rules."""

import pytest
import torch

from attnmt.errors import ConfigError
from attnmt.train.schedule import Schedule, build_optimizer
from attnmt.train.state import Progress, TrainerConfig
from tests.conftest import compose_config, plain


def schedule(kind, warmup=0, total=None, seconds=None, patience=2, factor=0.5, lr=1.0, min_lr=0.01):
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    return Schedule(optimizer, kind, lr, warmup, min_lr, total, seconds, patience, factor)


def test_warmup_rises_linearly_then_holds():
    s = schedule("constant", warmup=4)
    assert [s.set_step(t) for t in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert s.optimizer.param_groups[0]["lr"] == 1.0


def test_inverse_sqrt_decays_after_warmup():
    s = schedule("inverse_sqrt", warmup=4)
    assert s.set_step(4) == 1.0 and s.set_step(16) == pytest.approx(0.5)
    assert s.set_step(10**8) == 0.01  # never below min_lr


def test_cosine_goes_from_lr_to_min_lr_over_max_steps():
    s = schedule("cosine", total=10)
    assert s.set_step(0) == 1.0
    assert s.set_step(5) == pytest.approx((1.0 + 0.01) / 2)
    assert s.set_step(10) == pytest.approx(0.01) and s.set_step(20) == pytest.approx(0.01)


def test_cosine_over_minutes_follows_the_clock_and_the_earlier_budget_ends_it():
    s = schedule("cosine", seconds=600.0, warmup=2)
    assert s.set_step(0, elapsed=0.0) == 0.5  # warmup is counted in steps
    assert s.set_step(2, elapsed=300.0) == pytest.approx((1.0 + 0.01) / 2)
    assert s.set_step(3, elapsed=600.0) == pytest.approx(0.01)
    both = schedule("cosine", total=10, seconds=600.0)
    assert both.set_step(5, elapsed=0.0) == pytest.approx((1.0 + 0.01) / 2)  # steps end first
    assert both.set_step(1, elapsed=300.0) == pytest.approx((1.0 + 0.01) / 2)  # time does


def test_plateau_cuts_after_patience_validations_and_round_trips():
    s = schedule("plateau", patience=2, factor=0.5)
    for improved in (True, False, False):  # two without improvement: one cut
        s.observe(improved)
    assert s.set_step(100) == 0.5
    s.observe(True)  # better: the count starts again
    s.observe(False)
    assert s.set_step(101) == 0.5
    again = schedule("plateau", patience=2, factor=0.5)
    again.load_state_dict(s.state_dict())
    assert again.set_step(101) == 0.5
    for _ in range(40):
        s.observe(False)
    assert s.set_step(102) == 0.01  # never below min_lr


def trainer_config(*overrides):
    from attnmt.config import to_dataclass

    return to_dataclass(
        TrainerConfig, plain(compose_config("train", list(overrides)).trainer), "trainer"
    )


def test_max_epochs_and_patience_stop_a_run():
    c = trainer_config("trainer.max_steps=null", "trainer.max_epochs=2", "trainer.patience=3")
    assert c.stop_reason(Progress(epoch=1), elapsed=0) is None
    assert c.stop_reason(Progress(epoch=2), elapsed=0) == "trainer.max_epochs=2 reached"
    stalled = Progress(validations_without_improvement=3)
    assert c.stop_reason(stalled, 0) == "no better dev BLEU in 3 validations (trainer.patience)"
    timed = trainer_config("trainer.max_time=1", "trainer.max_steps=null")
    assert timed.stop_reason(Progress(), elapsed=59) is None
    assert timed.stop_reason(Progress(), elapsed=60) == "trainer.max_time=1 minutes reached"
    capped = trainer_config("trainer.max_time=1", "trainer.max_steps=300")
    assert capped.stop_reason(Progress(step=299), elapsed=59) is None
    assert capped.stop_reason(Progress(step=120), elapsed=60) == (
        "cut by trainer.max_time=1 minutes at step 120, before trainer.max_steps=300"
    )


def test_cosine_takes_its_length_from_max_epochs_when_no_steps_or_minutes_are_set():
    c = trainer_config(
        "trainer.max_time=null",
        "trainer.max_steps=null",
        "trainer.max_epochs=3",
        "trainer.accumulate=2",
    )
    assert c.schedule == "cosine"  # the default
    assert c.expected_steps(lambda: 11) == 3 * 6  # 11 batches, 2 a step: 6 steps an epoch
    assert c.expected_steps(lambda: 11, world=2) == 3 * 2  # 2 ranks x 2: 8 of 11 batches
    assert (
        trainer_config("trainer.max_epochs=3", "trainer.max_steps=5").expected_steps(lambda: 11)
        == 5
    )  # the budget that ends first
    with pytest.raises(ConfigError, match="max_steps, trainer.max_epochs or trainer.max_time"):
        trainer_config("trainer.max_time=null", "trainer.max_steps=null")


def test_the_optimizer_is_fused_on_cpu_and_steps_as_torchs_loop():
    torch.manual_seed(0)
    weights = [torch.randn(7, 5, requires_grad=True), torch.randn(5, requires_grad=True)]
    looped = [w.detach().clone().requires_grad_() for w in weights]
    fused = build_optimizer(weights, "adamw", 1e-2, (0.9, 0.98), 0.01)
    reference = torch.optim.AdamW(looped, lr=1e-2, betas=(0.9, 0.98), weight_decay=0.01)
    assert fused.defaults["fused"] and not reference.defaults["fused"]
    for _ in range(3):
        for params, optimizer in ((weights, fused), (looped, reference)):
            optimizer.zero_grad()
            (params[0] @ params[1]).square().sum().backward()
            optimizer.step()
    for mine, theirs in zip(weights, looped, strict=True):
        torch.testing.assert_close(mine, theirs)


def test_an_unknown_optimizer_is_refused_by_name():
    with pytest.raises(ConfigError, match="trainer.optimizer='sgd'"):
        build_optimizer([torch.zeros(1, requires_grad=True)], "sgd", 1e-3, (0.9, 0.98), 0.0)
