"""The tests' fork server (tests/zygote.py): its children behave as fresh ``python -m extender.cli``
and ``kubectl-dra`` processes: exit codes, output, environment, working directory, signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import zygote
from tests.shared import REPO

CLI = [sys.executable, "-m", "extender.cli"]

pytestmark = pytest.mark.skipif(not zygote.enabled(), reason="DRA_TEST_ZYGOTE=0")


def both(command: list[str], **kw: object) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    """(code, stdout, stderr) from the zygote, and from a plain subprocess."""
    forked = zygote.popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    assert isinstance(forked, zygote.ZygoteProcess)
    out, err = forked.communicate(timeout=120)
    plain = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, **kw)  # type: ignore[call-overload]
    return (forked.returncode or 0, out, err), (plain.returncode, plain.stdout, plain.stderr)


def test_exit_code_stdout_and_stderr_are_a_fresh_process_s() -> None:
    forked, plain = both([*CLI, "--version"])
    assert forked == plain and forked[0] == 0 and forked[1].startswith("dra-extender ")
    forked, plain = both([*CLI, "simulate", "examples", "--pod", "default/nope"], cwd=REPO)
    assert forked == plain and forked[0] == 2 and "default/nope" in forked[2]


def test_the_working_directory_and_environment_are_the_request_s(tmp_path: Path) -> None:
    fits = zygote.run(
        [*CLI, "simulate", "examples", "--pod", "default/web"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (fits.returncode, "no claims to allocate" in fits.stdout) == (0, True), fits.stderr
    elsewhere = zygote.run(
        [*CLI, "simulate", "examples"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert elsewhere.returncode == 2 and "examples" in elsewhere.stderr
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    env = {**os.environ, "KUBECONFIG": str(config)}
    kubectl_dra = [str(zygote.KUBECTL_DRA), "--source", "objects", "capacity"]
    answer = zygote.run(kubectl_dra, env=env, capture_output=True, text=True, timeout=120)
    assert answer.returncode == 2 and "port=9" in answer.stderr, answer.stderr
    assert os.environ.get("KUBECONFIG") != str(config)  # the test's own environment is untouched


def test_a_server_is_stopped_thawed_terminated_and_killed_by_its_pid(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"

    def start() -> zygote.Process:
        with log.open("ab") as handle:
            process = zygote.popen(
                [*CLI, "serve", "--state", str(REPO / "examples"), "--port", "0", "--ops-port", "0"],
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        assert isinstance(process, zygote.ZygoteProcess)
        deadline = time.monotonic() + 60
        while "verbs and debug views on" not in log.read_text() and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            time.sleep(0.05)
        return process

    def state(pid: int) -> str:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]

    process = start()
    assert os.getsid(process.pid) == process.pid  # start_new_session, as subprocess's
    fds = [os.readlink(f"/proc/{process.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{process.pid}/fd")]
    assert not [f for f in fds if "dra-zygote-" in f], fds  # nothing of the zygote's is left open
    process.send_signal(signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while state(process.pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert state(process.pid) == "T"
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.2)
    process.send_signal(signal.SIGCONT)
    process.terminate()
    assert process.wait(timeout=30) == 143  # serve's status after SIGTERM (serve_command.py)

    process = start()
    process.kill()
    assert process.wait(timeout=30) == -signal.SIGKILL
    assert process.poll() == -signal.SIGKILL
    process.kill()  # after its end: nothing happens, as with Popen


def test_the_escape_hatch_and_other_commands_use_plain_subprocesses(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = zygote.popen(["true"])
    assert isinstance(plain, subprocess.Popen) and plain.wait(timeout=30) == 0
    monkeypatch.setenv("DRA_TEST_ZYGOTE", "0")
    fresh = zygote.popen([*CLI, "--version"], stdout=subprocess.DEVNULL)
    assert isinstance(fresh, subprocess.Popen) and fresh.wait(timeout=120) == 0
