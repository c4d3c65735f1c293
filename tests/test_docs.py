# SPDX-License-Identifier: MIT
"""The Sphinx docs (docs/): every example of the contract page runs, and the API
reference documents every public name exactly once.

docs/contracts.rst's convention, what keeps the page from rotting:

* every ``.. code-block:: python`` block runs as written, in page order, in one
  namespace, in a fresh empty folder, in a Python of its own (no block is skipped:
  there is no skip marker);
* a block whose last line is ``# raises NAME: TEXT`` must raise exception ``NAME``
  (a name of :mod:`tensorffi`, else a builtin) from its last statement, with a
  message that starts with ``TEXT`` (a trailing ``...`` is dropped; runs of blanks
  compare equal). Only that statement may raise; the blocks after it go on in the
  same namespace;
* a block whose last line is ``# warns NAME: TEXT`` must warn that from its last
  statement; in every other block a tensorffi warning (``UncheckedWarning``,
  ``BuildWarning``, ``CacheWarning``) is an error.

The API reference's check reads the directives of docs/*.rst (no Sphinx needed: it
runs in the default test run) and, where Sphinx is installed (the ``docs`` extra),
builds the docs and counts each public object's entries in ``objects.inv``. The
public modules are the package's modules without a leading underscore (tests/
test_imports.py's PUBLIC); a public name is one in a public module's ``__all__``; a
name re-exported elsewhere (``tensorffi.ShapeError`` is ``tensorffi.errors.ShapeError``)
is the same object, documented once.
"""
from __future__ import annotations

import builtins
import importlib
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import tensorffi

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGE = DOCS / "contracts.rst"
EXPECT = re.compile(r"^#\s*(raises|warns)\s+([A-Za-z_][\w.]*)\s*:\s*(.*?)\s*$")


# --------------------------------------------------------------------------- #
# docs/contracts.rst: every example runs                                       #
# --------------------------------------------------------------------------- #


def page_blocks(path: Path = PAGE) -> list[dict]:
    """The ``.. code-block:: python`` blocks of an .rst page, in order: line (of the
    first code line), code (dedented), expect (None, or [raises|warns, NAME, TEXT])."""
    lines = path.read_text().splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)\.\. code-block::\s*(\S+)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang = len(m.group(1)), m.group(2)
        j = i + 1
        while j < len(lines) and re.match(rf"^\s{{{indent + 1},}}:\w[\w-]*:", lines[j]):
            j += 1  # the directive's options
        body: list[str] = []
        first = None
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
            if lines[j].strip() and first is None:
                first = j + 1
            body.append(lines[j])
            j += 1
        i = j
        if lang not in ("python", "py", "python3"):
            continue
        code = textwrap.dedent("\n".join(body)).strip("\n") + "\n"
        last = code.rstrip("\n").rsplit("\n", 1)[-1]
        em = EXPECT.match(last.strip())
        out.append({"line": first, "code": code, "expect": list(em.groups()) if em else None})
    return out


DRIVER = r'''
import ast, builtins, json, re, sys, traceback, warnings

import tensorffi

OURS = (tensorffi.UncheckedWarning, tensorffi.BuildWarning, tensorffi.CacheWarning)


def lookup(name):
    obj = tensorffi
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return getattr(builtins, name)
    return obj


def norm(text):
    return " ".join(str(text).split())


def main():
    blocks = json.load(open(sys.argv[1]))
    ns = {"__name__": "__main__"}
    failed = 0
    for b in blocks:
        where = f"contracts.rst:{b['line']}"
        print(f"\n### {where}", flush=True)
        last = ast.parse(b["code"]).body[-1]
        lines = range(last.lineno, last.end_lineno + 1)
        code = compile(b["code"], where, "exec")
        kind, name, text = b["expect"] or (None, None, None)
        if text is not None and text.endswith("..."):
            text = text[:-3]
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                if kind != "warns":
                    for cls in OURS:
                        warnings.simplefilter("error", cls)
                exec(code, ns)
            if kind == "raises":
                raise AssertionError(f"expected {name}: {text!r}, nothing was raised")
            if kind == "warns":
                cls = lookup(name)
                got = [w for w in seen if issubclass(w.category, cls)]
                if not got:
                    raise AssertionError(f"expected warning {name}, got {[str(w.message) for w in seen]}")
                if not any(norm(w.message).startswith(norm(text)) for w in got):
                    raise AssertionError(f"expected {name} starting {text!r}, got {[str(w.message) for w in got]}")
        except BaseException as exc:
            if kind == "raises" and not isinstance(exc, AssertionError):
                cls = lookup(name)
                frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == where]
                ok = isinstance(exc, cls) and frames and frames[0].lineno in lines  # the block's own frame
                if ok and norm(exc).startswith(norm(text)):
                    print(f"raised as expected: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                    continue
                print(f"expected {name} from the last statement, starting {text!r}; got:", file=sys.stderr)
            traceback.print_exc()
            print(f"block at {where} failed", file=sys.stderr, flush=True)
            failed += 1
    print(f"\ncontracts.rst: {len(blocks)} blocks, {failed} failed", flush=True)
    sys.exit(1 if failed else 0)


main()
'''


