#!/usr/bin/python3
"""The web dashboard of `cairn serve` in a real browser (docs/SERVER.md,
"Web dashboard"): headless Chromium driven by Selenium against a real
server on loopback, with seeded snapshots in two datastores.

  dashboard_test.py CAIRN_BINARY [SCREENSHOT_DIR]

Checks, as a user would see them: the login form with a bad token (refused,
audited with the peer's address), an admin logs in and sees both
datastores and the seeded snapshots, protects one (`cairn snapshots` then
reports it protected), edits its notes, previews a prune (nothing changes),
browses a tree snapshot and downloads one file of it, sees the throughput
chart of a datastore a backup went to through the server, starts a verify
and watches it run in its task log (the server's hidden
--inject-task-latency makes each chunk read take half a second, one at a
time, so the verify is caught running: state, progress and the bottleneck so far, then its
end); a reader token sees only its datastore, is offered no action, is
refused one it forces (403, and nothing changed) and cannot download a file
of another datastore. Screenshots at 1280x800 and at a phone's 390x844 go
to SCREENSHOT_DIR when given.

Exit status: 0 passed, 1 failed, 77 skipped (Chromium, chromedriver or
python3-selenium missing: scripts/setup-deps.sh installs them).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    print("SKIP: python3-selenium is not installed (scripts/setup-deps.sh)")
    sys.exit(SKIP)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
if not CHROMIUM or not DRIVER:
    print("SKIP: chromium or chromium-driver is not installed (scripts/setup-deps.sh)")
    sys.exit(SKIP)

# $CAIRN_BINARY wins, as for the C++ integration tests (the sanitizer stage
# runs this tree's tests against its own binary).
CAIRN = os.path.abspath(os.environ.get("CAIRN_BINARY") or sys.argv[1])
SHOTS = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else None
WAIT_S = 60  # generous: the machine may be loaded; nothing waits this long when it works


def cairn(*args, check=True):
    r = subprocess.run([CAIRN, *args], capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"cairn {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    return r


T0 = time.time()


def step(what):
    """One line per step with the seconds since the start: where the time goes."""
    print(f"[{time.time() - T0:5.1f} s] {what}", flush=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class Server:
    """`cairn serve` on 127.0.0.1, port chosen by the kernel."""

    def __init__(self, work, stores):
        # Every chunk read of a verify task sleeps half a second, one read at
        # a time (hidden option for tests): the verify below runs for about
        # three seconds, long enough to be watched.
        args = [CAIRN, "serve", "--listen", "127.0.0.1:0", "--state-dir", f"{work}/state",
                "--inject-task-latency", "500"]
        for name, path in stores.items():
            args += ["--store", f"{name}={path}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(f"{work}/serve.log", "w"),
                                     text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (https://[0-9.:]+) \(certificate fingerprint ([0-9A-Fa-f:]+)\)", line)
        if not m:
            self.proc.kill()
            raise AssertionError(f"cairn serve did not start: {line!r}, log: {open(f'{work}/serve.log').read()}")
        self.url = m.group(1)
        self.fingerprint = m.group(2)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def browser(work):
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={work}/chromium",
                 "--window-size=1280,800",
                 # The server's certificate is self-signed (the CLI pins its
                 # fingerprint; a browser would ask the user once).
                 "--ignore-certificate-errors"]:
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    desktop(driver)
    return driver


def desktop(driver):
    """A 1280x800 viewport (the window's size would include its frame)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})


class Dashboard:
    def __init__(self, driver, url):
        self.d = driver
        self.url = url
        self.wait = WebDriverWait(driver, WAIT_S)

    def find(self, css):
        return self.wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, css)))

    def visible(self, css):
        return self.wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, css)))

    def text_in(self, css, text):
        self.wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))

    def login(self, token):
        self.d.get(self.url + "/")
        self.wait.until(EC.url_contains("/ui/login"))
        box = self.visible("#token")
        box.clear()
        box.send_keys(token)
        self.d.find_element(By.ID, "login").click()

    def logout(self):
        self.d.find_element(By.ID, "logout").click()
        self.wait.until(EC.url_contains("/ui/login"))

    def tab(self, name):
        self.d.find_element(By.CSS_SELECTOR, f'#tabs a[data-tab="{name}"]').click()
        self.visible(f"#tab-{name}")

    def fetch(self, method, path, body):
        """A request from the page's own script, with its session and CSRF token."""
        return self.d.execute_async_script(
            """const [method, path, body, done] = arguments;
               fetch(path, {method, credentials: 'same-origin',
                            headers: {'X-CSRF-Token': S.session.csrf, 'Content-Type': 'application/json'},
                            body}).then(r => done(r.status)).catch(e => done(String(e)));""",
            method, path, body)

    def fetch_text(self, url):
        """GET `url` from the page's own script (its session cookie): [status, text]."""
        return self.d.execute_async_script(
            """const [url, done] = arguments;
               fetch(url, {credentials: 'same-origin'}).then(async r => done([r.status, await r.text()]))
                 .catch(e => done([0, String(e)]));""", url)

    def shot(self, name):
        if SHOTS:
            os.makedirs(SHOTS, exist_ok=True)
            self.d.save_screenshot(os.path.join(SHOTS, name))


