"""The batch guide (docs/guide/clusters.md, "Batch runs on SLURM, step by step") says what the
code does: its cluster file is valid and makes the job script it describes, the error line it
shows for a malformed file is the one the CLI prints, every command it shows parses with the
CLI it names, and the driver script it shows is the repository's. Submitting that driver for
real is in tests/cluster/test_slurm.py.
"""

import os
import re
import shlex
import subprocess

import paths
import pytest
import zarr

from ppa_dask.app.cli import build_parser, main
from ppa_dask.cluster import job_script, read_cluster_config
from ppa_dask.cluster.files import walltime_seconds

# runs the batch guide's commands, clusters included
pytestmark = [pytest.mark.slow, pytest.mark.cluster]


ROOT = str(paths.ROOT)
GUIDE = os.path.join(ROOT, "docs", "guide", "clusters.md")
DRIVER = os.path.join(ROOT, "cluster", "slurm-driver.sh")


def _section():
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    start = text.index("## Batch runs on SLURM, step by step")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def _blocks(language):
    """The fenced code blocks of the section in ``language``."""
    return re.findall(rf"^```{language}\n(.*?)^```", _section(), re.M | re.S)


def _cluster_file():
    (block,) = [b for b in _blocks("yaml") if b.startswith("# my-slurm.yaml")]
    return block


def test_the_guides_cluster_file_is_valid_and_makes_the_script_it_describes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # its log_directory is relative
    path = tmp_path / "my-slurm.yaml"
    path.write_text(_cluster_file())
    config = read_cluster_config(str(path))
    assert config["type"] == "slurm" and config["scale"] == {"jobs": 2}
    assert (config["max_job_restarts"], config["worker_timeout"]) == (3, 1800)
    local = {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}
    script = job_script(str(path), {"scheduler_options": local})
    for line in [
        "#SBATCH -p compute",
        "#SBATCH -A my-project",
        "#SBATCH -t 02:00:00",
        "module load python/3.12",
        "source ~/venvs/ppa-dask/bin/activate",
        "--lifetime 105m --lifetime-stagger 5m",
    ]:
        assert line in script, line
    # the logs where the guide says: log_directory/<job_name>-<job id>.err and .out
    assert "#SBATCH -e logs/ppa-dask-%J.err" in script
    assert "#SBATCH -o logs/ppa-dask-%J.out" in script
    # the workers leave 10 to 20 minutes before the walltime, as its comment says (distributed
    # draws each worker's lifetime in lifetime +- stagger)
    options = config["options"]
    args = options["worker_extra_args"]
    lifetime = int(args[args.index("--lifetime") + 1].rstrip("m")) * 60
    stagger = int(args[args.index("--lifetime-stagger") + 1].rstrip("m")) * 60
    walltime = walltime_seconds(options["walltime"])
    assert "leave 10 to 20 minutes before the walltime" in _cluster_file()
    assert (walltime - lifetime - stagger, walltime - lifetime + stagger) == (10 * 60, 20 * 60)


