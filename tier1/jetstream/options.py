"""Where a JetStream data log lives and how it talks to the servers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class JetStreamOptions:
    """How to reach the JetStream cluster and name a container's stream.

    ``stream_prefix`` names everything this deployment keeps in JetStream: container ``7``'s
    stream is ``<prefix>-container-7``, which takes messages on the subject of its owner's
    epoch only (``<prefix>.container.7.e<epoch>``), and the epochs live in the key-value
    bucket ``<prefix>-epochs``. Two deployments sharing one JetStream cluster need two
    prefixes.
    """

    servers: tuple[str, ...] = ("nats://127.0.0.1:4222",)
    stream_prefix: str = "segmentstore"
    # A stream is refused when it keeps fewer copies than this (a quorum of 3 survives a node).
    replicas: int = 3
    # How long one message may wait for its acknowledgement before it counts as lost and is
    # probed and sent again.
    ack_timeout_ms: int = 5_000
    # How long an append may take in all, retries through a leader election included, before
    # the log gives up and fails it (and everything after it).
    write_timeout_ms: int = 30_000
    connect_timeout_ms: int = 5_000
    # Messages sent and not yet acknowledged, at most (the pipeline's depth), in bytes.
    max_in_flight_bytes: int = 32 << 20
    # A record larger than this travels as several messages. None: as large as the servers'
    # max_payload allows (less room for headers).
    max_message_bytes: int | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    credentials_file: str | None = None
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    def __post_init__(self) -> None:
        if not self.servers:
            raise ValueError("at least one JetStream server URL is needed")
        if not self.stream_prefix.replace("-", "").replace("_", "").isalnum():
            raise ValueError(
                f"stream_prefix {self.stream_prefix!r} may hold only letters, digits, - and _"
            )
        if self.replicas < 1:
            raise ValueError("replicas must be at least 1")

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
