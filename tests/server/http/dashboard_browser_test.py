#!/usr/bin/env python3
"""The dashboard in a real browser: headless Chromium (Debian's chromium and
chromium-driver) driven by Selenium (python3-selenium).

Starts rbmrec-server on free ports with a temporary database and an
--auth-tokens file with an admin, a write and a read token (`rbmrec-server token
new`), loads the synthetic ratings of tests/server/synthetic_ratings.py and
item titles through the HTTP API, trains once, then in the browser:
  - a wrong token is refused on the login form;
  - with the admin token: the overview shows the store counts; the user page
    shows recommendation rows, each with its predicted-distribution bars
    (one per rating value), and the user's stored ratings as GetUserRatings
    returns them; the item page shows the item's title, its ratings
    histogram (one bar per rating value, the counts GetItem returns) and
    lists similar items; the models
    page has the admin actions; a training run started from the training
    page draws its validation-RMSE chart point by point (every redraw of the
    chart is recorded in the page, and the point count must grow through at
    least two redraws before the job ends);
  - with a write token: the role shown is write, the user page lists the
    stored ratings;
  - with the read token: no admin action on the models and training pages,
    no stored ratings on the user page (a line says the role cannot see them);
  - no console error (except the expected refusals: 401 before login, the
    403/400 of the role probes) and no Content-Security-Policy report.
Screenshots and the browser console go to --artifacts (ctest:
build/artifacts/dashboard; default $RBMREC_ARTIFACTS, else
./dashboard-artifacts). --full (bench/browser.sh --full) loads three times
the users, opens more users and items, pins a version, rolls back to
version 1 and cancels a run from the page.

Exit 77 (ctest: skipped) when Chromium, chromedriver or Selenium is missing,
unless RBMREC_REQUIRE_BROWSER=1 (scripts/test.sh sets it).

  dashboard_browser_test.py --server-bin build/bin/rbmrec-server --source-dir .
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from python_client_test import free_port  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def skip_or_fail(why):
    if os.environ.get("RBMREC_REQUIRE_BROWSER") == "1":
        sys.exit(f"dashboard browser test: {why}")
    print(f"SKIP: {why}")
    sys.exit(77)


class Api:
    """The HTTP/JSON API with a token (urllib, no browser)."""

    def __init__(self, base, token):
        self.base, self.token = base, token

    def call(self, method, path, body=None, timeout=60):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read().decode()
        return text


def make_tokens(server_bin, tmp):
    lines, tokens = [], {}
    for name, role in [("admin", "admin"), ("writer", "write"), ("reader", "read")]:
        out = subprocess.run([server_bin, "token", "new", name, role], check=True,
                             capture_output=True, text=True).stdout.splitlines()
        tokens[role] = out[0].strip()
        lines.append(out[1])
    path = os.path.join(tmp, "tokens")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return path, tokens


def load_data(api, source_dir, tmp, full):
    data = os.path.join(tmp, "u.data")
    subprocess.run([sys.executable, os.path.join(source_dir, "tests", "server",
                                                 "synthetic_ratings.py"), data], check=True)
    rows = []
    with open(data) as f:
        for line in f:
            u, i, r, t = line.split("\t")
            rows.append({"userId": u, "itemId": i, "rating": float(r), "timestamp": t.strip()})
    copies = 3 if full else 1  # --full: the same tastes for 3x the users
    for c in range(copies):
        batch = [dict(row, userId=row["userId"] if c == 0 else f"{row['userId']}-{c}")
                 for row in rows]
        api.call("POST", "/v1/ratings", {"ratings": batch})
    items = [{"itemId": str(i), "title": f"Item {i} ({'odd' if i % 2 else 'even'})",
              "categories": ["odd" if i % 2 else "even"]} for i in range(1, 101)]
    api.call("PUT", "/v1/items", {"items": items})
    return len(rows) * copies


def train(api, epochs):
    text = api.call("POST", "/v1/train", {"options": {"epochs": epochs}}, timeout=300)
    assert '"state":"SUCCEEDED"' in text, text[-500:]


class Browser:
    def __init__(self, base, artifacts):
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service

        opts = Options()
        opts.binary_location = CHROMIUM
        for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--window-size=1200,860", "--no-first-run", "--disable-extensions",
                  "--disable-background-networking", "--disable-sync"]:
            opts.add_argument(a)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        self.driver.set_page_load_timeout(30)
        self.base, self.artifacts = base, artifacts
        self.logs = []

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def wait(self, what, fn, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            v = fn()
            if v:
                return v
            time.sleep(0.1)
        self.shot(f"timeout-{what}")
        raise AssertionError(f"timed out waiting for {what}")

    def count(self, selector):
        return self.js("return document.querySelectorAll(arguments[0]).length", selector)

    def text(self, selector):
        return self.js("const e = document.querySelector(arguments[0]);"
                       "return e ? e.textContent : null", selector)

    def go(self, hash_route):
        self.js("location.hash = arguments[0]", hash_route)

    def shot(self, name):
        path = os.path.join(self.artifacts, f"{name}.png")
        self.driver.save_screenshot(path)
        return path

    def shot_page(self, name):
        """The page's content only (the body element), without the empty
        window below it."""
        from selenium.webdriver.common.by import By
        path = os.path.join(self.artifacts, f"{name}.png")
        self.driver.find_element(By.TAG_NAME, "body").screenshot(path)
        return path

    def collect_logs(self):
        self.logs += self.driver.get_log("browser")

    def login(self, token):
        self.driver.get(self.base + "/")
        self.wait("login form", lambda: self.js(
            "return !document.getElementById('login').hidden"))
        self.js("document.getElementById('token').value = arguments[0];"
                "document.getElementById('login-submit').click()", token)

    def quit(self):
        self.driver.quit()


# Console messages that are expected: the browser logs every non-2xx fetch.
EXPECTED_NETWORK = ["/v1/models/0:pin", "/v1/rbmrec.v1.Rbmrec/GetUserRatings",
                    "/v1/stats - Failed to load resource: the server "
                    "responded with a status of 401"]


def check_logs(logs):
    bad = []
    for entry in logs:
        msg = entry.get("message", "")
        if "Content Security Policy" in msg or "Content-Security-Policy" in msg:
            bad.append(entry)
        elif entry.get("level") == "SEVERE":
            if entry.get("source") == "network" and any(x in msg for x in EXPECTED_NETWORK):
                continue
            bad.append(entry)
    assert not bad, "console errors:\n" + "\n".join(json.dumps(b) for b in bad)


# Records, in the page, the point count of every chart redraw in #chart-rmse.
RECORD_REDRAWS = """
window.__points = [];
new MutationObserver((records) => {
  for (const r of records) for (const n of r.addedNodes) {
    if (n.querySelectorAll) window.__points.push(n.querySelectorAll('circle.point').length);
  }
}).observe(document.getElementById('chart-rmse'), {childList: true});
"""


def admin_pass(b, api, tokens, n_ratings, full):
    b.login("rbmrec_not_a_token")
    b.wait("refusal", lambda: "refused" in (b.text("#login-error") or ""))
    b.login(tokens["admin"])
    b.wait("admin role", lambda: b.text("#role") == "role: admin")
    b.wait("overview", lambda: b.text("#stat-ratings dd") == f"{n_ratings:,}")
    assert "serving model version" in b.text("#serving")
    b.shot("overview")
    users = ["1", "2", "7"] if full else ["1"]
    for user in users:
        b.go(f"#/user/{user}")
        b.wait(f"recommendations of {user}", lambda: b.count("tr.rec-row") >= 5)
        rows = b.count("tr.rec-row")
        bars = b.count("tr.rec-row svg.dist rect.bar")
        assert bars == rows * 5, f"{bars} bars for {rows} rows (5 rating values each)"
    # The stored ratings (admin: may see them), as GetUserRatings has them.
    stored = json.loads(api.call("GET", f"/v1/users/{users[-1]}/ratings?limit=100"))
    want = [r["itemId"] for r in stored["ratings"]]
    b.wait("stored ratings", lambda: b.count("tr.rating-row") == len(want) > 0)
    got = b.js("return [...document.querySelectorAll('tr.rating-row')].map(r => r.dataset.item)")
    assert got == want, f"ratings table {got[:5]}.. != GetUserRatings {want[:5]}.."
    assert f"{int(stored['total']):,} stored ratings" in b.text("#ratings-total")
    b.shot("user")
    # Filters: odd items only, 3 of them, the first excluded.
    b.go("#/user")
    b.wait("user form", lambda: b.count("#user-form") == 1)
    b.js("const f = document.getElementById('user-form');"
         "f.elements.user.value = '2'; f.elements.n.value = '3';"
         "f.elements.categories.value = 'odd'; f.elements.exclude.value = '1';"
         "f.requestSubmit()")
    b.wait("filtered recommendations", lambda: b.count("tr.rec-row") == 3 and
           b.text("main h2") == "User 2")
    items = b.js("return [...document.querySelectorAll('tr.rec-row')].map(r => r.dataset.item)")
    assert all(int(i) % 2 == 1 and i != "1" for i in items), items
    for item in (["2", "5", "10"] if full else ["2"]):
        b.go(f"#/item/{item}")
        b.wait(f"similar items of {item}", lambda: b.count("tr.similar-row") >= 3)
        # The catalogue row and the ratings histogram: one bar per value.
        title = f"Item {item} ({'odd' if int(item) % 2 else 'even'})"
        assert b.text("#item-title dd") == title, b.text("#item-title dd")
        assert b.count("#item-hist rect.bar") == 5, b.count("#item-hist rect.bar")
        got = json.loads(api.call("GET", f"/v1/items/{item}"))
        tips = b.js("return [...document.querySelectorAll('#item-hist rect.bar title')]"
                    ".map(t => t.textContent)")
        counts = [int(c) for c in got["ratingCounts"]]
        assert [t.split(":")[1].split()[0] for t in tips] == [f"{c:,}" for c in counts], tips
        assert sum(counts) > 0
    b.shot("item")
    b.go("#/models")
    b.wait("models", lambda: b.count("tr.model-row") >= 1)
    assert b.count("button.admin-action") >= 1
    if full:
        version = b.js("return document.querySelector('tr.model-row').dataset.version")
        b.js("document.querySelector(`button.pin[data-version='${arguments[0]}']`).click()", version)
        b.wait("pinned", lambda: "pinned" in b.js(
            "return document.querySelector(`tr.model-row[data-version='${arguments[0]}']`)"
            ".textContent", version))
    b.shot("models-admin")
    b.go("#/training")
    b.wait("training page", lambda: b.count("#train-start") == 1)
    b.js(RECORD_REDRAWS)
    b.js("const f = document.getElementById('train-form'); f.elements.epochs.value = '25';"
         "document.getElementById('train-start').click()")
    b.wait("training done", lambda: b.js(
        "return document.getElementById('train-status').dataset.state") == "SUCCEEDED",
        timeout=240)
    ndcg = b.count("#chart-ndcg circle.point")
    assert ndcg >= 2, f"{ndcg} NDCG points (the rated RBM's TrainProgress.validation_ndcg)"
    counts = b.js("return window.__points")
    growing = sorted(set(c for c in counts if c > 0))
    assert len(growing) >= 3, f"the chart did not grow live: point counts {counts}"
    b.shot("training")
    b.shot_page("training-page")
    print(f"training chart: {len(counts)} redraws, point counts {growing[:5]}..{growing[-1]}")
    if full:
        full_admin_extras(b, api)
    b.collect_logs()


def model_row_text(b, version):
    return b.js("const r = document.querySelector(`tr.model-row[data-version='${arguments[0]}']`);"
                "return r ? r.textContent : ''", version)


def full_admin_extras(b, api):
    """--full: roll back to version 1 from the models page, cancel a long
    run from the training page, and follow (then cancel) a run started
    through the API."""
    b.go("#/models")
    b.wait("two versions", lambda: b.count("tr.model-row") >= 2)
    b.js("document.querySelector(\"button.activate[data-version='1']\").click()")
    b.wait("version 1 active", lambda: "active" in model_row_text(b, "1"))
    assert "active" not in model_row_text(b, "2")
    b.shot("models-rolled-back")
    b.go("#/training")
    b.wait("training page", lambda: b.count("#train-start") == 1)
    b.js("const f = document.getElementById('train-form'); f.elements.epochs.value = '1000'; f.elements.hidden.value = '200';"
         "f.elements.activation.value = 'ACTIVATE_NEVER';"
         "document.getElementById('train-start').click()")
    b.wait("a running job", lambda: b.count("#chart-rmse circle.point") >= 2, timeout=60)
    b.js("document.getElementById('train-cancel').click()")
    b.wait("cancelled", lambda: b.js(
        "return document.getElementById('train-status').dataset.state") == "CANCELLED",
        timeout=60)
    b.shot("training-cancelled")
    # A job started elsewhere (here: the API) is followed by polling.
    # Without validation it cannot stop early (and draws no point: the
    # status line shows its epochs), so it still runs when the page looks.
    body = {"options": {"epochs": 100000, "validationFraction": 0},
            "activation": "ACTIVATE_NEVER"}
    job = threading.Thread(target=lambda: api.call("POST", "/v1/train", body, timeout=300))
    job.start()
    b.go("#/overview")
    b.wait("training shown as running", lambda: "running" in (b.text("#training-state") or ""))
    b.go("#/training")
    b.wait("a polled job", lambda: "started elsewhere" in (b.text("#train-source") or "") and
           "epoch" in (b.text("#train-status") or ""), timeout=60)
    b.shot("training-polled")
    b.js("document.getElementById('train-cancel').click()")
    b.wait("the polled job ends", lambda: b.js(
        "return document.getElementById('train-status').dataset.state") == "finished",
        timeout=60)
    job.join(timeout=60)


def writer_pass(b, tokens):
    """A write token: told apart from read by the role probe; it sees a
    user's stored ratings but no admin action."""
    b.js("document.getElementById('logout').click()")
    b.login(tokens["write"])
    b.wait("write role", lambda: b.text("#role") == "role: write")
    b.go("#/user/3")
    b.wait("stored ratings as writer", lambda: b.count("tr.rating-row") > 0)
    assert b.count("#ratings-denied") == 0 and b.count(".admin-action") == 0
    b.collect_logs()


