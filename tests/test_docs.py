"""The documentation site (mkdocs.yml, docs/): it builds in strict mode (once per test session),
its API reference covers every public name of the four user-facing packages, opens
``cftgnn.explain`` with its entry points, shows the real defaults of the explainers' parameters
and no raw Sphinx role, every page is in the navigation, code blocks wrap instead of being cut
off, wide tables keep their scroll bar in view, the index's picture links to its full size, and
every option of ``conf/`` is documented on some page. (What a browser shows: see
``scripts/docs_screenshots.sh``.)"""

from __future__ import annotations

import html
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
API_PACKAGES = ("cftgnn.oracle", "cftgnn.explain", "cftgnn.runs", "cftgnn.data")
#: A Sphinx role left in the text of a page (``:class:`` before the rendered ``<code>X</code>``):
#: docstrings are Markdown, cross-references are written ``[``X``][cftgnn.pkg.X]``.
RAW_ROLE = re.compile(r":(?:py:)?(?:class|func|mod|meth|attr|data|exc|obj|const|ref):")
#: A role as written in reStructuredText, ``:class:`X` ``: shown as it is in inline code too.
RAW_ROLE_TEXT = re.compile(r":(?:py:)?[a-z]+:`")
_CODE = re.compile(r"<(pre|code)\b.*?</\1>", re.S)
_PRE = re.compile(r"<pre\b.*?</pre>", re.S)
_TAG = re.compile(r"<[^>]+>")


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
    """Each raw Sphinx role in a page's text (code blocks left out), with its context: a role
    before rendered code (``:class:<code>X</code>``, a docstring's ``:class:`X```), or one
    written out with its backticks, in inline code as well (``<code>:class:`X`</code>``)."""
    text = _CODE.sub(lambda m: "<code/>" if m.group(1) == "code" else "", html)
    found = [text[max(m.start() - 60, 0): m.end() + 20] for m in RAW_ROLE.finditer(text)]
    text = _PRE.sub("", html)
    return found + [text[max(m.start() - 60, 0): m.end() + 20]
                    for m in RAW_ROLE_TEXT.finditer(text)]


def test_a_raw_role_is_found() -> None:
    """The check of the built site can fail: a role before rendered code is found, and one
    written out in inline code; one inside a code block is not, nor a role's bare name."""
    assert raw_roles('<p>see :class:<code>EventStream</code> and :func:<code>x</code></p>')
    assert raw_roles("<p>a role such as <code>:class:`X`</code> shows as written</p>")
    assert raw_roles("<p>see :meth:`Oracle.logit`</p>")
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


def _signatures(page: str) -> list[str]:
    """The text of every code block of an API page (signatures, attribute values)."""
    return [html.unescape(_TAG.sub("", block)) for block in _PRE.findall(page)]


def test_the_explain_package_lists_its_entry_points_first() -> None:
    """``cftgnn.explain.__all__`` (the API page's order) starts with ``explain_event`` and
    ``explain_events`` (with what the latter yields), the result and the explainers; the
    record version and the search internals come later."""
    names = importlib.import_module("cftgnn.explain").__all__
    explainers = [n for n in names if n.endswith("Explainer")]
    assert names[:3] == ["explain_event", "explain_events", "Explained"]
    assert names[3:6] == ["ExplanationResult", "ExplanationStatus", "Explainer"]
    assert names[6: 5 + len(explainers)] == explainers[1:], "the explainers follow"
    assert names[-1] == "SCHEMA_VERSION"


def test_the_explain_api_page_opens_with_its_entry_points(site: Path) -> None:
    """The members of ``cftgnn.explain`` appear in the order of its ``__all__`` (not by kind,
    which put ``SCHEMA_VERSION`` first)."""
    page = (site / "api" / "explain" / "index.html").read_text()
    shown = re.findall(r'<h2 id="cftgnn\.explain\.(\w+)"', page)
    assert shown[0] == "explain_event"
    assert shown == list(importlib.import_module("cftgnn.explain").__all__)


