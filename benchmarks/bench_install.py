"""What an install of adaptlab costs: packages, site-packages size and seconds, on a fresh venv.

    python -m benchmarks.bench_install                          # the core: pip install adaptlab
    python -m benchmarks.bench_install --target all             # pip install 'adaptlab[all]'
    python -m benchmarks.bench_install --target core --target test --compare
    python -m benchmarks.bench_install --reference 225,3500     # ratios against known figures

Each target gets its own new venv (``python -m venv``, with the pip it ships), in which the
benchmark runs what the README says: ``pip install torch==2.13.0`` first (the CPU wheel; the
project's ``torch`` range is then satisfied and pip pulls no other build), then
``pip install <clone>[extra]`` (``--editable``: ``pip install -e``). It prints per target:

- packages: the distributions in the venv's site-packages (``*.dist-info``), pip included;
- size: the bytes of every file under site-packages, bytecode compiled by pip included (MB = 10^6 B);
- seconds: wall time of the torch step and of the adaptlab step, and the CPU seconds (user +
  system) of both, which depend less on what else runs on a shared machine.

``--compare`` gives each target's ratios to the ``test`` target (measured too), ``--reference
SECONDS,MB`` its ratios to figures measured before (the test extra's, say) without installing it
again. pip reads its configured indexes and its cache as usual: the figures are for a warm
cache when the same packages were installed before on this machine, and say nothing about
download speed. The environment's ``PYTHONPATH`` is dropped so the venv sees only its own packages.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"
TARGETS = ("core", "colbert", "flag", "fast", "trackers", "s3", "all", "test")


@dataclass(frozen=True)
class Install:
    """What installing one target cost."""

    target: str
    packages: int
    megabytes: float
    torch_seconds: float
    seconds: float
    cpu_seconds: float

    @property
    def total_seconds(self) -> float:
        return self.torch_seconds + self.seconds


def site_packages(venv: Path) -> Path:
    """The venv's one ``lib/pythonX.Y/site-packages`` folder."""
    found = sorted(venv.glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise SystemExit(f"{venv}: expected one lib/python*/site-packages folder, found {len(found)}")
    return found[0]


def count_packages(site: Path) -> int:
    """The installed distributions: one ``*.dist-info`` folder each (an editable install too)."""
    return sum(1 for p in site.iterdir() if p.is_dir() and p.name.endswith(".dist-info"))


def tree_megabytes(folder: Path) -> float:
    """The size in MB (10^6 bytes) of every regular file under ``folder``, links not followed."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                total += os.stat(path).st_size
    return total / 1e6


def requirement(target: str, root: Path, editable: bool) -> list[str]:
    """The pip arguments that install ``target`` (``core`` or an extra) from the clone at ``root``."""
    spec = str(root) if target == "core" else f"{root}[{target}]"
    return ["-e", spec] if editable else [spec]


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _timed(cmd: list[str], env: dict[str, str], log: Path) -> tuple[float, float]:
    """Run ``cmd`` (output to ``log``), return (wall seconds, CPU seconds of it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        done = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}; see {log}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(target: str, workdir: Path, root: Path = _ROOT, editable: bool = False) -> Install:
    """Install ``target`` into a new venv under ``workdir`` and measure it."""
    venv = workdir / f"venv-{target}"
    log = workdir / f"{target}.log"
    env = _clean_env()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install"]
    torch_wall, torch_cpu = _timed([*pip, TORCH], env, log)
    wall, cpu = _timed([*pip, *requirement(target, root, editable)], env, log)
    site = site_packages(venv)
    return Install(
        target,
        count_packages(site),
        round(tree_megabytes(site), 1),
        round(torch_wall, 1),
        round(wall, 1),
        round(torch_cpu + cpu, 1),
    )


def ratios(got: Install, seconds: float, megabytes: float) -> dict[str, float]:
    """``got``'s total seconds and size as fractions of a reference's."""
    return {"seconds": round(got.total_seconds / seconds, 3), "size": round(got.megabytes / megabytes, 3)}


def parse_reference(text: str) -> tuple[float, float]:
    """``"225,3500"`` -> (225.0, 3500.0); anything else exits with one line."""
    try:
        seconds, megabytes = (float(x) for x in text.split(","))
    except ValueError:
        seconds = megabytes = -1.0
    if seconds <= 0 or megabytes <= 0:
        raise SystemExit(f"--reference {text!r}: expected SECONDS,MB, two positive numbers (e.g. 225,3500)")
    return seconds, megabytes


def describe(got: Install) -> str:
    """One line per target."""
    return (
        f"{got.target:>8}: {got.packages} packages, {got.megabytes:,.0f} MB in site-packages, "
        f"{got.total_seconds:.0f} s ({got.torch_seconds:.0f} s torch + {got.seconds:.0f} s adaptlab; "
        f"{got.cpu_seconds:.0f} CPU s)"
    )


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument(
        "--target",
        action="append",
        choices=TARGETS,
        help="what to install: core (the default) or an extra; repeat for several",
    )
    p.add_argument("--compare", action="store_true", help="also measure the test extra and print ratios to it")
    p.add_argument("--reference", metavar="SECONDS,MB", help="print ratios to these figures (the test extra's)")
    p.add_argument("--editable", action="store_true", help="pip install -e (as the README's commands do)")
    p.add_argument("--keep", metavar="DIR", help="make the venvs under DIR and keep them (default: a temporary folder)")
    p.add_argument("--json", action="store_true", help="print one JSON line per target too")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    targets = list(dict.fromkeys(args.target or ["core"]))
    if args.compare and "test" not in targets:
        targets.append("test")
    reference = parse_reference(args.reference) if args.reference else None
    workdir = Path(args.keep or tempfile.mkdtemp(prefix="bench-install-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}; "
        f"venvs in {workdir}",
        flush=True,
    )
    results: dict[str, Install] = {}
    try:
        for target in targets:
            results[target] = got = measure(target, workdir, editable=args.editable)
            print(describe(got), flush=True)
            if args.json:
                print("RESULT " + json.dumps(asdict(got)), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    for name, got in results.items():
        if "test" in results and name != "test":
            base = results["test"]
            print(f"{name} / test: {ratios(got, base.total_seconds, base.megabytes)}")
        if reference is not None:
            print(f"{name} / reference {reference[0]:g} s, {reference[1]:g} MB: {ratios(got, *reference)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
