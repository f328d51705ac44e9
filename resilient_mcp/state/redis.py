"""The shared state store: the same narrow protocols as ``StateStore`` (SQLite), kept in Redis (or Valkey), so that
several proxy replicas behind a load balancer share idempotency records, stored outputs, the audit trail and (with
``breaker.shared``) open circuits.

Keys (all under ``state.key_prefix``, default ``resilient-mcp:``):

==============================  ======================================================================================
``secret``                      the installation's HMAC key (64 hex digits), created once with ``SET NX`` by the first
                                replica: every replica derives the same fingerprints (with ``state.secret`` given,
                                ``secret-id`` holds a digest of it instead, as the same check)
``idem:<key>``                  a hash per idempotency record (status, args_hash, tool, times, result); every status
                                change is one Lua script (claim, complete, mark unknown), so a claim is atomic across
                                replicas and is in Redis **before** the call is sent; ``PEXPIREAT`` = its expiry. A
                                default write makes two round trips, both waited for: both of its records claimed in
                                one script, both settled in one; its own record, once the host has the result
                                (``forget``), is deleted by the next claim's script on its way (or the background
                                task's next tick, all waiting records in one ``DEL``): no round trip of its own
``out:<key>`` / ``out:<key>:m``  a stored output's UTF-8 text (appended chunk by chunk, read by ``GETRANGE`` pages)
                                and its manifest; both expire after ``output_ttl_s``; the key binds handle and owner
``audit``                       a Redis Stream capped with ``XADD MAXLEN ~ audit_max_entries``
``breaker:<upstream>[/<tool>]`` an open circuit (``breaker.shared``), expiring when it would half-open
``retry:<upstream>``            the upstream's retry budget (token bucket) shared by replicas (``breaker.shared``)
``task:<id>``                   a durable task's record (JSON, ``tasks.TaskRecord``), expiring with the task
``tasks:<principal>``           a sorted set of the principal's task ids by creation time (listing, and its bound)
==============================  ======================================================================================

Every command has a timeout (``command_timeout_s``, ``connect_timeout_s``); connections are pooled. When Redis cannot
be reached the store raises ``StateUnavailable`` (the idempotency stage turns it into a ``STATE_UNAVAILABLE``
observation, or proceeds with ``idempotency.on_state_unavailable: proceed``); audit entries stay queued in memory
(bounded) and are written when Redis is back; a background task pings every second while it is down, logs
``state_unavailable`` / ``state_reconnected`` and ``available`` feeds ``/healthz``.

A Redis that lost its keys (restarted without persistence, ``FLUSHALL``) lost the shared secret with them: a replica
that kept its own would silently stop deduplicating against one that made a new one. So every claim checks, in its Lua
script, that the secret key still holds this replica's value, and the background task checks it every
``SECRET_CHECK_S`` and on every reconnect. On a difference the claim is refused (``StateUnavailable``: the write is not
sent), and the replica restores its secret with ``SET NX`` (replicas that shared it all restore the same value, so
fingerprints made before stay valid) or adopts the one another replica restored or created first; it logs
``state_reset`` and ``/healthz`` says ``"state": "reset"`` for ``RESET_REPORTED_S``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import hashlib
import inspect
import json
import secrets
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import mcp_types as types
import redis
import redis.asyncio as aioredis
import structlog
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..call.chain import call_arguments_hash, keyed_fingerprint
from ..text import iter_utf8, utf8_len
from . import AuditFields, Claim, IdempotencyRecord, StateError, StateLimits, StateUnavailable, output_key
from .errors import state_errors
from .schema import AUDIT_FIELDS
from .tasks import TaskRecord

if TYPE_CHECKING:
    from ..call.chain import ToolCall
    from ..policy.config import StateConfig

log = structlog.get_logger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]

_MAX_FORGETS = 10_000
"""Records waiting to be deleted (``forget``) at most; beyond it the oldest only expire (``window_s``)."""
_CARRY = 64
"""Records one claim deletes on its way at most (the rest wait for the next one, or the background task)."""
_DOWN = (RedisConnectionError, RedisTimeoutError, ConnectionError, TimeoutError, OSError)

SECRET_CHECK_S = 5.0
"""How often the background task checks that the shared secret is still in Redis (claims check it every time)."""
RESET_REPORTED_S = 600.0
"""How long ``/healthz`` reports ``"state": "reset"`` after a wipe was found."""
_MISMATCH = "!secret"

# KEYS[1] record, KEYS[2] the secret, KEYS[3...] records to delete first (``forget``) · ARGV: now, args_hash, tool,
# expires_at, the secret this replica uses.
# Returns {} when claimed, {'!secret', <what the key holds>} when the secret is not this replica's, else the record
# that holds the key.
_CLAIM = """
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
local s = redis.call('GET', KEYS[2])
if s ~= ARGV[5] then return {'!secret', s or ''} end
local r = redis.call('HGETALL', KEYS[1])
if #r > 0 then
  local exp = nil
  for i = 1, #r, 2 do if r[i] == 'expires_at' then exp = tonumber(r[i + 1]) end end
  if exp ~= nil and exp > tonumber(ARGV[1]) then return r end
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'args_hash', ARGV[2], 'tool', ARGV[3], 'status', 'in_flight',
  'created_at', ARGV[1], 'expires_at', ARGV[4])
