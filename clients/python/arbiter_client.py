"""Arbiter client for rollout workers: one file, Python >= 3.8, standard library only.

Copy this file next to your training code, then::

    from arbiter_client import ArbiterClient, ArbiterError, is_error

    arbiter = ArbiterClient("http://arbiter.rl.svc.cluster.local", token=os.environ.get("ARBITER_TOKEN"))
    results = arbiter.verify_batch(
        [{"task": task, "trajectory": completion} for completion in group],
        manifest=manifest,
    )
    rewards = [None if is_error(r) else r["reward"] for r in results]

Retry policy (the same as the TypeScript client, src/client.ts):

- an error body marked ``"retryable": true`` is retried; ``"retryable": false`` never is;
- a 503 whose body is not an Arbiter error body (a proxy's) is retried when it has Retry-After;
- a connection error before any response (refused, reset, DNS failure) is retried;
- anything else (400, 401, a 502 marked retryable false, a malformed 200) raises at once.

Waits are jittered exponential backoff, or the server's Retry-After (capped) plus a little
jitter; attempts are bounded and all attempts and waits fit inside one per-call deadline.
An ``ArbiterClient`` holds no per-call state, so one instance may be shared by threads.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import math
import random
import socket
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

__all__ = [
    "ArbiterClient",
    "ArbiterError",
    "RetryEvent",
    "is_error",
    "parse_retry_after",
    "verify",
    "verify_batch",
]

__version__ = "1"

# Codes the client gives when there is no Arbiter error body to report (server codes start ARB_).
CLIENT_TIMEOUT = "CLIENT_TIMEOUT"  # the per-call deadline passed
CLIENT_CONNECTION_FAILED = "CLIENT_CONNECTION_FAILED"  # no response: refused, reset, DNS failure
CLIENT_HTTP_STATUS = "CLIENT_HTTP_STATUS"  # a non-2xx answer without an Arbiter error body
CLIENT_BAD_RESPONSE = "CLIENT_BAD_RESPONSE"  # a 2xx answer that is not the documented shape


class ArbiterError(Exception):
    """Every failure of a call.

    ``code`` is the server's stable ARB_ code when it answered with an error body (``body`` holds
    it whole), else one of the CLIENT_ codes above. ``retryable`` says whether the same request
    may succeed later; ``attempts`` how many were made before this was raised.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: Optional[int] = None,
        retryable: bool = False,
        body: Optional[Dict[str, Any]] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.retryable = retryable
        self.body = body
        self.verifier: Optional[Dict[str, str]] = body.get("verifier") if body else None
        self.request_id: Optional[str] = body.get("requestId") if body else None
        self.retry_after = retry_after  # seconds, as the server sent it (before any cap)
        self.attempts = 1

    @property
    def requestId(self) -> Optional[str]:  # noqa: N802 - the wire name, for symmetry with the body
        return self.request_id

    def __repr__(self) -> str:
        return "ArbiterError(code=%r, status=%r, retryable=%r, verifier=%r, request_id=%r)" % (
            self.code, self.status, self.retryable, self.verifier, self.request_id)


class RetryEvent:
    """What ``on_retry`` receives before each wait."""

    __slots__ = ("attempt", "delay", "error", "items")

    def __init__(self, attempt: int, delay: float, error: ArbiterError, items: Optional[List[int]] = None):
        self.attempt = attempt  # the attempt that just failed, from 1
        self.delay = delay  # seconds the client waits before the next attempt
        self.error = error
        self.items = items  # batch item retries: indices into the original items sent again


def is_error(entry: Any) -> bool:
    """True for a batch entry (or any value) that is an Arbiter error body rather than a result."""
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("statusCode"), int)
        and isinstance(entry.get("code"), str)
        and isinstance(entry.get("retryable"), bool)
    )


