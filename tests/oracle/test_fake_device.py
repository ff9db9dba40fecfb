"""Device discipline on the CPU: the oracles, every model kind, the memory
budget's spilled segments, the explainers and ``explain.py`` run on a foreign device
(``testsupport.fakedevice``: it computes on the CPU, refuses ``.numpy()`` and mixing with CPU
tensors, and counts host<->device crossings) and give the CPU's logits (1e-5; in fact bit for
bit, since the fake device computes with the CPU's kernels).

The same tests run on a real CUDA device (their ``cuda`` variants, marked ``gpu``: deselected
by default, run by ``scripts/gpu/check.sh``; no crossings are counted there), so every path of
these is checked on the GPU machine too.

``test_the_crossings_per_history_batch_are_the_design_notes`` measures the crossings of one
TGN exact single call and one batch of 16 sets per history batch, by kind and code site, and
checks them against the table of docs/design.md ("Device crossings"): a change of the replay
that adds or removes a crossing fails it until the table is updated from its message.
"""

from __future__ import annotations

import copy
import math
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from testsupport.devices import device_or_skip
from testsupport.fakedevice import (
    DEVICE,
    Crossings,
    FakeDeviceTensor,
    fake_device,
    package_path,
)
from testsupport.models import dygformer, graphmixer, tgat, tgn1, tgn2

from cftgnn.data import EventStream, make_synthetic_stream
from cftgnn.models import TemporalModel
from cftgnn.models.pyg_tgn import PyGTGN
from cftgnn.oracle.engine import EventReplay, ReplayEngine
from cftgnn.replay.tgn import Cone, TGNReplay

ROOT = Path(__file__).resolve().parents[2]
ATOL = 1e-5


def pyg_tgn(stream: EventStream) -> TemporalModel:
    """PyG's TGN, wrapped (``model=pyg_tgn``), small."""
    return PyGTGN(stream.num_nodes, stream.feat_dim, memory_dim=12, time_dim=8,
                  embedding_dim=12, num_neighbors=4, batch_size=16)


FACTORIES = {"tgn1": tgn1, "tgn2": tgn2, "tgat": tgat, "graphmixer": graphmixer,
             "dygformer": dygformer, "pyg_tgn": pyg_tgn}
EVENT = 333
FLIPPED = 412  # tgn1 at m_max=8: a counterfactual of 2 events, the smallest


@pytest.fixture(scope="module")
def stream() -> EventStream:
    return make_synthetic_stream(30, 480, seed=3, feat_dim=2, p_tie=0.2)


@pytest.fixture
def fake() -> Iterator[Crossings]:
    with fake_device() as record:
        yield record


class Target:
    """Where a test's second copy runs: the fake device (``record`` counts its crossings) or
    a real CUDA device (``record`` None)."""

    def __init__(self, device: torch.device, record: Crossings | None) -> None:
        self.device, self.record = device, record
        self.allocations = self._allocations()

    def _allocations(self) -> int:
        """CUDA's count of allocations made so far (0 on the fake device)."""
        if self.record is not None:
            return 0
        return int(torch.cuda.memory_stats(self.device).get("allocation.all.allocated", 0))

    def reset(self) -> None:
        if self.record is not None:
            self.record.reset()
        self.allocations = self._allocations()

    def ran(self) -> bool:
        """Whether the calls since ``reset`` ran on the target: crossings counted, or CUDA
        memory allocated."""
        if self.record is not None:
            return self.record.total() > 0
        return self._allocations() > self.allocations


@pytest.fixture(params=["fake", pytest.param("cuda", marks=pytest.mark.gpu)])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "fake":
        with fake_device() as record:
            yield Target(DEVICE, record)
    else:
        yield Target(device_or_skip("cuda"), None)


def _model(stream: EventStream, name: str) -> TemporalModel:
    torch.manual_seed(0)
    return FACTORIES[name](stream).eval()


def _engines(stream: EventStream, name: str, device: torch.device = DEVICE, **kwargs: object
             ) -> tuple[ReplayEngine, ReplayEngine]:
    """The CPU engine of a model and one of its copy on ``device`` (the fake one by default),
    both running the same form of TGN's exact cone replay."""
    model = _model(stream, name)
    moved = copy.deepcopy(model).to(device)
    if device == DEVICE:
        assert isinstance(next(moved.parameters()), FakeDeviceTensor)
    else:
        assert next(moved.parameters()).device.type == device.type
    cpu, other = ReplayEngine(model, stream, **kwargs), ReplayEngine(moved, stream, **kwargs)
    if isinstance(cpu.replay, TGNReplay):  # the form of the cone replay the device takes
        # (``cone=auto``: the dense replay), so that the fake device's bits are the CPU's
        cpu.replay.options.cone = Cone.DENSE
    return cpu, other


