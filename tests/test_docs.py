"""Docs are tested: generated docs stay in sync, every command has help and a docs entry."""

from __future__ import annotations

from pathlib import Path

from gpugap.cli import app, main
from gpugap.rules import registry
from gpugap.rules.docs import rules_markdown

ROOT = Path(__file__).parent.parent


def test_rules_doc_is_generated_from_the_rules():
    assert (ROOT / "docs" / "rules.md").read_text() == rules_markdown() + "\n", \
        "docs/rules.md is stale: gpugap rules --markdown > docs/rules.md"
    text = rules_markdown()
    for rule in registry().values():
        assert f"## `{rule.id}`" in text
        for cause in rule.causes:
            assert f"`{cause}`" in text
        for name in rule.thresholds:
            assert f"`{rule.id}.{name}`" in text


def test_every_command_has_help_and_is_documented(capsys):
    readme = (ROOT / "README.md").read_text()
    docs = readme + "".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    assert {"analyze", "rules", "scenarios", "run", "profile"} <= set(names)
    for name in names:
        assert main([name, "--help"]) == 0
        out = capsys.readouterr().out
        assert "Usage" in out, name
        assert f"gpugap {name}" in docs, f"README/docs never show 'gpugap {name}'"
