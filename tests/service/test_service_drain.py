"""Real server process: SIGTERM drains in-flight work into JSON answers, and slow clients are cut off."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from test_service_server import ROOT, _free_port, _wait_healthy

from placement.io import load_document


def _start(**env: str) -> tuple[subprocess.Popen[bytes], str, int]:
    port = _free_port()
    full = {**os.environ, "PYTHONUNBUFFERED": "1", **{f"PLACEMENT_{k.upper()}": v for k, v in env.items()}}
    full.pop("PLACEMENT_API_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "placement_service", "--port", str(port)], cwd=ROOT, env=full,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    _wait_healthy(url, proc)
    return proc, url, port


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def test_sigterm_answers_in_flight_work_as_json_with_its_request_id() -> None:
    proc, url, _ = _start(max_time_limit_s="30", drain_grace_s="1", max_solver_workers="1")
    request: Any = load_document(Path(ROOT, "instances/library/gangs-M.json"))
    request["policy"].update(time_limit_s=25, workers=1, deterministic=False)
    result: dict[str, Any] = {}

    def call() -> None:
        r = httpx.post(f"{url}/v1/plans", json=request, headers={"x-request-id": "draining-1"}, timeout=60)
        result.update(status=r.status_code, rid=r.headers.get("x-request-id"), body=r.json(),
                      kind=r.headers["content-type"])

    try:
        thread = threading.Thread(target=call)
        thread.start()
        time.sleep(2.0)  # solving by now
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        thread.join(30)
        assert result, "no answer"
        assert time.monotonic() - sent < 15  # the grace (1 s) and a stopped solve's return, not 25 s
        assert result["status"] == 200, result
        assert result["rid"] == "draining-1" and result["kind"].startswith("application/json")
        assert proc.wait(20) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once drained
    finally:
        _stop(proc)


def test_slow_headers_are_cut_off_and_health_still_answers() -> None:
    proc, url, port = _start(header_timeout_s="1", body_timeout_s="1")
    socks = []
    try:
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /v1/plans HTTP/1.1\r\nHost: x\r\n")  # headers never finish
            socks.append(s)
        slow_body = socket.create_connection(("127.0.0.1", port))
        slow_body.sendall(b"POST /v1/plans HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 1000\r\n\r\n{")
        started = time.monotonic()
        assert httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        for s in socks:
            s.settimeout(5)
            assert s.recv(100) == b""  # closed by the server
        assert time.monotonic() - started < 5
        slow_body.settimeout(5)
        answer = slow_body.recv(1000)
        assert answer.startswith(b"HTTP/1.1 408"), answer
    finally:
        for s in socks:
            s.close()
        _stop(proc)