def _sets(cand: np.ndarray, seed: int = 0) -> list[frozenset[int]]:
    rng = np.random.default_rng(seed)
    sets = [frozenset(), frozenset([int(cand[0])]), frozenset(cand.tolist())]
    return sets + [frozenset(cand[rng.random(len(cand)) < 0.4].tolist())]


# ------------------------------------------------------------------ the device itself
@pytest.mark.parametrize("clone", ["/home/u/cftgnn", "/tmp/a b/cftgnn/tests/cftgnn", "/w/main"])
def test_crossing_sites_are_named_from_the_package_folder_whatever_the_clone_is_called(clone):
    # ``git clone`` names the folder cftgnn: the package is then at .../cftgnn/cftgnn/, and a
    # path cut at the first "/cftgnn/" read "cftgnn/models/tgn.py" (the design notes' keys
    # read "models/tgn.py"); a clone under a "tests" folder counted nothing at all
    package = f"{clone}/cftgnn"
    assert package_path(f"{package}/models/tgn.py", package) == "models/tgn.py"
    assert package_path(f"{package}/replay/tgn/rows.py", package) == "replay/tgn/rows.py"
    assert package_path(f"{clone}/tests/oracle/test_fake_device.py", package) is None
    assert package_path(f"{clone}/cftgnn_extra/x.py", package) is None


def test_the_fake_device_refuses_what_a_gpu_refuses_and_counts_crossings(fake):
    x = torch.arange(6.0).to(fake.device)  # upload
    assert isinstance(x, FakeDeviceTensor) and x.device == DEVICE
    z = torch.zeros(3, device=fake.device)  # made there: no crossing
    assert isinstance(z, FakeDeviceTensor)
    assert fake.by_kind() == {"upload": 1}
    with pytest.raises(TypeError, match="numpy"):
        x.numpy()
    with pytest.raises(TypeError, match="numpy"):
        np.asarray(x)
    with pytest.raises(RuntimeError, match="same device"):
        _ = x + torch.ones(6)
    assert isinstance(x * torch.tensor(2.0), FakeDeviceTensor)  # a CPU scalar is allowed
    fake.reset()
    assert float(x.sum()) == 15.0 and bool(x[0] == 0) and x.tolist()[1] == 1.0
    assert torch.equal(x[x > 2], torch.tensor([3.0, 4.0, 5.0], device=fake.device))
    y = x[torch.tensor([0, 2])]  # a CPU index: uploaded implicitly, as CUDA does
    assert torch.equal(y.cpu(), torch.tensor([0.0, 2.0]))
    assert fake.by_kind() == {"sync": 5, "upload": 1, "implicit upload": 1, "download": 1}
    lin = torch.nn.Linear(6, 2).to(fake.device)
    out = lin(x)
    out.sum().backward()  # autograd works (PGExplainer, soft removal)
    assert isinstance(lin.weight.grad, FakeDeviceTensor)
    assert torch.equal(out.detach().cpu(), torch.nn.functional.linear(
        torch.arange(6.0), lin.weight.detach().cpu(), lin.bias.detach().cpu()))


# ------------------------------------------------------------------ oracles, every model
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_the_oracles_of_every_model_on_the_fake_device_equal_the_cpu(stream, name, target):
    cpu, other = _engines(stream, name, target.device)
    ref, got = EventReplay(cpu, EVENT, m_max=10), EventReplay(other, EVENT, m_max=10)
    np.testing.assert_array_equal(got.candidates.ids, ref.candidates.ids)
    sets = _sets(ref.candidates.ids)
    for mode in ("exact", "approximate"):
        want = getattr(ref, mode)(sets)
        np.testing.assert_allclose(getattr(got, mode)(sets), want, atol=ATOL,
                                   err_msg=f"{mode}, batched")
        singles = [float(getattr(got, mode)([s])[0]) for s in sets[:2]]
        np.testing.assert_allclose(singles, want[:2], atol=ATOL, err_msg=f"{mode}, singles")
    assert target.ran()  # it ran on the device: the logits came back at least


