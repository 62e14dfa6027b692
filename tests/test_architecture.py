"""The layers of docs/architecture.md, checked against every import of every module:
no import cycle, no import of a lower layer, function-local imports only in the CLI."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "gpugap"


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = modules()


def resolve(name: str) -> str:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports(name: str, path: Path):
    """(is function-local, line, gpugap modules imported) of each import statement. The
    imports of a module-level ``if TYPE_CHECKING:`` block (the names a lazy package
    exports, for type checkers) are not function-local: they never run."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for block in tree.body
                   if isinstance(block, ast.If) and isinstance(block.test, ast.Name)
                   and block.test.id == "TYPE_CHECKING"
                   for statement in block.body for n in ast.walk(statement)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name if path.name == "__init__.py" else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                       for a in node.names]
        else:
            continue
        found = {resolve(t) for t in targets if t.split(".")[0] == "gpugap"} - {name, ""}
        if found:
            yield node.col_offset > 0 and id(node) not in typing_only, node.lineno, found


def layers() -> list[tuple[str, list[str]]]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"```layers\n(.*?)```", text, flags=re.S)
    assert block, "docs/architecture.md has no ```layers block"
    return [(line.split()[0], line.split()[1:]) for line in block.group(1).splitlines()
            if line.strip()]


def layer_of(module: str, table: list[tuple[str, list[str]]]) -> int | None:
    if module == "gpugap":
        return 0                    # the package's __init__: the version and lazy names
    for rank, (_, prefixes) in enumerate(table):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


def test_every_module_has_a_layer():
    table = layers()
    orphans = sorted(m for m in MODULES if layer_of(m, table) is None)
    assert not orphans, f"modules in no layer of docs/architecture.md: {orphans}"
    # ... and every package the table names exists.
    named = [p for _, prefixes in table for p in prefixes]
    assert all(p in MODULES for p in named), [p for p in named if p not in MODULES]


@pytest.mark.slow
def test_imports_go_to_lower_layers_only():
    table = layers()
    wrong = []
    for name, path in MODULES.items():
        mine = layer_of(name, table)
        for _, line, targets in imports(name, path):
            for target in targets:
                theirs = layer_of(target, table)
                if target != "gpugap" and theirs > mine:
                    wrong.append(f"{path.relative_to(ROOT)}:{line} ({table[mine][0]}) "
                                 f"imports {target} ({table[theirs][0]})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
def test_no_import_cycles():
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        for _, _, targets in imports(name, path):
            graph[name] |= targets - {"gpugap"}
    # Tarjan's strongly connected components: any of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in list(MODULES):
        if v not in index:
            visit(v)
    assert not cycles, cycles


@pytest.mark.slow
def test_function_local_imports_only_in_cli_commands():
    local = [f"{path.relative_to(ROOT)}:{line}"
             for name, path in MODULES.items() if not name.startswith("gpugap.cli")
             for is_local, line, _ in imports(name, path) if is_local]
    assert not local, local


def test_no_module_above_report_reaches_into_another_objects_attributes():
    """Derived state is declared (docs/architecture.md, "Derived state"): no module
    outside report/ reads or writes another object's ``__dict__`` or sets its
    attributes by name (``setattr``), the way caches were once stashed on a Trace;
    an object may do so to itself (``self``)."""
    wrong = []
    for name, path in MODULES.items():
        if name == "gpugap.report" or name.startswith("gpugap.report."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            target = None
            if isinstance(node, ast.Attribute) and node.attr == "__dict__":
                target = node.value
            elif (isinstance(node, ast.Call) and node.args
                  and ((isinstance(node.func, ast.Name) and node.func.id == "setattr")
                       or (isinstance(node.func, ast.Attribute)
                           and node.func.attr == "__setattr__"))):
                target = node.args[0]
            if target is not None and not (isinstance(target, ast.Name)
                                           and target.id == "self"):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not wrong, "\n".join(wrong)


# nsys's own names: the tables gpugap declares (report/schema.py), the families of the
# metadata and enum tables, SQL, and the nsys name of every declared column that is
# not a plain word (startTime, globalTid, correlationId: "start" or "name" is English).
NSYS_TABLE = re.compile(r"\b(?:CUPTI_ACTIVITY_KIND_\w+|NVTX_EVENTS|OSRT_\w+|StringIds|"
                        r"ThreadNames|PROCESSES|TARGET_INFO_\w+|META_DATA_\w+|ENUM_\w+|"
                        r"ANALYSIS_DETAILS|EXPORT_META_DATA|COMPOSITE_EVENTS|"
                        r"sqlite_master)\b")
SQL = re.compile(r"\bSELECT\b.*\bFROM\b", re.IGNORECASE | re.DOTALL)


def _nsys_names() -> tuple[set[str], set[str]]:
    from gpugap.report import schema

    tables = {t.name for t in vars(schema).values() if isinstance(t, schema.Table)}
    columns = {name for t in vars(schema).values() if isinstance(t, schema.Table)
               for c in t.columns for name in (c.nsys, *c.alt)
               if name != name.lower()}
    return tables, columns


def nsys_names_in(path: Path) -> list[str]:
    """The nsys table names, column names and SQL in the code of *path* (its string
    constants; docstrings, which may say where a value comes from, not counted)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    tables, columns = _nsys_names()
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) \
                or id(node) in docstrings:
            continue
        text = node.value
        words = set(re.findall(r"\w+", text))
        hits = sorted((words & (tables | columns))
                      | {m.group(0) for m in NSYS_TABLE.finditer(text)})
        if SQL.search(text):
            hits.append("SQL")
        found += [f"line {node.lineno}: {hit}" for hit in hits]
    return found


def test_nsys_table_and_column_names_only_in_report():
    """report/ is the only place that knows nsys's tables and columns (its APIs:
    Trace, Database): no other module names one in its code."""
    offenders = {str(path.relative_to(ROOT)): found for path in sorted(PACKAGE.rglob("*.py"))
                 if "report" not in path.relative_to(PACKAGE).parts[:1]
                 for found in [nsys_names_in(path)] if found}
    assert not offenders, offenders


def test_the_nsys_name_check_sees_a_table_a_column_and_sql(tmp_path):
    """The check above is not blind: the leaks issue 41 removed are caught."""
    leak = tmp_path / "leak.py"
    leak.write_text('"""From OSRT_API (a docstring may say so)."""\n'
                    'def f(trace, db):\n'
                    '    if "OSRT_API" not in trace.info.tables:\n'
                    '        return db.rows("select startTime, stopTime from x")\n'
                    '    return db.read("t", ["globalTid"])\n')
    assert nsys_names_in(leak) == ["line 3: OSRT_API", "line 4: startTime",
                                   "line 4: stopTime", "line 4: SQL", "line 5: globalTid"]
