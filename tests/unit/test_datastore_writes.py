"""The Datastore sink's pure rules: chunks of at most 500 distinct keys, which
write wins by version, and which errors are retried after what wait."""

from __future__ import annotations

import random

import pytest
from google.api_core import exceptions
from hypothesis import given
from hypothesis import strategies as st

from sluice_job.sinks.datastore_retry import Backoff, Retrying, is_transient
from sluice_job.sinks.datastore_writes import MAX_MUTATIONS, chunks, supersedes
from sluice_job.write_order import write_version

pytestmark = pytest.mark.unit

ROWS = st.lists(st.tuples(st.integers(0, 40), st.integers()), max_size=300)


@given(ROWS, st.integers(1, 50))
def test_chunks_hold_each_key_once_and_keep_every_key_in_order(
    rows: list[tuple[int, int]], size: int
) -> None:
    result = list(chunks(rows, size))
    assert all(0 < len(chunk) <= size for chunk in result)
    # Replaying the chunks in order leaves every key with its last value.
    replayed: dict[int, int] = {}
    for chunk in result:
        replayed.update(chunk)
    assert replayed == dict(rows)


def test_chunks_split_1234_rows_into_500_500_234() -> None:
    sizes = [len(c) for c in chunks((f"k{i}", i) for i in range(1234))]
    assert sizes == [MAX_MUTATIONS, MAX_MUTATIONS, 234]


def test_a_repeated_key_in_a_full_chunk_replaces_its_value_without_a_new_chunk() -> None:
    result = list(chunks([("a", 1), ("b", 2), ("a", 3)], size=2))
    assert result == [{"b": 2, "a": 3}]


def test_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        list(chunks([("a", 1)], size=0))


@pytest.mark.parametrize(
    ("ours", "stored", "wins"),
    [
        (write_version(5, 2), None, True),  # new entity
        (write_version(5, 2), write_version(4, 9), True),  # later batch beats any epoch
        (write_version(5, 2), write_version(5, 1), True),  # newer driver, same batch
        (write_version(5, 2), write_version(5, 2), True),  # same batch, same driver: re-run
        (write_version(5, 2), write_version(5, 3), False),  # fenced driver's late write
        (write_version(5, 9), write_version(6, 1), False),  # an older batch never wins
        (write_version(5, 2), "7", True),  # not ours: a string someone else wrote
        (write_version(5, 2), True, True),  # bool is not a version
    ],
)
def test_version_rule(ours: int, stored: object, wins: bool) -> None:
    assert supersedes(ours, stored) is wins


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (exceptions.Aborted("conflict"), True),
        (exceptions.ServiceUnavailable("down"), True),
        (exceptions.DeadlineExceeded("slow"), True),
        (exceptions.InternalServerError("oops"), True),
        (exceptions.ResourceExhausted("quota"), True),
        (exceptions.InvalidArgument("bad"), False),
        (exceptions.PermissionDenied("no"), False),
        (exceptions.Unauthenticated("who"), False),
        (exceptions.NotFound("where"), False),
        (ValueError("not an API error"), False),
    ],
)
def test_only_transient_statuses_are_retried(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient


@given(st.integers(1, 30), st.integers(0, 2**32))
def test_backoff_grows_exponentially_within_jitter_and_cap(retry: int, seed: int) -> None:
    backoff = Backoff(initial=0.1, multiplier=2.0, maximum=5.0)
    ceiling = min(5.0, 0.1 * 2.0 ** (retry - 1))
    assert ceiling / 2 <= backoff.delay(retry, random.Random(seed)) <= ceiling


class Flaky:
    """Fails with the given errors in turn, then answers "done"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


def retrying(attempts: int = 5) -> tuple[Retrying, list[float]]:
    waits: list[float] = []
    return Retrying(Backoff(initial=1.0, attempts=attempts), sleep=waits.append), waits


def test_transient_errors_are_retried_with_growing_waits_until_success() -> None:
    policy, waits = retrying()
    flaky = Flaky(exceptions.ServiceUnavailable("a"), exceptions.Aborted("b"))
    assert policy.call(flaky) == "done"
    assert flaky.calls == 3
    assert policy.retries == 2
    assert 0.5 <= waits[0] <= 1.0 <= waits[1] <= 2.0


def test_a_permanent_error_fails_at_once() -> None:
    policy, waits = retrying()
    flaky = Flaky(exceptions.PermissionDenied("no"))
    with pytest.raises(exceptions.PermissionDenied):
        policy.call(flaky)
    assert (flaky.calls, waits) == (1, [])


def test_transient_errors_give_up_after_the_last_attempt() -> None:
    policy, waits = retrying(attempts=3)
    flaky = Flaky(*(exceptions.ServiceUnavailable(str(i)) for i in range(5)))
    with pytest.raises(exceptions.ServiceUnavailable, match="2"):
        policy.call(flaky)
    assert flaky.calls == 3
    assert len(waits) == 2
