"""Every config group option composes and instantiates (no network, no real data needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf

import cftgnn.config  # noqa: F401
from cftgnn.data import EventStream

CONF = Path(__file__).resolve().parents[1] / "conf"


def dataset_options() -> list[str]:
    return sorted(p.stem for p in (CONF / "dataset").glob("*.yaml"))


@pytest.mark.parametrize("dataset", dataset_options())
def test_dataset_options_compose(dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("CFTGNN_DATA_DIR", str(tmp_path / "data"))
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("dataset_info", overrides=[f"dataset={dataset}"])
    assert cfg.dataset._target_.startswith("cftgnn.data.")
    if dataset == "tgb":  # TGB's downloads have their own folder ($CFTGNN_TGB_DIR, py-tgb's)
        assert cfg.dataset.data_dir is None and cfg.dataset.name is None
    elif "data_dir" in cfg.dataset:
        assert cfg.dataset.data_dir == str(tmp_path / "data")  # the env var overrides


def test_paths_default_to_project_folders(monkeypatch):
    monkeypatch.delenv("CFTGNN_DATA_DIR", raising=False)
    monkeypatch.delenv("CFTGNN_CACHE_DIR", raising=False)
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("dataset_info")
    root = Path(cfg.paths.root_dir)
    assert (root / "pyproject.toml").is_file()
    assert cfg.paths.data_dir == str(root / "data")
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("dataset_info", overrides=["paths.data_dir=/elsewhere"])
    assert cfg.dataset.data_dir == "/elsewhere"


def test_debug_config_makes_a_tiny_synthetic_stream():
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("dataset_info", overrides=["debug=default"])
    stream = instantiate(cfg.dataset)
    assert isinstance(stream, EventStream) and stream.num_events == 300


def test_dataset_info_script_prints_summary(capsys):
    from cftgnn.data.info import run

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("dataset_info", overrides=["dataset=synthetic", "dataset.num_events=123"])
    run(cfg)
    out = capsys.readouterr().out
    assert "events       123" in out and "feature dim" in out and "data file" in out


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def test_the_two_layer_tgn_has_its_own_files(tmp_path, monkeypatch):
    """model=tgn2l (the T-GNNExplainer papers' TGN): 2 layers, its own checkpoint
    (checkpoint=auto) and trained explainers' names; model=tgn keeps its 1 layer and names."""
    from cftgnn.explain.pgexplainer import scorer_path
    from cftgnn.training.resolve import auto_checkpoint, model_name

    monkeypatch.setenv("CFTGNN_DATA_DIR", str(tmp_path))
    with initialize_config_dir(str(CONF), version_base="1.3"):
        two = compose("explain", overrides=["dataset=wikipedia", "model=tgn2l"])
        one = compose("train_explainer", overrides=["dataset=wikipedia", "model=tgn"])
    assert two.model.num_layers == 2 and one.model.num_layers == 1
    assert {k: v for k, v in two.model.items() if k != "num_layers"} == \
        {k: v for k, v in one.model.items() if k != "num_layers"}
    folder = Path(two.paths.checkpoint_dir)
    assert auto_checkpoint(folder, two.model, "wikipedia") == folder / "tgn2l_wikipedia.pt"
    assert auto_checkpoint(folder, one.model, "wikipedia") == folder / "tgn_wikipedia.pt"
    names = [scorer_path(folder, model_name(c.model), "wikipedia").name for c in (two, one)]
    assert names == ["pgexplainer_tgn2l_wikipedia.pt", "pgexplainer_tgn_wikipedia.pt"]


@pytest.mark.parametrize("model", _options("model"))
@pytest.mark.parametrize("dataset", dataset_options())
def test_explain_composes_for_every_dataset_and_model(dataset, model, tmp_path, monkeypatch):
    monkeypatch.setenv("CFTGNN_DATA_DIR", str(tmp_path))
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=[f"dataset={dataset}", f"model={model}"])
    assert cfg.dataset._target_.startswith("cftgnn.data.")
    assert cfg.model._target_.startswith("cftgnn.models.")
    # the defaults a researcher gets without options
    with initialize_config_dir(str(CONF), version_base="1.3"):
        base = compose("explain")
    assert base.explainer._target_.endswith("CFTGNNExplainer")
    assert base.strategy._target_.endswith("ClosestStrategy")
    assert base.logger._target_.endswith("NullTracker")
    assert base.n_events == 20 and base.sample.prediction == "both"


