"""JUnit XML for CI test reporters: one <testsuite> per report, one <testcase> per gate.

A failed gate is a <failure>, a gate skipped on a null metric (allow_missing) a
<skipped>; each case's message goes to <system-out> so passing gates explain themselves
too in the CI's test view.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import PurePath
from typing import TYPE_CHECKING

from gpugap.ci.gates import FAIL, SKIP, Check, fmt_value
from gpugap.text import MESSAGE_LIMIT, safe_text, shown_path

if TYPE_CHECKING:
    from gpugap.render.outputs import View


def check_junit(check: Check, view: View | None = None) -> str:
    # Report-derived text goes through safe_text: XML 1.0 cannot hold most control
    # characters, and a name may carry any (gpugap.text).
    counts = check.counts()
    root = ET.Element("testsuites", name="gpugap check", tests=str(counts["gates"]),
                      failures=str(counts["failed"]), errors="0",
                      skipped=str(counts["skipped"]))
    for report in check.reports:
        statuses = [r.status for r in report.results]
        suite = ET.SubElement(root, "testsuite", name=shown_path(report.report),
                              tests=str(len(statuses)), failures=str(statuses.count(FAIL)),
                              errors="0", skipped=str(statuses.count(SKIP)), time="0")
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="scope",
                      value=safe_text(report.scope or "whole report"))
        if check.baseline:
            ET.SubElement(props, "property", name="baseline", value=safe_text(check.baseline))
        # Test reporters read dots in a classname as packages: keep the report's stem.
        classname = "gpugap.check." + safe_text(PurePath(report.report).name.split(".")[0])
        for result in report.results:
            message = safe_text(result.message, MESSAGE_LIMIT)
            case = ET.SubElement(suite, "testcase", classname=classname,
                                 name=safe_text(result.name), time="0")
            if result.status == FAIL:
                failure = ET.SubElement(case, "failure", message=message,
                                        type=f"gpugap.{result.kind}")
                failure.text = (f"{message}\n(gate from {safe_text(result.source)}; value "
                                f"{fmt_value(result.metric, result.value)})")
            elif result.status == SKIP:
                ET.SubElement(case, "skipped", message=message)
            ET.SubElement(case, "system-out").text = message
        for warning in report.warnings:
            ET.SubElement(suite, "system-err").text = safe_text(warning, MESSAGE_LIMIT)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


__all__ = ["check_junit"]
