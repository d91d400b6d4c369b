from tenk.platform.resilience.backoff import Backoff


def test_the_delay_doubles_up_to_its_cap() -> None:
    backoff = Backoff(0.05, 0.3)
    assert [backoff.next_delay() for _ in range(5)] == [0.05, 0.1, 0.2, 0.3, 0.3]


def test_a_reset_starts_again_from_the_first_delay() -> None:
    backoff = Backoff(0.05, 1.0)
    backoff.next_delay()
    backoff.next_delay()
    backoff.reset()
    assert backoff.next_delay() == 0.05
