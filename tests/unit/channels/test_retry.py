"""The one backoff helper: waits double from the first up to the cap, start over after a
success, and jitter stays within its band."""

from channels.retry import Backoff


def test_waits_double_up_to_the_cap_and_start_over_after_a_reset():
    b = Backoff(1.0, 30.0)
    assert [b.next() for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    b.reset()
    assert b.peek() == 1 and b.next() == 1 and b.peek() == 2


def test_a_stateless_wait_per_attempt_and_no_overflow_after_many_failures():
    b = Backoff(0.5, 30.0)
    assert [b.delay(a) for a in range(4)] == [0.5, 1, 2, 4]
    assert b.delay(10_000) == 30  # a very long outage: capped, not an OverflowError


def test_another_factor():
    b = Backoff(1.0, 100.0, factor=3.0)
    assert [b.next() for _ in range(5)] == [1, 3, 9, 27, 81]


def test_jitter_spreads_each_wait_within_its_band():
    low = Backoff(10.0, 60.0, jitter=0.2, rand=lambda: 0.0)
    high = Backoff(10.0, 60.0, jitter=0.2, rand=lambda: 0.999999)
    assert low.next() == 8.0 and 11.99 < high.next() < 12.0
    plain = Backoff(10.0, 60.0)  # no jitter: exactly the doubling
    assert plain.next() == 10.0
