"""JUnit XML for CI test reporters: one <testsuite> per report, one <testcase> per gate.

A failed gate is a <failure>, a gate skipped on a null metric (allow_missing) a
<skipped>; each case's message goes to <system-out> so passing gates explain themselves
too in the CI's test view.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import PurePath

from gpugap.gates import FAIL, SKIP, Check, fmt_value


def check_junit(check: Check) -> str:
    counts = check.counts()
    root = ET.Element("testsuites", name="gpugap check", tests=str(counts["gates"]),
                      failures=str(counts["failed"]), errors="0",
                      skipped=str(counts["skipped"]))
    for report in check.reports:
        statuses = [r.status for r in report.results]
        suite = ET.SubElement(root, "testsuite", name=report.report,
                              tests=str(len(statuses)), failures=str(statuses.count(FAIL)),
                              errors="0", skipped=str(statuses.count(SKIP)), time="0")
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="scope", value=report.scope or "whole report")
        if check.baseline:
            ET.SubElement(props, "property", name="baseline", value=check.baseline)
        # Test reporters read dots in a classname as packages: keep the report's stem.
        classname = "gpugap.check." + PurePath(report.report).name.split(".")[0]
        for result in report.results:
            case = ET.SubElement(suite, "testcase", classname=classname, name=result.name,
                                 time="0")
            if result.status == FAIL:
                failure = ET.SubElement(case, "failure", message=result.message,
                                        type=f"gpugap.{result.kind}")
                failure.text = (f"{result.message}\n(gate from {result.source}; value "
                                f"{fmt_value(result.metric, result.value)})")
            elif result.status == SKIP:
                ET.SubElement(case, "skipped", message=result.message)
            ET.SubElement(case, "system-out").text = result.message
        for warning in report.warnings:
            ET.SubElement(suite, "system-err").text = warning
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


__all__ = ["check_junit"]
