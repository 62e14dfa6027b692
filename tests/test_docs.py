"""Docs are tested: generated docs stay in sync, every command has help and a docs entry,
README's output blocks are the real output, committed samples name no machine's paths."""

from __future__ import annotations

import io
import re
import shlex
from pathlib import Path

import pytest
from rich.console import Console

from gpugap.cli import app, main
from gpugap.cli import root as cli
from gpugap.render.rules_doc import causes_markdown, rules_markdown
from gpugap.rules import registry

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


# Directories of the machine that made a file: a user's home, a temporary directory, a
# work tree. (/opt/... install paths, such as nsys's in the run manifests, are not.)
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home|tmp|Users|private/var)/")


def test_committed_samples_carry_no_machine_paths():
    samples = [p for top in ("reports", "docs") for p in sorted((ROOT / top).rglob("*"))
               if p.suffix in (".html", ".svg", ".json")]
    assert len(samples) >= 6 * 5              # 6 scenarios: timeline, analyses, records
    for path in samples:
        found = MACHINE_PATH.search(path.read_text(encoding="utf-8", errors="replace"))
        assert found is None, f"{path.relative_to(ROOT)} names {found.group(0)}..."


README_WIDTH = 80           # the width of the README's output blocks: a terminal's, a CI log's
# An output block: a fence with no language, `gpugap analyze ...` as its first line, then
# the output; a last line "..." marks the rest as left out.
OUTPUT_BLOCK = re.compile(r"^```\n(gpugap analyze [^\n]*)\n(.*?)^```$", re.S | re.M)


def real_output(command: str, monkeypatch) -> list[str]:
    """What *command* prints, from the repository root, at README_WIDTH, without colour."""
    screen = io.StringIO()
    monkeypatch.setattr(cli, "stdout", Console(file=screen, width=README_WIDTH,
                                               color_system=None, highlight=False))
    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command)[1:]) == 0, command
    return [line.rstrip() for line in screen.getvalue().splitlines()]


@pytest.mark.parametrize("command", [c for c, _ in OUTPUT_BLOCK.findall(
    (ROOT / "README.md").read_text())])
def test_readme_output_is_the_real_output(command, monkeypatch):
    shown = dict(OUTPUT_BLOCK.findall((ROOT / "README.md").read_text()))[command]
    shown = [line.rstrip() for line in shown.splitlines()]
    real = real_output(command, monkeypatch)
    if shown[-1] == "...":
        shown, real = shown[:-1], real[:len(shown) - 1]
    assert shown == real, "README.md's output of `" + command + "` is stale; it prints:\n" \
        + "\n".join(real)


def test_readme_shows_output_blocks():
    assert len(OUTPUT_BLOCK.findall((ROOT / "README.md").read_text())) >= 2


def test_the_buckets_are_listed_as_the_code_has_them():
    """docs/api.md names every bucket id of the accounting, in the code's order; README
    every idle bucket's title (issue 40: three were missing)."""
    from gpugap.accounting.buckets import BUCKETS, IDLE_IDS, IDS

    api = (ROOT / "docs" / "api.md").read_text()
    listed = api[api.index("`frames.accounting` has one row"):]
    listed = listed[:listed.index("order).")]
    found = re.findall(r"`([a-z0-9-]+)`", listed)
    assert [b for b in found if b in IDS] == list(IDS)
    readme = " ".join((ROOT / "README.md").read_text().split())
    idle = readme[readme.index("or idle by cause ("):]
    idle = idle[:idle.index("). The verdict comes first")]
    assert [b.title for b in BUCKETS if b.id in IDLE_IDS] == [
        t.split(":")[0].strip().removeprefix("and ") for t in
        idle.removeprefix("or idle by cause (").split(", ")]


def test_causes_doc_is_generated_from_the_catalogue():
    assert (ROOT / "docs" / "causes.md").read_text() == causes_markdown() + "\n", \
        "docs/causes.md is stale: gpugap rules --causes > docs/causes.md"


def test_readme_counts_the_corpus_programs():
    from tests.corpus import score

    readme = " ".join((ROOT / "README.md").read_text().split())
    total = len(list((ROOT / "tests" / "corpus" / "programs").glob("*/expected.toml")))
    names = ("dev", "held-out", score.SEALED, "external", "public", score.PUBLIC_HELD_OUT,
             score.PUBLIC_BLIND, "host")
    splits = [len(score.programs(s)) for s in names]
    assert sum(splits) == total
    assert (f"a corpus of {total} programs" in readme
            and f"{splits[0]} dev, {splits[1]} held-out, {splits[2]} sealed" in readme
            and f"{splits[3]} external" in readme
            and f"{splits[4] + splits[5] + splits[6]} public programs" in readme
            and f"{splits[4]} public, {splits[5]} public-held-out, {splits[6]} "
                "public-blind" in readme
            and f"{splits[7]} host programs" in readme)


def test_troubleshooting_a_script_beside_a_clone(tmp_path):
    """docs/api.md's troubleshooting, as it happens: a script in the folder that holds a
    clone named gpugap imports the clone's top folder as an empty namespace package."""
    import os
    import subprocess
    import sys

    (tmp_path / "gpugap" / "gpugap").mkdir(parents=True)     # the clone, its package
    (tmp_path / "try.py").write_text("import gpugap\nprint(gpugap)\ngpugap.analyze\n")
    # -S and no PYTHONPATH: whether an installed gpugap is found before the folder
    # depends on how it was installed (an editable install's finder comes after it).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-S", "try.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert "NamespaceLoader" in done.stdout
    assert "AttributeError: module 'gpugap' has no attribute 'analyze'" in done.stderr
    doc = " ".join((ROOT / "docs" / "api.md").read_text().split())
    assert "## Troubleshooting" in doc and "imports it as an empty namespace package" in doc


def _recipe_rule():
    """The whole small rule docs/architecture.md shows, as a module of its own."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("### A whole small rule", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    namespace: dict = {"__name__": "tiny_kernels"}
    exec(compile(code, "docs/architecture.md", "exec"), namespace)  # noqa: S102
    return namespace["RULE"]


def test_the_recipes_small_rule_runs_on_a_real_capture():
    """The rule the recipe shows is a working rule: on a real capture of a small eager
    loop it finds the tiny kernels, costed from the accounting; with a count no device
    reaches it stays silent."""
    from gpugap.rules import detections, finish
    from gpugap.rules import thresholds as rule_thresholds
    from gpugap.rules.base import Context
    from gpugap.rules.settle import settle
    from tests.conftest import analyze_report, load_report

    rule = _recipe_rule()
    trace = load_report("captures/small-eager")
    context = Context(analyze_report("captures/small-eager").accounting)

    def run(thresholds=None):
        """The analysis's stages for this one rule: detect, settle, finish."""
        config = rule_thresholds.effective([rule], thresholds)
        raw = [f for detect in detections(trace, context, [rule], config) for f in detect()]
        return finish(trace, [rule], settle(raw, [rule], context), context)

    found = run()
    assert [(f.rule, f.cause) for f in found] == [("tiny-kernels", "tiny")] * len(found)
    assert found and all(f.count >= 1000 and 0 < f.cost_ns <= f.end_ns - f.start_ns
                         for f in found)
    assert "kernels ran for a few microseconds each" in found[0].message
    assert run({"tiny-kernels": {"min_count": 10**9}}) == []