def test_the_api_shows_the_real_defaults_of_the_parameters(site: Path) -> None:
    """A ``Params`` field declared with ``option(default, "…")`` shows its default, not the
    call (docs/griffe_option.py), in the class' signature and in the field's own entry, which
    gets the call's description."""
    leaks = {}
    for page in sorted((site / "api").rglob("index.html")):
        found = [b[:200] for b in _signatures(page.read_text()) if "option(" in b]
        if found:
            leaks[page.relative_to(site).as_posix()] = found[:2]
    assert not leaks, f"option(...) in rendered signatures: {leaks}"
    page = (site / "api" / "explain" / "index.html").read_text()
    blocks = _signatures(page)
    signature = next(b for b in blocks if b.startswith("CFTGNNParams("))
    assert "    it_max: int = 300,\n" in signature
    assert "    max_time_s: float | None = None,\n" in signature
    entry = page[page.index('id="cftgnn.explain.CFTGNNParams.it_max"'):]
    assert "MCTS iterations" in entry[:3000]


def _griffe_option() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cftgnn_griffe_option",
                                                  DOCS / "griffe_option.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_option_defaults_extension_rewrites_only_option_calls(tmp_path: Path) -> None:
    griffe = pytest.importorskip("griffe", reason="the docs extra is not installed")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(
        "from dataclasses import dataclass, field\n"
        "from cftgnn.explain.params import option\n\n\n"
        "@dataclass\nclass P:\n"
        '    a: int = option(3, "the a", low=0)\n'
        '    b: str = option(default="x", doc="the b " "goes on")\n'
        '    c: float = option(1.0 / 3.0, DOC)\n'
        "    d: list[int] = field(default_factory=list)\n"
        '    e: int = option(4, "described")\n'
        '    """Its own docstring."""\n')
    ext = griffe.load_extensions(_griffe_option().OptionDefaults)
    pkg = griffe.load("pkg", search_paths=[str(tmp_path)], extensions=ext,
                      resolve_aliases=False)
    cls = pkg["P"]
    values = {n: str(cls.members[n].value) for n in "abcde"}
    assert values == {"a": "3", "b": "'x'", "c": "1.0 / 3.0",
                      "d": "field(default_factory=list)", "e": "4"}
    docs = {n: cls.members[n].docstring.value if cls.members[n].docstring else None
            for n in "abcde"}
    assert docs == {"a": "the a", "b": "the b goes on", "c": None, "d": None,
                    "e": "Its own docstring."}
    defaults = {p.name: str(p.default) for p in cls.members["__init__"].parameters
                if p.name != "self"}
    assert defaults == {"a": "3", "b": "'x'", "c": "1.0 / 3.0", "d": "list()", "e": "4"}


def test_wide_tables_keep_their_scroll_bar_in_view() -> None:
    """docs/stylesheets/extra.css bounds the height of the theme's table box
    (``.md-typeset__scrollwrap``, which scrolls sideways), so a table wider than the page shows
    its horizontal scroll bar with the table, not only under its last row."""
    css = (DOCS / "stylesheets" / "extra.css").read_text()
    rule = re.search(r"(?m)^\.md-typeset__scrollwrap\s*\{([^}]*)\}", css)
    assert rule, "no .md-typeset__scrollwrap rule in extra.css"
    assert re.search(r"max-height:\s*\d+vh", rule.group(1))
    assert re.search(r"overflow(-x)?:\s*auto", rule.group(1))
    header = re.search(r"\.md-typeset__scrollwrap table:not\(\[class\]\) thead th\s*\{([^}]*)\}",
                       css)
    assert header and "position: sticky" in header.group(1)
    assert "stylesheets/extra.css" in _config()["extra_css"]  # type: ignore[operator]


def test_the_index_picture_links_to_its_full_size(site: Path) -> None:
    page = (site / "index.html").read_text()
    picture = re.search(r'<a href="([^"]+\.png)"><img [^>]*src="([^"]+)"', page)
    assert picture and picture.group(1) == picture.group(2), "the picture is not a link to itself"
    assert (site / picture.group(1)).is_file()
