"""Issue 53: `--help` that cannot drift from the tool: every variant `try` knows is listed from the launcher's own
table, the usage lines name PROGRAM, and the command list shows each description whole."""
from __future__ import annotations

from nsighttc.runtime.variants import VARIANTS


def test_try_help_lists_every_variant_from_the_launchers_table(run_cli):
    code, out, _ = run_cli("try", "--help")
    assert code == 0
    for name in VARIANTS:
        if name != "baseline":
            assert name in out, name
    assert "channels_last" not in out.replace("torch.channels_last", "")  # the name it accepts, not another


def test_usage_lines_name_the_program(run_cli):
    for cmd in ("profile", "try"):
        code, out, _ = run_cli(cmd, "--help")
        assert code == 0 and f"Usage: nsighttc {cmd} [OPTIONS] PROGRAM [ARGS]..." in out


def test_command_descriptions_fit_whole(run_cli):
    code, out, _ = run_cli("--help")
    commands = out.split("Commands:", 1)[1].strip().splitlines()
    assert len(commands) == 8 and not [c for c in commands if c.rstrip().endswith("...")]