def test_the_page_has_the_blocks_this_test_runs():
    blocks = page_blocks()
    assert len(blocks) >= 20
    expects = [b["expect"] for b in blocks if b["expect"]]
    assert len(expects) >= 20 and any(e[0] == "warns" for e in expects)
    for b in blocks:  # an expectation comment anywhere but the last line is a typo of the convention
        for line in b["code"].rstrip("\n").split("\n")[:-1]:
            assert not EXPECT.match(line.strip()), f"contracts.rst:{b['line']}: {line!r} is not the block's last line"
    for kind, name, _ in expects:
        assert isinstance(getattr(tensorffi, name, None) or getattr(builtins, name, None), type), name


def test_every_example_of_the_contract_page_runs(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "blocks.json").write_text(json.dumps(page_blocks()))
    (tmp_path / "driver.py").write_text(DRIVER)
    env = dict(os.environ, PYTHONPATH=str(Path(tensorffi.__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "blocks.json")], cwd=work,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    assert "0 failed" in proc.stdout


# --------------------------------------------------------------------------- #
# the API reference: every public name documented exactly once                #
# --------------------------------------------------------------------------- #


def public_modules() -> list[str]:
    return ["tensorffi"] + sorted(f"tensorffi.{m.name}" for m in pkgutil.iter_modules(tensorffi.__path__)
                                  if not m.name.startswith("_"))


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:  # tensorffi.magic without IPython
        return False
    return True


def _key(module: str, name: str, obj: object) -> object:
    """What "the same name" means: one object for classes and routines (re-exports
    are one name), the qualified name for data (two equal tuples are two names)."""
    if inspect.isclass(obj) or callable(obj):
        return ("obj", id(obj))
    return ("data", f"{module}.{name}")


def public_names() -> dict[object, list[str]]:
    """key -> the public qualified names of that object."""
    out: dict[object, list[str]] = {}
    for module in public_modules():
        if not _importable(module):
            continue
        mod = importlib.import_module(module)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if isinstance(obj, types.ModuleType):
                continue  # a submodule: checked as a module
            out.setdefault(_key(module, name, obj), []).append(f"{module}.{name}")
    return out


def _resolve(qualname: str) -> tuple[str, str, object]:
    parts = qualname.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        module = ".".join(parts[:i])
        for part in parts[i:]:
            obj = getattr(obj, part)
        return module, ".".join(parts[i:]), obj
    raise LookupError(qualname)


def rst_directives() -> list[tuple[str, str, str, dict[str, str]]]:
    """(page, directive, argument, options) of every directive of docs/*.rst, with
    the current module (``py:module``/``automodule``) prefixed to a py: directive's
    bare name."""
    out = []
    for page in sorted(DOCS.glob("*.rst")):
        lines = page.read_text().splitlines()
        current = None
        for i, line in enumerate(lines):
            m = re.match(r"^\s*\.\. ([\w:-]+)::\s*(.*?)\s*$", line)
            if not m:
                continue
            directive, arg = m.groups()
            options: dict[str, str] = {}
            key = None
            for nxt in lines[i + 1:]:
                om = re.match(r"^\s+:([\w-]+):\s*(.*)$", nxt)
                if om:
                    key = om.group(1)
                    options[key] = om.group(2)
                elif key and nxt.strip() and not nxt.strip().startswith(":") and re.match(r"^\s{6,}\S", nxt):
                    options[key] += " " + nxt.strip()  # a continued option value
                else:
                    break
            if directive in ("automodule", "py:module", "module", "py:currentmodule", "currentmodule"):
                current = arg
            elif directive.startswith("py:") and current and "." not in arg.split("(")[0]:
                arg = f"{current}.{arg}"
            out.append((page.name, directive, arg, options))
    return out


def _has_doc_comment(module: str, name: str) -> bool:
    """Whether ``NAME`` has a ``#:`` doc comment (or a docstring after it) in the
    module's own source, as autodoc's analyzer needs for data."""
    source = inspect.getsource(importlib.import_module(module))
    return bool(re.search(rf"^#:.*\n{re.escape(name)}\s*[:=]", source, re.M)
                or re.search(rf"^{re.escape(name)}\s*(?::[^=\n]*)?=.*\n\"\"\"", source, re.M))


def documented_by_rst() -> dict[object, list[str]]:
    """key -> where the .rst directives document it (page: directive argument)."""
    out: dict[object, list[str]] = {}
    modules: dict[str, list[str]] = {}

    def note(key: object, where: str) -> None:
        out.setdefault(key, []).append(where)

    for page, directive, arg, options in rst_directives():
        where = f"{page}: {directive}:: {arg}"
        if "no-index" in options or "noindex" in options:
            continue
        name = arg.split("(")[0].strip()
        if directive in ("automodule", "py:module", "module"):
            modules.setdefault(name, []).append(where)
            if directive != "automodule" or "no-members" in options or "members" not in options \
                    or not _importable(name):
                continue
            mod = importlib.import_module(name)
            listed = [m.strip() for m in options["members"].split(",") if m.strip()]
            excluded = {m.strip() for m in options.get("exclude-members", "").split(",") if m.strip()}
            for member in listed or mod.__all__:
                if member in excluded:
                    continue
                obj = getattr(mod, member)
                if isinstance(obj, types.ModuleType):
                    continue
                routine = inspect.isclass(obj) or inspect.isroutine(obj)
                if routine and not (obj.__doc__ or "undoc-members" in options):
                    continue
                if not routine and not _has_doc_comment(name, member):
                    continue  # autodoc documents data with a doc comment only
                note(_key(name, member, obj), where)
        elif directive.startswith(("auto", "py:")) and directive not in ("py:currentmodule",):
            if not directive.startswith("py:") and directive[4:] not in ("function", "class", "exception", "data",
                                                                          "decorator"):
                continue  # automethod, autoattribute...: members, not public names
            if directive.startswith("py:") and directive[3:] not in ("function", "class", "exception", "data"):
                continue
            module, attr, obj = _resolve(name)
            if "." in attr:
                continue  # a class member
            note(_key(module, attr, obj), where)
    out.update({("module", m): w for m, w in modules.items()})
    return out


def test_every_public_name_is_documented_once_in_the_rst():
    have = documented_by_rst()
    problems = []
    for module in public_modules():
        got = have.get(("module", module), [])
        if len(got) != 1:
            problems.append(f"module {module}: documented {len(got)} times {got}")
    for key, names in public_names().items():
        got = have.get(key, [])
        if len(got) != 1:
            problems.append(f"{' = '.join(names)}: documented {len(got)} times {got}")
    assert not problems, "\n".join(problems)


def test_the_contract_page_is_in_the_toctree_and_api_points_to_it():
    index = (DOCS / "index.rst").read_text()
    toctree = index.split(".. toctree::", 1)[1]
    assert re.search(r"^\s+contracts\s*$", toctree, re.M) and re.search(r"^\s+api\s*$", toctree, re.M)
    api = (DOCS / "api.rst").read_text()
    assert ":doc:`contracts`" in api and "tensorffi.contract" not in api.split(":doc:`contracts`")[1]
    assert PAGE.read_text().startswith("The contract language\n=====")


def test_conf_names_the_script_that_builds_the_docs():
    conf = (DOCS / "conf.py").read_text()
    named = re.findall(r"`(\.ci/[\w.-]+)`", conf)
    assert named, "docs/conf.py names the CI script that builds the docs"
    for script in named:
        text = (ROOT / script).read_text()
        assert "sphinx -W --keep-going" in text and " docs " in text, script


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    pytest.importorskip("sphinx", reason="the docs extra (pip install -e '.[docs]') builds the docs")
    from sphinx.util.inventory import InventoryFile

    out = tmp_path_factory.mktemp("docs") / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS),
                           str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    with open(out / "objects.inv", "rb") as f:
        return InventoryFile.load(f, "", lambda base, uri: uri)


def test_the_built_docs_document_every_public_name_once(inventory):
    """Entries of one object that share an anchor are one description (autodoc adds
    the defining module's name, ``tensorffi.library.Library``, as a canonical alias
    of ``tensorffi.Library``)."""
    anchors: dict[object, set[str]] = {}
    members = ("py:method", "py:property", "py:attribute", "py:classmethod", "py:staticmethod")
    items = inventory.items() if hasattr(inventory, "items") else inventory.data.items()
    for kind, entries in items:
        if not kind.startswith("py:") or kind in members:
            continue
        for name, item in entries.items():
            uri = item.uri if hasattr(item, "uri") else item[2]
            if kind == "py:module":
                key: object = ("module", name)
            else:
                module, attr, obj = _resolve(name)
                key = _key(module, attr, obj)
            anchors.setdefault(key, set()).add(uri)
    problems = [f"module {m}: {sorted(anchors.get(('module', m), ()))}" for m in public_modules()
                if len(anchors.get(("module", m), ())) != 1]
    problems += [f"{' = '.join(names)}: {sorted(anchors.get(key, ()))}" for key, names in public_names().items()
                 if len(anchors.get(key, ())) != 1]
    assert not problems, "documented other than once:\n" + "\n".join(problems)
