"""`dra-extender serve` refuses bad command lines with a clear error and no traceback (issue 10)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from extender.cli import _parser, main
from extender.serve_command import ops_host
from tests.shared import REPO

EXAMPLES = str(REPO / "examples")

# (name, arguments, what the error says)
BAD: list[tuple[str, list[str], str]] = [
    ("port out of range", ["--port", "99999"], "a port is 0..65535"),
    ("zero budget", ["--filter-budget", "0"], "positive number of seconds"),
    ("negative node timeout", ["--node-timeout", "-1"], "positive number of seconds"),
    ("zero body limit", ["--max-body-bytes", "0"], "greater than 0"),
    ("zero concurrency", ["--max-concurrency", "0"], "greater than 0"),
    ("zero api timeout", ["--api-timeout", "0"], "positive number of seconds"),
    ("prefix with a space", ["--prefix", "/my scheduler"], "not a URL path: '/my scheduler'"),
    ("prefix with a query", ["--prefix", "/s?x=1"], "not a URL path"),
    ("prefix with an empty segment", ["--prefix", "/a//b"], "an empty segment"),
    ("prefix with an escape the routes never match", ["--prefix", "/dra%41"], "not a URL path"),
    ("client CA without a certificate", ["--tls-client-ca-file", "{ca}"], "without a server certificate"),
    ("certificate without key", ["--tls-cert-file", "{cert}"], "go together"),
    (
        "missing certificate file",
        ["--tls-cert-file", "{missing}", "--tls-key-file", "{cert}"],
        "no such file",
    ),
    (
        "client name without CA",
        ["--tls-cert-file", "{cert}", "--tls-key-file", "{cert}", "--tls-client-name", "x"],
        "needs --tls-client-ca-file",
    ),
    ("state with cluster flags", ["--state", "{cert}", "--kubeconfig", "{cert}"], "cannot be combined"),
    ("missing kubeconfig", ["--kubeconfig", "{missing}"], "no such file"),
    ("unreadable kubeconfig content", ["--kubeconfig", "{cert}"], "kubeconfig {cert}: "),
    (
        "leader election timings out of order",
        ["--kubeconfig", "{cert}", "--leader-elect", "--leader-elect-renew-deadline", "20"],
        "retry-period < --leader-elect-renew-deadline",
    ),
]


@pytest.mark.parametrize(("arguments", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_serve_flags(
    arguments: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {"ca": tmp_path / "ca.pem", "cert": tmp_path / "cert.pem", "missing": tmp_path / "missing.pem"}
    for name in ("ca", "cert"):
        files[name].write_text("x")
    argv = ["serve", *(a.format(**{k: str(v) for k, v in files.items()}) for a in arguments)]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert message.format(**{k: str(v) for k, v in files.items()}) in err
    assert "Traceback" not in err


def test_a_host_that_is_no_address_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--state", EXAMPLES, "--host", "999.1.1.1"]) == 2
    assert "error: --host 999.1.1.1: not an address to listen on" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--port", "--ops-port"])
def test_a_port_in_use_names_the_flag_to_change(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Two instances on one machine: the second says which port to change (the ops port, 8889
    by default, is the one a second --port forgets)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        other = "--ops-port" if flag == "--port" else "--port"
        assert main(["serve", "--state", EXAMPLES, flag, port, other, "0"]) == 2
    err = capsys.readouterr().err
    assert (
        f"error: {flag} {port}: 127.0.0.1:{port} is already in use" in err and f"choose another {flag}" in err
    )


def test_embedded_mode_keeps_its_probes_local() -> None:
    """In --state mode the ops listener binds 127.0.0.1 unless --ops-host says otherwise."""
    args = _parser().parse_args(["serve", "--state", EXAMPLES])
    assert ops_host(args) == "127.0.0.1"
    assert ops_host(_parser().parse_args(["serve", "--kubeconfig", "k"])) == "0.0.0.0"
    assert ops_host(_parser().parse_args(["serve", "--state", "x", "--ops-host", "0.0.0.0"])) == "0.0.0.0"


@pytest.mark.parametrize(
    ("given", "routes"),
    [
        ("noslash", "/noslash"),
        ("/scheduler/", "/scheduler"),
        ("/", ""),
        ("", ""),
        ("a/b", "/a/b"),
    ],
)
def test_the_prefix_is_normalized_once_for_routes_and_logs(given: str, routes: str) -> None:
    assert _parser().parse_args(["serve", "--prefix", given]).prefix == routes


def test_make_room_flags_become_the_planners_rules() -> None:
    from extender.scheduling.config import DEFAULT_CONTROLLER_KINDS, Rules
    from extender.serve_command import serve_config

    default = serve_config(_parser().parse_args(["serve"])).engine
    assert default.make_room.min_age == 300.0 and default.make_room.max_moves == Rules().max_moves
    assert default.make_room.controller_kinds == DEFAULT_CONTROLLER_KINDS
    argv = [
        "serve",
        *("--make-room-max-priority", "100", "--make-room-min-age", "0", "--make-room-max-moves", "5"),
        *("--make-room-controller-kind", "LeaderWorkerSet", "--make-room-hint-interval", "0"),
    ]
    engine = serve_config(_parser().parse_args(argv)).engine
    assert engine.make_room.max_priority == 100 and engine.make_room.min_age == 0.0
    assert engine.make_room.max_moves == 5 and engine.make_room_hint_seconds == 0.0
    assert engine.make_room.controller_kinds == DEFAULT_CONTROLLER_KINDS | {"LeaderWorkerSet"}


def test_the_score_tie_break_is_off_unless_asked() -> None:
    from extender.serve_command import serve_config

    assert serve_config(_parser().parse_args(["serve"])).engine.score_tie_break == "none"
    argv = ["serve", "--score-tie-break", "fragmentation"]
    assert serve_config(_parser().parse_args(argv)).engine.score_tie_break == "fragmentation"
