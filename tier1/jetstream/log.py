"""A durable data log on NATS JetStream: one replicated stream per container.

The same contract as every Tier 1 log (:mod:`segmentstore.tier1.log`), on a JetStream stream
with file storage and ``replicas`` copies (3 by default):

* **Durability.** A record's future resolves on the stream's acknowledgement, which JetStream
  sends once a quorum of the replicas stored it. The servers must run with
  ``jetstream { sync_interval: always }``: by default they sync to disk only every two minutes.
* **Order, no gaps.** Appends are pipelined and chained with expected last sequences
  (:mod:`.publisher`); a failure fails that record and every later one.
* **Ownership and epoch.** :meth:`open` bumps the container's epoch with a compare-and-set in
  the key-value bucket ``<prefix>-epochs`` and switches the stream over to that epoch's subject
  (``<prefix>.container.N.e<epoch>``): from then on the stream stores nothing a previous owner
  sends (its publishes find no stream, it sees the higher epoch, and it fails with
  ``DataLogFencedError``). A fence message then marks where the new epoch starts. Chaining
  alone could not fence: a stale owner's pipelined message may expect exactly the sequence
  that the new owner's first message took.
* **Records of any size.** A record larger than the servers' ``max_payload`` travels as several
  messages and is reassembled on read; a record whose parts are not all there is never returned
  (:mod:`.wire`).
* **Truncation** purges the stream below an address; **reads** go through an ordered consumer
  up to the tail the stream's leader reports, never a lagging follower.

Every nats-py error is translated here into the ``DataLogError`` leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import nats
from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import (
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    KeyValueConfig,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BadRequestError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.errors import NotFoundError as JsNotFoundError

from segmentstore.tier1.errors import (
    DataLogClosedError,
    DataLogError,
    DataLogFencedError,
    DataLogWriteError,
)
from segmentstore.tier1.jetstream import wire
from segmentstore.tier1.jetstream.nats_errors import describe
from segmentstore.tier1.jetstream.options import JetStreamOptions
from segmentstore.tier1.jetstream.publisher import Publisher, copy_error
from segmentstore.tier1.log import Buffer, DurableDataLog, LogRecord

log = logging.getLogger(__name__)

_READ_IDLE_S = 10.0  # a read that receives nothing for this long has lost its consumer
_READER_IDLE_S = 5.0
_BUCKET_READY_S = 30.0  # how long a new key-value bucket may take to answer its first read
_BUCKET_PROBE_S = 0.5


class JetStreamDurableDataLog(DurableDataLog):
    """Container ``container``'s Tier 1 on the JetStream cluster that ``options`` names."""

    def __init__(self, options: JetStreamOptions, container: int) -> None:
        self._options = options
        self._container = container
        self._stream = options.stream(container)
        self._subject = ""  # the subject of this owner's epoch, once open
        self._epoch = 0
        self._client: Client | None = None
        self._js: JetStreamContext | None = None
        self._publisher: Publisher | None = None
        self._closer: asyncio.Task[None] | None = None
        self._size_bytes = 0

    @property
    def name(self) -> str:
        return self._stream

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def size_bytes(self) -> int:
        return self._size_bytes

    @property
    def available(self) -> bool:
        publisher = self._publisher
        return publisher is not None and not publisher.stalled

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self, min_epoch: int = 0) -> int:
        if self._publisher is not None:
            raise DataLogError(f"data log {self._stream} is already open")
        self._closer = None
        client = await connect_or_raise(self._options, f"segmentstore {self._stream}")
        try:
            js = client.jetstream(timeout=self._options.ack_timeout_ms / 1000)
            await self._ensure_stream(js)
            self._epoch = await self._bump_epoch(js, min_epoch)
            self._subject = self._options.subject(self._container, self._epoch)
            await self._claim_stream(js)
            last = await self._fence(js)
            info = await js.stream_info(self._stream)
            self._size_bytes = info.state.bytes
            max_part = max(4096, client.max_payload - wire.HEADER_ALLOWANCE)
            if self._options.max_message_bytes is not None:
                max_part = min(max_part, self._options.max_message_bytes)
            publisher = Publisher(
                client,
                self._probe,
                self._check_ownership,
                self._subject,
                self._epoch,
                last,
                max_part,
                self._options,
                self._count_bytes,
            )
            await publisher.start()
        except BaseException as error:
            with contextlib.suppress(Exception):
                await client.close()
            if isinstance(error, NatsError | TimeoutError):
                raise DataLogWriteError(
                    f"cannot open data log {self._stream}: {describe(error)}"
                ) from error
            raise
        self._client, self._js, self._publisher = client, js, publisher
        log.info("data log %s open at epoch %d (tail %d)", self._stream, self._epoch, last)
        return self._epoch

    async def _ensure_stream(self, js: JetStreamContext) -> None:
        """Create the stream if it is missing; refuse one that could lose acknowledged data."""
        try:
            info = await js.stream_info(self._stream)
        except JsNotFoundError:
            config = StreamConfig(
                name=self._stream,
                subjects=[self._options.subject(self._container, 0)],
                storage=StorageType.FILE,
                num_replicas=self._options.replicas,
                discard=DiscardPolicy.NEW,
                allow_direct=True,
                duplicate_window=120.0,
            )
            with contextlib.suppress(BadRequestError):  # created meanwhile by another opener
                await js.add_stream(config)
            info = await js.stream_info(self._stream)
        config = info.config
        if config.storage != StorageType.FILE:
            raise DataLogError(
                f"stream {self._stream} keeps its messages in memory; Tier 1 needs file storage"
            )
        if (config.num_replicas or 1) < self._options.replicas:
            raise DataLogError(
                f"stream {self._stream} has {config.num_replicas} replicas, fewer than the"
                f" {self._options.replicas} configured"
            )

    async def _bump_epoch(self, js: JetStreamContext, min_epoch: int) -> int:
        bucket = await epoch_bucket(js, self._options)
        key = self._options.epoch_key(self._container)
        while True:
            try:
                entry = await bucket.get(key)
            except KeyNotFoundError:
                first = max(1, min_epoch)
                with contextlib.suppress(KeyWrongLastSequenceError, BadRequestError):
                    await bucket.create(key, str(first).encode())
                    return first
                continue
            epoch = max(int((entry.value or b"0").decode()) + 1, min_epoch)
            with contextlib.suppress(KeyWrongLastSequenceError, BadRequestError):
                await bucket.update(key, str(epoch).encode(), last=entry.revision)
                return epoch

    async def _claim_stream(self, js: JetStreamContext) -> None:
        """Make the stream take this epoch's subject only, unless a newer epoch exists.

        The epoch is read before the switch (an owner that lost its epoch must never switch
        the stream back: its pipelined messages could then land after the new owner's fence)
        and after it (an opener of a newer epoch may have come in between; it switches the
        stream back itself when it finds it taken, see :meth:`_check_ownership`).
        """
        await self._raise_if_superseded(js)
        info = await js.stream_info(self._stream)
        if info.config.subjects != [self._subject]:
            info.config.subjects = [self._subject]
            await js.update_stream(info.config)
            await self._raise_if_superseded(js)

    async def _raise_if_superseded(self, js: JetStreamContext) -> None:
        newest = await self._newest_epoch(js)
        if newest > self._epoch:
            raise DataLogFencedError(self._epoch, newest)

    async def _newest_epoch(self, js: JetStreamContext) -> int:
        bucket = await epoch_bucket(js, self._options)
        entry = await bucket.get(self._options.epoch_key(self._container))
        return int((entry.value or b"0").decode())

    async def _check_ownership(self) -> None:
        """Raise ``DataLogFencedError`` if a newer epoch took over; otherwise make sure the
        stream still takes this epoch's subject (the publisher asks after "no responders")."""
        assert self._js is not None
        await self._claim_stream(self._js)

    async def _fence(self, js: JetStreamContext) -> int:
        """Append this epoch's fence message after the stream's current tail; its sequence."""
        deadline = time.monotonic() + self._options.write_timeout_ms / 1000
        while True:
            info = await js.stream_info(self._stream)
            last = info.state.last_seq
            try:
                ack = await js.publish(
                    self._subject,
                    b"",
                    headers={
                        wire.KIND: wire.FENCE,
                        wire.EPOCH: str(self._epoch),
                        wire.MESSAGE_ID: f"{self._epoch}-fence",
                        wire.EXPECTED_LAST_SEQUENCE: str(last),
                    },
                )
                return ack.seq
            except BadRequestError:
                # The previous owner appended meanwhile: chain on the new tail.
                if time.monotonic() > deadline:
                    raise

    async def _probe(self, sequence: int) -> str | None:
        assert self._js is not None
        message = await self._js.get_msg(self._stream, seq=sequence)
        return (message.headers or {}).get(wire.MESSAGE_ID)

    def _count_bytes(self, size: int) -> None:
        self._size_bytes += size

    async def close(self) -> None:
        if self._closer is None:
            self._closer = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closer)

    async def _close(self) -> None:
        publisher, client = self._publisher, self._client
        if publisher is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(publisher.drain(), self._options.write_timeout_ms / 1000)
            await publisher.stop()
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        self._publisher = None
        self._client = self._js = None

    # -- appends and reads -------------------------------------------------------------------

    def append(self, parts: Sequence[Buffer]) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        publisher = self._publisher
        if publisher is None or self._closer is not None:
            future.set_exception(DataLogClosedError(f"data log {self._stream} is closed"))
        elif publisher.failure is not None:
            future.set_exception(copy_error(publisher.failure))
        else:
            publisher.append(b"".join(parts), future)
        return future

    async def read(self, from_address: int = 0) -> AsyncIterator[LogRecord]:
        js = self._js
        if js is None:
            raise DataLogClosedError(f"data log {self._stream} is not open")
        try:
            info = await js.stream_info(self._stream)
            last = info.state.last_seq
            start = max(from_address, info.state.first_seq, 1)
            if start > last:
                return
            subscription = await js.subscribe(
                "",  # every subject: records of earlier epochs too
                stream=self._stream,
                ordered_consumer=True,
                config=ConsumerConfig(
                    deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start
                ),
                # Deleted below when the read ends; JetStream deletes it this soon after
                # nobody listens if this process dies first.
                inactive_threshold=_READER_IDLE_S,
            )
        except (NatsError, TimeoutError) as error:
            raise DataLogWriteError(
                f"cannot read data log {self._stream}: {describe(error)}"
            ) from error
        assembler = wire.RecordAssembler()
        try:
            sequence = 0
            while sequence < last:
                try:
                    msg = await subscription.next_msg(timeout=_READ_IDLE_S)
                except (NatsError, TimeoutError) as error:
                    raise DataLogWriteError(
                        f"reading data log {self._stream} stopped at {sequence} of {last}:"
                        f" {describe(error)}"
                    ) from error
                sequence = msg.metadata.sequence.stream
                stored = wire.StoredMessage(sequence, dict(msg.headers or {}), msg.data)
                whole = assembler.feed(stored)
                if whole is not None:
                    yield LogRecord(*whole)
        finally:
            consumer = getattr(subscription, "_consumer", None)
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()
            if consumer:
                with contextlib.suppress(Exception):
                    await js.delete_consumer(self._stream, consumer)

    async def truncate(self, below_address: int) -> None:
        js = self._js
        if js is None:
            raise DataLogClosedError(f"data log {self._stream} is not open")
        try:
            info = await js.stream_info(self._stream)
            # Never past the tail: a purge there would move the stream's next sequence and break
            # the chain of expected last sequences.
            below = min(below_address, info.state.last_seq + 1)
            if below <= info.state.first_seq:
                return
            await js.purge_stream(self._stream, seq=below)
            info = await js.stream_info(self._stream)
        except (NatsError, TimeoutError) as error:
            raise DataLogWriteError(
                f"cannot truncate data log {self._stream}: {describe(error)}"
            ) from error
        self._size_bytes = info.state.bytes


