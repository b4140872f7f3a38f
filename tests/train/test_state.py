"""Where a run stands: which validation score is better."""

from attnmt.train.state import better


def test_a_better_score_goes_the_metric_s_way_and_an_equal_one_is_not_better():
    assert better(5.0, None, True) and better(5.0, None, False)  # any score beats none
    assert better(6.0, 5.0, True) and not better(4.0, 5.0, True)
    assert better(4.0, 5.0, False) and not better(6.0, 5.0, False)
    assert not better(5.0, 5.0, True) and not better(5.0, 5.0, False)