@pytest.mark.parametrize("cone", [Cone.AUTO, Cone.ROWS])
def test_the_local_and_the_cone_replay_of_tgn_on_the_fake_device(stream, target, monkeypatch,
                                                                cone):
    # the local replay serves short histories (the approximate oracle) of one set, the cone
    # replay long ones and several sets: both paths, counted to be sure they ran (on a device
    # the cone replay is the dense one unless the row table is asked for)
    from cftgnn.replay import tgn

    ran: Counter[str] = Counter()
    for path in ("local_replay", "cone_replay", "dense_replay"):
        real = getattr(tgn, path)
        monkeypatch.setattr(tgn, path, lambda *a, _f=real, _p=path, **k: (
            ran.update([_p]), _f(*a, **k))[1])
    cpu, other = _engines(stream, "tgn1", target.device)
    if cone is Cone.ROWS:
        for eng in (cpu, other):
            assert isinstance(eng.replay, TGNReplay)
            eng.replay.options.cone = Cone.ROWS
    ref, got = EventReplay(cpu, EVENT, m_max=10), EventReplay(other, EVENT, m_max=10)
    many = _sets(ref.candidates.ids)  # more than local_max_sets (1): the cone replay
    for mode in ("exact", "approximate"):
        for sets in (many[1:2], many):
            np.testing.assert_allclose(getattr(got, mode)(sets), getattr(ref, mode)(sets),
                                       atol=ATOL, err_msg=mode)
    cone_path = "cone_replay" if cone is Cone.ROWS else "dense_replay"
    assert ran["local_replay"] >= 1 and ran[cone_path] >= 2, ran
    assert not ran["dense_replay" if cone is Cone.ROWS else "cone_replay"], ran


def test_the_memory_budget_with_spilled_segments_on_the_fake_device(stream, target,
                                                                     monkeypatch):
    # a plan's recorded rows held within a byte limit: the segments not held are spilled to
    # a temporary file (on the host) and read back (uploaded) when the cone replay reads them,
    # or, where no file can be made, computed again on the device
    from cftgnn.replay.tgn import record

    monkeypatch.setattr(record, "_MIN_SEGMENT_BYTES", 512)  # segments of a toy size
    made: list[object] = []
    real = record._spill_file
    monkeypatch.setattr(record, "_spill_file", lambda *a: made.append(real(*a)) or made[-1])
    cpu, other = _engines(stream, "tgn1", target.device, memory_budget_gb=None)
    for engine in (cpu, other):
        engine.replay.record_bytes = 0  # type: ignore[attr-defined]
    ref, got = EventReplay(cpu, EVENT, m_max=10), EventReplay(other, EVENT, m_max=10)
    sets = _sets(ref.candidates.ids)  # several sets: the cone replay
    for _ in range(2):  # twice: the dropped rows are read again
        np.testing.assert_allclose(got.exact(sets), ref.exact(sets), atol=ATOL)
    assert len(made) == 2 and all(s is not None for s in made), made  # one plan per side
    monkeypatch.setattr(record, "_spill_file", lambda *a: None)  # computed again instead
    ref, got = EventReplay(cpu, EVENT + 1, m_max=10), EventReplay(other, EVENT + 1, m_max=10)
    np.testing.assert_allclose(got.exact(sets), ref.exact(sets), atol=ATOL)


# ------------------------------------------------------------------ explainers
def _explainer(name: str, **overrides: object):  # noqa: ANN202
    from cftgnn.runs.build import make_explainer

    node = OmegaConf.load(ROOT / "conf" / "explainer" / f"{name}.yaml")
    node.merge_with(overrides)
    return make_explainer(node, OmegaConf.load(ROOT / "conf" / "strategy" / "closest.yaml"))


def _scorer(oracle):  # noqa: ANN001, ANN202
    from cftgnn.explain.pgexplainer import EdgeScorer, TrainedScorer

    torch.manual_seed(0)
    return TrainedScorer(EdgeScorer(oracle.probe.features().shape[1], hidden=8), {})


EXPLAINERS = {
    "cftgnn": dict(max_iterations=15), "greedy": {}, "beam": dict(width=2, max_iterations=2),
    "exhaustive": dict(max_size=2), "attention": {}, "perturb_one": {}, "pgexplainer": {},
    "tgnnexplainer": dict(rollouts=8, wave=4, candidates=8, navigator="attention"),
}


@pytest.fixture(scope="module")
def replays(stream: EventStream) -> dict[str, tuple[EventReplay, EventReplay]]:
    """One TGN event's replay on the CPU and on each target device (made at its first use),
    shared by the explainers (each gets fresh oracles: their caches and counters start
    empty)."""
    return {}