async def connect_or_raise(options: JetStreamOptions, name: str) -> Client:
    """:func:`connect`, its failure a ``DataLogWriteError``."""
    try:
        return await connect(options, name)
    except (NatsError, OSError, TimeoutError) as error:
        servers = list(options.servers)
        raise DataLogWriteError(
            f"cannot reach JetStream at {servers}: {describe(error)}"
        ) from error


async def connect(options: JetStreamOptions, name: str) -> Client:
    """A connection to the JetStream cluster that reconnects by itself and logs quietly."""
    tls: ssl.SSLContext | None = None
    if options.tls_ca_file or options.tls_cert_file:
        tls = ssl.create_default_context(cafile=options.tls_ca_file)
        if options.tls_cert_file:
            tls.load_cert_chain(options.tls_cert_file, options.tls_key_file)
    password, token = options.password, options.token
    credentials = options.credentials_file

    async def quiet(error: Exception) -> None:
        # Disconnections come and go and are retried; a server that refuses what this node
        # does (a permission it was not given, credentials it does not take) must be seen,
        # or it shows only as timeouts.
        text = describe(error)
        if "violation" in text.lower() and _worth_logging(name, text):
            log.warning("JetStream refused %s: %s", name, text)
        else:
            log.debug("JetStream connection %s: %s", name, text)

    return await nats.connect(
        list(options.servers),
        connect_timeout=options.connect_timeout_ms / 1000,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.2,
        error_cb=quiet,
        user=options.user,
        password=None if password is None else password.get_secret_value(),
        token=None if token is None else token.get_secret_value(),
        user_credentials=None if credentials is None else str(credentials),
        tls=tls,
        name=name,
    )


