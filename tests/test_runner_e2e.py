"""gpugap run/profile end to end with a real nsys (Debian's 2023.4 in CI, installed by
.ci/install-nsys.sh) on CPU-only programs: profile -> export -> analyze, and the failures
the runner must explain."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from gpugap.api import load as gpugap_load
from gpugap.cli import main
from gpugap.errors import EXIT_NO_CUDA, EXIT_NO_GPU, EXIT_NSYS, EXIT_PROGRAM, EXIT_USAGE
from gpugap.report import nsys as nsys_mod
from gpugap.run import runner
from tests.conftest import DATA

NVTX_PROGRAM = DATA / "cpu-only" / "cpu_only_nvtx.py"


def gpugap(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
@pytest.mark.needs_nsys
def test_cpu_program_end_to_end_reports_nvtx_and_no_cuda(capsys, tmp_path):
    import nvtx  # noqa: F401 - the program needs it; nvtx <= 0.2.11 emits under nsys 2023.4

    out = tmp_path / "run"
    code, stdout, err = gpugap(capsys, "run", "--out", str(out), "--json", "--",
                               sys.executable, str(NVTX_PROGRAM))
    assert code == EXIT_NO_CUDA, err
    doc = json.loads(stdout)
    assert doc["run"]["program_exit_code"] == 0
    analysis = doc["analysis"]
    assert analysis["status"] == "no-cuda-activity"
    assert "CUDA was traced but the program made no kernel launches" in analysis["error"]
    names = [r["name"] for r in analysis["ranges"]]
    # inner_0..2 (a loop's instances) are one row, nested in outer_step.
    assert names == ["outer_step", "inner N", "pushpop_range", "default_domain_range",
                     "startend_range"]
    assert [r["path"] for r in analysis["ranges"]][:2] == [["outer_step"],
                                                          ["outer_step", "inner N"]]
    assert {r["domain"] for r in analysis["ranges"]} == {"gpugap", ""}
    inner = next(r for r in analysis["ranges"] if r["name"] == "pushpop_range")
    assert 45e6 < inner["cpu_ns"] < 500e6          # time.sleep(0.05) in the program
    files = sorted(p.name for p in out.iterdir())
    assert files == ["cpu_only_nvtx.analysis.json", "cpu_only_nvtx.log",
                     "cpu_only_nvtx.nsys-rep", "cpu_only_nvtx.sqlite", "manifest.json"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["nsys"]["version"] == nsys_mod.find_nsys().version
    assert manifest["program"] == [sys.executable, str(NVTX_PROGRAM)]
    # The host's evidence recorded by default: CPU samples of the process tree, and for
    # a Python program the GIL trace and Python samples (nsys 2023.4 takes them all).
    command = manifest["command"]
    assert manifest["host_evidence"] is True
    assert {"--sample=process-tree", "--backtrace=fp", "--cpuctxsw=process-tree",
            "--python-sampling=true"} <= set(command)
    assert "python-gil" in command[command.index("-t") + 1].split(",")
    inventory = gpugap_load(out / "cpu_only_nvtx.sqlite").host_source.inventory()
    assert inventory.cpu_samples and inventory.backtraces and inventory.gil
    # CUDA graphs traced per graph by default, and the run says why.
    assert "--cuda-graph-trace=graph" in manifest["command"]
    assert manifest["cuda_graph_trace"]["mode"] == "graph"
    said = " ".join(err.split())
    assert "CUDA graphs traced per graph (--cuda-graph-trace=graph)" in said
    assert "least overhead" in said
    # The same report, analyzed again, gives the same ranges.
    code, again, _ = gpugap(capsys, "analyze", str(out / "cpu_only_nvtx.sqlite"), "--json")
    assert code == EXIT_NO_CUDA and [r["name"] for r in json.loads(again)["ranges"]] == names


@pytest.mark.slow
@pytest.mark.needs_nsys
def test_node_level_graph_tracing_on_request(capsys, tmp_path):
    out = tmp_path / "run"
    code, _, err = gpugap(capsys, "profile", "--out", str(out), "--cuda-graph-trace", "node",
                          "--json", sys.executable, "-c", "print('hi')")
    assert code == EXIT_NO_CUDA, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert "--cuda-graph-trace=node" in manifest["command"]
    assert "--sample=process-tree" in manifest["command"]
    assert "kernel inside a CUDA graph is traced" in " ".join(err.split())
    code, _, err = gpugap(capsys, "profile", "--out", str(tmp_path / "x"),
                          "--cuda-graph-trace", "nodes", sys.executable, "-c", "1")
    assert code == EXIT_USAGE and "--cuda-graph-trace must be graph or node" in err


@pytest.mark.slow
@pytest.mark.needs_nsys
def test_failing_program_keeps_its_exit_code_and_output(capsys, tmp_path):
    script = ("import sys\n"
              "for i in range(14): print('line', i)\n"
              "print('boom', file=sys.stderr); sys.exit(3)")
    code, out, err = gpugap(capsys, "profile", "--out", str(tmp_path / "x"), "--",
                            sys.executable, "-c", script)
    assert code == EXIT_PROGRAM
    assert "program exit code 3" in err
    # The command as typed, and the program's last 10 lines: none of nsys's own (its
    # progress bars, 'Generating ...qdstrm', 'Generated:' and the report's path).
    typed = f'{sys.executable} -c "{script}"'
    said = err[err.index("gpugap: error: "):]
    assert said == (f"gpugap: error: {typed} exited with code 3 under the profiler; its "
                    "last lines:\n" + "".join(f"  line {i}\n" for i in range(5, 14))
                    + "  boom\n")
    log = (tmp_path / "x" / "python.log").read_text()
    assert "[1/1] [" in log and "Generated:" in log     # nsys said them; the log keeps all
    assert "[1/1]" not in out + err and "Generat" not in out + err
    assert "line 0\n" in out                           # the program's output, echoed


def test_program_tail_drops_what_nsys_2025_printed():
    """The log of a committed H200 run (nsys 2025.3.1): the program printed its result
    as JSON, then nsys its progress and the report's path."""
    log = (Path(__file__).parents[1] / "reports" / "default-stream" / "h200-sample"
           / "bad.log").read_text()
    assert "Collecting data..." in log and "[1/1] [" in log and "Generated:\n\t/" in log
    program = log[:log.index("Collecting data...")].splitlines()
    assert runner.program_tail(log).splitlines() == program[-10:]
    # Progress redrawn in place with carriage returns is dropped the same way.
    redrawn = "step 9 ok\n[1/1] [0%   ] x.nsys-rep\r[1/1] [==100%] x.nsys-rep\r\n"
    assert runner.program_tail(redrawn) == "step 9 ok"


