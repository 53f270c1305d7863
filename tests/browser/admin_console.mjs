// The admin console in a real browser: Debian's Chromium, headless, driven
// by puppeteer-core. Run by tests/integration/admin_console_test.cpp
// against a live server under light load:
//
//   node tests/browser/admin_console.mjs --url http://127.0.0.1:PORT \
//        --token TOKEN --out DIR --stream REQUEST_ID [--chromium /usr/bin/chromium]
//
// Opens /admin with the token, checks the actor table lists the router, the
// store, an agent pool and at least one session, sorts by mailbox, opens
// one actor's details and sees them refresh, presses Stop on the running
// stream REQUEST_ID and sees it leave the streams view. A screenshot of
// every step goes to DIR. Prints one line per step; exits 1 with the reason
// (and DIR/failure.png) on the first failure, or on a JavaScript error of
// the page.
import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) => (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
for (const required of ["url", "out", "stream"])
  if (!args[required]) {
    console.error(`missing --${required}`);
    process.exit(2);
  }
fs.mkdirSync(args.out, { recursive: true });

const step = (text) => console.log("step: " + text);
const pageErrors = [];
let browser;
let page;

async function shot(name) {
  await page.screenshot({ path: path.join(args.out, name), fullPage: false });
}

// Clicks the element `sel` matches inside the page, in one task: the feed
// re-renders tables every second, so an element handle taken first (as
// page.click does) may be detached by the time it is clicked.
async function clickNow(sel) {
  const found = await page.evaluate((s) => {
    const el = document.querySelector(s);
    if (el) el.click();
    return !!el;
  }, sel);
  if (!found) throw new Error("nothing to click: " + sel);
}

async function waitFor(what, fn, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await page.evaluate(fn);
    if (v) return v;
    if (pageErrors.length) throw new Error("page error: " + pageErrors[0]);
    if (Date.now() > deadline) throw new Error("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 100));
  }
}

try {
  browser = await puppeteer.launch({
    executablePath: args.chromium || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  page.on("pageerror", (e) => pageErrors.push(String(e)));

  // 1. The actor table with the fixed actors and a session.
  const hash = args.token ? "#token=" + encodeURIComponent(args.token) : "";
  await page.goto(args.url + "/admin" + hash, { waitUntil: "domcontentloaded" });
  await page.click('button[data-view="actors"]');
  const kinds = await waitFor("router, store, agent_pool and session rows", () => {
    const ks = [...document.querySelectorAll("#actors-table tbody tr")].map((tr) => tr.dataset.kind);
    const need = ["router", "store", "agent_pool", "session"];
    return need.every((k) => ks.includes(k)) ? ks : null;
  });
  step(`actor table lists ${kinds.length} actors, router, store, agent_pool and session among them`);
  if (await page.evaluate(() => location.hash !== "")) throw new Error("the token stayed in the address bar");
  await shot("01-actors.png");

  // 2. Sort by mailbox, descending.
  for (let i = 0; i < 3; ++i) {
    const aria = await page.evaluate(() => document.querySelector('#actors-table th[data-sort="mailbox"]').getAttribute("aria-sort"));
    if (aria === "descending") break;
    await clickNow('#actors-table th[data-sort="mailbox"]');
  }
  const mailboxes = await waitFor("the table sorted by mailbox, descending", () => {
    const th = document.querySelector('#actors-table th[data-sort="mailbox"]');
    if (!th || th.getAttribute("aria-sort") !== "descending") return null;
    return [...document.querySelectorAll('#actors-table tbody td[data-col="mailbox"]')].map((td) => Number(td.textContent.replace(/,/g, "")));
  });
  for (let i = 1; i < mailboxes.length; ++i)
    if (mailboxes[i] > mailboxes[i - 1]) throw new Error("mailbox column not in descending order: " + mailboxes.join(","));
  step(`sorted by mailbox (descending): ${mailboxes.slice(0, 8).join(",")}…`);
  await shot("02-sorted.png");

  // 3. The store's details, refreshed live.
  await clickNow('#actors-table tbody tr[data-kind="store"]');
  const detail = await waitFor("the store's status JSON", () => {
    try {
      const j = JSON.parse(document.querySelector("#actor-detail-json").textContent);
      return j.kind === "store" ? j : null;
    } catch (_) {
      return null;
    }
  });
  const first = await page.evaluate(() => document.querySelector("#actor-detail-updated").textContent);
  await page.waitForFunction((t) => {
    const now = document.querySelector("#actor-detail-updated").textContent;
    return now !== "" && now !== t;
  }, { timeout: 30000 }, first);
  step(`store details shown (backend ${detail.backend}, ${detail.messages} messages) and refreshed`);
  await shot("03-detail.png");

  // 4. Stop the running stream.
  await page.click('button[data-view="streams"]');
  const row = `#streams-table tr[data-request-id="${args.stream}"]`;
  await page.waitForSelector(row + " button.stop", { timeout: 30000 });
  step(`stream ${args.stream} listed`);
  await shot("04-streams.png");
  await clickNow(row + " button.stop");

  // 5. It leaves the view once it ended.
  await page.waitForFunction((sel) => !document.querySelector(sel), { timeout: 30000 }, row);
  step(`stream ${args.stream} stopped and gone from the view`);
  await shot("05-stopped.png");
  if (pageErrors.length) throw new Error("page error: " + pageErrors[0]);
  console.log("ok");
  await browser.close();
  process.exit(0);
} catch (e) {
  console.log("FAILED: " + (e && e.message ? e.message : e));
  try {
    if (page) await shot("failure.png");
  } catch (_) {}
  if (browser) await browser.close().catch(() => {});
  process.exit(1);
}
