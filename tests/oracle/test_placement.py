"""``device=auto``'s rule (``cftgnn.oracle.placement``) with injected timings: where a call of
P sets runs, the constants fitted to timed calls, and the GPU table's own timings."""

from __future__ import annotations

import math

import pytest

from cftgnn.oracle.placement import (
    MEASURED_COSTS,
    CallTiming,
    DeviceCosts,
    Place,
    fit_costs,
    place_call,
)

#: A GPU with a large fixed cost per history batch and little per set.
COSTS = DeviceCosts(cpu_s_per_batch=1e-4, cpu_s_per_batch_set=1e-5, gpu_s_per_batch=5e-4,
                    gpu_s_per_batch_set=1e-8)


def test_until_the_device_is_measured_every_call_stays_on_the_cpu():
    assert MEASURED_COSTS is None
    assert {place_call(p) for p in (1, 64, 4096, 635_376)} == {Place.CPU}


def test_the_gpu_takes_the_calls_from_the_crossover_on():
    # 1e-4 + 1e-5 P > 5e-4 + 1e-8 P  <=>  P > 4e-4 / 9.99e-6 = 40.04
    assert COSTS.crossover_sets == 41
    assert [place_call(p, COSTS) for p in (1, 40, 41, 4096)] == [
        Place.CPU, Place.CPU, Place.GPU, Place.GPU]
    assert place_call(4096, COSTS, gpu=False) is Place.CPU  # no GPU: the CPU
    assert place_call(0, COSTS) is Place.CPU
    for p in range(1, 200):  # the rule is the prediction's faster side, ties on the CPU
        cpu, gpu = COSTS.seconds(Place.CPU, p, 7), COSTS.seconds(Place.GPU, p, 7)
        assert place_call(p, COSTS) is (Place.GPU if gpu < cpu else Place.CPU)


def test_crossovers_at_the_edges():
    never = DeviceCosts(1e-4, 1e-5, 1e-3, 2e-5)  # slower per set and per batch
    always = DeviceCosts(1e-3, 1e-5, 1e-4, 1e-6)
    assert never.crossover_sets == math.inf and place_call(10**6, never) is Place.CPU
    assert always.crossover_sets == 1 and place_call(1, always) is Place.GPU


def test_the_fit_recovers_the_constants_of_exact_timings_over_events_of_any_length():
    calls = [CallTiming(p, b, COSTS.seconds(Place.CPU, p, b), COSTS.seconds(Place.GPU, p, b))
             for b in (3, 40, 161) for p in (1, 64, 1024)]
    fitted = fit_costs(calls)
    for name in ("cpu_s_per_batch", "cpu_s_per_batch_set", "gpu_s_per_batch",
                 "gpu_s_per_batch_set"):
        assert getattr(fitted, name) == pytest.approx(getattr(COSTS, name), rel=1e-9, abs=1e-15)
    assert fitted.crossover_sets == COSTS.crossover_sets


def test_on_the_gpu_tables_timings_the_rule_picks_the_faster_side():
    """docs/benchmarks.md, the GPU table of 2026-11-27 (H100, the row table on both sides;
    each event's calls, one history length): UCI · TGN's typical event, an exact single call
    and a batch of 64 sets (ms); Wikipedia 153943, batches of 64 and 256."""
    uci = fit_costs([CallTiming(1, 1, 4.54e-3, 6.40e-3), CallTiming(64, 1, 10.65e-3, 18.93e-3)])
    assert uci.crossover_sets == math.inf  # slower on the GPU at every size: the CPU
    assert {place_call(p, uci) for p in (1, 64, 4096)} == {Place.CPU}
    heavy = fit_costs([CallTiming(64, 1, 1510.0e-3, 875.7e-3),
                       CallTiming(256, 1, 4807.6e-3, 1430.9e-3)])
    assert place_call(64, heavy) is place_call(256, heavy) is Place.GPU  # 1.7x and 3.4x


@pytest.mark.parametrize(("calls", "message"), [
    ([CallTiming(1, 1, 1.0, 1.0)], "at least two sizes"),
    ([CallTiming(1, 1, 1.0, 1.0), CallTiming(1, 5, 1.0, 1.0)], "at least two sizes"),
    ([CallTiming(0, 1, 1.0, 1.0), CallTiming(2, 1, 1.0, 1.0)], "sets >= 1 and batches >= 1"),
])
def test_a_fit_without_enough_timings_is_refused(calls, message):
    with pytest.raises(ValueError, match=message):
        fit_costs(calls)


def test_costs_are_finite_and_non_negative():
    with pytest.raises(ValueError, match="gpu_s_per_batch must be a finite number >= 0"):
        DeviceCosts(1.0, 1.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="cpu_s_per_batch_set must be"):
        DeviceCosts(1.0, math.nan, 1.0, 1.0)
