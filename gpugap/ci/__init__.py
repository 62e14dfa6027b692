"""CI: the gateable metrics and gates (gates), measuring them on a report (measure),
holding gates and a baseline against a report (check), baselines of known-good runs
(baseline), the comparison of two runs (diff) and the project's configuration (config).
Above the analysis, whose results it measures; below render/ and the command line."""