redis.call('PEXPIREAT', KEYS[1], math.ceil(tonumber(ARGV[4]) * 1000))
return {}
"""

# KEYS[1] own record, KEYS[2] upstream-wide marker, KEYS[3] the secret, KEYS[4...] records to delete first
# (``forget``) · ARGV: now, args_hash, tool, own expiry, marker expiry, the secret this replica uses.
# {1, own}: own holds a completed result (nothing claimed) · {2, marker}: own claimed, the marker held · {0}: both ·
# {3, {'!secret', <what the key holds>}}: the secret is not this replica's (nothing claimed).
_CLAIM_WRITE = """
for i = 4, #KEYS do redis.call('DEL', KEYS[i]) end
local s = redis.call('GET', KEYS[3])
if s ~= ARGV[6] then return {3, {'!secret', s or ''}} end
local now = tonumber(ARGV[1])
local function live(key)
  local r = redis.call('HGETALL', key)
  for i = 1, #r, 2 do if r[i] == 'expires_at' and tonumber(r[i + 1]) > now then return r end end
  return nil
end
local function claim(key, exp)
  redis.call('DEL', key)
  redis.call('HSET', key, 'args_hash', ARGV[2], 'tool', ARGV[3], 'status', 'in_flight',
    'created_at', ARGV[1], 'expires_at', exp)
  redis.call('PEXPIREAT', key, math.ceil(tonumber(exp) * 1000))
end
local own = live(KEYS[1])
if own then
  for i = 1, #own, 2 do if own[i] == 'status' and own[i + 1] == 'completed' then return {1, own} end end
