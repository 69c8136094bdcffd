"""The command line's front door: ``--version``, secrets masked in ``--print-config`` and in
settings errors, the log formats, and HTTPS served from a certificate in the settings."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from certificates import certificates
from cryptography import x509

from segmentstore.cli import main
from segmentstore.cli.logs import JsonFormatter
from segmentstore.client import AsyncSegmentStoreClient, RetryPolicy, SegmentStoreClient
from segmentstore.harness.served_store import ServedStore
from segmentstore.version import VERSION

EXPIRY = 'segmentstore_tls_certificate_expiry_timestamp_seconds{certificate="api"}'
TOKEN = "tok-3f9a1c77e2"
S3_SECRET = "sk-b8d40e1a55"
NATS_PASSWORD = "pw-77c1e0d9"
SECRETS_ENV = {
    "SEGMENTSTORE_AUTH__TOKENS": json.dumps({TOKEN: "admin", "tok-reader-0042": "read"}),
    "SEGMENTSTORE_TIER2__OPTIONS": json.dumps(
        {"endpoint_url": "http://127.0.0.1:1", "access_key": "ak", "secret_key": S3_SECRET}
    ),
    "SEGMENTSTORE_TIER1__JETSTREAM__PASSWORD": NATS_PASSWORD,
}


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == f"segmentstore {VERSION}"
    assert VERSION and VERSION[0].isdigit()


def test_print_config_masks_tokens_and_keys(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS_ENV.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", "--print-config", "--log-format", "json"]) == 0
    out = capsys.readouterr().out
    for secret in (TOKEN, "tok-reader-0042", S3_SECRET, NATS_PASSWORD):
        assert secret not in out
    printed = json.loads(out)
    assert sorted(printed["auth"]["tokens"].values()) == ["admin", "read"]  # two, both masked
    assert printed["tier2"]["options"]["secret_key"] == "**********"
    assert printed["tier2"]["options"]["access_key"] == "ak"
    assert printed["tier1"]["jetstream"]["password"] == "**********"
    assert printed["log"] == {"level": "info", "format": "json"}


def test_print_config_shows_what_an_empty_tier2_uri_stands_for(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["serve", "--print-config", "--data-dir", str(tmp_path / "data")]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["tier2"]["uri"] == (tmp_path / "data" / "tier2").resolve().as_uri()
    assert main(["serve", "--print-config", "--tier2", "s3://bucket/prefix"]) == 0
    assert json.loads(capsys.readouterr().out)["tier2"]["uri"] == "s3://bucket/prefix"


def test_a_settings_error_never_shows_a_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEGMENTSTORE_AUTH__TOKENS", json.dumps({TOKEN: "root"}))
    assert main(["serve", "--print-config"]) == 2
    err = capsys.readouterr().err
    assert "auth.tokens" in err and "'read', 'write' or 'admin'" in err
    assert TOKEN not in err


def test_json_log_lines_are_one_object_each() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "x.y", logging.ERROR, __file__, 1, "a %s", ("b",), sys.exc_info()
        )
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert (entry["level"], entry["logger"], entry["message"]) == ("error", "x.y", "a b")
    assert "ValueError: boom" in entry["exception"]
    assert entry["time"].endswith("+00:00")


def test_cli_logging_leaves_out_a_line_per_http_request() -> None:
    """httpx logs each request it makes at INFO; a command's log keeps its own INFO lines."""
    script = (
        "import logging; from segmentstore.cli.logs import configure_logging; configure_logging();"
        "logging.getLogger('httpx').info('HTTP Request: GET /v1/cluster');"
        "logging.getLogger('httpx').warning('retrying');"
        "logging.getLogger('segmentstore.x').info('own line')"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "own line" in completed.stderr and "retrying" in completed.stderr
    assert "HTTP Request" not in completed.stderr


async def _async_client_over_tls(url: str, ca_file: Path) -> None:
    async with AsyncSegmentStoreClient(url, verify=str(ca_file)) as client:
        assert (await client.append("tls/segment", b"!")).offset == 8
    fast = RetryPolicy(max_attempts=1)
    async with AsyncSegmentStoreClient(url, verify=True, retry=fast) as stranger:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await stranger.get_info("tls/segment")


@pytest.mark.integration
def test_the_client_talks_https_to_the_server(tmp_path: Path) -> None:
    ca_file, cert_file, key_file = certificates(tmp_path)
    served = ServedStore(
        tmp_path / "data",
        tmp_path / "serve.log",
        settings={"SEGMENTSTORE_API__TLS_KEY_FILE": str(key_file)},
        args=["--tls-cert-file", str(cert_file), "--log-format", "json"],
        environ=os.environ,
    )
    try:
        served.wait_ready(60, verify=ssl.create_default_context(cafile=str(ca_file)))
        assert served.url.startswith("https://")
        with SegmentStoreClient(served.url, verify=str(ca_file)) as client:
            client.create_segment("tls/segment")
            assert client.append("tls/segment", b"over tls").offset == 0
            assert bytes(client.read("tls/segment", 0).data) == b"over tls"
        # Without the CA the server is a stranger: the certificate check fails.
        fast = RetryPolicy(max_attempts=1)
        with (
            SegmentStoreClient(served.url, verify=True, retry=fast) as stranger,
            pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
        ):
            stranger.get_info("tls/segment")
        # The asyncio client (its own HTTP/1.1 transport) takes the same verify option with the
        # same meaning.
        asyncio.run(_async_client_over_tls(served.url, ca_file))
        # Plain HTTP to the HTTPS port is not served.
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{served.port}/healthz", timeout=10)
        # The certificate's expiry is a metric, for the alert that asks for a new one in time.
        trusted = ssl.create_default_context(cafile=str(ca_file))
        metrics = httpx.get(f"{served.url}/metrics", verify=trusted, timeout=10).text
        (line,) = [m for m in metrics.splitlines() if m.startswith(EXPIRY)]
        expires = x509.load_pem_x509_certificate(cert_file.read_bytes()).not_valid_after_utc
        assert float(line.split()[-1]) == expires.timestamp()
    finally:
        served.stop()
    # The service's log, uvicorn's lines included, is one JSON object a line.
    lines = [line for line in served.log().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines[1:]]  # the first may be cut by log()'s tail
    assert any(e["logger"].startswith("uvicorn") for e in entries)
    assert any(e["logger"].startswith("segmentstore") for e in entries)
