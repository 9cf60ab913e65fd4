"""`pitcrew demo` stopped by SIGTERM (kill, a service manager, a container's stop) cleans up as Ctrl-C does:
its Prometheus stopped, its temporary folders removed. The real command in a subprocess, its TMPDIR a folder
of the test's own, so what it leaves behind can be seen."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from sandbox.prometheus import PROMETHEUS

ROOT = Path(__file__).resolve().parents[2]
PITCREW = ROOT / ".venv" / "bin" / "pitcrew"
READY_SECONDS = 180  # seeding AWS, three weeks of history and Prometheus: about 25 s on a quiet 2-core machine


def children(pid: int, name: str) -> list[int]:
    """Processes named `name` whose parent is `pid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
            comm, ppid = fields[0].split("(", 1)[1], int(fields[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == pid and comm == name:
            found.append(int(stat.parent.name))
    return found


def running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_sigterm_stops_the_demo_its_prometheus_and_removes_its_temporary_folders(tmp_path: Path) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    output = tmp_path / "demo.log"
    env = {**os.environ, "TMPDIR": str(temporary), "PYTHONUNBUFFERED": "1"}
    env.pop("DATABASE_URL", None)  # the demo keeps its database in a temporary folder of its own
    with output.open("w") as log:
        demo = subprocess.Popen(
            [str(PITCREW), "demo", "--port", str(free_port())], cwd=tmp_path, env=env, stdout=log, stderr=log
        )
    prometheus: list[int] = []
    try:
        deadline = time.monotonic() + READY_SECONDS
        while "Pitcrew sandbox: open" not in output.read_text():
            assert demo.poll() is None, output.read_text()[-3000:]
            assert time.monotonic() < deadline, output.read_text()[-3000:]
            time.sleep(0.5)
        prometheus = children(demo.pid, "prometheus")
        if os.access(PROMETHEUS, os.X_OK):
            assert len(prometheus) == 1, ("the sandbox's Prometheus runs", output.read_text()[-3000:])
        assert {p.name.split("-")[1] for p in temporary.iterdir()} >= {"sandbox"}, list(temporary.iterdir())

        demo.send_signal(signal.SIGTERM)
        assert demo.wait(timeout=60) == 0, output.read_text()[-3000:]
        deadline = time.monotonic() + 10
        while any(running(pid) for pid in prometheus) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in prometheus if running(pid)], "Prometheus stopped with the demo"
        assert list(temporary.iterdir()) == [], "no temporary folder left behind"
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        for pid in prometheus:  # only if the test failed: what it started, by its id
            if running(pid):
                os.kill(pid, signal.SIGKILL)
