"""Tests of the fleetq client against a running API (fleetq's Go tests start
a dev stack and run this file; see pkg/service/api/python_client_test.go).

Environment: FLEETQ_API, FLEETQ_OPERATOR_TOKEN (the operator also creates the
API key a test uses), FLEETQ_FLEET_SECRET,
FLEETQ_STAGE, FLEETQ_FLEET and FLEETQ_WORKFLOW (a workflow of that fleet).
"""

import email.utils
import http.server
import json
import os
import threading
import time
import unittest
import urllib.request

import fleetq

ENV = os.environ

#: What a queued job may wait on (docs/api.md, "When will my job start").
WAITING_ON_CODES = {"leasing", "jobs_ahead", "capacity_booting", "scale_out_next_tick", "tenant_at_cap",
                    "fleet_at_max", "spot_unavailable", "backoff", "worker_approval", "queue_deadline_near"}


def worker_call(path, body, auth):
    """Calls a worker route as the agent would; returns (status, body)."""
    req = urllib.request.Request(ENV["FLEETQ_API"] + path, data=json.dumps(body).encode(), method="POST",
                                 headers=dict(auth, **{"Content-Type": "application/json"}))
    with urllib.request.urlopen(req, timeout=10) as res:
        raw = res.read()
        return res.status, json.loads(raw) if raw else None