def snapshots_json(store):
    return json.loads(cairn("snapshots", "-r", store, "--json").stdout)


def seed(work):
    s1, s2 = f"{work}/s1", f"{work}/s2"
    for s in (s1, s2):
        cairn("init", s)
    disk = f"{work}/disk.img"
    with open(disk, "wb") as f:
        f.write(os.urandom(12 << 20))  # three 4 MiB chunks: the verify reads each for half a second
    conf = f"{work}/vm.conf"
    with open(conf, "w") as f:
        f.write("memory: 2048\n")
    cairn("backup", "-r", s1, "--id", "vm/100", "disk0.img=" + disk, "vm.conf.blob=" + conf)
    with open(disk, "r+b") as f:
        f.write(os.urandom(1 << 20))
    cairn("backup", "-r", s1, "--id", "vm/100", "disk0.img=" + disk, "vm.conf.blob=" + conf)
    cairn("backup", "-r", s1, "--id", "ct/200", "ct.conf.blob=" + conf)
    cairn("backup", "-r", s2, "--id", "host/web", "etc.blob=" + conf)
    tree = f"{work}/tree"
    os.makedirs(f"{tree}/etc")
    with open(f"{tree}/etc/motd", "w") as f:
        f.write(MOTD)
    with open(f"{tree}/README", "w") as f:
        f.write("a small tree\n")
    cairn("backup", "-r", s1, "--id", "host/files", "root.tree=" + tree)
    cairn("backup", "-r", s2, "--id", "host/files", "root.tree=" + tree)
    return s1, s2


MOTD = "Welcome to the test host.\n" * 100


def token(work, name, store, role):
    out = cairn("token", "create", name, "--state-dir", f"{work}/state", "--store", store, "--role", role)
    return out.stdout.strip().splitlines()[0]


