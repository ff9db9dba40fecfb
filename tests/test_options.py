"""One integer rule for every option: top-level options, explainer parameters, constraints."""

from __future__ import annotations

import math

import numpy as np
import pytest
from omegaconf import OmegaConf

from cftgnn.errors import ConfigError, ExplainerError
from cftgnn.explain.params import check_value
from cftgnn.options import as_integer, integer, integer_list
from cftgnn.oracle.constraints import Constraints

TAKEN = [(3, 3), (0, 0), (-2, -2), (np.int64(5), 5), (1e3, 1000), (1000.0, 1000), (-4.0, -4),
         (np.float64(8.0), 8)]
REFUSED = [1.5, -0.25, math.nan, math.inf, -math.inf, True, False, np.bool_(True), "3", None,
           [1], 1 + 0j]


@pytest.mark.parametrize(("value", "want"), TAKEN)
def test_integers_and_integral_floats_are_taken_as_ints(value: object, want: int) -> None:
    got = as_integer(value)
    assert got == want and type(got) is int


@pytest.mark.parametrize("value", REFUSED)
def test_everything_else_is_refused(value: object) -> None:
    assert as_integer(value) is None


@pytest.mark.parametrize("value", [v for v, want in TAKEN if want >= 0] + REFUSED)
def test_top_level_options_explainer_parameters_and_constraints_agree(value: object) -> None:
    """(Non-negative: constraints refuse a negative event id by its range.)"""
    want = as_integer(value)
    cfg = OmegaConf.create({"n": None}) if value is None else {"n": value}
    outcomes = []
    try:
        outcomes.append(integer(cfg, "n"))
    except ConfigError:
        outcomes.append(None)
    try:
        outcomes.append(check_value("explainer.n", int, value, {}))
    except ExplainerError:
        outcomes.append(None)
    try:
        outcomes.append(Constraints(events=[value]).events[0])  # type: ignore[list-item]
    except ConfigError:
        outcomes.append(None)
    assert outcomes == [want] * 3
    assert all(type(o) is int for o in outcomes if o is not None)


def test_an_integer_option_from_the_command_line() -> None:
    cfg = OmegaConf.from_dotlist(["n_events=1e3", "m_max=1.5", "k=null", "ids=[1,2e1]"])
    assert integer(cfg, "n_events", minimum=1) == 1000
    assert integer(cfg, "k", optional=True) is None
    assert integer_list(cfg, "ids") == [1, 20]
    with pytest.raises(ConfigError, match=r"^m_max must be an integer >= 1, got 1.5$"):
        integer(cfg, "m_max", minimum=1)
    with pytest.raises(ConfigError, match=r"^n_events must be an integer >= 1001, got 1000.0$"):
        integer(cfg, "n_events", minimum=1001)