class Worker:
    def __init__(self, worker_id):
        _, reg = worker_call("/api/worker/register", {"worker_id": worker_id, "fleet_slug": ENV["FLEETQ_FLEET"],
                                                      "stage": ENV["FLEETQ_STAGE"]},
                             {"X-Fleet-Secret": ENV["FLEETQ_FLEET_SECRET"]})
        self.auth = {"Authorization": "Bearer " + reg["token"]}

    def lease(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, body = worker_call("/api/worker/poll", {}, self.auth)
            if status == 200:
                return body["job"]
            time.sleep(0.05)
        raise AssertionError("no job was leased")

    def report(self, route, job, **extra):
        return worker_call("/api/worker/" + route, dict(job_id=job["job_id"], lease_token=job["lease_token"], **extra),
                           self.auth)[1]


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.client = fleetq.Client()
        self.workflow = ENV["FLEETQ_WORKFLOW"]

    def wait_dispatched(self, job_id):
        """The job once dispatch has filed it (accepted until then)."""
        deadline = time.monotonic() + 20
        while True:
            job = self.client.get(job_id)
            self.assertIn(job.status, fleetq.STATUSES)
            if job.status != "accepted" or time.monotonic() > deadline:
                return job
            time.sleep(0.05)

    def test_submit_wait_succeeded_then_retry_a_dead_job(self):
        key = self.client.upload("t1", "scene.blend", b"mesh-bytes")
        self.assertTrue(key.startswith("tenants/t1/uploads/"), key)
        job_input = {"prompt": "a cat", "input_keys": {"scene": key}}
        job_id = self.client.submit("t1", self.workflow, input=job_input, job_id="py-1")
        # A job's id is its tenant's: the tenant, a colon and the job_id.
        self.assertEqual(job_id, "t1:py-1")
        # Submitting the same id again yields the same job.
        self.assertEqual(self.client.submit("t1", self.workflow, input=job_input, job_id="py-1"), "t1:py-1")
        with self.assertRaises(TimeoutError):
            self.client.wait("t1:py-1", timeout=0.2, interval=0.05)

        worker = Worker("py-w1")
        leased = worker.lease()
        self.assertEqual((leased["job_id"], leased["input"]), ("t1:py-1", job_input))
        with urllib.request.urlopen(leased["input_urls"]["scene"], timeout=10) as res:
            self.assertEqual(res.read(), b"mesh-bytes")
        got = self.client.get("t1:py-1")
        self.assertEqual((got.status, got.worker_id, got.finished), ("leased", "py-w1", False))
        with self.assertRaises(fleetq.APIError) as no_log:
            self.client.logs("t1:py-1")
        self.assertEqual(no_log.exception.code, "not_found")
        put = urllib.request.Request(leased["log_url"], data=b"step 1\nstep 2\n", method="PUT")
        with urllib.request.urlopen(put, timeout=10) as res:
            res.read()
        self.assertEqual(self.client.logs("t1:py-1"), b"step 1\nstep 2\n")
        self.assertEqual(self.client.logs("t1:py-1", attempt=1), b"step 1\nstep 2\n")
        worker.report("complete", leased, result={"image": "s3://out/py-1.png"})

        done = self.client.wait("t1:py-1", timeout=20, interval=0.05)
        self.assertIsInstance(done, fleetq.Job)
        self.assertEqual((done.status, done.result, done.attempts), ("succeeded", {"image": "s3://out/py-1.png"}, 1))
        self.assertTrue(done.finished)
        self.assertEqual([h["to"] for h in done.history][-1], "succeeded")
        self.assertIn("t1:py-1", [j.job_id for j in self.client.list(status="succeeded")])

        # A job whose worker says it cannot be retried is dead; an operator retries it.
        generated = self.client.submit("t1", self.workflow)
        self.assertTrue(generated.startswith("t1:") and len(generated) == 3 + 36, generated)
        leased = worker.lease()
        self.assertEqual(leased["job_id"], generated)
        self.assertEqual(worker.report("fail", leased, error={"message": "out of memory", "retryable": False, "code": "oom"})["status"], "dead")
        dead = self.client.wait(generated, timeout=20, interval=0.05)
        self.assertEqual((dead.status, dead.error), ("dead", fleetq.JobError(message="out of memory", retryable=False, code="oom")))
        self.assertIn(generated, [j.job_id for j in self.client.list(status="dead", fleet=ENV["FLEETQ_FLEET"])])
        self.assertEqual(self.client.retry(generated), "queued")
        self.assertEqual(self.client.get(generated).status, "queued")

    def test_cancel(self):
        job_id = self.client.submit("t1", self.workflow, job_id="py-2", priority=-5)
        queued = self.wait_dispatched(job_id)
        self.assertEqual(queued.status, "queued")
        # A queued job says what it waits on, its place in line and how its
        # estimate was made (a start only when the fleet's history can time it).
        self.assertIsInstance(queued.waiting_on, fleetq.WaitingOn)
        self.assertIn(queued.waiting_on.code, WAITING_ON_CODES)
        self.assertTrue(queued.waiting_on.text)
        self.assertGreaterEqual(queued.position, 1)
        self.assertTrue(queued.estimate_basis)
        self.assertEqual(queued.estimated_start_at is None, queued.estimate_basis != "projection")
        self.assertEqual(self.client.cancel(job_id), "canceled")
        job = self.client.wait(job_id, timeout=5, interval=0.05)
        self.assertEqual(job.status, "canceled")

    def test_an_api_key_acts_for_its_tenant_only(self):
        op = {"Authorization": "Bearer " + ENV["FLEETQ_OPERATOR_TOKEN"]}
        _, created = worker_call("/api/admin/keys", {"tenant_id": "py-key", "name": "python"}, op)
        key = created["key"]
        client = fleetq.Client(api_key=key, token="")
        # The key's tenant is the job's: no tenant_id needed, ids are its own.
        job_id = client.submit("", self.workflow, job_id="k-1")
        self.assertEqual(job_id, "py-key:k-1")
        self.assertEqual(self.wait_dispatched_by(client, "k-1").tenant_id, "py-key")
        self.assertTrue(client.upload("", "in.bin", b"x").startswith("tenants/py-key/uploads/"))
        # Another tenant's job is not found; another tenant, listing and retry are refused.
        other = self.client.submit("t1", self.workflow, job_id="not-yours")
        self.wait_dispatched(other)
        for call in (lambda: client.get(other), lambda: client.cancel(other), lambda: client.get("not-yours")):
            with self.assertRaises(fleetq.APIError) as e:
                call()
            self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"))
        for call in (lambda: client.submit("t1", self.workflow), lambda: client.list(status="queued"), lambda: client.retry(other)):
            with self.assertRaises(fleetq.APIError) as e:
                call()
            self.assertEqual((e.exception.status, e.exception.code), (403, "permission_denied"))
        # Its own job it may cancel (and the other tests' workers lease neither).
        self.assertEqual(client.cancel("k-1"), "canceled")
        self.assertEqual(self.client.cancel(other), "canceled")
        # Revoked, the key is refused.
        worker_call("/api/admin/keys/" + created["api_key"]["key_id"] + "/revoke", {}, op)
        with self.assertRaises(fleetq.APIError) as e:
            client.get(job_id)
        self.assertEqual((e.exception.status, e.exception.code), (401, "unauthenticated"))

    def wait_dispatched_by(self, client, job_id):
        """The job once dispatch has filed it (accepted until then)."""
        deadline = time.monotonic() + 20
        while True:
            job = client.get(job_id)
            self.assertIn(job.status, fleetq.STATUSES)
            if job.status != "accepted" or time.monotonic() > deadline:
                return job
            time.sleep(0.05)

    def test_errors_are_api_errors(self):
        with self.assertRaises(fleetq.APIError) as e:
            self.client.get("no-such-job")
        self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"))
        with self.assertRaises(fleetq.APIError) as e:
            self.client.submit("t1", "")
        self.assertEqual((e.exception.status, e.exception.code), (400, "invalid_argument"))
        with self.assertRaises(fleetq.APIError) as e:
            fleetq.Client(token="wrong").get("x")
        self.assertEqual((e.exception.status, e.exception.code), (401, "unauthenticated"))


def serve_json(test, answer):
    """Starts a local server for the test that answers each GET with
    ``answer(request)``: (status, JSON body); returns its port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            status, body = answer(self)
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    test.addCleanup(srv.server_close)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    test.addCleanup(srv.shutdown)
    return srv.server_port


class SigV4Test(unittest.TestCase):
    @unittest.skipUnless(__import__("importlib").util.find_spec("botocore"), "botocore is not installed")
    def test_without_a_token_requests_are_signed(self):
        seen = {}

        def answer(req):
            seen["authorization"] = req.headers.get("Authorization", "")
            seen["date"] = req.headers.get("X-Amz-Date", "")
            return 200, {"jobs": []}

        port = serve_json(self, answer)
        old = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")}
        os.environ.update(AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="secret",
                          AWS_CONFIG_FILE="/nonexistent", AWS_SHARED_CREDENTIALS_FILE="/nonexistent")
        self.addCleanup(lambda: [os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v) for k, v in old.items()])
        client = fleetq.Client(api=f"http://127.0.0.1:{port}", token="", region="eu-west-1")
        self.assertEqual(client.list(), [])
        self.assertTrue(seen["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"), seen)
        self.assertIn("/eu-west-1/execute-api/aws4_request", seen["authorization"])
        self.assertTrue(seen["date"])


def job_json(status):
    return {"job_id": "t1:j1", "tenant_id": "t1", "workflow_id": "wf", "fleet_slug": "gpu", "status": status,
            "attempts": 1, "max_attempts": 3, "preemptions": 0, "priority": 0, "result": None, "history": []}


class WaitRouteTest(unittest.TestCase):
    """wait against a local server that answers GET of the job and of its
    wait route from scripts, recording the paths asked."""

    def serve(self, gets, waits):
        """``gets`` and ``waits`` are the answers, in order, to the job's GET
        and to its wait route: a status (a 200 with the job) or an HTTP error
        status; the last of each repeats."""
        calls = []

        def answer(req):
            calls.append(req.path)
            script = waits if "/wait" in req.path else gets
            n = sum(1 for c in calls if ("/wait" in c) == ("/wait" in req.path)) - 1
            got = script[min(n, len(script) - 1)]
            if isinstance(got, str):
                return 200, job_json(got)
            return got, {"error": {"code": {404: "not_found", 429: "rate_limited"}.get(got, "internal"), "message": "scripted"}}

        port = serve_json(self, answer)
        return fleetq.Client(api=f"http://127.0.0.1:{port}", token="t", sleep=lambda s: None, retries=0), calls

    def test_wait_holds_the_wait_route_from_the_status_last_seen(self):
        client, calls = self.serve(gets=["queued"], waits=["leased", "succeeded"])
        job = client.wait("t1:j1", timeout=60, interval=0.01)
        self.assertEqual(job.status, "succeeded")
        self.assertEqual(calls, ["/api/jobs/t1%3Aj1", "/api/jobs/t1%3Aj1/wait?status=queued&seconds=25",
                                 "/api/jobs/t1%3Aj1/wait?status=leased&seconds=25"])

    def test_wait_polls_an_api_without_the_wait_route(self):
        client, calls = self.serve(gets=["queued", "leased", "succeeded"], waits=[404])
        job = client.wait("t1:j1", timeout=60, interval=0.01)
        self.assertEqual(job.status, "succeeded")
        self.assertEqual([c.split("?")[0] for c in calls],
                         ["/api/jobs/t1%3Aj1", "/api/jobs/t1%3Aj1/wait", "/api/jobs/t1%3Aj1", "/api/jobs/t1%3Aj1"])

    def test_wait_looks_again_after_429_on_the_wait_route(self):
        client, calls = self.serve(gets=["queued", "succeeded"], waits=[429])
        self.assertEqual(client.wait("t1:j1", timeout=60, interval=0.01).status, "succeeded")
        self.assertEqual([c.split("?")[0] for c in calls], ["/api/jobs/t1%3Aj1", "/api/jobs/t1%3Aj1/wait", "/api/jobs/t1%3Aj1"])

    def test_a_500_of_the_wait_route_is_a_throttle_look_then_wait_again(self):
        # API Gateway's own answer when the wait function is at its cap.
        client, calls = self.serve(gets=["queued", "leased"], waits=[500, "succeeded"])
        self.assertEqual(client.wait("t1:j1", timeout=60, interval=0.01).status, "succeeded")
        self.assertEqual([c.split("?")[0] for c in calls],
                         ["/api/jobs/t1%3Aj1", "/api/jobs/t1%3Aj1/wait", "/api/jobs/t1%3Aj1", "/api/jobs/t1%3Aj1/wait"])
        self.assertIn("status=leased", calls[-1])


class RetryAfterTest(unittest.TestCase):
    """Against a local server answering a scripted sequence; the client's
    sleep is recorded, never slept."""

    def serve(self, answers):
        """Starts a server that answers each request with the next of
        ``answers`` ((status, headers) pairs; the last repeats) and returns
        a client for it, the list of slept seconds and the request count."""
        calls = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                status, headers = answers[min(len(calls), len(answers) - 1)]
                calls.append(self.path)
                if status == 200:
                    body = json.dumps({"job_id": "j1", "status": "accepted"}).encode()
                else:
                    code = {429: "rate_limited", 503: "unavailable"}.get(status, "internal")
                    body = json.dumps({"error": {"code": code, "message": "try later"}}).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = answer

            def log_message(self, *args):
                pass

        srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.addCleanup(srv.server_close)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.shutdown)
        slept = []
        client = fleetq.Client(api=f"http://127.0.0.1:{srv.server_port}", token="t", sleep=slept.append)
        return client, slept, calls

    def test_503_then_200_waits_retry_after_with_jitter(self):
        client, slept, calls = self.serve([(503, {"Retry-After": "7"}), (503, {"Retry-After": "2"}), (200, {})])
        self.assertEqual(client.submit("t1", "wf", job_id="j1"), "j1")
        self.assertEqual(calls, ["/api/jobs"] * 3)
        self.assertEqual(len(slept), 2, slept)
        self.assertTrue(7 <= slept[0] <= 7.7, slept)
        self.assertTrue(2 <= slept[1] <= 2.2, slept)

    def test_429_is_retried_too(self):
        client, slept, calls = self.serve([(429, {"Retry-After": "3"}), (200, {})])
        self.assertEqual(client.submit("t1", "wf", job_id="j1"), "j1")
        self.assertEqual((len(calls), len(slept)), (2, 1))
        self.assertTrue(3 <= slept[0] <= 3.3, slept)

    def test_jitter_differs_between_waits(self):
        client, slept, _ = self.serve([(503, {"Retry-After": "10"})] * 3 + [(200, {})])
        client.submit("t1", "wf", job_id="j1")
        self.assertEqual(len(slept), 3)
        self.assertEqual(len(set(slept)), 3, slept)

    def test_retries_are_bounded(self):
        client, slept, calls = self.serve([(503, {"Retry-After": "1"})])
        with self.assertRaises(fleetq.APIError) as e:
            client.get("j1")
        self.assertEqual((e.exception.status, e.exception.code, e.exception.retry_after), (503, "unavailable", 1))
        self.assertEqual((len(calls), len(slept)), (client.retries + 1, client.retries))

    def test_without_retry_after_backs_off_exponentially(self):
        client, slept, _ = self.serve([(503, {}), (503, {}), (503, {}), (200, {})])
        client.submit("t1", "wf", job_id="j1")
        self.assertEqual([int(s) for s in slept], [1, 2, 4])
        for s, base in zip(slept, (1, 2, 4)):
            self.assertTrue(base <= s <= base * 1.1, slept)

    def test_a_wait_past_max_wait_is_raised_at_once(self):
        client, slept, calls = self.serve([(429, {"Retry-After": "120"}), (200, {})])
        with self.assertRaises(fleetq.APIError) as e:
            client.submit("t1", "wf", job_id="j1")
        self.assertEqual((e.exception.status, e.exception.retry_after), (429, 120))
        self.assertEqual((len(calls), slept), (1, []))

    def test_other_errors_and_retries_0_are_not_retried(self):
        client, slept, calls = self.serve([(500, {"Retry-After": "1"}), (200, {})])
        with self.assertRaises(fleetq.APIError) as e:
            client.get("j1")
        self.assertEqual((e.exception.status, len(calls), slept), (500, 1, []))
        client, slept, calls = self.serve([(503, {"Retry-After": "1"}), (200, {})])
        client.retries = 0
        with self.assertRaises(fleetq.APIError):
            client.get("j1")
        self.assertEqual((len(calls), slept), (1, []))

    def test_retry_after_as_an_http_date(self):
        when = email.utils.formatdate(time.time() + 5, usegmt=True)
        client, slept, _ = self.serve([(503, {"Retry-After": when}), (200, {})])
        client.submit("t1", "wf", job_id="j1")
        self.assertTrue(3 <= slept[0] <= 6.6, slept)


if __name__ == "__main__":
    unittest.main()
