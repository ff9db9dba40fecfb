"""The documentation site (mkdocs.yml, docs/): it builds in strict mode, its API reference covers
every public name of the four user-facing packages, and every option of ``conf/`` is documented
on some page."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Packages whose every ``__all__`` name the API reference must show.
API_PACKAGES = ("cftgnn.oracle", "cftgnn.explain", "cftgnn.evaluation", "cftgnn.data")


def _hooks() -> ModuleType:
    """docs/hooks.py, the MkDocs hook that renders the options tables of conf/."""
    spec = importlib.util.spec_from_file_location("cftgnn_docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


HOOKS = _hooks()


def _pages() -> dict[str, str]:
    """Every Markdown page of the site, as MkDocs renders its source (tables expanded)."""
    return {p.relative_to(DOCS).as_posix(): HOOKS.expand(p.read_text())
            for p in sorted(DOCS.rglob("*.md"))}


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _nav_pages(value)]
    return []


def test_every_conf_option_is_documented_on_some_page() -> None:
    sources = "\n".join(p.read_text() for p in DOCS.rglob("*.md"))  # tables not expanded
    tabled = HOOKS.tabled(sources)
    missing = []
    for name in HOOKS.conf_files():
        for opt in HOOKS.conf_options(name):
            described = name in tabled and opt.doc
            # in prose: `sample.range` or `sample.range=...` (a section is covered by its keys)
            named = re.search(rf"`{re.escape(opt.path)}(=[^`]*)?`", sources)
            section = any(o.path.startswith(opt.path + ".") for o in HOOKS.conf_options(name))
            if not (described or named or section):
                missing.append(f"conf/{name}.yaml: {opt.path}")
    assert not missing, "options documented on no page (give the YAML key a comment and " \
        "include its table with <!-- conf: NAME -->, or name it in backticks):\n" + \
        "\n".join(missing)


def test_every_override_file_of_conf_is_named_on_some_page() -> None:
    text = "\n".join(_pages().values())
    missing = [f"{path.parent.name}={path.stem}"
               for group in sorted(HOOKS.OVERRIDE_GROUPS)
               for path in sorted((HOOKS.CONF / group).glob("*.yaml"))
               if f"{path.parent.name}={path.stem}" not in text]
    assert not missing, f"conf files no page names: {missing}"


def test_an_undocumented_key_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: a key without a comment has no description in its table."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "mine.yaml").write_text(
        "_target_: x.Y\nwidth: 3           # the width\ndepth: 2\nsub:\n  a: 1  # an a\n"
        "  b: 2  # a b that goes on\n        # over two lines\n")
    monkeypatch.setattr(HOOKS, "CONF", tmp_path)
    options = {o.path: o for o in HOOKS.conf_options("model/mine")}
    assert list(options) == ["model.width", "model.depth", "model.sub", "model.sub.a",
                             "model.sub.b"]
    assert options["model.width"].doc == "the width" and options["model.width"].default == "3"
    assert options["model.depth"].doc == ""
    assert options["model.sub.b"].doc == "a b that goes on over two lines"
    assert "| `model.depth` | `2` |  |" in HOOKS.expand("<!-- conf: model/mine -->")


def test_every_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python/name:", ""))
    nav = set(_nav_pages(config["nav"]))
    # the result files under docs/results and docs/quality are reached through links
    pages = {p for p in _pages() if not p.startswith(("results/", "quality/"))}
    assert pages - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - set(_pages()) == set(), "nav entries without a page"


def test_the_site_builds_in_strict_mode_with_every_public_name(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed "
                        "(pip install -e '.[docs]'; .ci/run installs it)")
    pytest.importorskip("mkdocstrings", reason="the docs extra is not installed")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(site)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    for package in API_PACKAGES:
        page = (site / "api" / package.split(".")[-1] / "index.html").read_text()
        names = importlib.import_module(package).__all__
        absent = [n for n in names if f'id="{package}.{n}"' not in page]
        assert not absent, f"{package}: public names missing from the API reference: {absent}"
