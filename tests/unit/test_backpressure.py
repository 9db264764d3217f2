"""The backpressure estimator: bounds that always hold, the direction each batch
allows, and convergence to the cap whose batches take the target time."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice_job.backpressure import (
    MAX_GROWTH,
    TOLERANCE,
    Estimate,
    Observation,
    RateControl,
    fit,
)

pytestmark = pytest.mark.unit

observations = st.builds(
    Observation,
    records=st.integers(min_value=0, max_value=10**7),
    seconds=st.floats(min_value=0.0, max_value=1e5, allow_nan=False),
    capped=st.booleans(),
)
controls = st.builds(
    RateControl,
    target_seconds=st.floats(min_value=0.01, max_value=3600.0),
    max_cap=st.integers(min_value=1, max_value=10**7),
)


def slow(control: RateControl) -> float:
    """Seconds beyond which a batch counts as over target."""
    return control.target_seconds * (1 + TOLERANCE)


def settled(caps: list[int], control: RateControl, overhead: float, per_record: float) -> bool:
    """The last caps make batches take the target time, up to the tolerance, give
    or take one record; or are the maximum when even that is on time."""

    def records_in(seconds: float) -> int:
        return max(1, math.floor((seconds - overhead) / per_record))

    low = min(control.max_cap, records_in(control.target_seconds)) - 1
    high = min(control.max_cap, records_in(slow(control))) + 1
    return all(low <= cap <= high for cap in caps[-5:])


def run_batches(
    control: RateControl, start: int, overhead: float, per_record: float, batches: int
) -> list[int]:
    """Caps of successive batches of a backlog larger than any cap, each batch
    taking ``overhead + per_record * records`` seconds."""
    estimate, caps = Estimate(start), [start]
    for _ in range(batches):
        records = estimate.cap
        seen = Observation(records, overhead + per_record * records, capped=True)
        estimate = estimate.observe(seen, control)
        caps.append(estimate.cap)
    return caps


@given(control=controls, start=st.integers(1, 10**7), seen=st.lists(observations, max_size=30))
def test_cap_stays_between_one_and_the_maximum(
    control: RateControl, start: int, seen: list[Observation]
) -> None:
    estimate = Estimate(min(start, control.max_cap))
    for observation in seen:
        estimate = estimate.observe(observation, control)
        assert 1 <= estimate.cap <= control.max_cap


@given(control=controls, start=st.integers(1, 10**7), seen=st.lists(observations, max_size=30))
def test_a_slow_batch_never_grows_the_cap_and_one_on_time_never_shrinks_it(
    control: RateControl, start: int, seen: list[Observation]
) -> None:
    estimate = Estimate(min(start, control.max_cap))
    for observation in seen:
        after = estimate.observe(observation, control)
        if observation.records > 0 and observation.seconds <= control.target_seconds:
            assert after.cap >= estimate.cap
        if observation.records > 0 and observation.seconds > slow(control):
            overhead = fit(after.history).overhead
            assert after.cap <= estimate.cap or overhead >= control.target_seconds
        estimate = after


@given(
    control=controls,
    cap=st.integers(1, 10**7),
    records=st.integers(1, 10**7),
    seconds=st.floats(0.0, 1e5),
)
def test_a_batch_on_time_below_the_cap_says_nothing_about_larger_ones(
    control: RateControl, cap: int, records: int, seconds: float
) -> None:
    seconds = min(seconds, control.target_seconds)
    estimate = Estimate(min(cap, control.max_cap))
    after = estimate.observe(Observation(records, seconds, capped=False), control)
    assert after.cap == estimate.cap


@settings(max_examples=300)
@given(
    target=st.floats(0.1, 60.0),
    per_record=st.floats(1e-7, 1e-2),
    start=st.integers(1, 10**6),
    max_cap=st.integers(10, 10**6),
)
def test_converges_when_batch_time_is_proportional_to_records(
    target: float, per_record: float, start: int, max_cap: int
) -> None:
    control = RateControl(target, max_cap)
    caps = run_batches(control, min(start, max_cap), 0.0, per_record, batches=30)
    assert settled(caps, control, 0.0, per_record), caps


@settings(max_examples=300)
@given(
    target=st.floats(0.5, 60.0),
    overhead_share=st.floats(0.0, 0.5),
    per_record=st.floats(1e-6, 1e-3),
    start=st.integers(1, 10**6),
)
def test_converges_with_a_fixed_cost_per_batch_below_the_target(
    target: float, overhead_share: float, per_record: float, start: int
) -> None:
    overhead, max_cap = overhead_share * target, 10**6
    control = RateControl(target, max_cap)
    caps = run_batches(control, start, overhead, per_record, batches=40)
    assert settled(caps, control, overhead, per_record), caps


@settings(max_examples=100)
@given(
    rng=st.randoms(use_true_random=False),
    overhead_share=st.floats(0.0, 0.5),
    per_record=st.floats(1e-6, 1e-4),
)
def test_noisy_batch_times_keep_the_cap_near_the_ideal(
    rng: random.Random, overhead_share: float, per_record: float
) -> None:
    """Batch times off by up to 10% either way move the cap by about as much."""
    target = 1.0
    overhead = overhead_share * target
    control = RateControl(target, max_cap=10**7)
    ideal = (target - overhead) / per_record
    estimate = Estimate(control.max_cap)
    for batch in range(40):
        records = estimate.cap
        seconds = (overhead + per_record * records) * rng.uniform(0.9, 1.1)
        estimate = estimate.observe(Observation(records, seconds, capped=True), control)
        if batch >= 20:
            assert 0.6 * ideal <= estimate.cap <= 1.4 * ideal


def test_a_fixed_cost_above_the_target_does_not_starve_the_pipeline() -> None:
    """No cap meets the target; the largest batches drain a backlog fastest."""
    control = RateControl(target_seconds=0.8, max_cap=10_000)
    caps = run_batches(control, 10_000, overhead=1.0, per_record=1e-4, batches=30)
    assert caps[-1] == 10_000
    assert min(caps) > 1


def test_growth_is_bounded_per_batch_and_shrinking_is_immediate() -> None:
    control = RateControl(target_seconds=1.0, max_cap=1_000_000)
    fast = Estimate(1_000).observe(Observation(1_000, 0.001, capped=True), control)
    assert fast.cap == 1_000 * MAX_GROWTH
    slow = Estimate(100_000).observe(Observation(100_000, 10.0, capped=True), control)
    assert slow.cap == 10_000
