"""The documentation site (mkdocs.yml, docs/): it builds in strict mode (once per test session),
its API reference covers every public name of the four user-facing packages and shows no raw
Sphinx role, every page is in the navigation, code blocks wrap instead of being cut off, and
every option of ``conf/`` is documented on some page."""

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
#: A Sphinx role left in the text of a page (``:class:`` before the rendered ``<code>X</code>``):
#: docstrings are Markdown, cross-references are written ``[``X``][cftgnn.pkg.X]``.
RAW_ROLE = re.compile(r":(?:py:)?(?:class|func|mod|meth|attr|data|exc|obj|const|ref):")
_CODE = re.compile(r"<(pre|code)\b.*?</\1>", re.S)


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


def _config() -> dict[str, object]:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python/name:", ""))


def test_every_page_is_in_the_nav() -> None:
    config = _config()
    nav = set(_nav_pages(config["nav"]))
    pages = set(_pages())
    assert pages - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - pages == set(), "nav entries without a page"
    # and the strict build fails on a page left out of the nav (see the built site's test)
    validation = config["validation"]
    assert isinstance(validation, dict) and validation["nav"]["omitted_files"] == "warn"


def raw_roles(html: str) -> list[str]:
    """Each raw Sphinx role in a page's text (code samples left out), with its context."""
    text = _CODE.sub(lambda m: "<code/>" if m.group(1) == "code" else "", html)
    return [text[max(m.start() - 60, 0): m.end() + 20] for m in RAW_ROLE.finditer(text)]


def test_a_raw_role_is_found() -> None:
    """The check of the built site can fail: a role before rendered code is found, one inside a
    code sample is not."""
    assert raw_roles('<p>see :class:<code>EventStream</code> and :func:<code>x</code></p>')
    assert not raw_roles('<pre><code>""":class:`EventStream`"""</code></pre><p>'
                         '<a href="#x"><code>EventStream</code></a> <code>:mod:</code></p>')


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once with ``mkdocs build --strict`` (which must succeed)."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed "
                        "(pip install -e '.[docs]'; .ci/run installs it)")
    pytest.importorskip("mkdocstrings", reason="the docs extra is not installed")
    out = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_the_site_builds_in_strict_mode_with_every_public_name(site: Path) -> None:
    for package in API_PACKAGES:
        page = (site / "api" / package.split(".")[-1] / "index.html").read_text()
        names = importlib.import_module(package).__all__
        absent = [n for n in names if f'id="{package}.{n}"' not in page]
        assert not absent, f"{package}: public names missing from the API reference: {absent}"


def test_the_built_site_shows_no_raw_sphinx_role(site: Path) -> None:
    found = {page.relative_to(site).as_posix(): roles for page in sorted(site.rglob("*.html"))
             if (roles := raw_roles(page.read_text()))}
    assert not found, "raw Sphinx roles (write [``Name``][cftgnn.pkg.Name] or ``Name``): " + \
        "; ".join(f"{page}: {roles[:3]}" for page, roles in found.items())


def test_the_api_pages_link_their_cross_references(site: Path) -> None:
    """Docstring cross-references render as links to the objects they name."""
    page = (site / "api" / "explain" / "index.html").read_text()
    links = set(re.findall(r'<a class="autorefs autorefs-internal"[^>]*href="([^"]+)"', page))
    assert "#cftgnn.explain.ExplanationResult" in links
    assert "../oracle/#cftgnn.oracle.Oracle" in links


def test_code_blocks_wrap_instead_of_being_cut_off(site: Path) -> None:
    """Every page loads docs/stylesheets/extra.css, whose rule wraps the lines of code blocks (the
    theme would hide what passes the right edge behind a scroll bar)."""
    css = (DOCS / "stylesheets" / "extra.css").read_text()
    rule = re.search(r"\.md-typeset pre > code\s*\{([^}]*)\}", css)
    assert rule and "white-space: pre-wrap" in rule.group(1)
    pages = sorted(site.rglob("*.html"))
    missing = [p.relative_to(site).as_posix() for p in pages
               if "stylesheets/extra.css" not in p.read_text()]
    assert pages and not missing, f"pages without the stylesheet: {missing}"