@pytest.mark.parametrize("logger", _options("logger"))
def test_logger_options_instantiate(logger, monkeypatch):
    from cftgnn.tracking import Tracker

    monkeypatch.delenv("WANDB_MODE", raising=False)
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=[f"logger={logger}"])
    assert isinstance(instantiate(cfg.logger), Tracker)


SWEEP_AXES = {
    "strategies": {"strategy"},
    "explainers": {"explainer", "strategy"},
    "full": {"dataset", "model", "explainer", "strategy"},
    "shards": {"shard"},
    "it_max": {"strategy", "explainer.it_max"},
    "presets": {"dataset", "model", "experiment"},
    "diverse": {"dataset", "model", "explainer", "strategy", "mode"},
    "baselines": {"dataset", "model", "baseline"},
}


@pytest.mark.parametrize("sweep", _options("sweep"))
def test_sweep_files_compose_and_name_existing_options(sweep):
    assert set(SWEEP_AXES) == set(_options("sweep"))
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=[f"sweep={sweep}"], return_hydra_config=True)
    params = cfg.hydra.sweeper.params
    assert set(params) == SWEEP_AXES[sweep]
    for group, values in params.items():
        if group in ("shard",):
            continue
        if group == "mode":
            assert str(values) in ("exact", "approximate", "auto")
            continue
        if group == "explainer.it_max":
            assert all(int(v) > 0 for v in str(values).split(","))
            assert cfg.explainer._target_.endswith("CFTGNNExplainer")
            continue
        for value in str(values).split(","):
            assert value in _options(group), f"{sweep}: {group}={value} has no config file"
    if sweep == "shards":
        assert cfg.hydra.launcher._target_.endswith("JoblibLauncher")
        assert str(params.shard) == f"range(0,{cfg.num_shards})"


BASELINE_EXPLAINERS = {"random": "RandomExplainer", "attention": "AttentionExplainer",
                       "perturb_one": "PerturbOneExplainer", "pgexplainer": "PGExplainer",
                       "tgnnexplainer": "TGNNExplainer", "tgnnexplainer_narrowed": "TGNNExplainer",
                       "tempme": "TempMEExplainer", "cftgnn": "CFTGNNExplainer",
                       "greedy": "GreedyExplainer", "search_plus": "BeamExplainer",
                       "temgx": "TemGXExplainer"}


@pytest.mark.parametrize("baseline", _options("baseline"))
def test_every_baseline_selects_its_explainer(baseline):
    """sweep=baselines runs every file of conf/baseline/; each picks one explainer (the
    counterfactual searches with the closest strategy, search_plus as its preset)."""
    assert set(_options("baseline")) == set(BASELINE_EXPLAINERS)
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=[f"baseline={baseline}"])
        preset = compose("explain", overrides=["experiment=search_plus"])
    assert cfg.explainer._target_.rsplit(".", 1)[1] == BASELINE_EXPLAINERS[baseline]
    if baseline in ("cftgnn", "greedy"):
        assert cfg.strategy._target_.endswith("ClosestStrategy")
    if baseline == "search_plus":
        assert cfg == preset
    if baseline.startswith("tgnnexplainer"):  # published, or the earlier narrowed explorer
        narrowed = baseline.endswith("narrowed")
        assert cfg.explainer.search == ("narrowed" if narrowed else "published")
        assert cfg.explainer.navigator == ("mlp" if narrowed else "pgexplainer")


@pytest.mark.parametrize("launcher, target", [("joblib", "JoblibLauncher"),
                                              ("submitit_slurm", "SlurmLauncher"),
                                              ("submitit_local", "LocalLauncher")])