def run(work):
    step("seeding two datastores")
    s1, s2 = seed(work)
    admin = token(work, "admin", "*", "admin")
    reader = token(work, "viewer", "s1", "reader")
    step("starting cairn serve")
    server = Server(work, {"s1": s1, "s2": s2})
    step("starting Chromium")
    driver = browser(work)
    try:
        ui = Dashboard(driver, server.url)

        step("bad login")
        # A bad token: the form says so, the audit log names the peer.
        ui.login("admin:" + "0" * 64)
        ui.text_in("#login-error", "invalid token")
        audit = open(f"{work}/state/audit.log").read()
        check("127.0.0.1:" in audit and "/ui/login" in audit, f"bad login not audited: {audit}")

        step("admin login")
        # The admin sees both datastores with their status.
        ui.login(admin)
        ui.text_in("#who", "admin (admin)")
        ui.text_in('article[data-store="s1"] .stats', "4 in 3 groups")
        ui.find('article[data-store="s2"]')
        ui.text_in('article[data-store="s1"] .stats', "never verified")

        step("throughput")
        # A backup into s2 through the server shows in s2's chart (bytes in).
        disk = f"{work}/disk2.img"
        with open(disk, "wb") as f:
            f.write(os.urandom(1 << 20))
        env = dict(os.environ, CAIRN_TOKEN=admin, CAIRN_FINGERPRINT=server.fingerprint,
                   CAIRN_CACHE_DIR=f"{work}/cache", CAIRN_TRUSTED_SERVERS=f"{work}/servers")
        r = subprocess.run([CAIRN, "backup", "-r", server.url + "/s2", "--id", "vm/300", "disk0.img=" + disk],
                           capture_output=True, text=True, timeout=120, env=env)
        check(r.returncode == 0, f"backup through the server: {r.stderr}")
        ui.d.refresh()
        chart = 'article[data-store="s2"] .throughput'
        ui.find(chart + " svg rect.in")
        check(int(ui.find(chart).get_attribute("data-in-bytes")) >= 1 << 20,
              "s2's chart does not count the backup's megabyte")
        check(int(ui.find('article[data-store="s1"] .throughput').get_attribute("data-in-bytes")) == 0,
              "s1's chart counts another datastore's backup")
        ui.shot("dashboard-stores.png")

        step("snapshots")
        # Snapshots of s1, by group.
        ui.tab("snapshots")
        ui.find('details[data-group="vm/100"]')
        ui.find('details[data-group="ct/200"]')
        rows = driver.find_elements(By.CSS_SELECTOR, 'details[data-group="vm/100"] tbody tr')
        check(len(rows) == 2, f"vm/100 shows {len(rows)} snapshots, not 2")
        oldest = sorted(s["snapshot"] for s in snapshots_json(s1) if s["type"] == "vm")[0]
        row = f'tr[data-snapshot="{oldest}"]'
        check("disk0.img" in ui.find(row).text, "the archives column lacks disk0.img")

        step("protect")
        # Protect the oldest: the row says so, and so does the CLI.
        ui.find(row + " button.protect").click()
        ui.text_in(row + " td.protected", "protected")
        listed = {s["snapshot"]: s for s in snapshots_json(s1)}
        check(listed[oldest]["protected"], f"cairn snapshots does not report {oldest} protected")
        check(sum(s["protected"] for s in listed.values()) == 1, "more than one snapshot protected")

        step("notes")
        # Notes.
        ui.find(row + " button.edit-notes").click()
        area = ui.visible("textarea.notes-text")
        area.clear()
        area.send_keys("before the kernel upgrade")
        ui.find("button.save-notes").click()
        ui.text_in(row + " td.notes", "before the kernel upgrade")
        check({s["snapshot"]: s for s in snapshots_json(s1)}[oldest]["notes"] == "before the kernel upgrade",
              "notes not stored")

        step("prune preview")
        # A prune preview changes nothing.
        group = 'details[data-group="vm/100"]'
        keep = ui.find(group + " input.keep-last")
        keep.clear()
        keep.send_keys("1")
        ui.find(group + " button.prune").click()
        ui.text_in(group + " .prune-preview", "Dry run: would keep")
        # keep-last 1 removes the older one, but it is protected: kept.
        ui.text_in(group + " .prune-preview", oldest + ": keep (protected)")
        check(len(snapshots_json(s1)) == 4, "a prune preview removed snapshots")
        ui.shot("dashboard-snapshots.png")

        step("tree browser")
        # Browse the tree snapshot and download one file through its link.
        files = 'details[data-group="host/files"]'
        ui.find(files + ' button.browse[data-archive="root.tree"]').click()
        ui.find(files + ' tr.tree-row li[data-path="README"]')
        ui.find(files + ' tr.tree-row li[data-path="etc"] button.link').click()
        link = ui.find(files + ' tr.tree-row li[data-path="etc/motd"] a.download')
        download_url = link.get_attribute("href")
        status, text = ui.fetch_text(download_url)
        check(status == 200 and text == MOTD, f"downloading etc/motd: {status}, {len(text)} characters")
        ui.shot("dashboard-tree.png")

        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
        ui.d.execute_script("window.scrollTo(0, 0)")
        ui.shot("dashboard-phone-snapshots.png")
        desktop(driver)

        step("verify task")
        # A verify started from the page, watched while it runs (each chunk
        # read takes half a second, one at a time): its state, progress and
        # what limits it so far, then its end.
        ui.tab("stores")
        ui.find('article[data-store="s1"] button.verify-store').click()
        ui.visible("#task-detail")
        ui.text_in("#task-title", "verify of s1 · running")
        ui.text_in("#task-limit", "limit so far: source reads")
        ui.text_in("#task-bytes", "verify:")
        check("running" in ui.find("#task-title").text, "the verify ended before it was seen running")
        ui.find('#task-table tr[data-task] .badge.run')
        ui.shot("dashboard-task-running.png")
        ui.text_in("#task-title", "· ok")  # the page follows the task until it ends
        ui.text_in("#task-log", "verify ended: ok")
        ui.text_in("#task-limit", "bottleneck: ")
        ui.shot("dashboard-task.png")
        ui.logout()

        step("reader")
        # A reader: its datastore only, no actions offered, one forced is refused.
        ui.login(reader)
        ui.text_in("#who", "viewer (reader, s1)")
        ui.text_in('article[data-store="s1"] .stats', "4 in 3 groups")
        check(not driver.find_elements(By.CSS_SELECTOR, 'article[data-store="s2"]'), "a reader sees s2")
        check(not driver.find_elements(By.CSS_SELECTOR, "button.verify-store, button.gc-store"),
              "a reader is offered verify or gc")
        ui.tab("snapshots")
        ui.find(row)
        check(not driver.find_elements(By.CSS_SELECTOR, "button.protect"), "a reader is offered protect")
        newest = sorted(s["snapshot"] for s in snapshots_json(s1) if s["type"] == "vm")[-1]
        status = ui.fetch("PUT", f"/api/v1/stores/s1/protected?snapshot={newest}", '{"protected": true}')
        check(status == 403, f"a reader protecting a snapshot got {status}, not 403")
        check(ui.fetch("POST", "/api/v1/stores/s1/gc", "{}") == 403, "a reader started a gc")
        check(ui.fetch("GET", "/api/v1/stores/s2/status", None) == 403, "a reader read s2's status")
        # The tree file of s1 is the reader's to download; s2's same file is not.
        status, text = ui.fetch_text(download_url)
        check(status == 200 and text == MOTD, f"a reader downloading s1's etc/motd: {status}")
        other = download_url.replace("/stores/s1/", "/stores/s2/")
        s2_files = sorted(s["snapshot"] for s in snapshots_json(s2) if s["type"] == "host" and s["id"] == "files")[0]
        other = re.sub(r"snapshot=[^&]*", "snapshot=" + s2_files.replace("/", "%2F").replace(":", "%3A"), other)
        status, text = ui.fetch_text(other)
        check(status == 403, f"a reader of s1 downloading s2's file got {status}: {text[:200]}")
        check(not {s["snapshot"]: s for s in snapshots_json(s1)}[newest]["protected"],
              "a reader's refused request protected a snapshot")
        step("reader's tasks")
        ui.tab("tasks")
        ui.text_in("#task-table tbody", "No tasks")  # the admin's verify is not the reader's
        ui.logout()
    except Exception:
        if SHOTS:
            driver.save_screenshot(os.path.join(SHOTS, "failure.png"))
        print(open(f"{work}/serve.log").read()[-4000:], file=sys.stderr)
        raise
    finally:
        step("stopping Chromium")
        driver.quit()
        step("stopping cairn serve")
        server.stop()
        step("stopped")


def main():
    start = time.time()
    # Where the C++ tests put theirs (tests/unit_test_util.h, TempRoot): on a
    # loaded disk, removing two datastores' 8192 prefix directories takes
    # half a minute; on tmpfs nothing.
    root = os.environ.get("CAIRN_TEST_TMPDIR") or (
        "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None)
    work = tempfile.mkdtemp(prefix="cairn-dashboard-", dir=root)
    try:
        run(work)
    finally:
        step("removing " + work)
        shutil.rmtree(work, ignore_errors=True)
        step("removed")
    print(f"dashboard browser test passed in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
