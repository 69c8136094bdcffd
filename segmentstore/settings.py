"""The one settings tree: a frozen, validated model with a section per component.

Units are in the key names. Only the composition root (the command line, or the embedded
``SegmentStore.open``) builds a :class:`Settings`; components receive their own section.

Secrets (auth tokens, Tier 2 credentials, the JetStream password and token) are ``SecretStr``:
printed, logged or dumped as JSON they are masked; only the part that uses one reveals it
(:meth:`AuthSettings.roles`, :meth:`Tier2Settings.backend_options`, the JetStream connection).

A section that a component defines itself is taken as it is rather than copied: the
``tier1.jetstream`` section is the JetStream log's :class:`JetStreamOptions`, and the local
log's defaults are its own. Nothing else keeps a second list of a section's keys.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_serializer,
    field_validator,
    model_validator,
)

from segmentstore.tier1.jetstream.options import JetStreamOptions
from segmentstore.tier1.local.log import DEFAULT_SEGMENT_BYTES, DEFAULT_SEGMENT_MS

KiB = 1024
MiB = 1024 * KiB


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# Keys that bound one another, as (section path, lower key, upper key): the lower may equal
# the upper but never pass it. Each pair is checked by its section, and the message names both.
ORDERED_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("store", "recovery_retry_min_ms", "recovery_retry_max_ms"),
    ("storage_writer", "retry_min_ms", "retry_max_ms"),
    ("tier1.jetstream", "ack_timeout_ms", "write_timeout_ms"),
)


def _check_order(section: _Section, path: str) -> None:
    for where, lower, upper in ORDERED_PAIRS:
        if where == path and getattr(section, lower) > getattr(section, upper):
            raise ValueError(f"{path}.{lower} must not be greater than {path}.{upper}")


class StoreSettings(_Section):
    data_dir: Path = Path("./data")
    # Fixed for the life of a deployment: the data directory records it and refuses another.
    containers: int = Field(default=4, ge=1, le=4096)
    max_append_bytes: int = Field(default=8 * MiB, ge=1, le=64 * MiB)
    max_read_bytes: int = Field(default=16 * MiB, ge=1, le=64 * MiB)
    max_wait_ms: int = Field(default=60_000, ge=0)
    # The sparse time index of each segment (:offsetAt, time retention) records one append
    # boundary per this many appended bytes: its memory is 16 bytes per interval of Tier 1 tail.
    time_index_interval_bytes: int = Field(default=4 * KiB, ge=1)
    # How often retention policies are enforced; together with the index interval and the chunk
    # roll settings, this bounds how late expired data is deleted (docs/api.md, Seeking by time
    # and retention).
    retention_check_interval_ms: int = Field(default=30_000, ge=1)
    # A failed container is recovered again by itself, first after recovery_retry_min_ms, the
    # wait doubling per failed try up to recovery_retry_max_ms. One out of Tier 1 space waits
    # until Tier 1 has recovery_room_bytes free.
    recovery_retry_min_ms: int = Field(default=500, ge=1)
    recovery_retry_max_ms: int = Field(default=30_000, ge=1)
    recovery_room_bytes: int = Field(default=8 * MiB, ge=0)
    # Tier 1 lost, Tier 2 intact: rebuild Tier 1 from the Tier 2 manifests instead of refusing
    # to start (docs/operations.md, Rebuilding a lost Tier 1 from Tier 2). Only a data directory
    # without Tier 1 is rebuilt, once; what Tier 2 does not keep is lost and reported.
    rebuild_from_tier2: bool = False
    # A starting node waits this long for a shared service that does not answer yet (JetStream,
    # a cluster's Tier 2) before it gives up and exits: services and nodes start in any order.
    startup_wait_ms: int = Field(default=60_000, ge=100)

    @model_validator(mode="after")
    def _ordered(self) -> StoreSettings:
        _check_order(self, "store")
        return self


class DurableLogSettings(_Section):
    # One Tier 1 record; larger operations span several frames.
    max_frame_bytes: int = Field(default=1 * MiB, ge=4 * KiB, le=64 * MiB)
    # Appends enqueued together are written and acknowledged together; a batch this large is
    # sent to Tier 1 at once, so that one batch's fsync overlaps the preparation of the next.
    batch_seal_bytes: int = Field(default=128 * KiB, ge=1)
    # A metadata checkpoint is written after this many frames or bytes, whichever comes first;
    # Tier 1 can only be truncated at a checkpoint, so these bound recovery time.
    checkpoint_every_frames: int = Field(default=1000, ge=1)
    checkpoint_every_bytes: int = Field(default=256 * MiB, ge=1)
    # Back-pressure: appends accepted but not yet durable. Past it, appends wait up to
    # throttle_max_delay_ms for room, then fail with `throttled`.
    max_in_flight_bytes: int = Field(default=256 * MiB, ge=1 * MiB)
    throttle_max_delay_ms: int = Field(default=5_000, ge=0)


class MetadataSettings(_Section):
    # A segment's metadata stays in memory only while it is active. One unused for this long,
    # whose bytes and state are all in Tier 2, is evicted (its manifest then holds everything
    # it carries) and loaded back on its next use, answering exactly as before.
    idle_eviction_ms: int = Field(default=60_000, ge=1)
    # Per container: past this many active segments the least recently used are flushed to
    # Tier 2 early and evicted, so memory, checkpoints and recovery stay bounded.
    max_active_segments: int = Field(default=100_000, ge=1)


class CacheSettings(_Section):
    # The bound on cached payload: appends not yet in Tier 2 must fit, so past it appends wait
    # for room (back-pressure), and Tier 2 data is evicted least recently used first.
    max_bytes: int = Field(default=1024 * MiB, ge=1 * MiB)
    # The unit of cache memory: an entry holds whole blocks, so a small segment's tail costs a
    # block until Tier 2 has it; small enough that millions of small tails fit.
    block_bytes: int = Field(default=512, ge=512, le=1 * MiB)
    # Appends in offset order grow one read index entry up to this size.
    max_entry_bytes: int = Field(default=1 * MiB, ge=4 * KiB)


# Tier 2 options whose names contain one of these hold credentials (secret_key, session_token).
_SECRET_OPTION_WORDS = ("secret", "token", "password")
OptionValue = str | int | float | bool


class Tier2Settings(_Section):
    # file:///path, s3://bucket/prefix or hdfs://host:port/path; empty: <data_dir>/tier2.
    uri: str = ""
    # Backend options: endpoint_url, region, access_key, secret_key, create_bucket, ... (S3).
    # Credentials among them (secret_key, session_token, ...) are kept as SecretStr.
    options: dict[str, OptionValue | SecretStr] = Field(default_factory=dict)

    @field_validator("options", mode="after")
    @classmethod
    def _hide_credentials(
        cls, options: dict[str, OptionValue | SecretStr]
    ) -> dict[str, OptionValue | SecretStr]:
        return {
            key: SecretStr(str(value))
            if not isinstance(value, SecretStr)
            and any(word in key.lower() for word in _SECRET_OPTION_WORDS)
            else value
            for key, value in options.items()
        }

    def backend_options(self) -> dict[str, OptionValue]:
        """The options with their secrets revealed, for the Tier 2 backend alone."""
        return {
            key: value.get_secret_value() if isinstance(value, SecretStr) else value
            for key, value in self.options.items()
        }


class StorageWriterSettings(_Section):
    # A segment's pending bytes are written to Tier 2 once there are this many, or once the
    # oldest has waited flush_interval_ms, or when a seal, merge or delete needs them there.
    flush_threshold_bytes: int = Field(default=4 * MiB, ge=1)
    flush_interval_ms: int = Field(default=30_000, ge=1)
    # A chunk rolls at this size (where the backend can append; elsewhere a flush is a chunk).
    max_chunk_bytes: int = Field(default=64 * MiB, ge=4 * KiB)
    # ... or once it is this old, so that a slow segment's data can still be deleted whole
    # chunks at a time when retention truncates it.
    max_chunk_age_ms: int = Field(default=3_600_000, ge=1)
    # Tier 2 outages are retried with exponential backoff between these bounds; meanwhile
    # appends go on into Tier 1 and the cache until the cache bound pushes back.
    retry_min_ms: int = Field(default=100, ge=1)
    retry_max_ms: int = Field(default=10_000, ge=1)
    # Reads that miss the cache fetch Tier 2 in aligned blocks of this size.
    read_block_bytes: int = Field(default=1 * MiB, ge=4 * KiB)
    # Every chunk's bytes carry a CRC32C per block of this size (aligned in segment offsets),
    # checked by every reader; a damaged block costs a reader at most its own events. A
    # multiple of store.time_index_interval_bytes, so that each block's first event is known.
    # Smaller blocks lose fewer events to one damaged byte but cost more to verify (a CRC call
    # and an index record each): at 64 KiB, verifying took 12 % of a cache-miss read, at 256 KiB
    # about 9 %, most of it the CRC itself.
    checksum_block_bytes: int = Field(default=256 * KiB, ge=1 * KiB, le=64 * MiB)
    # Whether the store's reads from Tier 2 verify those checksums (off only to measure them).
    verify_checksums: bool = True

    @model_validator(mode="after")
    def _ordered(self) -> StorageWriterSettings:
        _check_order(self, "storage_writer")
        return self


class Tier1Settings(_Section):
    # local: a write-ahead log per container under <data_dir>/tier1 (one machine);
    # jetstream: a replicated stream per container on NATS JetStream (see jetstream).
    mode: Literal["local", "jetstream"] = "local"
    # A local log file rolls once it holds this much; truncation deletes whole files.
    segment_bytes: int = Field(default=DEFAULT_SEGMENT_BYTES, ge=4 * KiB)
    # ... or once its first record is this old, so that a quiet log still frees its files.
    segment_ms: int = Field(default=DEFAULT_SEGMENT_MS, ge=1)
    # The JetStream log's own options, as it defines them.
    jetstream: JetStreamOptions = JetStreamOptions()


class ClusterSettings(_Section):
    # Several nodes share one JetStream Tier 1 and one Tier 2 and split the containers.
    enabled: bool = False
    # Unique in the cluster and stable across restarts (a StatefulSet's pod name); empty:
    # the host name. Each worker of a node of several is a member of its own, NODE/wI.
    node_id: str = Field(default="", pattern=r"^([A-Za-z0-9_-]{1,64}(/w[0-9]{1,3})?)?$")
    # Where other nodes and clients reach this node; empty: http://<api.host>:<api.port>
    # (the host name when api.host is 0.0.0.0).
    advertise_url: str = ""
    # A node, or a container's owner, silent for this long is gone and its containers move.
    # Set once, when the cluster's lease bucket is created; every node then uses that figure.
    lease_ms: int = Field(default=5_000, ge=1_000, le=600_000)
    # The secret every node of the cluster shares, and only they: it signs the leases and
    # the requests nodes forward to each other, so that a process that can reach JetStream
    # but lacks it can never act as a node. At least 16 bytes; from secret_file (a mounted
    # Kubernetes Secret; surrounding whitespace is ignored) or secret, not both.
    secret: SecretStr | None = None
    secret_file: Path | None = None
    # A request forwarded to a container's owner: how long connecting and waiting for the
    # answer may take (a tail read's wait_ms comes on top), and how many may be under way to
    # one peer at once (more are answered 503 with Retry-After).
    forward_connect_timeout_ms: int = Field(default=2_000, ge=100)
    forward_answer_timeout_ms: int = Field(default=30_000, ge=100)
    max_forwards_per_peer: int = Field(default=256, ge=1)

    @model_validator(mode="after")
    def _one_secret(self) -> ClusterSettings:
        if self.secret is not None and self.secret_file is not None:
            raise ValueError("cluster.secret and cluster.secret_file: set one, not both")
        if self.enabled and self.secret is None and self.secret_file is None:
            raise ValueError(
                "cluster mode needs the cluster's secret: set cluster.secret_file (or"
                " SEGMENTSTORE_CLUSTER__SECRET); every node of the cluster gets the same one"
            )
        if self.secret is not None and len(self.secret.get_secret_value().encode()) < 16:
            raise ValueError("cluster.secret needs at least 16 bytes")
        return self

    def secret_bytes(self) -> bytes:
        """The secret, read from ``secret_file`` if that is where it is kept; ValueError if
        it cannot be read or is shorter than 16 bytes."""
        if self.secret_file is not None:
            try:
                secret = self.secret_file.read_bytes().strip()
            except OSError as error:
                raise ValueError(
                    f"cannot read cluster.secret_file {self.secret_file}: {error.strerror}"
                ) from error
        elif self.secret is not None:
            secret = self.secret.get_secret_value().encode()
        else:
            raise ValueError("no cluster secret is configured")
        if len(secret) < 16:
            raise ValueError(f"the cluster secret needs at least 16 bytes, not {len(secret)}")
        return secret


class ApiSettings(_Section):
    # The embedded default serves loopback only; a deployment binds 0.0.0.0 explicitly.
    host: str = "127.0.0.1"
    port: int = Field(default=9090, ge=0, le=65535)
    # HTTPS: a PEM certificate (chain) and its private key; both or neither (plain HTTP).
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    # A request line and headers larger than this in all are refused with 431 before they
    # are held in memory.
    max_header_bytes: int = Field(default=64 * KiB, ge=1 * KiB, le=16 * MiB)
    # A request body that stops arriving for this long is answered 408 and nothing of it is
    # applied; a node forwarding it gives up on the owner at the same moment.
    body_timeout_ms: int = Field(default=30_000, ge=100)
    # A request line and headers must arrive whole within this long of their first byte (and
    # a new connection send them within it), however slowly they keep coming: else 408.
    head_timeout_ms: int = Field(default=10_000, ge=100)
    # Client connections the node keeps open at once, in all and from one address: one more is
    # answered 429 and closed. The node lowers the first to what its descriptor limit leaves
    # after a reserve for its files and its own connections. Another node's forwards come
    # from one address: keep the second above cluster.max_forwards_per_peer.
    max_connections: int = Field(default=10_000, ge=1)
    max_connections_per_client: int = Field(default=2_000, ge=1)

    @model_validator(mode="after")
    def _tls_needs_both(self) -> ApiSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("api.tls_cert_file and api.tls_key_file go together")
        return self


class NodeSettings(_Section):
    # Worker processes of this node, each owning a fixed share of the containers with its own
    # event loop, HTTP server and parts, under a small supervisor (docs/operations.md, A node
    # on every core). None: as many as the CPUs this process may use; 1: one process, no
    # supervisor.
    workers: int | None = Field(default=None, ge=1, le=256)
    # Each worker also listens on an address of its own, published in the node's map so that
    # clients reach the owning worker directly. 0: the kernel chooses each worker's port; P:
    # worker i listens on P + i (a firewall or a pod's declared ports can then name them).
    worker_base_port: int = Field(default=0, ge=0, le=65535)

    def worker_count(self) -> int:
        """``workers``, with the CPUs this process may use for None."""
        if self.workers is not None:
            return self.workers
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error", "critical"] = "info"
    # text: one line per record for people; json: one JSON object per line for log pipelines.
    format: Literal["text", "json"] = "text"


Role = Literal["read", "write", "admin"]


class AuthSettings(_Section):
    # token -> role. Empty: everyone may do everything (the default binds to loopback).
    tokens: dict[SecretStr, Role] = Field(default_factory=dict)

    @field_serializer("tokens", when_used="json")
    def _masked(self, tokens: dict[SecretStr, Role]) -> dict[str, Role]:
        # Every key masks to the same text: numbered, so that none hides another.
        return {f"********** ({i})": role for i, role in enumerate(tokens.values(), 1)}

    def roles(self) -> dict[str, Role]:
        """token -> role with the tokens revealed, for the part that checks requests."""
        return {token.get_secret_value(): role for token, role in self.tokens.items()}


class Settings(_Section):
    store: StoreSettings = StoreSettings()
    durable_log: DurableLogSettings = DurableLogSettings()
    metadata: MetadataSettings = MetadataSettings()
    cache: CacheSettings = CacheSettings()
    tier1: Tier1Settings = Tier1Settings()
    tier2: Tier2Settings = Tier2Settings()
    storage_writer: StorageWriterSettings = StorageWriterSettings()
    api: ApiSettings = ApiSettings()
    auth: AuthSettings = AuthSettings()
    log: LogSettings = LogSettings()
    cluster: ClusterSettings = ClusterSettings()
    node: NodeSettings = NodeSettings()

    @model_validator(mode="after")
    def _frames_fit_appends(self) -> Settings:
        if self.cluster.enabled and self.tier1.mode != "jetstream":
            raise ValueError("cluster.enabled needs tier1.mode = jetstream: the nodes share Tier 1")
        if self.durable_log.max_in_flight_bytes < self.store.max_append_bytes:
            raise ValueError(
                "durable_log.max_in_flight_bytes must hold one maximal append:"
                " at least store.max_append_bytes"
            )
        if self.cache.max_bytes < self.store.max_append_bytes + self.cache.block_bytes:
            raise ValueError(
                "cache.max_bytes must hold one maximal append: at least store.max_append_bytes"
                " plus cache.block_bytes"
            )
        return self

    @model_validator(mode="after")
    def _blocks_hold_whole_index_windows(self) -> Settings:
        block, interval = (
            self.storage_writer.checksum_block_bytes,
            self.store.time_index_interval_bytes,
        )
        if block % interval:
            raise ValueError(
                f"storage_writer.checksum_block_bytes ({block}) must be a multiple of"
                f" store.time_index_interval_bytes ({interval})"
            )
        return self

    @model_validator(mode="after")
    def _rebuild_needs_local_tier1(self) -> Settings:
        # On JetStream, opening a container's stream to rebuild it would fence its live owner.
        if self.store.rebuild_from_tier2 and self.tier1.mode != "local":
            raise ValueError("store.rebuild_from_tier2 rebuilds a local Tier 1 only")
        return self

    def tier2_uri(self) -> str:
        return self.tier2.uri or (self.store.data_dir.resolve() / "tier2").as_uri()

    def with_overrides(self, **sections: dict[str, Any]) -> Settings:
        """A copy with ``section={key: value}`` overrides applied and validated."""
        merged = self.model_dump()
        for section, values in sections.items():
            if section not in merged:
                raise ValueError(f"unknown settings section {section!r}")
            for key, value in values.items():
                if isinstance(value, dict) and isinstance(merged[section].get(key), dict):
                    merged[section][key] = {**merged[section][key], **value}
                else:
                    merged[section][key] = value
        return Settings.model_validate(merged)
