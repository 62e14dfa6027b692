"""Running programs under nsys: profile any command, or a shipped scenario with the
expectations it must meet, then analyze what was captured (gpugap.run.runner)."""
