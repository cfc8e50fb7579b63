"""The dashboard in a real headless browser (Debian's chromium through Selenium, no download).

Usage: dashboard.py CONDUCTOR HOME PROJECT DASHBOARD_URL SCREENSHOT
Makes a claim (and a conflict), posts, submits a job and starts a workflow with the real
binary, and checks that each shows on the page within BOUND seconds, without reloading it.
Prints one JSON object: how long each took to appear.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

BOUND = 10.0
conductor, home, project, url, shot = sys.argv[1:6]
env = dict(os.environ, CONDUCTOR_HOME=home, SE_OFFLINE="true")


def run(*args, stdin=None):
    r = subprocess.run([conductor, *args], cwd=project, env=env, input=stdin,
                       capture_output=True, text=True)
    return r


def ok(*args, stdin=None):
    r = run(*args, stdin=stdin)
    if r.returncode != 0:
        raise SystemExit(f"conductor {' '.join(args)} failed: {r.stdout} {r.stderr}")
    return json.loads(r.stdout) if "--json" in args else r.stdout


opts = webdriver.ChromeOptions()
opts.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
profile = tempfile.mkdtemp(prefix="conductor-chromium-")
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
          "--disable-component-update", "--no-first-run", "--disable-sync",
          "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,1050"]:
    opts.add_argument(a)
service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
driver = webdriver.Chrome(options=opts, service=service)
timings = {}
try:
    driver.get(url)
    wait = WebDriverWait(driver, BOUND)
    # The token was swapped for a cookie and the address bar no longer carries it.
    wait.until(lambda d: d.find_element(By.ID, "live").get_attribute("class") == "on")
    assert "token=" not in driver.current_url, driver.current_url
    page = driver.execute_script("return window.performance.timeOrigin")

    def shows(name, selector, text):
        t = time.monotonic()
        def found(d):
            for e in d.find_elements(By.CSS_SELECTOR, selector):
                if text in e.text:
                    return True
            return False
        try:
            wait.until(found)
        except Exception:
            body = driver.find_element(By.TAG_NAME, "body").text
            raise SystemExit(f"{name}: `{text}` never showed in {selector} within {BOUND} s:\n{body}")
        timings[name] = round(time.monotonic() - t, 3)

    inst = ok("--json", "start", "Wire the dashboard", "--project", "web", "--priority", "P1")["instance_id"]
    ok("claim", "src/main.rs", "src/lib.rs", "--instance", inst)
    shows("claim", f'[data-instance="{inst}"]', "main.rs")
    other = ok("--json", "start", "Refactor the server", "--project", "web", "--priority", "P1")["instance_id"]
    run("claim", "src/main.rs", "--instance", other)
    shows("conflict", f'[data-instance="{other}"]', "held by " + inst)
    # Paths as the project names them, never shortened: a directory keeps its `/`, a glob its
    # whole pattern; heartbeats read as minutes ago.
    ok("claim", "src/api/", "tests/**/*.rs", "--instance", inst)
    shows("directory claim", f'[data-instance="{inst}"]', "claims src/api/")
    shows("glob claim", f'[data-instance="{inst}"]', "claims tests/**/*.rs")
    shows("heartbeat", f'[data-instance="{inst}"]', "heartbeat just now")

    ok("post", "ops", "@scout please review the dashboard", "--as", "ana")
    shows("post", '[data-agent="scout"]', "please review the dashboard")

    manifest = {"workspace": "web", "jobs": [
        {"id": "build-docs", "prompt": "Build the docs"},
        {"id": "publish", "prompt": "Publish them", "depends_on": ["build-docs"]}]}
    ok("queue", "submit", "-", stdin=json.dumps(manifest))
    shows("job", '[data-job="publish"]', "after build-docs")

    wf = os.path.join(project, ".conductor", "workflows")
    os.makedirs(wf, exist_ok=True)
    with open(os.path.join(wf, "feature.json"), "w") as f:
        json.dump({"name": "Feature", "initial": "plan", "budget": {"max_tokens": 200000},
                   "states": {"plan": {"persona": "architect", "prompt": "Plan.", "next": ["build"]},
                              "build": {"persona": "engineer", "next": ["verify"]},
                              "verify": {"persona": "QA", "next": ["done"]}}}, f)
    session = ok("--json", "workflow", "start", "feature", "Ship the dashboard")["session"]
    shows("workflow", f'[data-session="{session}"]', "Ship the dashboard")

    # The holder finishes: the conflict is resolved, and gone from the other row as from
    # `status`.
    ok("done", "--instance", inst)
    t = time.monotonic()
    try:
        wait.until(lambda d: all("held by" not in e.text for e in
                                 d.find_elements(By.CSS_SELECTOR, f'[data-instance="{other}"]')))
    except Exception:
        body = driver.find_element(By.TAG_NAME, "body").text
        raise SystemExit(f"resolved conflict: still shown within {BOUND} s:\n{body}")
    timings["resolved conflict"] = round(time.monotonic() - t, 3)
    assert not ok("--json", "status").get("conflicts"), "status agrees"

    # Never reloaded: the same page did it all over its event stream.
    assert driver.execute_script("return window.performance.timeOrigin") == page
    time.sleep(0.3)
    driver.save_screenshot(shot)
    print(json.dumps({"shown_within_seconds": timings, "bound": BOUND}))
finally:
    driver.quit()
