"""Where a JetStream data log lives and how it talks to the servers: the one definition of
these options, which the settings tree takes as its ``tier1.jetstream`` section as it is.

Importing this module needs pydantic alone (not nats-py): the settings tree reads it whether
or not a deployment uses JetStream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

MiB = 1024 * 1024


class JetStreamOptions(BaseModel):
    """How to reach the JetStream cluster and name a container's stream (``tier1.mode =
    "jetstream"``: a replicated stream per container). The servers must run with
    ``jetstream { sync_interval: always }``.

    ``stream_prefix`` names everything this deployment keeps in JetStream: container ``7``'s
    stream is ``<prefix>-container-7``, which takes messages on the subject of its owner's
    epoch only (``<prefix>.container.7.e<epoch>``), and the epochs live in the key-value
    bucket ``<prefix>-epochs``. Two deployments sharing one JetStream cluster need two
    prefixes. The password and token are secrets: printed or dumped they are masked; only the
    connection reveals them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Client URLs of the JetStream cluster (any of them; the client finds the rest).
    servers: tuple[str, ...] = Field(default=("nats://127.0.0.1:4222",), min_length=1)
    stream_prefix: str = Field(default="segmentstore", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    # Copies of every record; a stream with fewer is refused. 3 survives the loss of a node.
    replicas: int = Field(default=3, ge=1, le=5)
    # A message not acknowledged in this time is probed and sent again ...
    ack_timeout_ms: int = Field(default=5_000, ge=100)
    # ... for at most this long (a leader election takes 5-10 s), then the append fails (and
    # everything after it).
    write_timeout_ms: int = Field(default=30_000, ge=1_000)
    connect_timeout_ms: int = Field(default=5_000, ge=100)
    # The publisher's pipeline: bytes sent and not yet acknowledged, at most.
    max_in_flight_bytes: int = Field(default=32 * MiB, ge=1 * MiB)
    # A record larger than this travels as several messages. None: as large as the servers'
    # max_payload allows (less room for headers).
    max_message_bytes: int | None = Field(default=None, ge=1024)
    user: str | None = None
    password: SecretStr | None = None
    token: SecretStr | None = None
    credentials_file: Path | None = None
    tls_ca_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None

    @field_validator("servers", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        # --nats and SEGMENTSTORE_TIER1__JETSTREAM__SERVERS take "nats://a:4222,nats://b:4222"
        if isinstance(value, str):
            return tuple(url.strip() for url in value.split(",") if url.strip())
        return value

    @model_validator(mode="after")
    def _ordered(self) -> JetStreamOptions:
        if self.ack_timeout_ms > self.write_timeout_ms:
            raise ValueError(
                "tier1.jetstream.ack_timeout_ms must not be greater than"
                " tier1.jetstream.write_timeout_ms"
            )
        return self

    def stream(self, container: int) -> str:
        return f"{self.stream_prefix}-container-{container}"

    def subject(self, container: int, epoch: int) -> str:
        return f"{self.stream_prefix}.container.{container}.e{epoch}"

    def epoch_key(self, container: int) -> str:
        """The key of ``container``'s epoch in :attr:`epoch_bucket`."""
        return f"container-{container}"

    @property
    def epoch_bucket(self) -> str:
        return f"{self.stream_prefix}-epochs"