@pytest.mark.slow
@pytest.mark.needs_nsys
def test_profile_without_out_writes_where_the_docs_say(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dirs, reports = [], []
    for _ in range(2):                  # twice within a second: a new directory each time
        code, out, err = gpugap(capsys, "profile", "--json", sys.executable, "-c", "0")
        assert code == EXIT_NO_CUDA, err
        dirs.append(Path(json.loads(out)["out"]))      # stdout: one JSON document
        said = re.search(r"gpugap: program exit code 0; report (\S+), its export", err)
        assert said, err
        reports.append(Path(said.group(1)))
    # docs/scenarios.md: reports/PROGRAM/TIMESTAMP/ under the current directory.
    assert dirs[0] != dirs[1] and dirs[0].parent == dirs[1].parent == Path("reports/python")
    assert re.fullmatch(r"\d{8}-\d{6}(-2)?", dirs[1].name)
    for d, report in zip(dirs, reports, strict=True):
        assert report == d / "python.nsys-rep" and report.is_file()
        assert sorted(p.name for p in d.iterdir()) == [
            "manifest.json", "python.analysis.json", "python.log", "python.nsys-rep",
            "python.sqlite"]


@pytest.mark.needs_nsys
def test_program_not_found(capsys, tmp_path):
    code, _, err = gpugap(capsys, "run", "--out", str(tmp_path / "x"), "--",
                          str(tmp_path / "no-such-program"))
    assert code == EXIT_USAGE
    assert "program not found" in err


@pytest.mark.needs_nsys
def test_a_file_that_is_not_executable(capsys, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    code, _, err = gpugap(capsys, "profile", "--out", str(tmp_path / "x"), "--", str(script))
    assert code == EXIT_USAGE
    assert f'{script}: not an executable program (nsys: "Not executable")' in err
    assert "python3 script.py" in err


# --- nsys failing itself (issue 23, point 4) --------------------------------------------
NSYS_FAILURES = DATA / "nsys-failures"
TRANSCRIPTS = json.loads((NSYS_FAILURES / "transcripts.json").read_text())["transcripts"]


@pytest.mark.parametrize("name", sorted(TRANSCRIPTS))
def test_nsys_own_failure_is_named_as_nsys_s(name):
    """nsys 2023.4's real output when its agent died (tests/data/nsys-failures): nsys's
    failure, exit 3, quoting nsys's own line, never blaming the program (whose exit code
    nsys's is not) nor quoting the program's output."""
    meta = TRANSCRIPTS[name]
    output = (NSYS_FAILURES / name).read_text()
    nsys = nsys_mod.Nsys("/opt/nsys/bin/nsys", "2023.4.4.54")
    error = runner.no_report_failure(nsys, "python3 -c 'print(1)'", meta["nsys_exit_code"],
                                     output, Path("out/python3.log"))
    assert error.exit_code == EXIT_NSYS == 3
    said = error.cli_message()
    nsys_line = next(line for line in output.splitlines()
                     if line.startswith(("Connection", "Agent launcher")))
    assert said.startswith("nsys 2023.4.4.54 failed and wrote no report (nsys exit code "
                           f"{meta['nsys_exit_code']}): \"{nsys_line}\"; ")
    assert "whether python3 -c 'print(1)' ran, and how it ended, is unknown" in said
    assert "out/python3.log" in said and "--nsys PATH" in said
    assert "exited with code" not in said and "troubleshooting" not in said
    for line in meta["program_printed"]:
        assert line not in said


def test_an_unknown_nsys_failure_still_is_nsys_s():
    """No report and no message nsys is known to print: nsys's exit code and its last
    lines, said as nsys's."""
    nsys = nsys_mod.Nsys("/opt/nsys/bin/nsys", "2023.4.4.54")
    said = str(runner.no_report_failure(nsys, "prog", 1, "step 1\nsomething broke\n",
                                        Path("p.log")))
    assert said.startswith("nsys 2023.4.4.54 exited with code 1 and wrote no report; the "
                           "last lines under it: step 1 / something broke; whether prog ran")
    assert "--nsys" not in said and "nsys='PATH'" in said      # Python's spelling


@pytest.mark.slow
@pytest.mark.needs_nsys
def test_nsys_failing_for_real_is_not_the_program_s(capsys, tmp_path):
    """The real nsys, its agent killed under it (tests/data/cpu-only/kill_nsys_agent.py):
    exit 3 naming nsys's failure, not 5 blaming the program."""
    program = DATA / "cpu-only" / "kill_nsys_agent.py"
    code, out, err = gpugap(capsys, "profile", "--out", str(tmp_path / "x"), "--json", "--",
                            sys.executable, str(program))
    log = (tmp_path / "x" / "kill_nsys_agent.log").read_text()
    if "no nsys agent found" in log:
        pytest.skip(f"this nsys ({nsys_mod.find_nsys().version}) runs no agent to kill")
    assert code == EXIT_NSYS, err
    assert out == ""                                   # --json: nothing half-written
    version = nsys_mod.find_nsys().version
    assert (f"gpugap: error: nsys {version} failed and wrote no report (nsys exit code "
            in err)
    # Which of its messages nsys prints depends on when its agent died (on a quiet
    # machine "Connection to Agent lost. This is most likely a bug. ..."; a run of the
    # suite under load quoted another): the error quotes nsys's own failure lines from
    # its output, whichever they are, and never the program's.
    said = runner.nsys_failure_lines(log)
    flat = " ".join(err.split())
    assert said and all(" ".join(f'"{line}"'.split()) in flat for line in said), (log, err)
    assert "exited with code" not in err and "killed nsys's agent" not in err
    assert not list((tmp_path / "x").glob("*.nsys-rep"))


@pytest.mark.needs_nsys
def test_existing_output_needs_force(capsys, tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("user data")
    code, _, err = gpugap(capsys, "run", "--out", str(target), "--", sys.executable, "-c", "0")
    assert code == EXIT_USAGE and "pass --force" in err
    assert (target / "keep.txt").read_text() == "user data"


@pytest.mark.slow
@pytest.mark.needs_nsys
def test_importer_failure_leaving_a_qdstrm_is_explained(capsys, tmp_path):
    """A real nsys whose importer cannot load one of its libraries: the failure mode of
    NVIDIA's nsys on the GPU machine without libdw.so.1."""
    real = Path(nsys_mod.find_nsys().path).resolve()
    prefix = real.parent.parent
    broken = Path(tempfile.mkdtemp(prefix="gpugap-broken-nsys-", dir=prefix.parent))
    try:
        for part in ("target-linux-x64", "host-linux-x64"):
            shutil.copytree(prefix / part, broken / part, symlinks=True,
                            copy_function=lambda s, d: Path(d).hardlink_to(s))
        for lib in ("libssh.so", "libssh.so.4"):
            (broken / "host-linux-x64" / lib).unlink()
        code, _, err = gpugap(capsys, "profile", "--nsys", str(broken / real.parent.name /
                                                                real.name),
                              "--out", str(tmp_path / "o"), "--", sys.executable, "-c", "0")
    finally:
        shutil.rmtree(broken)
    assert code == EXIT_NSYS
    assert "could not turn the raw capture into a report" in err
    assert ".qdstrm" in err and "libdw.so.1" in err


@pytest.mark.needs_nsys
def test_scenarios_need_a_gpu(capsys, monkeypatch):
    def no_driver(name, *a, **k):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(runner.ctypes, "CDLL", no_driver)
    code, _, err = gpugap(capsys, "run", "h2d-copy")
    assert code == EXIT_NO_GPU
    assert "no CUDA driver here" in err


def test_unknown_scenario_and_bad_variant(capsys):
    code, _, err = gpugap(capsys, "run", "no-such-puzzle")
    assert code == EXIT_USAGE and "unknown scenario 'no-such-puzzle'" in err
    code, _, err = gpugap(capsys, "run", "h2d-copy", "--variant", "ugly")
    assert code == EXIT_USAGE and "--variant must be bad, good or all" in err
    # An option run does not have is no scenario's name.
    code, _, err = gpugap(capsys, "run", "--lsit")
    assert code == EXIT_USAGE
    assert "no such option: --lsit; see gpugap run --help" in err
    assert "unknown scenario" not in err
    code, _, err = gpugap(capsys, "run")
    assert code == EXIT_USAGE and "gpugap run --list lists them" in err
    code, _, err = gpugap(capsys, "run", "--list", "h2d-copy")
    assert code == EXIT_USAGE and "--list lists every scenario" in err


@pytest.mark.parametrize("flag", [[], ["--json"]])
def test_run_list_lists_as_scenarios_does(capsys, flag):
    code, listed, err = gpugap(capsys, "run", "--list", *flag)
    assert code == 0 and err == ""
    assert gpugap(capsys, "scenarios", *flag) == (0, listed, "")


@pytest.mark.parametrize("flag", [[], ["--json"]])
def test_scenarios_listing(capsys, flag):
    code, out, _ = gpugap(capsys, "scenarios", *flag)
    assert code == 0
    for name in ("h2d-copy", "default-stream", "grid-sweep", "cublas-warmup", "moe-experts",
                 "prefetch-pipeline"):
        assert name in out
    if flag:
        doc = json.loads(out)
        assert {s["seed"] for s in doc} == {"000", "001", "002", "003", "004"}
        assert all(set(s["variants"]) == {"bad", "good"} for s in doc)
