"""docs/ARCHITECTURE.md's "Who writes which table" is the code's: every module that writes a
``kb.`` table (or builds the rows another stores) is listed for it, and every module listed does
(issue #24 item 5). Read from the source, as a reviewer would: ORM writes on a model's manager,
rows built from a model class, rows saved or deleted (``run.save()``, where the code says what
``run`` is: a parameter annotated with the model, a name bound to ``Model.objects…`` or
``Model(…)``; issue #47 item 8), tables named in INSERT, UPDATE or DELETE statements, and the
querysets handed to ``rows_write`` to update."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from django.apps import apps as registry

ROOT = Path(__file__).resolve().parent.parent
WRITES = {
    "create",
    "acreate",
    "bulk_create",
    "abulk_create",
    "bulk_update",
    "update",
    "aupdate",
    "delete",
    "adelete",
    "get_or_create",
    "aget_or_create",
    "update_or_create",
    "aupdate_or_create",
}
SQL_WRITE = re.compile(r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(?:kb\.)?\"?([a-z_]+)", re.IGNORECASE)


def _tables_by_model() -> dict[str, str]:
    tables = {}
    for model in registry.get_models():
        schema, _, table = model._meta.db_table.replace('"', "").rpartition(".")
        if schema == "kb":
            tables[model.__name__] = table
    return tables


def _chain_root(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Call | ast.Attribute):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _model_of(node: ast.AST | None, models: dict[str, str]) -> str | None:
    """The model a value is an instance (or a queryset) of, when the code says: ``Model(...)``,
    ``Model.objects...``, an annotation naming it (``run: AgentRun``, ``AgentRun | None``)."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        names = re.findall(r"\w+", node.value)
    else:
        names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
        root = _chain_root(node)
        if isinstance(root, ast.Name) and root.id in models:
            return root.id
        if not isinstance(node, ast.BinOp | ast.Subscript | ast.Name):
            return None
    return next((n for n in names if n in models), None)


def _instances(tree: ast.AST, models: dict[str, str]) -> dict[str, str]:
    """Names bound to a model's rows in a module (parameters, assignments, loop targets)."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        pairs: list[tuple[ast.AST, ast.AST | None]] = []
        if isinstance(node, ast.arg):
            pairs.append((ast.Name(id=node.arg), node.annotation))
        elif isinstance(node, ast.AnnAssign):
            pairs.append((node.target, node.annotation))
        elif isinstance(node, ast.Assign):
            pairs += [(target, node.value) for target in node.targets]
        elif isinstance(node, ast.For | ast.AsyncFor):
            pairs.append((node.target, node.iter))
        for target, value in pairs:
            model = _model_of(value, models)
            if isinstance(target, ast.Name) and model is not None:
                bound[target.id] = model
    return bound


def writers_in_code() -> dict[str, set[str]]:
    models = _tables_by_model()
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "apps").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        module = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text())
        instances = _instances(tree, models)
        for node in ast.walk(tree):
            tables: list[str] = []
            if (  # a row saved or deleted: ``run.save(update_fields=[...])``
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"save", "asave", "delete", "adelete"}
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in instances
            ):
                tables.append(models[instances[node.func.value.id]])
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in WRITES
            ):
                root = _chain_root(node.func.value)
                if isinstance(root, ast.Name) and root.id in models:
                    tables.append(models[root.id])
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in models:  # a row built to be stored
                    tables.append(models[node.func.id])
                if node.func.id == "rows_write":
                    for keyword in node.keywords:
                        if keyword.arg == "updates":
                            tables += [
                                models[n.value.id]
                                for n in ast.walk(keyword.value)
                                if isinstance(n, ast.Attribute)
                                and n.attr == "objects"
                                and isinstance(n.value, ast.Name)
                                and n.value.id in models
                            ]
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                tables += [t for t in SQL_WRITE.findall(node.value) if t in models.values()]
            for table in tables:
                found.setdefault(table, set()).add(module)
    return found


def writers_in_doc() -> dict[str, set[str]]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## Who writes which table", 1)[1].split("\n## ", 1)[0]
    listed: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) < 4 or not cells[1].strip().startswith("`"):
            continue
        tables = re.findall(r"`([a-z_]+)`", cells[1])
        modules = set(re.findall(r"`(apps/[\w/]+\.py)`", cells[2]))
        for table in tables:
            listed[table] = modules
    return listed


def test_every_kb_table_is_in_the_writer_table():
    assert set(writers_in_doc()) == set(_tables_by_model().values())


def test_the_writer_table_names_exactly_the_modules_that_write_each_table():
    in_code, in_doc = writers_in_code(), writers_in_doc()

    mismatches = {
        table: {
            "unlisted": sorted(in_code.get(table, set()) - modules),
            "stale": sorted(modules - in_code.get(table, set())),
        }
        for table, modules in in_doc.items()
        if in_code.get(table, set()) != modules
    }

    assert mismatches == {}


def test_the_agent_audit_trail_has_one_writer():
    """Issue #47 item 8: turn recovery asks the audit trail's writer; it writes none of it itself."""
    in_code = writers_in_code()

    audit = {
        table: in_code.get(table) for table in ("agent_runs", "agent_run_messages", "agent_run_tool_calls")
    }

    assert audit == {table: {"apps/agents/services.py"} for table in audit}


def locks_in_code() -> dict[str, set[str]]:
    """The modules that lock a ``kb.`` table's rows (``Model.objects.select_for_update()…``): the
    first step of a write, so a table with one writer is locked by that writer only."""
    models = _tables_by_model()
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "apps").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "select_for_update":
                root = _chain_root(node.value)
                if isinstance(root, ast.Name) and root.id in models:
                    found.setdefault(models[root.id], set()).add(str(path.relative_to(ROOT)))
    return found


def test_turn_recovery_asks_the_run_writer_to_take_a_run_over():
    """Issue #49 item 4: taking over a lapsed turn locks and takes its run through
    ``apps.agents.services`` (``agent_run_take_over_running``); ``chat/turns/recovery.py`` neither
    writes nor locks an audit row itself."""
    writes, locks = writers_in_code(), locks_in_code()

    recovery = "apps/chat/turns/recovery.py"
    audit = ("agent_runs", "agent_run_messages", "agent_run_tool_calls")

    assert [t for t in audit if recovery in writes.get(t, set()) | locks.get(t, set())] == []
    assert {t: locks.get(t, set()) for t in audit if t in locks} == {
        "agent_runs": {"apps/agents/services.py"}
    }