end
claim(KEYS[1], ARGV[4])
local held = live(KEYS[2])
if held then return {2, held} end
claim(KEYS[2], ARGV[5])
return {0}
"""

# KEYS[1] own record, KEYS[2] (optional) marker · ARGV: '1' completed / '0' released, expires_at, result ('' = none).
_SETTLE_WRITE = """
if ARGV[1] == '1' then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    redis.call('HSET', KEYS[1], 'status', 'completed', 'expires_at', ARGV[2])
    if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'result', ARGV[3]) else redis.call('HDEL', KEYS[1], 'result') end
    redis.call('PEXPIREAT', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
  end
else
  redis.call('DEL', KEYS[1])
end
if #KEYS > 1 then redis.call('DEL', KEYS[2]) end
return 1
"""

# KEYS[1] bucket · ARGV: delta, max. The shared retry budget of one upstream, clamped to [0, max]; starts full.
_BUCKET = """
local t = tonumber(redis.call('GET', KEYS[1]) or ARGV[2]) + tonumber(ARGV[1])
t = math.max(0, math.min(tonumber(ARGV[2]), t))
redis.call('SET', KEYS[1], tostring(t), 'EX', 3600)
return tostring(t)
"""

# KEYS[1] record · ARGV: status, expires_at, result ('' = none). Only an existing record changes status.
_SETTLE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'expires_at', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'result', ARGV[3]) else redis.call('HDEL', KEYS[1], 'result') end
redis.call('PEXPIREAT', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
return 1
"""


class RedisStateStore:
    """The Redis implementation of ``IdempotencyStore``, ``OutputStore`` and ``AuditStore`` (and ``AuditSink``).

    Open with ``await RedisStateStore.open(config)``, close with ``aclose()``. Needs an asyncio event loop."""

    path = None
    journal_mode = "redis"

    def __init__(self, config: StateConfig, *, clock: Clock, limits: StateLimits) -> None:
        assert config.url is not None
        self.config = config
        self._where = _redact(config.url)
        """The URL the state seam's words name (credentials removed)."""
        self.limits = limits
        self.prefix = config.key_prefix
        self.audit_dropped = 0
        self.backend_errors = 0
        """Redis operations that failed (connection lost, timeout): the metric ``state_backend_errors``."""
        self.available = True
        """False from a failed command until Redis answers again (``/healthz`` reports it)."""
        self._clock = clock
        self._audit: collections.deque[dict[str, str]] = collections.deque()
        self._wake = asyncio.Event()
        self._back = asyncio.Event()
        self._back.set()
        self._writing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._forgets: collections.OrderedDict[str, None] = collections.OrderedDict()
        """Records to delete (``forget``): carried by this store's next claim, or deleted by the background task."""
        self._forgetting: dict[str, asyncio.Future[None]] = {}
        """Records a command in flight deletes: this store's next operation on one waits for that command."""
        self._hash_key = b""
        self._check_value = ""
        """What the secret key must hold: this replica's secret in hex (or the digest of ``state.secret``)."""
        self._check_key = self.prefix + ("secret-id" if config.secret else "secret")
        self.reset_at: float | None = None
        """When this replica last found the shared state wiped (``/healthz``: ``reset``)."""
        self._resyncing = asyncio.Lock()
        kwargs: dict[str, Any] = {
            "socket_timeout": config.command_timeout_s,
            "socket_connect_timeout": config.connect_timeout_s,
            "max_connections": config.max_connections,
            "health_check_interval": 30,
        }
        if config.username is not None:
            kwargs["username"] = config.username
        if config.password is not None:
            kwargs["password"] = config.password
        self.redis: aioredis.Redis = aioredis.Redis.from_url(config.url, **kwargs)
        self._claim = self.redis.register_script(_CLAIM)
        self._settle = self.redis.register_script(_SETTLE)
        self._claim_write = self.redis.register_script(_CLAIM_WRITE)
        self._settle_write = self.redis.register_script(_SETTLE_WRITE)
        self._bucket = self.redis.register_script(_BUCKET)

    @classmethod
    async def open(
        cls, config: StateConfig, *, clock: Clock = time.time, limits: StateLimits | None = None
    ) -> RedisStateStore:
        """Connect and load (or create) the shared secret; a Redis that cannot be reached is a ``StateError``."""
        store = cls(config, clock=clock, limits=limits or StateLimits())
        try:
            with state_errors(_redact(config.url or ""), redis=True, opening=True):
                store._hash_key = await store._secret()
        except BaseException:
            await store.redis.aclose()
            raise
        store._task = asyncio.get_running_loop().create_task(store._background())
        log.info("state_opened", backend="redis", url=_redact(config.url or ""), prefix=store.prefix)
        return store

    async def _secret(self, restore: str | None = None) -> bytes:
        """Load the shared secret, creating it (``SET NX``: the first replica's wins) as ``restore`` or a new one."""
        if self.config.secret:
            self._check_value = hashlib.sha256(self.config.secret.encode()).hexdigest()[:32]
            await self.redis.set(self._check_key, self._check_value)
            return self.config.secret.encode()
        key = self._check_key
        await self.redis.set(key, restore or secrets.token_hex(32), nx=True)
        value = await self.redis.get(key)
        text = value.decode() if isinstance(value, bytes) else str(value)
        try:
            secret = bytes.fromhex(text)
        except ValueError:
            secret = b""
        if len(secret) < 32:
            raise StateError(f"Redis key {key!r} is not a resilient-mcp secret (64 hex digits expected): delete it")
        self._check_value = text
        return secret

    @property
    def state(self) -> str:
        """``ok``, ``unavailable``, or ``reset`` for a while after the shared state was found wiped (``/healthz``)."""
        if not self.available:
            return "unavailable"
        if self.reset_at is not None and self._clock() - self.reset_at < RESET_REPORTED_S:
            return "reset"
        return "ok"

    async def _resync(self, found: str) -> None:
        """The secret key no longer holds this replica's secret: restore it, or adopt the one now there."""
        async with self._resyncing:
            current = await self.redis.get(self._check_key)
            if (current.decode() if isinstance(current, bytes) else current) == self._check_value:
                return  # another task of this replica restored it meanwhile
            before = self._check_value
            self._hash_key = await self._secret(restore=before)
            self.reset_at = self._clock()
            log.error(
                "state_reset",
                backend="redis",
                found="missing" if not found else "another secret",
                secret="restored" if self._check_value == before else "adopted another replica's",
                hint="Redis lost this proxy's keys (restarted without persistence, or flushed): idempotency records, "
                "stored outputs and open circuits kept before are gone; writes were refused until the secret was "
                "consistent again. Enable Redis persistence (appendonly yes) to keep them.",
            )

    async def _check_secret(self) -> None:
        current = await self.redis.get(self._check_key)
        text = current.decode() if isinstance(current, bytes) else (current or "")
        if text != self._check_value:
            await self._resync(text)

    async def aclose(self) -> None:
        """Write queued audit entries (bounded by the command timeout), stop the background task, close the pool."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        # Bounded: a task cancelled inside the Redis client's own connection handling can take long to end (seen
        # after a command failed on a connection); shutdown must not wait on it.
        done, _ = await asyncio.wait([task], timeout=self.config.command_timeout_s)
        if not done:
            log.warning("state_task_not_stopped", timeout_s=self.config.command_timeout_s)
        elif not task.cancelled() and task.exception() is not None:
            log.warning("state_task_failed", error=repr(task.exception()))
        if self._forgetting:
            await asyncio.wait(list(self._forgetting.values()), timeout=self.config.command_timeout_s)
        try:
            await asyncio.wait_for(self._delete_forgotten(), self.config.command_timeout_s)
        except Exception:  # (Redis down: they expire with their window)
            log.warning("idempotency_forget_not_written_at_close", records=len(self._forgets))
        try:
            await self._write_audit()
        except (StateError, RedisError):
            log.warning("audit_not_written_at_close", queued=len(self._audit))
        try:  # closing the pool can hang on a connection a failed command left behind: shutdown must not
            await asyncio.wait_for(self.redis.aclose(), self.config.command_timeout_s)
        except TimeoutError:
            log.warning("redis_close_timed_out", timeout_s=self.config.command_timeout_s)

    async def __aenter__(self) -> RedisStateStore:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # --- availability ----------------------------------------------------------------------------------------------

    async def _do(self, fn: Callable[[], Any]) -> Any:
        """Run one Redis operation; connection loss or a timeout marks the store unavailable and raises."""
        if self._task is None:
            raise StateError("the state store is closed")
        try:
            with state_errors(self._where, redis=True):
                value = fn()
                if inspect.isawaitable(value):
                    value = await value
        except StateUnavailable as exc:
            self.backend_errors += 1
            self._down(exc.__cause__ or exc)
            raise
        self._up()
        return value

    def idempotency_counts(self) -> None:
        """Not counted here: the records live in Redis, shared by every replica (count them there, by key prefix);
        a replica's own view would be wrong, so the metric leaves this gauge out."""
        return None

    def _down(self, exc: BaseException) -> None:
        if self.available:
            self.available = False
            self._back.clear()
            log.error("state_unavailable", backend="redis", error=str(exc), hint="reconnecting on its own")
            self._wake.set()

    def _up(self) -> None:
        if not self.available:
            self.available = True
            self._back.set()
            log.warning("state_reconnected", backend="redis", audit_queued=len(self._audit))
            self._wake.set()

    async def wait_available(self) -> None:
        """Until Redis answers again (returns at once while it does)."""
        await self._back.wait()

    async def _background(self) -> None:
        """Write the audit in batches; while Redis is down, ping every second until it answers; check the shared
        secret every ``SECRET_CHECK_S`` and on every reconnect."""
        checked = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.limits.flush_interval_s)
            self._wake.clear()
            try:
                if not self.available:
                    await self.redis.ping()
                    self._up()
                    checked = 0.0
                if time.monotonic() - checked >= SECRET_CHECK_S:
                    await self._check_secret()
                    checked = time.monotonic()
                await self._write_audit()
                await self._delete_forgotten()
            except _DOWN as exc:
                self._down(exc)
                await asyncio.sleep(1.0)
            except Exception:  # a refusal (OOM, ACL) or a bug: logged, the entries stay queued, the task lives on
                log.exception("audit_write_failed", queued=len(self._audit))
                await asyncio.sleep(1.0)

    # --- IdempotencyStore ------------------------------------------------------------------------------------------

    def _idem(self, key: str) -> str:
        return f"{self.prefix}idem:{key}"

    def forget(self, key: str) -> None:
        """Delete the record off the call's path: this store's next claim deletes it on its way (in the same script,
        no round trip of its own), or the background task at its next tick (``flush_interval_s``), with every other
        one waiting. ``_settled`` makes this store's next operation on ``key`` see it gone, so a record the host
        received is never replayed."""
        if self._task is None:
            raise StateError("the state store is closed")
        self._forgets[key] = None
        self._forgets.move_to_end(key)
        while len(self._forgets) > _MAX_FORGETS:  # bounded: the oldest then only expire (window_s)
            self._forgets.popitem(last=False)

    def _carry(self) -> tuple[list[str], asyncio.Future[None] | None]:
        """Take up to ``_CARRY`` records to delete into a command about to be sent: their Redis keys and the future
        that ``_carried`` resolves (what ``_settled`` waits for meanwhile)."""
        if not self._forgets:
            return [], None
        keys = [self._forgets.popitem(last=False)[0] for _ in range(min(_CARRY, len(self._forgets)))]
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._forgetting[key] = done
        return [self._idem(k) for k in keys], done

    def _carried(self, done: asyncio.Future[None] | None, deleted: bool) -> None:
        """The command that carried records to delete has ended; when it failed they wait for the next one."""
        if done is None:
            return
        keys = [k for k, f in self._forgetting.items() if f is done]
        for key in keys:
            del self._forgetting[key]
            if not deleted:
                self._forgets[key] = None
                self._forgets.move_to_end(key, last=False)
        done.set_result(None)

    async def _delete_forgotten(self) -> None:
        """Delete every record waiting for it, ``_CARRY`` a round trip (the background task's tick, closing; Redis's
        own errors raised as they are, as the audit's writes do)."""
        while self._forgets:
            keys, done = self._carry()
            try:
                await self.redis.delete(*keys)
            except BaseException:
                self._carried(done, False)
                raise
            self._carried(done, True)

    async def _settled(self, *keys: str, carried: bool = False) -> None:
        """Wait for commands in flight that delete ``keys``; then delete those still waiting for it, unless the
        caller's command carries them (``carried``: a claim, which deletes every waiting record first)."""
        for key in keys:
            done = self._forgetting.get(key)
            if done is not None:
                await asyncio.wait([done])
        if not carried and any(key in self._forgets for key in keys):
            await self._do(self._delete_forgotten)

    async def begin(
        self, key: str, *, args_hash: str, tool: str, now: float, expires_at: float
    ) -> IdempotencyRecord | None:
        await self._settled(key, carried=True)
        args = [repr(now), args_hash, tool, repr(expires_at), self._check_value]
        deletes, done = self._carry()
        keys = [self._idem(key), self._check_key, *deletes]
        try:
            held = await self._do(lambda: self._claim(keys=keys, args=args))
        except BaseException:
            self._carried(done, False)
            raise
        self._carried(done, True)
        if not held:
            return None
        flat = [v.decode() if isinstance(v, bytes) else str(v) for v in held]
        if flat[0] == _MISMATCH:
            await self._do(lambda: self._resync(flat[1]))
            raise StateUnavailable(
                "the shared state (Redis) was reset: it lost its keys (restarted without persistence, or flushed), "
                "so this write could not be checked against earlier ones; the proxy has restored its secret"
            )
        return _record(key, dict(zip(flat[::2], flat[1::2], strict=True)))

    async def begin_write(self, key: str, marker: str, claim: Claim) -> tuple[IdempotencyRecord | None, ...]:
        """One round trip (a Lua script, atomic across replicas) for both claims of a derived-key write, which also
        deletes the records waiting for it (``forget``: the previous write's, once the host had its answer)."""
        await self._settled(key, marker, carried=True)
        args = [repr(claim.now), claim.args_hash, claim.tool, repr(claim.expires_at), repr(claim.marker_expires_at)]
        args.append(self._check_value)
        deletes, done = self._carry()
        keys = [self._idem(key), self._idem(marker), self._check_key, *deletes]
        try:
            got = await self._do(lambda: self._claim_write(keys=keys, args=args))
        except BaseException:
            self._carried(done, False)
            raise
        self._carried(done, True)
        which = int(got[0])
        if which == 0:
            return None, None
        flat = [v.decode() if isinstance(v, bytes) else str(v) for v in got[1]]
        if which == 3:
            await self._do(lambda: self._resync(flat[1]))
            raise StateUnavailable(
                "the shared state (Redis) was reset: it lost its keys (restarted without persistence, or flushed), "
                "so this write could not be checked against earlier ones; the proxy has restored its secret"
            )
        record = _record(key if which == 1 else marker, dict(zip(flat[::2], flat[1::2], strict=True)))
        return (record, None) if which == 1 else (None, record)

    async def settle_write(
        self, key: str, marker: str | None, result: types.CallToolResult | None, *, expires_at: float
    ) -> None:
        """One round trip: the own record completed (or deleted) and the marker deleted."""
        text = self._kept(key, result) if result is not None else ""
        keys = [self._idem(key)] + ([self._idem(marker)] if marker is not None else [])
        args = ["1" if result is not None else "0", repr(expires_at), text]
        await self._do(lambda: self._settle_write(keys=keys, args=args))

    def _kept(self, key: str, result: types.CallToolResult) -> str:
        """The result as stored for a replay ('' when it is larger than ``idempotency_max_result_bytes``)."""
        text = result.model_dump_json(by_alias=True, exclude_none=True)
        if len(text) > self.limits.idempotency_max_result_bytes:
            log.info("idempotency_result_not_kept", key=key, bytes=len(text))
            return ""
        return text

    async def complete(self, key: str, result: types.CallToolResult, *, expires_at: float) -> None:
        text = self._kept(key, result)
        await self._do(lambda: self._settle(keys=[self._idem(key)], args=["completed", repr(expires_at), text]))

    async def mark_unknown(self, key: str, *, expires_at: float) -> None:
        await self._do(lambda: self._settle(keys=[self._idem(key)], args=["unknown", repr(expires_at), ""]))

    async def release(self, key: str) -> None:
        await self._do(lambda: self.redis.delete(self._idem(key)))

    async def get(self, key: str, *, now: float) -> IdempotencyRecord | None:
        await self._settled(key)
        raw: dict[bytes, bytes] = await self._do(lambda: self.redis.hgetall(self._idem(key)))
        if not raw:
            return None
        record = _record(key, {k.decode(): v.decode() for k, v in raw.items()})
        return record if record.expires_at > now else None

    def call_fingerprint(self, call: ToolCall) -> str:
        """``keyed_fingerprint`` with the shared secret: every replica derives the same key for the same call."""
        return keyed_fingerprint(call, self._hash_key)

    def arguments_hash(self, call: ToolCall) -> str:
        return call_arguments_hash(call, self._hash_key)

    # --- OutputStore -----------------------------------------------------------------------------------------------

    def _out(self, handle: str, owner: str) -> str:
        return f"{self.prefix}out:{output_key(handle, owner)}"

    async def put_output(self, tool: str, parts: Sequence[str], manifest: str, owner: str = "") -> str | None:
        size = sum(utf8_len(p) for p in parts)
        if size + len(manifest) > self.limits.outputs_max_bytes:
            log.warning("output_not_stored", tool=tool, bytes=size, limit=self.limits.outputs_max_bytes)
            return None
        handle = secrets.token_hex(16)
        key = self._out(handle, owner)
        ttl_ms = int(self.limits.output_ttl_s * 1000)

        async def write() -> None:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.set(key, b"", px=ttl_ms)
                for i, chunk in enumerate(iter_utf8(parts)):  # a few MB per round trip, never one whole copy
                    pipe.append(key, chunk)
                    if i % 32 == 31:
                        await pipe.execute()
                meta = json.dumps({"tool": tool, "size": size, "manifest": manifest})
                pipe.set(key + ":m", meta, px=ttl_ms)
                pipe.pexpire(key, ttl_ms)
                await pipe.execute()

        try:
            await self._do(write)
        except StateUnavailable:
            log.warning("output_not_stored", tool=tool, bytes=size, reason="state unavailable")
            return None
        return handle

    async def read_output(self, handle: str, offset: int, length: int, owner: str = "") -> tuple[bytes, int] | None:
        key = self._out(handle, owner)

        async def read() -> tuple[bytes | None, int]:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.exists(key + ":m")
                pipe.strlen(key)
                pipe.getrange(key, offset, max(offset, offset + length - 1))
                exists, total, data = await pipe.execute()
            return (bytes(data) if exists and length > 0 else (b"" if exists else None)), int(total)

        data, total = await self._do(read)
        if data is None:
            return None
        return data, total

    async def output_manifest(self, handle: str, owner: str = "") -> str | None:
        raw = await self._do(lambda: self.redis.get(self._out(handle, owner) + ":m"))
        if raw is None:
            return None
        manifest: str = json.loads(raw)["manifest"]
        return manifest

    # --- TaskStore (``resilient_mcp.tasks``) ------------------------------------------------------------------------

    async def put_task(self, record: TaskRecord, max_per_principal: int) -> None:
        key, index = f"{self.prefix}task:{record.task_id}", f"{self.prefix}tasks:{record.principal}"
        ttl_ms = max(1, int((record.expires_at - self._clock()) * 1000))

        async def write() -> list[Any]:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.set(key, record.to_json(), px=ttl_ms)
                pipe.zadd(index, {record.task_id: record.created_at})
                pipe.zremrangebyscore(index, "-inf", self._clock() - 31 * 86_400)  # far older than any TTL
                pipe.pexpire(index, ttl_ms, gt=True)
                pipe.zcard(index)
                return list(await pipe.execute())

        count = int((await self._do(write))[-1])
        if count > max_per_principal:
            await self._trim_tasks(index, count - max_per_principal)

    async def _trim_tasks(self, index: str, excess: int) -> None:
        """Drop the principal's oldest terminal (or expired) records until ``excess`` are gone."""
        raw_ids = await self._do(lambda: self.redis.zrange(index, 0, -1))
        for raw_id in raw_ids:
            if excess <= 0:
                return
            task_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
            key = f"{self.prefix}task:{task_id}"
            raw = await self._do(functools.partial(self.redis.get, key))
            if raw is None or TaskRecord.from_json(raw).terminal:
                await self._do(functools.partial(self.redis.delete, key))
                await self._do(functools.partial(self.redis.zrem, index, task_id))
                excess -= 1

    async def get_task(self, task_id: str) -> TaskRecord | None:
        raw = await self._do(lambda: self.redis.get(f"{self.prefix}task:{task_id}"))
        record = None if raw is None else TaskRecord.from_json(raw)
        return record if record is not None and record.expires_at > self._clock() else None

    async def list_tasks(self, principal: str | None = None, limit: int = 100) -> list[TaskRecord]:
        records: list[TaskRecord] = []
        if principal is not None:
            index = f"{self.prefix}tasks:{principal}"
            ids = await self._do(lambda: self.redis.zrevrange(index, 0, limit - 1))
            keys = [f"{self.prefix}task:{i.decode() if isinstance(i, bytes) else i}" for i in ids]
        else:
            keys = []
            async for key in self.redis.scan_iter(match=f"{self.prefix}task:*", count=200):
                keys.append(key.decode() if isinstance(key, bytes) else str(key))
                if len(keys) >= 10 * limit:
                    break
        if keys:
            for raw in await self._do(lambda: self.redis.mget(keys)):
                if raw is not None and (record := TaskRecord.from_json(raw)).expires_at > self._clock():
                    records.append(record)
        records.sort(key=lambda r: r.created_at, reverse=True)
        return records[:limit]

    # --- AuditStore ------------------------------------------------------------------------------------------------

    def record(self, entry: AuditFields) -> None:
        if len(self._audit) >= self.limits.audit_queue:
            self.audit_dropped += 1
            if self.audit_dropped & (self.audit_dropped - 1) == 0:
                log.warning("audit_queue_full", dropped=self.audit_dropped, queue=self.limits.audit_queue)
            return
        fields = {f: _field(getattr(entry, f)) for f in AUDIT_FIELDS}
        if not self.available:
            fields["state"] = "unavailable"  # this call ran while the shared state could not be reached
        self._audit.append(fields)
        if len(self._audit) >= self.limits.audit_batch:
            self._wake.set()

    async def _write_audit(self) -> None:
        """Write queued entries; on failure they stay queued, in order, for the next attempt. One writer at a time."""
        async with self._writing:
            await self._write_queued()

    async def _write_queued(self) -> None:
        while self._audit:
            batch = [self._audit[i] for i in range(min(len(self._audit), self.limits.audit_batch))]
            async with self.redis.pipeline(transaction=False) as pipe:
                for fields in batch:
                    pipe.xadd(
                        self.prefix + "audit",
                        fields,  # type: ignore[arg-type]
                        maxlen=self.config.audit_max_entries,
                        approximate=True,
                    )
                await pipe.execute()
            for _ in batch:
                self._audit.popleft()

    async def flush(self) -> None:
        """Write every queued audit entry now (``StateUnavailable`` if Redis is down: they stay queued)."""
        await self._do(self._write_audit)

    def recent_audit(self, limit: int = 50, session: str | None = None) -> list[dict[str, Any]]:
        """Newest audit entries first (what is still queued is not seen: ``await flush()`` first)."""
        return read_audit(self.config, limit, session)

    # --- shared circuits (``breaker.shared``) ------------------------------------------------------------------------

    def _breaker(self, upstream: str, tool: str | None) -> str:
        return f"{self.prefix}breaker:{upstream}" + (f"/{tool}" if tool else "")

    async def circuit_open(self, upstream: str, tool: str) -> tuple[str | None, float, int] | None:
        """An open circuit another replica published: (tool or None for the upstream, seconds left, failures)."""
        keys = [self._breaker(upstream, None), self._breaker(upstream, tool)]

        async def read() -> list[Any]:
            async with self.redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.get(key)
                    pipe.pttl(key)
                return list(await pipe.execute())

        got = await self._do(read)
        for i, which in enumerate((None, tool)):
            raw, ttl = got[2 * i], got[2 * i + 1]
            if raw is not None and ttl > 0:
                return which, ttl / 1000, int(raw)
        return None

    async def publish_circuit(self, upstream: str, tool: str | None, open_s: float, failures: int) -> None:
        """Say that a circuit opened here: other replicas fail fast until it would half-open."""
        await self._do(lambda: self.redis.set(self._breaker(upstream, tool), failures, px=max(1, int(open_s * 1000))))

    async def retry_tokens(self, upstream: str, delta: float, max_tokens: float) -> float:
        """Add ``delta`` to the upstream's shared retry bucket; its new level (``retry.RetryBudgets.share``)."""
        key = f"{self.prefix}retry:{upstream}"
        return float(await self._do(lambda: self._bucket(keys=[key], args=[repr(delta), repr(max_tokens)])))