def _is_result(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    reward = entry.get("reward")
    # bool is an int in Python: True must never pass as a reward of 1.
    return isinstance(reward, (int, float)) and not isinstance(reward, bool) and math.isfinite(reward)


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Retry-After is delta-seconds or an HTTP date; returns seconds, or None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
        return seconds if seconds >= 0 and math.isfinite(seconds) else None
    except ValueError:
        pass
    try:
        date = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if date is None:
        return None
    return max(0.0, date.timestamp() - (time.time() if now is None else now))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Arbiter never redirects; a 3xx is some proxy's doing and is reported, not followed."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[override]
        return None


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()


class ArbiterClient:
    """A client for one Arbiter base URL (a Service, a load balancer, or one replica)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: Optional[str] = None,
        timeout: float = 300.0,
        max_attempts: int = 4,
        base_delay: float = 0.2,
        max_delay: float = 5.0,
        max_retry_after: float = 30.0,
        retry_items: bool = True,
        headers: Optional[Mapping[str, str]] = None,
        on_retry: Optional[Callable[[RetryEvent], None]] = None,
    ) -> None:
        if not (base_url.startswith("http://") or base_url.startswith("https://")):
            raise ValueError("base_url must be an http(s) URL such as http://127.0.0.1:8080, got %r" % base_url)
        if not (timeout > 0) or max_attempts < 1 or base_delay < 0 or max_delay < 0 or max_retry_after < 0:
            raise ValueError("timeout and max_attempts must be positive; delays zero or more")
        self.base_url = base_url.rstrip("/")
        self.timeout = float(timeout)
        self.max_attempts = int(max_attempts)
        self.base_delay = float(base_delay)
        self.max_delay = float(max_delay)
        self.max_retry_after = float(max_retry_after)
        self.retry_items = retry_items
        self.on_retry = on_retry
        self._headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "user-agent": "arbiter-client-python/%s" % __version__,
        }
        if headers:
            self._headers.update(headers)
        if token:
            self._headers["authorization"] = "Bearer %s" % token
        self._opener = urllib.request.build_opener(_NoRedirect())

    # ----------------------------------------------------------------------------------- calls

    def verify(
        self,
        manifest: Mapping[str, Any],
        task: Mapping[str, Any],
        trajectory: Any,
        *,
        timeout: Optional[float] = None,
        request_id: Optional[str] = None,
    ) -> Dict[str, Any]:
        """POST /v1/verify: the result dict (with a finite ``reward``), or raises ArbiterError."""
        deadline = _Deadline(self.timeout if timeout is None else timeout)
        body = self._send("/v1/verify", {"manifest": manifest, "task": task, "trajectory": trajectory}, deadline, request_id)
        if not _is_result(body):
            raise ArbiterError(CLIENT_BAD_RESPONSE, "a 200 from /v1/verify without a finite numeric reward")
        return body

    def verify_batch(
        self,
        items: Sequence[Mapping[str, Any]],
        manifest: Optional[Mapping[str, Any]] = None,
        *,
        timeout: Optional[float] = None,
        request_id: Optional[str] = None,
    ) -> List[Dict[str, Any]]:
        """POST /v1/verify/batch: one entry per item, in order; each a result or an error body.

        With ``manifest`` the items are ``{"task", "trajectory"}`` and share it; without, each item
        is a full ``{"manifest", "task", "trajectory"}``. Entries marked retryable are sent again,
        alone, while attempts and the deadline allow; what still fails is returned as its error
        body (test with ``is_error``), not raised. Raises only when the batch call itself fails.
        """
        deadline = _Deadline(self.timeout if timeout is None else timeout)
        items = list(items)
        results: List[Any] = [None] * len(items)
        pending = list(range(len(items)))
        round_ = 1
        while True:
            envelope: Dict[str, Any] = {"items": [items[i] for i in pending]}
            if manifest is not None:
                envelope["manifest"] = manifest
            try:
                answer = self._send("/v1/verify/batch", envelope, deadline, request_id)
            except ArbiterError:
                if round_ == 1:
                    raise
                break  # a resend that fails as a whole leaves the earlier answers standing
            entries = answer.get("results") if isinstance(answer, dict) else None
            if not isinstance(entries, list) or len(entries) != len(pending):
                raise ArbiterError(CLIENT_BAD_RESPONSE, "a 200 from /v1/verify/batch without one result per item (sent %d)" % len(pending))
            for index, entry in zip(pending, entries):
                if not is_error(entry) and not _is_result(entry):
                    raise ArbiterError(CLIENT_BAD_RESPONSE, "batch entry %d is neither a result nor an error body" % index)
                results[index] = entry
            again = [i for i in pending if is_error(results[i]) and results[i]["retryable"] is True]
            if not self.retry_items or not again or round_ >= self.max_attempts:
                break
            delay = self._backoff(round_)
            if delay >= deadline.remaining():
                break
            self._notify(RetryEvent(round_, delay, _from_body(results[again[0]]["statusCode"], results[again[0]], None), again))
            time.sleep(delay)
            pending = again
            round_ += 1
        return results

    # -------------------------------------------------------------------------------- plumbing

    def _send(self, path: str, payload: Any, deadline: _Deadline, request_id: Optional[str]) -> Any:
        data = json.dumps(payload, allow_nan=False).encode("utf-8")
        attempt = 1
        while True:
            try:
                return self._attempt(path, data, deadline, request_id)
            except ArbiterError as error:
                error.attempts = attempt
                if not error.retryable or attempt >= self.max_attempts or error.code == CLIENT_TIMEOUT:
                    raise
                delay = self._delay(attempt, error.retry_after)
                # Waiting past the deadline only to time out would hide the real error.
                if delay >= deadline.remaining():
                    raise
                self._notify(RetryEvent(attempt, delay, error))
                time.sleep(delay)
                attempt += 1

    def _attempt(self, path: str, data: bytes, deadline: _Deadline, request_id: Optional[str]) -> Any:
        remaining = deadline.remaining()
        if remaining <= 0:
            raise ArbiterError(CLIENT_TIMEOUT, "the call did not finish within its deadline", retryable=True)
        headers = dict(self._headers)
        if request_id is not None:
            headers["x-request-id"] = request_id
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method="POST")
        try:
            response = self._opener.open(request, timeout=remaining)
        except urllib.error.HTTPError as answer:
            # A non-2xx answer: read it, then decide from its body.
            status, text, retry_after_header = answer.code, self._read(answer, deadline, answer.code), answer.headers.get("retry-after")
            answer.close()
            return self._error(status, text, retry_after_header)
        except (socket.timeout, TimeoutError) as cause:
            raise self._timeout(cause)
        except (urllib.error.URLError, OSError) as cause:
            reason = getattr(cause, "reason", cause)
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise self._timeout(reason)
            # No response at all: the request may be tried again.
            raise ArbiterError(CLIENT_CONNECTION_FAILED, "no response from %s: %s" % (self.base_url, reason), retryable=True) from cause
        except http.client.HTTPException as cause:
            # Something answered, but not HTTP (a bad status line): not Arbiter, not retried.
            raise ArbiterError(CLIENT_BAD_RESPONSE, "a garbled answer from %s: %r" % (self.base_url, cause)) from cause
        with response:
            status = response.status
            text = self._read(response, deadline, status)
        try:
            return json.loads(text)
        except ValueError:
            raise ArbiterError(CLIENT_BAD_RESPONSE, "a %d answer that is not JSON: %s" % (status, _cut(text)), status=status) from None

    def _read(self, response: Any, deadline: _Deadline, status: int) -> str:
        chunks = []
        try:
            while True:
                if deadline.remaining() <= 0:
                    raise self._timeout(None)
                chunk = response.read(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except ArbiterError:
            raise
        except (socket.timeout, TimeoutError) as cause:
            raise self._timeout(cause)
        except Exception as cause:  # http.client.IncompleteRead, ConnectionResetError, ...
            # The server had started answering: it may have run the verification, so no resend.
            raise ArbiterError(CLIENT_CONNECTION_FAILED, "the answer from %s broke off: %r" % (self.base_url, cause), status=status) from cause
        return b"".join(chunks).decode("utf-8", errors="replace")

    def _error(self, status: int, text: str, retry_after_header: Optional[str]) -> Any:
        retry_after = parse_retry_after(retry_after_header)
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if is_error(body):
            raise _from_body(status, body, retry_after)
        # Not Arbiter speaking (a proxy, a load balancer): only a 503 that names a time is retried.
        raise ArbiterError(
            CLIENT_HTTP_STATUS,
            "HTTP %d without an Arbiter error body: %s" % (status, _cut(text)),
            status=status,
            retryable=status == 503 and retry_after is not None,
            retry_after=retry_after,
        )

    def _timeout(self, cause: Optional[BaseException]) -> ArbiterError:
        error = ArbiterError(CLIENT_TIMEOUT, "the call did not finish within its deadline", retryable=True)
        error.__cause__ = cause
        return error

    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        if retry_after is None:
            return self._backoff(attempt)
        wait = min(retry_after, self.max_retry_after)
        # A little jitter on top, so a fleet of workers told "1 s" does not return in one instant.
        return wait + random.random() * min(1.0, wait * 0.1)

    def _backoff(self, attempt: int) -> float:
        return random.random() * min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))

    def _notify(self, event: RetryEvent) -> None:
        if self.on_retry is not None:
            self.on_retry(event)


def _from_body(status: int, body: Dict[str, Any], retry_after: Optional[float]) -> ArbiterError:
    verifier = body.get("verifier")
    where = " (%s %s)" % (verifier.get("kind"), verifier.get("ref")) if isinstance(verifier, dict) else ""
    return ArbiterError(
        body["code"],
        "%s%s: %s" % (body["code"], where, body.get("message", "")),
        status=status,
        retryable=body.get("retryable") is True,
        body=body,
        retry_after=retry_after,
    )


def _cut(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:200] + "…" if len(flat) > 200 else flat


def verify(base_url: str, manifest: Mapping[str, Any], task: Mapping[str, Any], trajectory: Any, **options: Any) -> Dict[str, Any]:
    """One-off POST /v1/verify; a long-lived worker should keep one ArbiterClient."""
    call = {k: options.pop(k) for k in ("timeout", "request_id") if k in options}
    return ArbiterClient(base_url, **options).verify(manifest, task, trajectory, **call)


def verify_batch(base_url: str, items: Sequence[Mapping[str, Any]], manifest: Optional[Mapping[str, Any]] = None, **options: Any) -> List[Dict[str, Any]]:
    """One-off POST /v1/verify/batch; a long-lived worker should keep one ArbiterClient."""
    call = {k: options.pop(k) for k in ("timeout", "request_id") if k in options}
    return ArbiterClient(base_url, **options).verify_batch(items, manifest, **call)