def reader_pass(b, tokens):
    b.js("document.getElementById('logout').click()")
    b.login(tokens["read"])
    b.wait("read role", lambda: b.text("#role") == "role: read")
    b.go("#/models")
    b.wait("models", lambda: b.count("tr.model-row") >= 1)
    assert b.count(".admin-action") == 0, "a read token sees admin actions"
    b.shot("models-read")
    b.go("#/training")
    b.wait("training page", lambda: b.count("#train-status") == 1)
    assert b.count("#train-start") == 0 and b.count(".admin-action") == 0
    b.go("#/user/3")
    b.wait("recommendations as reader", lambda: b.count("tr.rec-row") >= 5)
    b.wait("no stored ratings for a reader", lambda: b.count("#ratings-denied") == 1)
    assert b.count("tr.rating-row") == 0, "a read token sees stored ratings"
    b.collect_logs()


def csp_control(b):
    """The policy is enforced and its reports reach the log: an inline
    script added on purpose must not run and must be reported (then it is
    dropped from the logs check_logs reads)."""
    b.js("const s = document.createElement('script'); s.textContent = 'window.__inline = 1';"
         "document.body.append(s)")
    time.sleep(0.3)
    assert b.js("return window.__inline === undefined"), "an inline script ran"
    logs = b.driver.get_log("browser")
    reports = [e for e in logs if "Content Security Policy" in e.get("message", "")]
    assert reports, f"the blocked inline script was not reported: {logs}"
    b.logs += [e for e in logs if e not in reports]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server-bin", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--artifacts", default=os.environ.get("RBMREC_ARTIFACTS",
                                                          "dashboard-artifacts"))
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--readme-shot", help="copy the training screenshot here")
    args = ap.parse_args()
    for path in [CHROMIUM, CHROMEDRIVER]:
        if not os.access(path, os.X_OK):
            skip_or_fail(f"{path} is missing (apt-get install chromium chromium-driver)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        skip_or_fail("Selenium is missing (apt-get install python3-selenium)")
    os.makedirs(args.artifacts, exist_ok=True)
    started = time.time()
    tmp = tempfile.mkdtemp(prefix="rbmrec-dashboard-")
    proc, browser = None, None
    log_path = os.path.join(args.artifacts, "server.log")
    try:
        tokens_file, tokens = make_tokens(args.server_bin, tmp)
        http = f"127.0.0.1:{free_port()}"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [args.server_bin, "--listen", f"127.0.0.1:{free_port()}", "--http-listen", http,
                 "--db", os.path.join(tmp, "db.sqlite"), "--auth-tokens", tokens_file,
                 "--hidden", "8", "--epochs", "10", "--train-threads", "1"],
                stdout=log, stderr=log)
        base = f"http://{http}"
        end = time.time() + 20
        while True:
            try:
                urllib.request.urlopen(base + "/", timeout=2).read()
                break
            except (urllib.error.URLError, ConnectionError):
                if time.time() > end or proc.poll() is not None:
                    raise AssertionError(f"the server did not start; see {log_path}")
                time.sleep(0.1)
        api = Api(base, tokens["admin"])
        n_ratings = load_data(api, args.source_dir, tmp, args.full)
        train(api, 5)
        print(f"server up, {n_ratings} ratings, one model: {time.time() - started:.1f} s")
        browser = Browser(base, args.artifacts)
        admin_pass(browser, api, tokens, n_ratings, args.full)
        writer_pass(browser, tokens)
        reader_pass(browser, tokens)
        check_logs(browser.logs)
        csp_control(browser)
        if args.readme_shot:
            shutil.copy(os.path.join(args.artifacts, "training-page.png"), args.readme_shot)
        print(f"dashboard browser test passed in {time.time() - started:.1f} s; "
              f"screenshots in {args.artifacts}")
    finally:
        if browser is not None:
            try:
                browser.collect_logs()
                with open(os.path.join(args.artifacts, "browser-console.json"), "w") as f:
                    json.dump(browser.logs, f, indent=1)
            finally:
                browser.quit()
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