def test_the_guides_line_for_an_unquoted_walltime_is_the_clis(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    data = zarr.create_array(store="x.zarr", shape=(100, 3), chunks=(50, 3), dtype="f8")
    data[...] = 1.0
    (row,) = [r for r in _section().splitlines() if r.startswith("| a malformed cluster file")]
    shown = re.search(r"`(ppa-dask: error: [^`]*)`", row).group(1)
    # the guide's file with the walltime unquoted as its comment warns: 2:00:00 is read as
    # 7200 (a YAML 1.1 base-60 integer), 02:00:00 would stay a string
    assert "YAML reads an unquoted 2:00:00 as a number" in _cluster_file()
    text = _cluster_file().replace('walltime: "02:00:00"', "walltime: 2:00:00")
    assert "walltime: 2:00:00" in text
    (tmp_path / "my-slurm.yaml").write_text(text)
    assert main(["fit", "x.zarr", "m.zarr", "--cluster", "my-slurm.yaml"]) == 2
    assert capsys.readouterr().err.strip() == shown
    assert not (tmp_path / "m.zarr").exists()


def _commands():
    """Every command line of the section's bash blocks, split as the shell would."""
    lines = []
    for block in _blocks("bash"):
        for line in block.splitlines():
            if line.strip():
                lines.append(shlex.split(line, comments=True))
    return lines


def _check_ppa_dask_args(args):
    parser = build_parser()
    try:
        parser.parse_args(args)
    except SystemExit as exc:  # argparse's exit: a command or option the CLI lacks
        pytest.fail(f"the guide's 'ppa-dask {' '.join(args)}' does not parse (exit {exc.code})")


def test_every_command_the_guide_shows_exists(capsys):
    seen = set()
    for words in _commands():
        program = words[0]
        seen.add(program)
        if program == "ppa-dask":
            _check_ppa_dask_args(words[1:])
        elif program == "sbatch":
            # sbatch [its options] cluster/slurm-driver.sh PPA-DASK ARGS
            (at,) = [i for i, w in enumerate(words) if w.endswith("slurm-driver.sh")]
            assert os.path.join(ROOT, words[at]) == DRIVER
            assert all(w.startswith("--") and "=" in w for w in words[1:at]), words
            _check_ppa_dask_args(words[at + 1 :])
        elif program == "python" and words[1] == "-c":
            namespace = {}
            exec(words[2].split(";")[0], namespace)  # the import only: it exists
            assert callable(namespace["job_script"])
        else:
            assert program in {"python3", "source", "pip", "squeue"}, words
    assert {"sbatch", "python"} <= seen
    # the driver's own usage lines are commands of the same kind
    with open(DRIVER) as f:
        usage = [line[1:].strip() for line in f if line.startswith("#   sbatch ")]
    assert len(usage) >= 2
    for line in usage:
        words = shlex.split(line)
        _check_ppa_dask_args(words[words.index("cluster/slurm-driver.sh") + 1 :])
    capsys.readouterr()


def test_the_driver_script_shown_is_the_repositorys():
    (include,) = re.findall(r"^```\{literalinclude\} (\S+)$", _section(), re.M)
    assert os.path.normpath(os.path.join(os.path.dirname(GUIDE), include)) == DRIVER
    assert subprocess.run(["bash", "-n", DRIVER], timeout=30).returncode == 0
    with open(DRIVER) as f:
        script = f.read()
    # what the guide says of it: its log file, one core, and ppa-dask as the job's process
    assert "#SBATCH --output=ppa-dask-driver-%j.out" in script
    assert "#SBATCH --cpus-per-task=1" in script
    assert re.search(r'^exec ppa-dask "\$@"$', script, re.M)


def test_the_fault_tables_lines_are_the_ones_the_code_prints():
    """Each line the table quotes, its variable parts (job ids, names, paths, numbers) aside,
    is a line the package makes: its fixed pieces occur in order in one of its messages."""
    import ast
    import inspect

    from ppa_dask.app import cli, faults
    from ppa_dask.cluster import batchjobs, client, files, jobqueue, probe

    # the text of every string literal of those modules (f-strings' fixed parts included)
    texts = []
    for module in (batchjobs, cli, client, files, jobqueue, probe, faults):
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append(node.value)
    source = "\n".join(texts)
    table = [r for r in _section().splitlines() if r.startswith("| ") and "`" in r]
    quoted = [q for row in table for q in re.findall(r"`([^`]*(?:job \d+|ppa-dask: )[^`]*)`", row)]
    assert len(quoted) >= 8, quoted
    for line in quoted:
        for prefix in ("ppa-dask: error: my-slurm.yaml: ", "ppa-dask: error: ", "ppa-dask: "):
            line = line.removeprefix(prefix)
        if line.startswith("options."):
            continue  # the malformed-file line: compared whole with the CLI's above
        line = line.replace(" while fitting", ": ")  # what the command was doing (faults._doing)
        line = re.sub(r"(log \S+): [^;]*", r"\1", line)  # the last lines of a job's log
        # the variable parts: numbers, ids, names in parentheses, paths, quoted names, job states
        # (and ': ', where a message is put together from several literals)
        pieces = re.split(
            r"\d+(?:\.\d+)?|\([^()]*\)|\S*/\S*|'[^']*'|\.\.\.|: | = |\b[A-Z][A-Z_]{3,}\b", line
        )
        pieces = [p.strip(" :;,.") for p in pieces]
        pieces = [p for p in pieces if len(p) >= 6]
        assert pieces, line
        for piece in pieces:
            assert piece in source, f"{piece!r} (from the guide's {line!r}) is in no message"
