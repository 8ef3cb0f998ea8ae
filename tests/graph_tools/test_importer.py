"""The importer itself: imports of one project take turns; the demo graph it loads."""

import json

import pytest

from tests.factories import make_project
from tests.graph_tools.records import ALICE, jsonl


def test_demo_graph_is_real_typed_data_of_a_few_thousand_entities():
    from apps.graph_tools.demo import demo_graph_lines

    records = [json.loads(line) for line in demo_graph_lines()]

    entities = [r for r in records if r["kind"] == "entity"]
    types = {r["type"] for r in entities}
    rel_types = {r["type"] for r in records if r["kind"] == "relationship"}
    assert len(entities) >= 3000
    assert {"Country", "City", "Continent", "Currency", "Language"} <= types
    assert {"LOCATED_IN", "BORDERS", "CAPITAL_OF", "USES_CURRENCY", "SPEAKS"} <= rel_types
    france = next(r for r in entities if r["key"] == "country:FR")
    assert france["name"] == "France" and "Paris" in france["description"]


@pytest.mark.django_db(transaction=True)
def test_imports_of_one_project_take_turns_and_other_projects_do_not_wait():
    import threading

    from django.db import OperationalError, connection, transaction

    from apps.graph_tools.importer import graph_import

    project, other = make_project(), make_project()
    outcome: dict[str, str] = {}
    robot = {"kind": "entity", "key": "r2", "type": "Robot", "name": "R2"}

    def import_meanwhile(target, name: str) -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '300ms'")
                # Another key and another type: nothing but the project is shared.
                graph_import(project=target, lines=[jsonl(robot)])
            outcome[name] = "imported"
        except OperationalError as exc:
            outcome[name] = "waited" if "lock timeout" in str(exc) else str(exc)
        finally:
            connection.close()

    with transaction.atomic():
        graph_import(project=project, lines=[jsonl(ALICE)])
        for target, name in ((project, "same"), (other, "other")):
            worker = threading.Thread(target=import_meanwhile, args=(target, name))
            worker.start()
            worker.join()

    assert outcome == {"same": "waited", "other": "imported"}
