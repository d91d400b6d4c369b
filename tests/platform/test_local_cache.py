from tenk.platform.local_cache import TtlCache


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_entry_is_served_until_its_ttl_and_never_after() -> None:
    clock = Clock()
    cache: TtlCache[str, bytes] = TtlCache(max_items=10, ttl_s=1.0, clock=clock)
    cache.put("a", b"1")
    clock.now += 0.999
    assert cache.get("a") == b"1"
    clock.now += 0.001
    assert cache.get("a") is None


def test_a_load_that_raced_an_invalidation_is_not_stored() -> None:
    cache: TtlCache[int, bytes] = TtlCache(max_items=10, ttl_s=60)
    epoch = cache.epoch
    cache.invalidate(1)
    cache.put(1, b"old", epoch=epoch)
    assert cache.get(1) is None


def test_the_least_recently_used_entry_goes_first_when_full() -> None:
    cache: TtlCache[str, bytes] = TtlCache(max_items=2, ttl_s=60)
    cache.put("a", b"1")
    cache.put("b", b"2")
    assert cache.get("a") == b"1"
    cache.put("c", b"3")
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (b"1", None, b"3")


def test_a_zero_ttl_keeps_nothing() -> None:
    cache: TtlCache[str, bytes] = TtlCache(max_items=2, ttl_s=0)
    cache.put("a", b"1")
    assert len(cache) == 0
