"""``scripts/report.py`` and ``scripts/show_explanation.py`` on three tiny synthetic runs."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

import cftgnn.config  # noqa: F401
from cftgnn.errors import ConfigError
from cftgnn.reporting import picture, report
from cftgnn.runs import pipeline
from cftgnn.runs.merge import find_runs, merge_runs
from cftgnn.runs.records import read_records
from cftgnn.scoring import summaries
from cftgnn.scoring.summaries import GROUP_ORDER, format_summary, sort_groups, summarize

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
# TGAT with fresh weights of seed 0 finds counterfactuals on the synthetic stream within a few
# iterations (debug=default's own seed 1 is chosen for TGN)
TINY = ["debug=default", "checkpoint=null", "model=tgat", "progress=false",
        "sample.prediction=any", "n_events=6", "seed=0"]
RUNS = {
    "cf-closest-40": ["explainer.it_max=40", "strategy=closest"],
    "cf-recent-20": ["explainer.it_max=20", "strategy=recent"],
    "greedy-recent": ["explainer=greedy", "strategy=recent"],
}
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """A folder of three run directories (two CF-TGNN budgets and strategies, one greedy)."""
    root = tmp_path_factory.mktemp("sweep")
    for name, overrides in RUNS.items():
        with initialize_config_dir(str(CONF), version_base="1.3"):
            cfg = compose("explain", overrides=[*TINY, *overrides, f"out_dir={root / name}"])
        pipeline.run(cfg)
    return root


@pytest.fixture(scope="module")
def written(sweep, tmp_path_factory) -> tuple[report.Report, str]:
    out = tmp_path_factory.mktemp("report")
    return report.write_report([sweep], out), str(out)


def _markdown_tables(text: str) -> list[pd.DataFrame]:
    """Every markdown table of ``text`` as a frame of strings."""
    tables, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif block:
            tables.append(pd.DataFrame(block[2:], columns=block[0]))
            block = []
    return tables


def _same(cell: str, value: float) -> bool:
    return math.isnan(value) if cell == "–" else float(cell) == pytest.approx(value, abs=6e-4)


def test_report_rows_equal_summarize_of_each_run(sweep, written):
    rep, out = written
    text = (Path(out) / "report.md").read_text()
    main_table, group_table = _markdown_tables(text)[:2]
    assert len(main_table) == len(RUNS)
    assert "it_max" in main_table.columns  # it varies between the runs
    for run in find_runs([sweep]):
        records = read_records(run)
        expect = summarize(records).iloc[0]
        (explainer,), (strategy,) = set(records.explainer), set(records.strategy_name)
        it_max = json.loads((run / "run.json").read_text())["explainer"].get("it_max")
        row = main_table[(main_table.explainer == explainer) & (main_table.strategy == strategy)
                         & (main_table.it_max == ("–" if it_max is None else str(it_max)))]
        assert len(row) == 1, run
        for column, heading in report.TABLE_COLUMNS.items():
            assert _same(row.iloc[0][heading], float(expect[column])), (run, column)
        by_group = summarize(records, by=["group"])
        rows = group_table[(group_table.explainer == explainer)
                           & (group_table.strategy == strategy)]
        assert sorted(rows.group) == sorted(by_group.group)
        for g in by_group.itertuples():
            cell = rows[rows.group == g.group].iloc[0]
            assert _same(cell["fidelity+ ↑"], g.fidelity_plus)
            assert _same(cell["events"], g.events)
    assert set(rep.table["dataset"]) == {"synthetic"} and set(rep.table["model"]) == {"tgat"}


def test_cli_prints_the_table_and_the_files(sweep, tmp_path, capsys):
    rep = report.main([str(sweep), "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert report.markdown_table(rep.table) in printed
    for path in rep.files:
        assert str(path) in printed and path.parent == tmp_path
    assert [p.name for p in rep.files] == ["report.md", "fidelity_sparsity.png",
                                           "fidelity_kept.png", "size_hist.png", "it_max.png"]


def test_default_output_folder_is_inside_the_first_path(sweep):
    rep = report.write_report([sweep / "greedy-recent"])
    assert all(p.parent == sweep / "greedy-recent" / "report" for p in rep.files)
    assert len(report.load_runs([sweep])) == sum(len(read_records(r)) for r in find_runs([sweep]))


def test_pngs_are_written(written):
    rep, _ = written
    for path in rep.files[1:]:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, path


def test_fidelity_kept_plots_the_mean_curve_and_needs_curve_logits(sweep):
    from cftgnn.scoring.curves import mean_fidelity_curve

    records = report.load_runs([sweep])
    fig = report.plot_fidelity_kept(records)
    (ax,) = fig.axes
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 21]
    assert len(lines) == len(RUNS)
    greedy = records[(records.explainer == "greedy") & (records.status == "ok")]
    want = mean_fidelity_curve(greedy.original_logit.to_numpy(float),
                               list(greedy.fid_curve_logits))
    assert any(np.allclose(ln.get_ydata(), want) for ln in lines)
    old = records.drop(columns=["fid_curve_logits", "acc_curve_logits"])  # before schema 4
    assert "fidelity_kept" not in report.report_figures(old)


def test_every_axis_has_a_title_and_labels(sweep):
    figures = report.report_figures(report.load_runs([sweep]))
    assert set(figures) == {"fidelity_sparsity", "fidelity_kept", "size_hist", "it_max"}
    for name, fig in figures.items():
        assert fig.get_suptitle(), name
        for ax in fig.axes:
            assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel(), (name, ax)


def test_plots_show_the_summarized_numbers(sweep):
    records = report.load_runs([sweep])
    table = report.comparison_table(records)
    (ax,) = report.plot_fidelity_sparsity(records).axes  # one dataset × model
    curves = {line.get_label().split(" (")[0]: line for line in ax.get_lines()}
    assert len(curves) == len(RUNS)
    for row in table.to_dict("records"):
        line = curves[f"{row['explainer']}/{row['strategy_name']}"
                      + ("" if pd.isna(row["it_max"]) else f" it_max={row['it_max']}")]
        assert line.get_ydata()[-1] == pytest.approx(row["fidelity_plus"])  # F+(1) = fid+
    hist = report.plot_size_hist(records)
    counted = sum(p.get_height() for ax in hist.axes for p in ax.patches)
    flips = records[(records.status == "ok") & (records.original_logit * records.final_logit < 0)]
    assert counted == len(flips) > 0
    capped = report.plot_size_hist(records, cap=2)  # sizes ≥ 2 share the last bar
    assert sum(p.get_height() for ax in capped.axes for p in ax.patches) == len(flips)
    if flips["size"].max() > 2:
        assert capped.axes[0].get_xticklabels()[-1].get_text() == "≥2"
    it_fig = report.plot_it_max(records)
    ax_time = it_fig.axes[0]
    cf = report.it_max_table(records)
    xs = sorted(x for line in ax_time.get_lines() for x in line.get_xdata())
    assert xs == sorted(cf["it_max"]) and len(set(xs)) == 2
    ys = sorted(y for line in ax_time.get_lines() for y in line.get_ydata())
    assert ys == pytest.approx(sorted(cf["time_p50"]))


def test_it_max_plot_with_one_value_says_so(sweep):
    records = report.load_runs([sweep / "cf-closest-40"])
    fig = report.plot_it_max(records)
    assert "only one it_max value" in fig.get_suptitle()
    assert [len(line.get_xdata()) for line in fig.axes[0].get_lines()] == [1]
    assert "it_max" not in report.comparison_table(records).columns


def test_a_merged_run_is_not_counted_twice(sweep, tmp_path):
    shutil.copytree(sweep / "cf-closest-40", tmp_path / "shard0")
    merge_runs([tmp_path / "shard0"], tmp_path / "merged")
    records = report.load_runs([tmp_path])
    assert len(records) == len(read_records(tmp_path / "shard0"))
    assert set(records.run) == {str(tmp_path / "merged")}


def test_both_tables_of_a_run_order_the_groups_the_same_way(sweep):
    records = report.load_runs([sweep / "cf-closest-40"])
    assert set(records["group"]) == {"correct", "incorrect"}
    first_incorrect = records.sort_values("group", ascending=False, kind="stable")
    printed = summaries.summary_table(first_incorrect)  # explain.py's table and summary.csv
    by_group = report.comparison_table(first_incorrect, by_group=True)  # report.md's
    assert list(printed["group"]) == list(GROUP_ORDER) == ["correct", "incorrect", "all"]
    assert list(by_group["group"]) == list(GROUP_ORDER[:2])
    lines = format_summary(printed, index="group").splitlines()
    assert lines[0].split() == ["correct", "incorrect", "all"]


def test_unknown_groups_follow_the_known_ones_in_order_of_appearance():
    table = pd.DataFrame({"run": ["b", "a", "a", "a", "b"],
                          "group": ["all", "other", "incorrect", "correct", "correct"]})
    ordered = sort_groups(table, ["run", "group"])
    assert list(zip(ordered["run"], ordered["group"], strict=True)) == [
        ("a", "correct"), ("a", "incorrect"), ("a", "other"), ("b", "correct"), ("b", "all")]


def _copy_run(src: Path, dst: Path, **changes) -> Path:
    run = shutil.copytree(src, dst)
    fp = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**fp, **changes}))
    return run


def test_runs_differing_in_a_setting_are_not_pooled(sweep, tmp_path):
    src = sweep / "cf-closest-40"
    n = len(read_records(src))
    _copy_run(src, tmp_path / "a")
    _copy_run(src, tmp_path / "exact", mode="exact")
    shard1 = _copy_run(src, tmp_path / "shard1", shard=1, num_shards=2)  # shards pool
    for f in (shard1 / "records").glob("*.parquet"):  # as if shard 1 explained other events
        rec = pd.read_parquet(f)
        rec["event_id"] += 10**6
        rec.to_parquet(f)
    records = report.load_runs([tmp_path])
    assert dict(zip(records.run, records.settings, strict=True)) == {
        str(tmp_path / "a"): "mode=approximate", str(tmp_path / "shard1"): "mode=approximate",
        str(tmp_path / "exact"): "mode=exact"}
    table = report.comparison_table(records)
    assert list(table.settings) == ["mode=approximate", "mode=exact"]
    assert list(table.events) == [2 * n, n]
    assert "settings" in report.markdown_table(table).splitlines()[0]
    labels = [t.get_text() for t in report.plot_fidelity_sparsity(records).axes[0]
              .get_legend().get_texts()]
    assert any("mode=exact" in label for label in labels)
    # runs of other configurations do not make a setting vary
    assert set(report.load_runs([sweep]).settings) == {""}


def test_an_event_explained_by_two_runs_of_one_configuration_counts_once(sweep, tmp_path):
    src = sweep / "cf-closest-40"
    shutil.copytree(src, tmp_path / "first")
    shutil.copytree(src, tmp_path / "again")
    with pytest.warns(UserWarning, match=rf"{len(read_records(src))} events .* counted once"):
        records = report.load_runs([tmp_path])
    assert sorted(records.event_id) == sorted(read_records(src).event_id)
    assert set(records.run) == {str(tmp_path / "again")}  # the first run found is kept


def test_bad_paths_give_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        report.load_runs([tmp_path / "nope"])
    with pytest.raises(ConfigError, match="no run directories"):
        report.load_runs([tmp_path])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    with pytest.raises(ConfigError, match="hold no records"):
        report.load_runs([tmp_path])


def test_records_without_a_key_column_are_refused(sweep, tmp_path):
    run = shutil.copytree(sweep / "greedy-recent", tmp_path / "old")
    for f in (run / "records").glob("*.parquet"):
        pd.read_parquet(f).drop(columns=["strategy_name"]).to_parquet(f)
    with pytest.raises(ConfigError, match=r"lack the columns \['strategy_name'\]"):
        report.load_runs([run])


def test_an_event_without_candidates_is_drawn():
    from cftgnn.data import make_synthetic_stream

    stream = make_synthetic_stream(num_nodes=30, num_events=50)
    record = {"event_id": 0, "candidate_ids": [], "explanation": [], "original_logit": 0.3,
              "final_logit": 0.3, "keep_logit": math.nan, "status": "no_candidates"}
    fig = picture.plot_explanation(picture.explanation_view(stream, record, 1, 64))
    assert "no candidate events" in " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "(not flipped)" in fig.get_suptitle() and "keep logit" in fig.get_suptitle()


def _script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], env=ENV,
                          capture_output=True, text=True, timeout=120)


def test_report_script_exits_2_with_one_line(tmp_path):
    done = _script("report.py", str(tmp_path / "missing"))
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {tmp_path / 'missing'} does not exist"


# --------------------------------------------------------------------------- the picture


def _largest(run: Path) -> pd.Series:
    records = read_records(run)
    return records.loc[records["size"].idxmax()]


def test_picture_highlights_the_explanation(sweep):
    run = sweep / "cf-closest-40"
    rec = _largest(run)
    assert rec["size"] > 0
    view = picture.load_view(run, int(rec.event_id))
    assert sorted(view.highlighted.tolist()) == sorted(int(e) for e in rec.explanation)
    assert sorted(view.ids.tolist()) == sorted(int(e) for e in rec.candidate_ids)
    fig = picture.plot_explanation(view)
    timeline, graph = fig.axes
    assert timeline.get_xlabel() and timeline.get_ylabel() and timeline.get_title()
    assert graph.get_title() and graph.get_xlabel()
    (removed,) = [c for c in timeline.collections if c.get_gid() == "explanation"]
    unit, size = picture.time_unit(float(np.max(np.abs(view.cand_t - view.t))))
    expect = (view.cand_t[view.removed] - view.t) / size
    assert sorted(removed.get_offsets()[:, 0]) == pytest.approx(sorted(expect))
    assert unit in timeline.get_xlabel()
    verdict = "(flipped)" if rec.original_logit * rec.final_logit < 0 else "(not flipped)"
    title = fig.get_suptitle()
    # the logits as the words print them (three significant digits below 0.1)
    from cftgnn.runs.showcase import logit_text

    assert verdict in title
    assert f"{logit_text(rec.original_logit)} → {logit_text(rec.final_logit)}" in title
    assert f"keep logit (only the explanation kept) {logit_text(rec.keep_logit)}" in title
    pairs = {tuple(sorted(p)) for p in zip(view.cand_src[view.removed],
                                           view.cand_dst[view.removed], strict=True)}
    (edges,) = [c for c in graph.collections if c.get_gid() == "removed"]
    assert len(edges.get_segments()) == len(pairs)


def test_picture_hops_come_from_the_run_k(sweep):
    run = sweep / "greedy-recent"
    fp = picture.read_fingerprint(run)
    assert fp["k"] is None and picture.hop_radius(fp) == fp["model"]["config"]["num_layers"]
    rec = read_records(run).iloc[-1]
    view = picture.load_view(run, int(rec.event_id))
    assert view.hops.max() <= view.k and view.k == picture.hop_radius(fp)
    fig = picture.plot_explanation(view, x_axis="order")
    assert "position" in fig.axes[0].get_xlabel()


def test_show_explanation_writes_the_default_png(sweep, capsys):
    run = sweep / "cf-recent-20"
    event = int(read_records(run).event_id.iloc[0])
    out = picture.main([str(run), str(event)])
    assert out == run / f"explanation_{event}.png" and out.stat().st_size > 10_000
    assert f"wrote {out}" in capsys.readouterr().out


def test_unknown_event_lists_some_known_ones(sweep):
    run = sweep / "cf-recent-20"
    ids = read_records(run).event_id.tolist()
    with pytest.raises(ConfigError, match=f"not in the records .*{ids[0]}, {ids[1]}"):
        picture.load_view(run, max(ids) + 1)
    with pytest.raises(ConfigError, match="not a run directory"):
        picture.load_view(sweep, ids[0])
    done = _script("show_explanation.py", str(run), str(max(ids) + 1))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: event {max(ids) + 1} is not in")
