"""Every rule of the registry has its tests here (see tests/rules/kit.py): a file named
after its module, cases that fire and cases that stay silent on real captures, the four
tests that run them, and a committed snapshot of its messages."""

from __future__ import annotations

import importlib
from pathlib import Path

from gpugap.rules import RULE_MODULES, registry
from tests.rules.kit import SNAPSHOTS, Fires, Silent

HERE = Path(__file__).parent
TESTS = ("test_fires", "test_stays_silent", "test_messages_match_the_snapshot",
         "test_findings_are_marked")


def test_every_rule_has_its_file_cases_tests_and_snapshot() -> None:
    missing = []
    for module_name in RULE_MODULES:
        rule = importlib.import_module(f"gpugap.rules.{module_name}").RULE
        path = HERE / f"test_{module_name}.py"
        if not path.is_file():
            missing.append(f"{rule.id}: no tests/rules/{path.name} (see tests/rules/kit.py)")
            continue
        tests = importlib.import_module(f"tests.rules.test_{module_name}")
        if getattr(tests, "RULE", None) != rule.id:
            missing.append(f"{path.name}: RULE = {rule.id!r} expected")
        fires = getattr(tests, "FIRES", [])
        silent = getattr(tests, "SILENT", [])
        if not fires or not all(isinstance(c, Fires) for c in fires):
            missing.append(f"{path.name}: FIRES needs a Fires case on a real capture")
        if not silent or not all(isinstance(c, Silent) for c in silent):
            missing.append(f"{path.name}: SILENT needs a Silent case on a real capture")
        wrong = sorted({c.cause for c in (*fires, *silent) if c.cause} - set(rule.causes))
        if wrong:
            missing.append(f"{path.name}: {rule.id} has no cause {', '.join(wrong)}")
        missing += [f"{path.name}: no {name}()" for name in TESTS
                    if not callable(getattr(tests, name, None))]
        if not (SNAPSHOTS / f"{rule.id}.txt").is_file():
            missing.append(f"{rule.id}: no snapshot tests/rules/snapshots/{rule.id}.txt")
    assert not missing, "\n".join(missing)


def test_no_tests_or_snapshots_of_rules_that_are_gone() -> None:
    files = {p.stem.removeprefix("test_") for p in HERE.glob("test_*.py")} - {"completeness"}
    assert files <= set(RULE_MODULES), sorted(files - set(RULE_MODULES))
    snapshots = {p.stem for p in SNAPSHOTS.glob("*.txt")}
    assert snapshots <= set(registry()), sorted(snapshots - set(registry()))
