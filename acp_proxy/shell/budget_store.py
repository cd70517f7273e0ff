"""The shared budget store: ``[budgets] store = "redis://HOST:PORT/DB"`` (issue 28).

docs/design.md ("Budgets shared through a store"). The sans-IO core asks for
a :class:`~acp_proxy.core.actions.StoreCall`; this module carries it out with
the ``redis`` client (the ``redis`` extra) in a worker thread
(``trio.to_thread.run_sync``: the client blocks, and its asyncio flavour does
not run on trio), and the relay hands the
:class:`~acp_proxy.core.actions.StoreReply` back to the core. Each call is
one Lua script, so it is atomic across every proxy sharing the store:

- ``reserve``: refuse when the key's tokens are over ``max_tokens``; else
  count one prompt, and take it back when that goes over
  ``prompts_per_window`` (kept in observe mode: the prompt is forwarded);
- ``add``: add token growth.

Keys are ``{key_prefix}{key}:prompts`` and ``{key_prefix}{key}:tokens``; each
expires ``window_s`` after its first increment (``PEXPIRE`` when it has no
expiry yet), so no counter outlives its window. A store that cannot be
reached gives ``StoreReply(ok=False, error=...)`` naming it, and the core
applies ``budgets.store_fail``.
"""

from __future__ import annotations

import threading
from typing import Any

import trio

from acp_proxy.config import BudgetsConfig
from acp_proxy.core.actions import StoreCall, StoreReply
from acp_proxy.errors import UsageError

__all__ = ["ADD_SCRIPT", "RESERVE_SCRIPT", "RedisBudgetStore", "store_for"]

#: KEYS: prompts, tokens. ARGV: prompt limit, token limit, window ms, commit over ("1"/"0").
#: Returns {prompts, tokens, ms to reset, budget used up or ""}.
RESERVE_SCRIPT = """
local tokens = tonumber(redis.call('GET', KEYS[2]) or '0')
local plimit = tonumber(ARGV[1])
local tlimit = tonumber(ARGV[2])
local commit = ARGV[4] == '1'
local budget = ''
if tlimit > 0 and tokens > tlimit then budget = 'max_tokens' end
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if budget == '' or commit then
  n = redis.call('INCR', KEYS[1])
  if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
  if budget == '' and plimit > 0 and n > plimit then
    budget = 'prompts_per_window'
    if not commit then redis.call('DECR', KEYS[1]) end
  end
end
local ttl = redis.call('PTTL', KEYS[1])
if budget == 'max_tokens' then ttl = redis.call('PTTL', KEYS[2]) end
return {n, tokens, ttl, budget}
"""

#: KEYS: tokens. ARGV: amount, window ms. Returns the new total.
ADD_SCRIPT = """
local t = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return t
"""

#: store calls in worker threads at once, over every connection
MAX_THREADS = 4


class RedisBudgetStore:
    """Budget counters in Redis, shared by every proxy using the same URL, prefix and key.

    Args:
        url: ``redis://HOST:PORT/DB``.
        prefix: prepended to every key (``budgets.key_prefix``).
        timeout_s: connect and reply timeout of one call, seconds.

    Raises:
        UsageError: the ``redis`` package is not installed.
    """

    def __init__(self, url: str, prefix: str, timeout_s: float) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as exc:  # pragma: no cover - the test extra installs it
            raise UsageError(
                "budgets.store needs the redis client: pip install 'acp-proxy[redis]'"
            ) from exc
        self.url = url
        self.prefix = prefix
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._client = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        self._reserve = self._client.register_script(RESERVE_SCRIPT)
        self._add = self._client.register_script(ADD_SCRIPT)
        self._limiter = trio.CapacityLimiter(MAX_THREADS)

    def keys(self, key: str) -> tuple[str, str]:
        """The Redis keys of ``key``'s prompt and token counters."""
        base = f"{self.prefix}{key}"
        return f"{base}:prompts", f"{base}:tokens"

    def call_blocking(self, call: StoreCall) -> StoreReply:
        """Carries out ``call`` (blocks: run it in a worker thread). Never raises on a
        store error: the reply says ``ok=False`` and names the store."""
        prompts_key, tokens_key = self.keys(call.key)
        window_ms = max(1, int(call.window_s * 1000))
        try:
            if call.op == "add":
                total: Any = self._add(keys=[tokens_key], args=[call.amount, window_ms])
                return StoreReply(ok=True, tokens=int(total))
            n, tokens, ttl, budget = self._reserve(
                keys=[prompts_key, tokens_key],
                args=[call.prompt_limit, call.token_limit, window_ms, int(call.commit_over)],
            )
        except self._errors as exc:
            return StoreReply(ok=False, error=f"{self.url}: {type(exc).__name__}: {exc}")
        name = budget.decode() if isinstance(budget, bytes) else str(budget)
        return StoreReply(
            ok=True,
            allowed=not name,
            budget=name or None,
            prompts=int(n),
            tokens=int(tokens),
            reset_in_s=max(0.0, int(ttl) / 1000),
        )

    async def call(self, call: StoreCall) -> StoreReply:
        """:meth:`call_blocking` in a worker thread (at most :data:`MAX_THREADS` at once)."""
        return await trio.to_thread.run_sync(
            self.call_blocking, call, limiter=self._limiter, abandon_on_cancel=True
        )

    def close(self) -> None:
        """Closes the client's connections."""
        self._client.close()


_STORES: dict[tuple[str, str, float], RedisBudgetStore] = {}
_LOCK = threading.Lock()


def store_for(budgets: BudgetsConfig) -> RedisBudgetStore:
    """The process's store for ``budgets.store`` (one client per URL, prefix and timeout).

    Raises:
        UsageError: the ``redis`` package is not installed.
    """
    ident = (budgets.store, budgets.key_prefix, budgets.store_timeout_s)
    with _LOCK:
        store = _STORES.get(ident)
        if store is None:
            store = _STORES[ident] = RedisBudgetStore(*ident)
        return store