def read_audit(config: StateConfig, limit: int = 50, session: str | None = None) -> list[dict[str, Any]]:
    """The newest audit entries of a Redis state (for ``resilient-mcp audit`` and ``recent_audit``), newest first."""
    assert config.url is not None
    kwargs: dict[str, Any] = {
        "socket_timeout": config.command_timeout_s,
        "socket_connect_timeout": config.connect_timeout_s,
    }
    if config.username is not None:
        kwargs["username"] = config.username
    if config.password is not None:
        kwargs["password"] = config.password
    client = redis.Redis.from_url(config.url, **kwargs)
    out: list[dict[str, Any]] = []
    try:
        last = "+"
        while len(out) < limit:
            rows: list[tuple[bytes, dict[bytes, bytes]]] = client.xrevrange(  # type: ignore[assignment]
                config.key_prefix + "audit", max=last, count=max(limit, 100)
            )
            for _id, raw in rows:
                row = _row({k.decode(): v.decode() for k, v in raw.items()})
                if session is None or row["session"] == session:
                    out.append(row)
                if len(out) >= limit:
                    break
            if len(rows) < max(limit, 100):
                break
            last = "(" + rows[-1][0].decode()
    except (RedisError, OSError) as exc:  # down or refused alike: the audit cannot be read (no store to mark down)
        raise StateError(f"cannot read the audit from Redis at {_redact(config.url)}: {exc}") from exc
    finally:
        client.close()
    return out


def _field(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return json.dumps(list(value))
    return str(value)


def _row(raw: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = dict(raw)
    row["ts"] = float(raw.get("ts", 0))
    row["argument_keys"] = json.loads(raw.get("argument_keys") or "[]")
    for name in ("attempts", "latency_ms"):
        row[name] = int(raw.get(name) or 0)
    for name in ("fault_type", "decided_by"):
        row[name] = raw.get(name) or None
    return row


def _record(key: str, raw: dict[str, str]) -> IdempotencyRecord:
    text = raw.get("result")
    return IdempotencyRecord(
        key=key,
        args_hash=raw.get("args_hash", ""),
        tool=raw.get("tool", ""),
        status=raw.get("status", "in_flight"),  # type: ignore[arg-type]
        created_at=float(raw.get("created_at", 0)),
        expires_at=float(raw.get("expires_at", 0)),
        result=types.CallToolResult.model_validate_json(text) if text else None,
    )


def _redact(url: str) -> str:
    """The url without its password."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not at:
        return url
    user = creds.partition(":")[0]
    return f"{scheme}{sep}{user}:***@{host}" if user else f"{scheme}{sep}***@{host}"