def _replays(replays: dict[str, tuple[EventReplay, EventReplay]], stream: EventStream,
             device: torch.device) -> tuple[EventReplay, EventReplay]:
    if str(device) not in replays:
        cpu, other = _engines(stream, "tgn1", device)
        replays[str(device)] = (EventReplay(cpu, FLIPPED, m_max=8),
                                EventReplay(other, FLIPPED, m_max=8))
    return replays[str(device)]


@pytest.mark.parametrize("name", sorted(EXPLAINERS))
def test_every_explainer_on_the_fake_device_gives_the_cpus_answer(stream, replays, name,
                                                                  target):
    results = []
    for replay in _replays(replays, stream, target.device):
        oracle = replay.oracle(mode="exact")
        explainer = _explainer(name, **EXPLAINERS[name])
        if name == "pgexplainer":
            explainer.trained = _scorer(oracle)
        target.reset()
        results.append(explainer.explain(oracle))
    assert target.ran()  # the second search ran on the device
    want, got = results
    assert got.explanation == want.explanation
    assert got.is_counterfactual == want.is_counterfactual
    assert got.ranking == want.ranking and got.counterfactuals == want.counterfactuals
    assert got.exact_calls == want.exact_calls and got.search_calls == want.search_calls
    np.testing.assert_allclose([got.original_logit, got.final_logit, *got.importance],
                               [want.original_logit, want.final_logit, *want.importance],
                               atol=ATOL)


# ------------------------------------------------------------------ explain.py
def test_explain_py_runs_on_the_fake_device(tmp_path, target):
    from hydra import compose, initialize_config_dir

    import cftgnn.config  # noqa: F401  (the ${cftgnn_root:} resolver)
    from cftgnn.runs import pipeline
    from cftgnn.runs.records import read_records

    tables = {}
    for device in ("cpu", str(target.device)):
        out = tmp_path / device.replace(":", "")
        with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
            cfg = compose("explain", overrides=[
                "debug=default", "checkpoint=null", "model=tgn", "n_events=1", "m_max=8",
                "explainer.max_iterations=10", "progress=false", f"device={device}",
                f"out_dir={out}"])
        target.reset()
        pipeline.run(cfg)
        tables[device] = read_records(out / "records")
        if device != "cpu":
            assert target.ran(), f"explain.py did not run on {device}"
    want, got = tables["cpu"], tables[str(target.device)]
    assert got["event_id"].tolist() == want["event_id"].tolist()
    assert got["explanation"].tolist() == want["explanation"].tolist()
    for column in ("original_logit", "final_logit"):
        np.testing.assert_allclose(got[column].to_numpy(float), want[column].to_numpy(float),
                                   atol=ATOL, err_msg=column)


# ------------------------------------------------------------------ the crossings table
def _history_batches(replay: EventReplay) -> int:
    return math.ceil((replay.event_id - replay.start) / replay.engine.batch_size)


def measured_crossings(stream: EventStream, fake: Crossings) -> dict[str, Counter[str]]:
    """Crossings of a TGN (1 layer) exact single call (3 removed) and a batch of 16 sets
    (1 to 5 removed) of the stream's last event (64 candidates), per call, by
    ``kind function`` (a file's function, not its line: the table survives edits that move
    code), and the history batches the replay covers (``history batches``)."""
    _, other = _engines(stream, "tgn1")
    got = EventReplay(other, stream.num_events - 1, m_max=64)
    cand = got.candidates.ids
    rng = np.random.default_rng(0)
    calls = {"single": [frozenset(cand[:3].tolist())],
             "batch16": [frozenset(rng.choice(cand, int(rng.integers(1, 6)),
                                              replace=False).tolist()) for _ in range(16)]}
    got.exact([frozenset()])  # warm (the plan is made in the constructor)
    out: dict[str, Counter[str]] = {}
    for name, sets in calls.items():
        fake.reset()
        got.exact(sets)
        table: Counter[str] = Counter()
        for (kind, site), n in fake.crossings.items():
            table[f"{kind} {re.sub(r':[0-9]+ ', ' ', site)}"] += n
        table["history batches"] = _history_batches(got)
        out[name] = table
    return out


