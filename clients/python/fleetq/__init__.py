"""A client of fleetq's HTTP API for producers and operators.

Standard library only. Requests carry a tenant's API key when one is given
(``api_key``: the producer routes, for that tenant's jobs only; on a deployed
stage, call its KeyApiUrl), else the operator bearer token when one is given
(the dev stack); otherwise they are signed with AWS Signature Version 4 for
API Gateway's IAM authorization, which needs botocore (Debian:
python3-botocore) and the default AWS credentials.

The routes and bodies are those of docs/api.md and
pkg/domain/wire/openapi/openapi.yaml.

A ``503 unavailable`` (the request changed nothing) and a ``429`` are retried
a bounded number of times (``retries``, default 3), each after the answer's
``Retry-After`` (or 1, 2, 4 ... seconds without one) plus up to 10% jitter;
an answer asking for longer than ``max_wait`` seconds (default 30) is raised
at once, as is the last one.
"""

from __future__ import annotations

import json
import email.utils
import hashlib
import hmac
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

#: The client's version: that of the fleetq release it belongs to (its tag
#: without the leading v); pyproject.toml reads it from here.
__version__ = "0.1.0"

__all__ = ["Client", "Job", "JobError", "JobSummary", "WaitingOn", "APIError", "STATUSES", "FINAL_STATUSES",
           "WebhookError", "verify_webhook", "key_id"]

#: Every status a job has: accepted from the moment its submission is
#: answered until dispatch files it, then queued, leased, and finally one of
#: FINAL_STATUSES.
STATUSES = ("accepted", "queued", "leased", "succeeded", "dead", "canceled")

#: The statuses a job never leaves.
FINAL_STATUSES = frozenset({"succeeded", "dead", "canceled"})

#: The longest the API's wait route holds a request, in seconds.
MAX_WAIT_SECONDS = 25


class APIError(Exception):
    """An error answer of the API: its status, code and message
    (docs/api.md lists the codes). ``retry_after`` is seconds or None."""

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[int] = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True)
class JobError:
    """A job's last failure as its worker reported it."""

    message: str
    retryable: bool
    code: str = ""


@dataclass(frozen=True)
class WaitingOn:
    """The one thing a queued job waits on: ``code`` (leasing, jobs_ahead,
    capacity_booting, scale_out_next_tick, tenant_at_cap, fleet_at_max,
    spot_unavailable, backoff, worker_approval, queue_deadline_near), its
    ``params`` (strings: counts, RFC 3339 times) and a ``text`` to show."""

    code: str
    text: str
    params: Dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Job:
    """A job as GET /api/jobs/{job_id} answers it. Times are RFC 3339 strings
    or None; ``result`` is the worker's result object or None."""

    job_id: str
    tenant_id: str
    workflow_id: str
    fleet_slug: str
    status: str
    attempts: int
    max_attempts: int
    preemptions: int
    priority: int
    reason: str = ""
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    not_before: Optional[str] = None
    lease_expires_at: Optional[str] = None
    worker_id: Optional[str] = None
    progress: Optional[float] = None
    result: Optional[Dict[str, Any]] = None
    error: Optional[JobError] = None
    history: List[Dict[str, Any]] = field(default_factory=list)
    cost_usd: Optional[float] = None  # what the finished job cost; None until priced
    #: While queued: when the job is expected to start (None when the
    #: estimate cannot say; ``estimate_basis`` says why), how the estimate
    #: was made, what the job waits on and its place in line (1: next).
    estimated_start_at: Optional[str] = None
    estimate_basis: str = ""
    waiting_on: Optional[WaitingOn] = None
    position: Optional[int] = None

    @property
    def finished(self) -> bool:
        """Whether the job's status is final."""
        return self.status in FINAL_STATUSES

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Job":
        err = d.get("error")
        return cls(
            job_id=d["job_id"], tenant_id=d["tenant_id"], workflow_id=d["workflow_id"],
            fleet_slug=d["fleet_slug"], status=d["status"], attempts=d["attempts"],
            max_attempts=d["max_attempts"], preemptions=d["preemptions"], priority=d["priority"],
            reason=d.get("reason", ""), created_at=d.get("created_at"), updated_at=d.get("updated_at"),
            not_before=d.get("not_before"), lease_expires_at=d.get("lease_expires_at"),
            worker_id=d.get("worker_id"), progress=d.get("progress"), result=d.get("result"),
            error=JobError(message=err["message"], retryable=err["retryable"], code=err.get("code", "")) if err else None,
            history=list(d.get("history") or []),
            cost_usd=d.get("cost_usd"),
            estimated_start_at=d.get("estimated_start_at"), estimate_basis=d.get("estimate_basis", ""),
            waiting_on=_waiting_on(d.get("waiting_on")), position=d.get("position"),
        )


