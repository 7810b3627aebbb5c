"""Resolve the JVM jars with the Ivy that ships inside PySpark; run by `make setup`.

    .venv/bin/python jvm/resolve.py [SET ...] [--out DIR] [--update-lock]

Each SET (`kafka`, `kafka-mirror`, `spark-kafka`; all by default) is described by
`jvm/SET.ivy.xml`. Ivy resolves it from Maven Central (`jvm/ivysettings.xml`), checking every
download against the repository's `.sha1`, and retrieves the jars into a staging directory. The
staged files must then be exactly the ones `jvm/jars.lock` pins for the set, with the same
SHA-1s, or nothing is changed and the run fails. Only then does the staging directory replace
`DIR/SET` (default `.cache/jars/SET`) and get its `.resolved` stamp, so a working set is in place
at all times.

`jvm/jars.lock` is in `sha1sum` format (`cd .cache/jars && sha1sum -c ../../jvm/jars.lock`).
`--update-lock` rewrites it from a fresh resolution after checking each file's SHA-1 against the
`.sha1` that Maven Central serves next to it.

Needs Java (JAVA_HOME/bin/java if JAVA_HOME is set, else `java` on PATH, as Spark picks it) and
standard-library Python only.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

JVM = Path(__file__).resolve().parent
ROOT = JVM.parent
SETS = ("kafka", "kafka-mirror", "spark-kafka")
LOCK = JVM / "jars.lock"
SETTINGS = JVM / "ivysettings.xml"
RETRIEVE = "[artifact]-[revision](-[classifier]).[ext]"


class ResolveError(Exception):
    pass


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not os.access(found, os.X_OK):
        where = f"JAVA_HOME={home} has no bin/java" if home else "no java on PATH"
        raise ResolveError(f"{where}: run `make setup`, which checks for Java 17+ first")
    return found


def ivy_jar() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise ResolveError("pyspark is not installed in this Python: run it with .venv/bin/python")
    jars = sorted(Path(next(iter(spec.submodule_search_locations)), "jars").glob("ivy-*.jar"))
    if len(jars) != 1:
        raise ResolveError(f"expected one ivy-*.jar inside PySpark, found {jars}")
    return jars[0]


def sha1(path: Path) -> str:
    digest = hashlib.sha1(usedforsecurity=False)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_lock() -> dict[str, dict[str, str]]:
    """{set: {file name: sha1}} from jars.lock."""
    pinned: dict[str, dict[str, str]] = {name: {} for name in SETS}
    for number, line in enumerate(LOCK.read_text().splitlines(), 1):
        digest, _, entry = line.partition("  ")
        set_name, _, file_name = entry.partition("/")
        if len(digest) != 40 or set_name not in pinned or not file_name:
            raise ResolveError(f"{LOCK}:{number}: expected '<sha1>  <set>/<file>', got {line!r}")
        pinned[set_name][file_name] = digest
    return pinned


def ivy_retrieve(set_name: str, staging: Path, cache: Path) -> Path:
    """Resolve and retrieve SET into `staging`; return Ivy's resolution report."""
    command = [
        java(),
        "-jar",
        str(ivy_jar()),
        "-settings",
        str(SETTINGS),
        "-ivy",
        str(JVM / f"{set_name}.ivy.xml"),
        "-cache",
        str(cache),
        "-confs",
        "default",
        "-types",
        "jar",
        "bundle",
        "-retrieve",
        str(staging / RETRIEVE),
        "-warn",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ResolveError(
            f"Ivy failed to resolve {set_name} (exit {done.returncode}):\n"
            + (done.stdout + done.stderr).strip()[-4000:]
        )
    return cache / f"dev.streamsim-{set_name}-default.xml"


def check_against_lock(set_name: str, staging: Path, pinned: dict[str, str]) -> list[str]:
    """Every difference between the staged files and the lock, one line each."""
    got = {p.name: sha1(p) for p in staging.iterdir() if p.is_file()}
    problems = [
        f"not in jars.lock: {set_name}/{n} ({got[n]})" for n in sorted(set(got) - set(pinned))
    ]
    problems += [
        f"pinned but not retrieved: {set_name}/{n}" for n in sorted(set(pinned) - set(got))
    ]
    problems += [
        f"SHA-1 mismatch: {set_name}/{n} is {got[n]}, jars.lock pins {pinned[n]}"
        for n in sorted(set(got) & set(pinned))
        if got[n] != pinned[n]
    ]
    return problems


def repository_sha1s(report: Path) -> dict[str, str]:
    """{file name: the .sha1 Maven Central serves} for every artifact in Ivy's report."""
    served = {}
    for artifact in ET.parse(report).iter("artifact"):
        origin = artifact.find("origin-location")
        if origin is None:
            continue
        url = origin.attrib["location"]
        with urllib.request.urlopen(url + ".sha1", timeout=60) as answer:
            served[url.rsplit("/", 1)[1]] = answer.read().decode().split()[0].lower()
    return served


def swap_in(staging: Path, target: Path) -> None:
    """Replace `target` by `staging` with two renames, then stamp it."""
    (staging / ".resolved").touch()
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
    if target.exists():
        target.rename(old / target.name)
    staging.rename(target)
    shutil.rmtree(old)


def resolve_set(
    set_name: str, out: Path, cache: Path, pinned: dict[str, dict[str, str]], update_lock: bool
) -> None:
    started = time.monotonic()
    target = out / set_name
    staging = Path(tempfile.mkdtemp(prefix=f".{set_name}.staging.", dir=out))
    try:
        staging.chmod(0o755)
        print(f"resolving {set_name} jars with {ivy_jar().name} from Maven Central", flush=True)
        report = ivy_retrieve(set_name, staging, cache)
        if update_lock:
            served = repository_sha1s(report)
            pinned[set_name] = {}
            for path in sorted(staging.iterdir()):
                digest = sha1(path)
                if served.get(path.name) != digest:
                    raise ResolveError(
                        f"{path.name}: SHA-1 {digest}, Maven Central's .sha1 says "
                        f"{served.get(path.name)}"
                    )
                pinned[set_name][path.name] = digest
        problems = check_against_lock(set_name, staging, pinned[set_name])
        if problems:
            raise ResolveError(
                f"{set_name}: the retrieved jars do not match {LOCK.relative_to(ROOT)}; "
                f"{target} is left as it was\n  " + "\n  ".join(problems)
            )
        swap_in(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(
        f"{set_name}: {len(pinned[set_name])} jars, SHA-1s match jars.lock, in {target} "
        f"({time.monotonic() - started:.0f} s)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="*", metavar="SET", help=f"any of {', '.join(SETS)}")
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "jars")
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "ivy")
    parser.add_argument("--update-lock", action="store_true")
    args = parser.parse_args(argv)
    unknown = set(args.sets) - set(SETS)
    if unknown:
        parser.error(f"unknown set(s) {sorted(unknown)}; known: {', '.join(SETS)}")
    try:
        pinned = read_lock() if LOCK.exists() else {name: {} for name in SETS}
        args.out.mkdir(parents=True, exist_ok=True)
        # One resolution at a time per output directory (Ivy's cache is not safe to share).
        lock = (args.out / ".resolve.lock").open("w")
        fcntl.flock(lock, fcntl.LOCK_EX)
        for set_name in args.sets or SETS:
            resolve_set(set_name, args.out, args.cache.resolve(), pinned, args.update_lock)
        if args.update_lock:
            lines = [f"{d}  {s}/{n}" for s in SETS for n, d in sorted(pinned[s].items())]
            LOCK.write_text("\n".join(lines) + "\n")
            print(f"wrote {LOCK.relative_to(ROOT)}: {len(lines)} jars")
    except ResolveError as error:
        print(f"jvm/resolve.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