def _documented() -> dict[str, Counter[str]]:
    """The table of docs/design.md's "Device crossings":
    ``| kind | site | single call | per batch | batch of 16 | per batch |``."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("### Device crossings", 1)[1].split("\n#", 1)[0]
    out: dict[str, Counter[str]] = {"single": Counter(), "batch16": Counter()}
    for line in section.splitlines():
        cells = [c.strip().strip("`*") for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not re.fullmatch(r"[0-9]+", cells[2]):
            continue
        key = cells[1] if cells[0] == "" else f"{cells[0]} {cells[1]}"
        for name, cell in (("single", cells[2]), ("batch16", cells[4])):
            if int(cell):
                out[name][key] = int(cell)
    return out


def _row(key: str, measured: dict[str, Counter[str]]) -> str:
    kind, site = ("", key) if key == "history batches" else key.split(" ", 1)
    per = measured["single"]["history batches"]
    one, many = measured["single"][key], measured["batch16"][key]
    return f"| {kind} | `{site}` | {one} | {one / per:.2f} | {many} | {many / per:.2f} |"


def test_the_crossings_per_history_batch_are_the_design_notes(stream, fake):
    measured = measured_crossings(stream, fake)
    for counts in measured.values():  # the dense replay: two uploads a call, none per batch
        replay = {k: n for k, n in counts.items() if " replay/tgn/" in k}
        assert sum(replay.values()) == 2 and all(k.startswith("upload") for k in replay)
    keys = sorted(set(measured["single"]) | set(measured["batch16"]))
    table = "\n".join(_row(k, measured) for k in keys)
    for counts in measured.values():  # the table's last row: every crossing of the call
        counts["total"] = sum(counts.values()) - counts["history batches"]
    assert measured == _documented(), f"update docs/design.md's Device crossings:\n{table}"


# ------------------------------------------------ the crossings of the other paths
LABELS = {"tgn1": "TGN, 1 layer", "tgn2": "TGN, 2 layers", "tgat": "TGAT",
          "graphmixer": "GraphMixer", "dygformer": "DyGFormer", "pyg_tgn": "PyG's TGN"}


def _kinds(fake: Crossings) -> str:
    kinds = Counter(fake.by_kind())
    assert not kinds["implicit upload"], kinds  # a CPU tensor mixed in: not a path's design
    return f"{kinds['upload']} / {kinds['download']} / {kinds['sync']}"


def measured_other_paths(stream: EventStream, fake: Crossings) -> dict[tuple[str, str], str]:
    """Every model's exact and approximate oracle (but TGN's exact one, the main table) on
    ``measured_crossings``' event and sets: ``(model, oracle) -> "batches | single | batch of
    16"``, each ``uploads / downloads / syncs``."""
    out = {}
    for name, label in [*LABELS.items(), ("tgn1", f"{LABELS['tgn1']}, cone=rows")]:
        _, other = _engines(stream, name)
        if label.endswith("cone=rows"):  # the row table on a device (its host bookkeeping)
            assert isinstance(other.replay, TGNReplay)
            other.replay.options.cone = Cone.ROWS
        got = EventReplay(other, stream.num_events - 1, m_max=64)
        cand = got.candidates.ids
        rng = np.random.default_rng(0)
        single = [frozenset(cand[:3].tolist())]
        batch = [frozenset(rng.choice(cand, int(rng.integers(1, 6)), replace=False).tolist())
                 for _ in range(16)]
        got.exact([frozenset()])  # warm
        got.approximate([frozenset()])
        for mode in ("exact", "approximate"):
            if (label, mode) == (LABELS["tgn1"], "exact"):  # the main table's
                continue
            cells = [str(_history_batches(got))]
            for sets in (single, batch):
                fake.reset()
                getattr(got, mode)(sets)
                cells.append(_kinds(fake))
            out[(label, mode)] = " | ".join(cells)
    return out


def _documented_other_paths() -> dict[tuple[str, str], str]:
    """docs/design.md's ``| model | oracle | history batches | single call | batch of 16 |``."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("### Device crossings", 1)[1].split("\n#", 1)[0]
    out = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[1] in ("exact", "approximate"):
            out[(cells[0], cells[1])] = " | ".join(cells[2:])
    return out


def test_the_crossings_of_the_other_paths_are_the_design_notes(stream, fake):
    measured = measured_other_paths(stream, fake)
    table = "\n".join(f"| {model} | {mode} | {cells} |" for (model, mode), cells in
                      measured.items())
    assert measured == _documented_other_paths(), \
        f"update docs/design.md's Device crossings (the other paths):\n{table}"
