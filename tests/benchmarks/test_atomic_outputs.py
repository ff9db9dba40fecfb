"""The benchmarks write their outputs atomically (``cftgnn.files``' ``atomic_write`` /
``atomic_output``): a benchmark killed or out of disk while writing leaves the old file, or
none, never a cut one that a later report would read as a result."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Plain writes left on purpose, by file and the writing call's line text (with the reason).
ALLOWED = {
    # the child's job spec, in a temporary folder, written before the child starts
    ("cftgnn/benchmarks/memory.py", "spec.write_text(json.dumps(job))"),
    # the profiling child runs another tree's code, whose cftgnn may have no atomic writer
    ("scripts/benchmark_oracle_versions.py",
     "(Path(req[\"dir\"]) / f\"{req['label']}_timers.json\").write_text(json.dumps(timers))"),
}
_PLAIN = {"write_text", "write_bytes"}
_FRAMES = {"to_parquet", "to_csv", "to_json"}


def plain_writes(path: Path) -> list[str]:
    """The calls of ``path`` that write a file in place: ``.write_text``, ``.write_bytes``,
    ``open(..., "w…")``, and a frame's ``to_parquet``/``to_csv``/``to_json`` given anything
    but a name (the file object of an ``atomic_output`` block)."""
    source = path.read_text()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        mode = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "mode"), None)
        if (name in _PLAIN
                or (name == "open" and isinstance(mode, ast.Constant)
                    and "w" in str(mode.value))
                or (name in _FRAMES and node.args and not isinstance(node.args[0], ast.Name))):
            found.append(ast.get_source_segment(source, node) or name)
    return found


def test_benchmark_outputs_are_written_atomically():
    files = [*sorted((ROOT / "cftgnn" / "benchmarks").glob("*.py")),
             *sorted((ROOT / "scripts").glob("benchmark_*.py"))]
    assert len(files) > 8  # the modules were found
    plain = {(str(f.relative_to(ROOT)), call) for f in files for call in plain_writes(f)}
    assert plain <= ALLOWED, sorted(plain - ALLOWED)


def test_the_check_finds_plain_writes(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from pathlib import Path\nPath('a').write_text('x')\n"
                      "open('b', 'w')\nframe.to_parquet(out / 'c.parquet')\n"
                      "with atomic_output(p) as f:\n    frame.to_parquet(f)\nopen('d')\n")
    assert plain_writes(sample) == ["Path('a').write_text('x')", "open('b', 'w')",
                                    "frame.to_parquet(out / 'c.parquet')"]
