"""``device=auto``: each run placed by ``cftgnn.oracle.placement``'s rule on its explainer's
largest oracle call (``Explainer.largest_call``, ``cftgnn.runs.build.explain_device``), and
records that say where each event ran (``device``, the summary's ``gpu_share``, the report's
"on GPU"). No GPU here: costs are injected and the GPU side is the test-only foreign device."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from testsupport.fakedevice import DEVICE, fake_device

import cftgnn.config  # noqa: F401  (the ${cftgnn_root:} resolver)
from cftgnn.analysis.compare import compared_columns
from cftgnn.explain.exact_search import largest_chunk
from cftgnn.oracle import placement
from cftgnn.oracle.placement import DeviceCosts
from cftgnn.reporting.tables import comparison_table, markdown_table
from cftgnn.runs import build, pipeline
from cftgnn.runs.build import explain_device, make_explainer
from cftgnn.runs.records import RECORD_SCHEMA, read_records, upgrade_records
from cftgnn.scoring.summaries import gpu_share, summarize, summary_metrics_flat

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"

#: Injected costs: per history batch the CPU 1 ms + 0.1 ms a set, the GPU 2 ms + 1 µs a set,
#: so the GPU is faster from floor(1 / 0.099) + 1 = 11 sets on.
COSTS = DeviceCosts(cpu_s_per_batch=1e-3, cpu_s_per_batch_set=1e-4, gpu_s_per_batch=2e-3,
                    gpu_s_per_batch_set=1e-6)


def _explainer(name: str, certify: int = 0, **options: object):  # noqa: ANN202
    from cftgnn.explain.post import PostProcessing

    node = OmegaConf.load(CONF / "explainer" / f"{name}.yaml")
    node = OmegaConf.merge(node, options)
    return make_explainer(node, OmegaConf.load(CONF / "strategy" / "recent.yaml"),
                          PostProcessing(certify=certify))


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> DeviceCosts:
    """``MEASURED_COSTS`` as if a GPU session had measured ``COSTS``."""
    monkeypatch.setattr(placement, "MEASURED_COSTS", COSTS)
    return COSTS


def test_the_injected_costs_cross_over_at_11_sets():
    assert COSTS.crossover_sets == 11


def test_each_explainer_declares_its_largest_call():
    assert _explainer("cftgnn").largest_call(64) == 1  # a search of single calls
    assert _explainer("cftgnn", batch_children=True).largest_call(64) == 64
    assert _explainer("temgx").largest_call(64) == 1
    # exhaustive K = 3 over 64 events: 41,664 sets of size 3, in chunks of 4,096
    assert _explainer("exhaustive", max_size=3).largest_call(64) == 4096
    assert _explainer("exhaustive", max_size=2).largest_call(8) == math.comb(8, 2)
    assert _explainer("exhaustive", max_size=3, chunk_size=100).largest_call(64) == 100
    # certify's chunks count for any explainer
    assert _explainer("cftgnn", certify=2).largest_call(64) == math.comb(64, 2)
    assert _explainer("cftgnn", certify=3).largest_call(64) == 4096
    assert _explainer("greedy").largest_call(64) == 10 and _explainer("greedy").largest_call(4) == 4
    assert _explainer("beam").largest_call(20) == 5 * 20
    assert _explainer("nsga2").largest_call(8) == 64 and _explainer("pso").largest_call(8) == 64
    assert _explainer("perturb_one").largest_call(30) == 30
    assert largest_chunk(0, 3) == 0 and largest_chunk(5, 0) == 0


def test_unmeasured_costs_keep_every_size_on_the_cpu():
    assert placement.MEASURED_COSTS is None  # until a GPU session measures them
    for sets in (1, 11, 4096, 10**6):
        chosen = explain_device("auto", sets, gpu=True)
        assert chosen.device == "cpu"
        assert chosen.note is not None and "not measured" in chosen.note


@pytest.mark.usefixtures("measured")
def test_measured_costs_keep_a_call_below_the_crossover_on_the_cpu_and_one_above_on_the_gpu():
    assert explain_device("auto", 1, gpu=True).device == "cpu"
    assert explain_device("auto", 10, gpu=True).device == "cpu"
    assert explain_device("auto", 11, gpu=True).device == "cuda"
    chosen = explain_device("auto", 4096, gpu=True)
    assert chosen.device == "cuda" and chosen.note is not None
    assert "4,096 sets" in chosen.note and "from 11 sets" in chosen.note
    # the same answer as the rule itself, for every size around the crossover
    for sets in range(1, 30):
        want = placement.place_call(sets, COSTS, gpu=True)
        assert (explain_device("auto", sets, gpu=True).device == "cuda") == (
            want is placement.Place.GPU)


@pytest.mark.usefixtures("measured")
def test_no_gpu_or_worker_processes_keep_the_cpu():
    assert explain_device("auto", 4096, gpu=False).device == "cpu"
    assert "no GPU" in str(explain_device("auto", 4096, gpu=False).note)
    assert explain_device("auto", 4096, gpu=True, num_workers=2).device == "cpu"


def test_a_gpu_that_gains_nothing_takes_no_call(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(placement, "MEASURED_COSTS", DeviceCosts(1e-3, 1e-6, 2e-3, 1e-6))
    chosen = explain_device("auto", 10**6, gpu=True)
    assert chosen.device == "cpu" and "no call size" in str(chosen.note)


@pytest.mark.usefixtures("measured")
@pytest.mark.parametrize("choice", ["cpu", "cuda", "cuda:1"])
def test_an_explicit_device_is_obeyed(choice: str):
    for sets in (1, 4096):
        for gpu in (True, False):
            assert explain_device(choice, sets, gpu=gpu) == build.RunDevice(choice, None)


def _cfg(out: Path, *overrides: str):  # noqa: ANN202
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("explain", overrides=[
            "debug=default", "checkpoint=null", "model=tgn", "n_events=2", "m_max=8",
            "progress=false", "curves=none", "picture=false", f"out_dir={out}", *overrides])


def test_a_run_under_device_auto_records_the_cpu_while_unmeasured(tmp_path, capsys):
    table = pipeline.run(_cfg(tmp_path, "device=auto", "explainer=exhaustive",
                              "explainer.max_size=2"))
    assert "device=auto: cpu (largest oracle call 28 sets;" in capsys.readouterr().out
    records = read_records(tmp_path)
    assert len(records) == 2 and records["device"].tolist() == ["cpu", "cpu"]
    assert table["gpu_share"].iloc[-1] == 0.0
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert summary["gpu_share"].iloc[-1] == 0.0
    # what logger=wandb logs of the summary
    assert summary_metrics_flat(table)[f"summary/{table['group'].iloc[-1]}/gpu_share"] == 0.0


@pytest.mark.usefixtures("measured")
def test_measured_costs_place_a_batched_run_on_the_gpu_and_a_single_call_one_on_the_cpu(
        tmp_path, monkeypatch, capsys):
    # the machine "has a GPU": the foreign device stands in for it
    monkeypatch.setattr(pipeline, "explain_device", functools.partial(explain_device, gpu=True))
    resolve = pipeline.resolve_device
    monkeypatch.setattr(pipeline, "resolve_device",
                        lambda name: torch.device(DEVICE) if name == "cuda" else resolve(name))
    with fake_device() as crossings:
        pipeline.run(_cfg(tmp_path / "exhaustive", "device=auto", "explainer=exhaustive",
                          "explainer.max_size=2"))
        assert crossings.total() > 0  # it ran on the foreign device
        pipeline.run(_cfg(tmp_path / "cftgnn", "device=auto", "explainer.max_iterations=5"))
        pipeline.run(_cfg(tmp_path / "explicit", "device=cpu", "explainer=exhaustive",
                          "explainer.max_size=2"))
    out = capsys.readouterr().out
    assert "device=auto: cuda (largest oracle call 28 sets; the GPU is faster from 11" in out
    assert "device=auto: cpu (largest oracle call 1 set;" in out
    on_gpu = read_records(tmp_path / "exhaustive")
    assert on_gpu["device"].tolist() == [str(DEVICE)] * 2
    on_cpu = read_records(tmp_path / "cftgnn")
    assert on_cpu["device"].tolist() == ["cpu", "cpu"]
    assert read_records(tmp_path / "explicit")["device"].tolist() == ["cpu", "cpu"]
    assert summarize(on_gpu)["gpu_share"].iloc[0] == 1.0
    both = pd.concat([on_gpu, on_cpu], ignore_index=True)
    assert summarize(both)["gpu_share"].iloc[0] == 0.5
    # the same records wherever they ran: compare_runs does not compare the device
    assert "device" not in compared_columns(both.columns)


def test_the_record_schema_has_the_device_column_and_older_records_read_it_as_unknown():
    assert RECORD_SCHEMA.field("device").type == "string"
    old = pd.DataFrame({"event_id": [1, 2], "status": ["ok", "ok"], "schema_version": [10, 10],
                        "is_counterfactual": [True, False], "explanation": [[1], []],
                        "final_logit": [-1.0, 1.0], "n_counterfactuals": [1, 0],
                        "fid_curve_logits": [[], []]})
    upgraded = upgrade_records(old)
    assert "device" in upgraded.columns and upgraded["device"].isna().all()
    assert math.isnan(gpu_share(upgraded)) and math.isnan(gpu_share(old))


def test_the_gpu_share_is_over_the_rows_that_say_where():
    rows = pd.DataFrame({"device": ["cpu", "cuda:0", None, "cuda:1", "cpu"]})
    assert gpu_share(rows) == 0.5


def test_the_report_has_an_on_gpu_column(tmp_path):
    records = pd.DataFrame({
        "dataset": ["d"] * 4, "model": ["m"] * 4, "explainer": ["e"] * 4,
        "strategy_name": ["s"] * 4, "event_id": [1, 2, 3, 4], "status": ["ok"] * 4,
        "original_logit": [1.0] * 4, "final_logit": [-1.0] * 4, "size": [1] * 4,
        "num_candidates": [4] * 4, "oracle_calls": [3] * 4, "time_s": [0.1] * 4,
        "it_max": [None] * 4, "device": ["cuda:0", "cpu", "cpu", "cpu"]})
    table = comparison_table(records)
    assert table["gpu_share"].tolist() == [0.25]
    assert "on GPU" in markdown_table(table).splitlines()[0]


def test_a_records_device_is_the_models_own_else_its_parameters():
    class Plain(torch.nn.Module):  # a model of one's own without a device property
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(2))

    assert pipeline.model_device(Plain()) == "cpu"
    assert pipeline.model_device(object()) is None
    with fake_device():
        assert pipeline.model_device(Plain().to(DEVICE)) == str(DEVICE)