_violations_logged: dict[tuple[str, str], float] = {}


def _worth_logging(name: str, text: str, every_s: float = 60.0) -> bool:
    """Once a minute per connection and message: a violation repeats on every retry."""
    now = time.monotonic()
    if now - _violations_logged.get((name, text), -every_s) < every_s:
        return False
    _violations_logged[(name, text)] = now
    return True


async def epoch_bucket(js: JetStreamContext, options: JetStreamOptions) -> Any:
    """The deployment's key-value bucket of container epochs, created on first use."""
    return await key_value_bucket(
        js,
        KeyValueConfig(
            bucket=options.epoch_bucket,
            history=1,
            storage=StorageType.FILE,
            replicas=options.replicas,
            direct=False,  # reads from the leader: a follower may not have the latest epoch
        ),
    )


async def key_value_bucket(js: JetStreamContext, config: KeyValueConfig) -> Any:
    """The bucket ``config`` names, created if it is missing, once it answers.

    Right after a bucket is created (by this node or by another at the same moment) its
    stream may take a moment to elect a leader, and reads sent meanwhile go unanswered until
    they time out: wait for a quick read to be answered first.
    """
    deadline = time.monotonic() + _BUCKET_READY_S
    while True:
        try:
            bucket = await js.key_value(config.bucket)
            await asyncio.wait_for(bucket.get("answering"), _BUCKET_PROBE_S)
            return bucket
        except KeyNotFoundError:
            return bucket  # it answers
        except JsNotFoundError:
            # Missing: create it. Another node may be creating it at the same moment.
            with contextlib.suppress(NatsError, TimeoutError):
                await js.create_key_value(config)
        except (NatsError, TimeoutError):
            pass  # created but not answering yet
        if time.monotonic() > deadline:
            raise DataLogWriteError(f"the key-value bucket {config.bucket} does not answer")
        await asyncio.sleep(0.1)