def test_scale_out_launchers_compose(launcher, target):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=[f"hydra/launcher={launcher}", "shard=1",
                                            "num_shards=4"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_.endswith(target)


def test_wandb_sweep_file_names_existing_options_and_full_grid():
    import yaml

    sweep = yaml.safe_load((CONF / "wandb_sweep.yaml").read_text())
    assert sweep["program"] == "scripts/explain.py"
    assert "${args_no_hyphens}" in sweep["command"] and "logger=wandb" in sweep["command"]
    grid = {k: v["values"] for k, v in sweep["parameters"].items() if "values" in v}
    with initialize_config_dir(str(CONF), version_base="1.3"):
        full = compose("explain", overrides=["sweep=full"], return_hydra_config=True)
    assert {k: str(v).split(",") for k, v in full.hydra.sweeper.params.items()} == grid
    for group, values in grid.items():
        assert set(values) <= set(_options(group))


@pytest.mark.parametrize("experiment", _options("experiment"))
def test_experiment_files_override_the_defaults(experiment):
    import yaml

    with initialize_config_dir(str(CONF), version_base="1.3"):
        base = compose("explain")
        cfg = compose("explain", overrides=[f"experiment={experiment}"])
    body = yaml.safe_load((CONF / "experiment" / f"{experiment}.yaml").read_text())
    for entry in body.pop("defaults", []):  # group choices: checked by the choice made
        for group, option in entry.items():
            group = group.removeprefix("override /")
            assert OmegaConf.select(cfg, f"{group}._target_") == OmegaConf.load(
                CONF / group / f"{option}.yaml")["_target_"], group

    def leaves(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                yield from leaves(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}", v

    changed = False
    for key, value in leaves(body):
        assert OmegaConf.select(cfg, key) == value, key
        changed |= OmegaConf.select(base, key) != value
    assert changed, f"experiment={experiment} changes nothing"
    instantiate(cfg.explainer, strategy=instantiate(cfg.strategy))


@pytest.mark.parametrize("name, experiment", [("cftgnn-plus", "cftgnn_plus"),
                                              ("search-plus", "search_plus")])
def test_quality_benchmark_rows_of_the_presets_match_the_preset_files(name, experiment):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        preset = compose("explain", overrides=[f"experiment={experiment}"])
        quality = compose("benchmark_quality")
    row = quality.explainers[name]
    assert OmegaConf.load(CONF / "explainer" / f"{row.explainer}.yaml")._target_ == \
        preset.explainer._target_
    assert OmegaConf.load(CONF / "strategy" / f"{row.strategy}.yaml")._target_ == \
        preset.strategy._target_
    assert (bool(row.get("prune", False)), int(row.get("certify", 0)),
            str(row.get("mode", quality.mode))) == (preset.prune, preset.certify, preset.mode)
    for key, value in row.get("params", {}).items():
        assert preset.explainer[key] == value, key
    body = OmegaConf.load(CONF / "experiment" / f"{experiment}.yaml")
    assert set(body.explainer) <= set(row.get("params", {})), "the row misses a preset option"


def test_every_config_writes_the_one_default_of_m_max():
    """The configs document ``m_max`` where they set it; the number is ``M_MAX``'s."""
    import yaml

    from cftgnn.data.index import M_MAX

    found = {path.relative_to(CONF).as_posix(): data["m_max"]
             for path in sorted(CONF.rglob("*.yaml"))
             if isinstance(data := yaml.safe_load(path.read_text()), dict) and "m_max" in data
             and path.parent.name not in ("experiment", "sweep", "debug", "baseline")}
    assert len(found) >= 9 and "explain.yaml" in found
    assert {name: v for name, v in found.items() if v != M_MAX} == {}


@pytest.mark.parametrize(("overrides", "target", "k", "negatives"), [
    ([], "logit", 1, None),
    (["target=rank"], "rank", 1, None),
    (["target=rank", "target_k=10", "target_negatives=neg.npz"], "rank", 10, "neg.npz"),
])
def test_the_target_options_compose_and_check(overrides, target, k, negatives):
    from cftgnn.oracle.target import Target
    from cftgnn.runs.options import check_explain_options
    from cftgnn.runs.targets import target_options

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=overrides)
    check_explain_options(cfg)
    opts = target_options(cfg)
    assert (opts.target, opts.k, opts.negatives) == (Target(target), k, negatives)
    # run.json says nothing of the logit target (runs before the option read the same)
    assert bool(opts.as_dict()) is (target == "rank")
    with initialize_config_dir(str(CONF), version_base="1.3"):
        bench = compose("benchmark_rank", overrides=[f"target_k={k}"])
    from cftgnn.benchmarks.options import check_rank_options

    check_rank_options(bench)
    assert bench.num_negatives == 999 and bench.mode == "approximate"


@pytest.mark.parametrize("cone", ["auto", "rows", "dense"])
def test_the_replay_options_compose_and_pass_the_checks(cone):
    """``replay.cone`` (``tests/runs/test_replay_option.py`` runs each on the engine)."""
    from cftgnn.runs.options import check_explain_options

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("explain", overrides=[f"replay.cone={cone}"])
    check_explain_options(cfg)
    assert cfg.replay.cone == cone
