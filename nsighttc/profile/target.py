"""What ``nsighttc profile`` (and ``try``) runs: a script, a module, any command, or a distributed launcher
(torchrun / ``python -m torch.distributed.run``) in front of one of those."""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError


@dataclass
class Target:
    argv: list[str]          # what to run inside the launcher (script + args, or module + args)
    module: bool             # True: ``-m module``
    python_program: bool     # False: an arbitrary command, run as is (no launcher, no torch engine)
    label: str
    dist_prefix: list[str] | None = None  # torchrun and its options: every pass runs once per rank

    @property
    def distributed(self) -> bool:
        return self.dist_prefix is not None


# torchrun options that take no value (torch 2.11 torch/distributed/run.py); every other option takes one
_TORCHRUN_FLAGS = {"--standalone", "--run-path", "--run_path", "--virtual-local-rank", "--virtual_local_rank"}
_TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def _torchrun_target(prefix: list[str], args: list[str]) -> Target:
    """``torchrun [OPTIONS] SCRIPT|-m MODULE|--no-python CMD [ARGS]`` -> the per-rank program and the
    launcher prefix every pass is run behind (``rankexec`` starts the profilers inside each rank)."""
    opts: list[str] = []
    no_python = module = False
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        a = args[i]
        if a in ("--no-python", "--no_python"):
            no_python = True
        elif a in ("-m", "--module"):
            module = True
        elif a in _TORCHRUN_FLAGS or "=" in a:
            opts.append(a)
        else:
            opts += args[i:i + 2]
            i += 1
        i += 1
    if i < len(args) and args[i] == "--":
        i += 1
    program = args[i:]
    if not program:
        raise UsageError(f"{' '.join(prefix)}: no training script after its options")
    dist = [*prefix, *opts]
    if no_python:
        if shutil.which(program[0]) is None and not Path(program[0]).exists():
            raise UsageError(f"{program[0]}: command not found")
        return Target(program, False, False, Path(program[0]).name, dist)
    if module:
        return Target(program, True, True, program[0], dist)
    if not Path(program[0]).is_file():
        raise UsageError(f"{program[0]}: script not found")
    return Target(program, False, True, Path(program[0]).stem, dist)


def resolve_target(script: str | None, args: list[str], command: list[str] | None) -> Target:
    if command:
        exe = Path(command[0]).name
        if exe == "torchrun":
            return _torchrun_target([command[0]], command[1:])
        if re.fullmatch(r"python(\d(\.\d+)?)?", exe) and len(command) >= 3 and command[1] == "-m" \
                and command[2] in _TORCHRUN_MODULES:
            return _torchrun_target(command[:3], command[3:])
        if re.fullmatch(r"python(\d(\.\d+)?)?", exe) and len(command) >= 2:
            if command[1] == "-m" and len(command) >= 3:
                return Target([command[2], *command[3:]], True, True, command[2])
            if command[1].endswith(".py"):
                return resolve_target(command[1], command[2:], None)
        if shutil.which(command[0]) is None and not Path(command[0]).exists():
            raise UsageError(f"{command[0]}: command not found")
        return Target(list(command), False, False, exe)
    if not script:
        raise UsageError("nothing to profile: give SCRIPT.py [ARGS] or -- COMMAND [ARGS]")
    p = Path(script)
    if not p.is_file():
        raise UsageError(f"{script}: script not found")
    return Target([str(p), *args], False, True, p.stem)