def _waiting_on(w: Optional[Dict[str, Any]]) -> Optional[WaitingOn]:
    if not w:
        return None
    return WaitingOn(code=w["code"], text=w.get("text", ""), params=dict(w.get("params") or {}))


@dataclass(frozen=True)
class JobSummary:
    """A job in an operator's list (GET /api/admin/jobs)."""

    job_id: str
    tenant_id: str
    workflow_id: str
    fleet_slug: str
    status: str
    attempts: int
    preemptions: int
    reason: str = ""
    error_code: str = ""
    updated_at: Optional[str] = None


class Client:
    """Calls the producer and operator routes of one fleetq API.

    ``api`` defaults to $FLEETQ_API, ``api_key`` (a tenant's API key, which
    acts for its tenant: ``tenant_id`` may then be left empty) to
    $FLEETQ_API_KEY, ``token`` to $FLEETQ_OPERATOR_TOKEN and ``region`` (for
    SigV4) to $AWS_REGION.

    ``retries`` bounds how often one call is sent again after a ``503`` or
    ``429`` (0: never); each retry waits the answer's ``Retry-After`` (1, 2,
    4 ... seconds when it has none) plus a random jitter of up to 10%, so
    clients turned away together do not return together. An answer asking
    for more than ``max_wait`` seconds is raised at once as APIError (its
    ``retry_after`` says how long). ``sleep`` is the function that waits
    (tests pass their own).
    """

    def __init__(self, api: Optional[str] = None, token: Optional[str] = None,
                 region: Optional[str] = None, timeout: float = 30.0, retries: int = 3,
                 max_wait: float = 30.0, sleep: Callable[[float], None] = time.sleep,
                 api_key: Optional[str] = None):
        self.api = (api or os.environ.get("FLEETQ_API") or "http://127.0.0.1:8080").rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("FLEETQ_API_KEY", "")
        self.token = token if token is not None else os.environ.get("FLEETQ_OPERATOR_TOKEN", "")
        self.region = region or os.environ.get("AWS_REGION", "")
        self.timeout = timeout
        self.retries = max(0, retries)
        self.max_wait = max_wait
        self._sleep = sleep
        self._random = random.Random()

    def submit(self, tenant_id: str, workflow_id: str, input: Optional[Dict[str, Any]] = None,
               job_id: Optional[str] = None, priority: int = 0, max_attempts: int = 0,
               timeout_seconds: int = 0, queue_timeout_seconds: int = 0, callback_url: str = "") -> str:
        """Queues a job and returns its id (``<tenant>:<job_id>``). Without
        ``job_id`` one is made here, so retrying a submit with the returned
        id yields one job. With an API key, ``tenant_id`` may be "" (the
        key's tenant).
        ``callback_url`` receives the job's outcomes, signed (its host must
        be among the stage's webhooks.allowed_hosts)."""
        body: Dict[str, Any] = {"job_id": job_id or str(uuid.uuid4()),
                                "workflow_id": workflow_id, "priority": priority}
        if tenant_id:
            body["tenant_id"] = tenant_id
        if input is not None:
            body["input"] = input
        for k, v in (("max_attempts", max_attempts), ("timeout_seconds", timeout_seconds),
                     ("queue_timeout_seconds", queue_timeout_seconds)):
            if v:
                body[k] = v
        return self._call("POST", "/api/jobs", body)["job_id"]

    def get(self, job_id: str) -> Job:
        """The job; APIError with code not_found until dispatch created it."""
        return Job.from_json(self._call("GET", "/api/jobs/" + _seg(job_id)))

    def wait(self, job_id: str, timeout: float = 600.0, interval: float = 2.0) -> Job:
        """Returns the job once its status is final; TimeoutError after
        ``timeout`` seconds. It holds a request on the API's wait route
        (``GET /api/jobs/{job_id}/wait``) from the status it last saw, up to
        25 seconds at a time (and 5 less than the client's ``timeout``), and
        looks at the job every ``interval`` seconds instead when the API
        answers that route 404 (an API from before it) or when less than a
        second is left; when the route answers 429 or a 5xx (after the
        client's retries of 429 and 503: the waits are at their cap, and API
        Gateway answers a throttled function with a 500 of its own) it looks
        once after ``interval`` and then waits again. A job is found from
        the moment its submission is answered (status ``accepted`` until
        dispatch files it); not_found is waited out only for a job sent
        straight to the submission queue."""
        deadline = time.monotonic() + timeout
        held = True  # the API serves the wait route, until it answers 404
        status = ""
        throttled = False  # the wait route answered 429 or 5xx: look once, then wait again
        while True:
            secs = int(min(deadline - time.monotonic(), self.timeout - 5, MAX_WAIT_SECONDS))
            waiting, throttled = held and status and secs >= 1 and not throttled, False
            try:
                if waiting:
                    q = urllib.parse.urlencode({"status": status, "seconds": str(secs)})
                    job = Job.from_json(self._call("GET", f"/api/jobs/{_seg(job_id)}/wait?{q}"))
                    if job.finished:
                        return job
                    status = job.status
                    continue
                job = self.get(job_id)
                if job.finished:
                    return job
                status = job.status
            except APIError as e:
                if waiting and e.status == 404:
                    held = False  # the job exists (it was read): the route does not
                    continue
                throttled = waiting and (e.status == 429 or e.status >= 500)
                if e.code != "not_found" and not throttled:
                    raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"job {job_id} did not finish within {timeout}s")
            time.sleep(min(interval, left))

    def cancel(self, job_id: str) -> str:
        """Cancels an accepted, queued or leased job; returns its status. An
        accepted job canceled before dispatch files it never runs."""
        return self._call("POST", f"/api/jobs/{_seg(job_id)}/cancel", {})["status"]

    def retry(self, job_id: str) -> str:
        """Queues a dead job again; returns its new status."""
        return self._call("POST", f"/api/admin/jobs/{_seg(job_id)}/retry", {})["status"]

    def list(self, status: str = "dead", fleet: str = "", limit: int = 100) -> List[JobSummary]:
        """Jobs of one status, optionally of one fleet."""
        q = {"status": status, "limit": str(limit)}
        if fleet:
            q["fleet"] = fleet
        jobs = self._call("GET", "/api/admin/jobs?" + urllib.parse.urlencode(q))["jobs"]
        return [JobSummary(**{k: j.get(k, d) for k, d in _SUMMARY_FIELDS.items()}) for j in jobs]

    def upload(self, tenant_id: str, filename: str, data: bytes, content_type: str = "") -> str:
        """Uploads one input file under the tenant's prefix through a
        presigned PUT and returns its key, which a job's input names in
        ``input_keys`` (``{"input_keys": {"scene": key}}``)."""
        body = {"filename": filename}
        if tenant_id:
            body["tenant_id"] = tenant_id
        if content_type:
            body["content_type"] = content_type
        up = self._call("POST", "/api/uploads", body)
        headers = {"Content-Type": content_type} if content_type else {}
        req = urllib.request.Request(up["url"], data=data, method="PUT", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                res.read()
        except urllib.error.HTTPError as e:
            raise APIError(e.code, "unknown", f"the presigned upload failed: {e.reason}") from None
        return up["key"]

    def logs(self, job_id: str, attempt: int = 0) -> bytes:
        """The tail of an attempt's runner output (the latest attempt
        unless ``attempt`` is given). APIError not_found when the job has
        not run that attempt or its worker uploaded no log."""
        entries = self._call("GET", f"/api/jobs/{_seg(job_id)}/logs")["logs"]
        if attempt:
            entries = [e for e in entries if e["attempt"] == attempt]
        if not entries:
            raise APIError(404, "not_found", f"job {job_id} has no attempt {attempt or 1} yet")
        try:
            with urllib.request.urlopen(entries[-1]["url"], timeout=self.timeout) as res:
                return res.read()
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise APIError(404, "not_found", f"attempt {entries[-1]['attempt']} of job {job_id} has no log") from None
            raise APIError(e.code, "unknown", f"the presigned log download failed: {e.reason}") from None

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        attempt = 0
        while True:
            try:
                return self._send(method, path, body)
            except APIError as e:
                wait = self._retry_wait(e, attempt)
                if wait is None:
                    raise
            self._sleep(wait)
            attempt += 1

    def _retry_wait(self, e: APIError, attempt: int) -> Optional[float]:
        """Seconds to wait before sending a call again after ``e``, or None
        when it is not to be retried."""
        if e.status not in (429, 503) or attempt >= self.retries:
            return None
        wait = float(e.retry_after) if e.retry_after is not None else float(2 ** attempt)
        if wait > self.max_wait:
            return None
        return wait + self._random.uniform(0, wait / 10)

    def _send(self, method: str, path: str, body: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        url = self.api + path
        headers.update(self._authorization(method, url, data, headers))
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                return json.loads(res.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise _api_error(e) from None

    def _authorization(self, method: str, url: str, data: Optional[bytes], headers: Dict[str, str]) -> Dict[str, str]:
        if self.api_key:
            return {"Authorization": "Bearer " + self.api_key}
        if self.token:
            return {"Authorization": "Bearer " + self.token}
        try:
            import botocore.session
            from botocore.auth import SigV4Auth
            from botocore.awsrequest import AWSRequest
        except ImportError:
            raise RuntimeError("no operator token, and SigV4 signing needs botocore (Debian: python3-botocore)") from None
        session = botocore.session.Session()
        creds = session.get_credentials()
        region = self.region or session.get_config_variable("region")
        if creds is None or not region:
            raise RuntimeError("no operator token, and no AWS credentials or region to sign with")
        req = AWSRequest(method=method, url=url, data=data or b"", headers=dict(headers))
        SigV4Auth(creds, "execute-api", region).add_auth(req)
        return {k: v for k, v in req.headers.items() if k.lower() in ("authorization", "x-amz-date", "x-amz-security-token")}


_SUMMARY_FIELDS: Dict[str, Any] = {
    "job_id": "", "tenant_id": "", "workflow_id": "", "fleet_slug": "", "status": "",
    "attempts": 0, "preemptions": 0, "reason": "", "error_code": "", "updated_at": None,
}


def _seg(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _api_error(e: urllib.error.HTTPError) -> APIError:
    raw = e.read()
    code, message = "unknown", e.reason or ""
    try:
        detail = json.loads(raw)["error"]
        if detail.get("code"):
            code, message = detail["code"], detail.get("message", "")
    except (ValueError, KeyError, TypeError):
        pass
    ra = e.headers.get("Retry-After") if e.headers else None
    return APIError(e.code, code, str(message), _retry_after(ra))


def _retry_after(value: Optional[str]) -> Optional[int]:
    """Seconds from a Retry-After header: whole seconds (what fleetq sends)
    or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0, int(when.timestamp() - time.time() + 0.999))


class WebhookError(Exception):
    """A job callback whose timestamp, key id or signature does not verify."""


def key_id(key: str) -> str:
    """The id fleetq names a signing key by: the first 16 hex digits of the
    SHA-256 of the key."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def verify_webhook(headers: Any, body: bytes, key: str, previous_key: Optional[str] = None,
                   previous_until: Optional[float] = None, now: Optional[float] = None,
                   tolerance: float = 300.0) -> Dict[str, Any]:
    """Verify a job callback (docs/api.md, "Webhooks") and return its body.

    ``headers`` is any mapping with ``get`` (case-insensitive ones such as
    ``http.server``'s or ``email.message.Message`` work as they are), ``body``
    the raw bytes received. ``key`` is the webhook key; during a rotation,
    ``previous_key`` is the key before it, accepted until ``previous_until``
    (Unix seconds: the end of the rotation window), never after.
    ``Fleetq-Timestamp`` must be within ``tolerance`` seconds of ``now``.
    Raises WebhookError; deduplicate what it returns by its ``id``."""
    now = time.time() if now is None else now
    try:
        ts = int(headers.get("Fleetq-Timestamp") or "")
    except ValueError:
        raise WebhookError("no Fleetq-Timestamp") from None
    if abs(now - ts) > tolerance:
        raise WebhookError(f"Fleetq-Timestamp {ts} is more than {tolerance:.0f}s from now")
    keys = {key_id(key): key}
    if previous_key and previous_until is not None and now < previous_until:
        keys.setdefault(key_id(previous_key), previous_key)
    # Every signature, by key id: Fleetq-Signatures ("<id>:v1=<hex>, ..."),
    # and Fleetq-Key-Id with Fleetq-Signature.
    signed = {}
    for part in (headers.get("Fleetq-Signatures") or "").split(","):
        kid, sep, sig = part.strip().partition(":")
        if sep and kid:
            signed[kid] = sig
    signed.setdefault(headers.get("Fleetq-Key-Id") or "", headers.get("Fleetq-Signature") or "")
    held = [kid for kid in keys if kid in signed]
    if not held:
        raise WebhookError("no signature names the current key or the previous one within its window")
    for kid in held:
        mac = hmac.new(keys[kid].encode(), str(ts).encode() + b"." + body, hashlib.sha256).hexdigest()
        if hmac.compare_digest("v1=" + mac, signed[kid]):
            break
    else:
        raise WebhookError("Fleetq-Signature does not match")
    return json.loads(body)
