// The console in a real browser (headless chromium through playwright-core): it loads while
// events flow, shows the pipeline's graph, sees the batch id and the charts move, is refused
// dead letters' values and a rollback without the token, then with the token shows the
// values, swaps MODULE in and rolls it back. Screenshots of each step go
// to SCREENSHOT_DIR. Exits non-zero, saying why, on the first expectation not met.
//
//     node console.mjs URL TOKEN STAGE MODULE SCREENSHOT_DIR
import { pathToFileURL } from "node:url";
import { mkdirSync } from "node:fs";

const [url, token, stage, module, shots] = process.argv.slice(2);
const { chromium } = await import(pathToFileURL(process.env.PLAYWRIGHT_CORE).href);
mkdirSync(shots, { recursive: true });

function expect(ok, what) {
  if (!ok) throw new Error(`expected: ${what}`);
  console.log(`ok: ${what}`);
}

const browser = await chromium.launch({
  executablePath: process.env.SLUICE_CHROMIUM,
  args: ["--no-sandbox", "--disable-gpu"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
  const failures = [];
  page.on("pageerror", e => failures.push(String(e)));
  page.on("requestfailed", r => failures.push(`${r.url()}: ${r.failure()?.errorText}`));
  await page.goto(url);

  // The graph: the stage's box, with its version from the last batch.
  const node = page.locator(`#graph [data-kind=stage] .node[data-name="${stage}"]`);
  await node.locator(".version").waitFor({ timeout: 30000 });
  expect((await page.locator("#graph [data-kind=source] .node").count()) >= 1, "a source topic in the graph");
  expect((await page.locator("#graph [data-kind=output] .node").count()) >= 2, "the table and the dead-letter topic in the graph");
  await page.screenshot({ path: `${shots}/1-graph.png`, fullPage: true });

  // Numbers move while events flow.
  const first = Number(await page.locator("#batch-id").textContent());
  await page.waitForFunction(n => Number(document.querySelector("#batch-id").textContent) > n, first, { timeout: 60000 });
  const later = Number(await page.locator("#batch-id").textContent());
  expect(later > first, `the last batch moved on (${first} → ${later})`);
  const points = await page.locator("#chart-throughput polyline").first().getAttribute("points");
  expect(points.split(" ").length >= 2, "the throughput chart has points");
  const scale = await page.locator("#legend-throughput .scale").textContent();
  expect(/^scale 0 – [\d.]+, \d\d:\d\d:\d\dZ – \d\d:\d\d:\d\dZ$/.test(scale), `the chart's scale and times (${scale})`);
  expect((await page.locator("#partitions tr").count()) >= 2, "a row per partition");
  expect((await page.locator("#commits tr").count()) >= 3, "commit history");
  const deadRows = await page.locator("#dead-letters tr").evaluateAll(rows =>
    rows.map(r => [...r.querySelectorAll("td")].map(td => td.textContent)));
  expect(deadRows.some(([, stage, code]) => stage === "encode" && code === "malformed_json"),
    `the encoder's refusal by stage and code (${JSON.stringify(deadRows)})`);
  const changes = await page.locator("#readiness-changes td").allTextContents();
  expect(changes.includes("running"), `readiness changes shown (${changes.join(" | ")})`);
  await page.screenshot({ path: `${shots}/2-moving.png`, fullPage: true });

  // Dead letters' values need the token: refused without it.
  await page.click("#show-samples");
  await page.waitForFunction(() => document.querySelector("#samples-result").textContent !== "");
  const hidden = await page.locator("#samples-result").textContent();
  expect(/^refused: 401 /.test(hidden), `dead-letter values refused without the token (${hidden.trim()})`);
  expect((await page.locator("#dead-letter-samples td").count()) === 0, "no value shown without the token");

  // A rollback without the token is refused; with it, it is done.
  const button = page.locator(`button.rollback[data-stage="${stage}"]`);
  await button.click();
  await page.waitForFunction(() => document.querySelector("#action-result").textContent !== "");
  const refused = await page.locator("#action-result").textContent();
  expect(/: 401 /.test(refused), `refused without the token (${refused.trim()})`);
  await page.screenshot({ path: `${shots}/3-refused.png`, fullPage: true });
  await page.fill("#token", token);
  await page.click("#show-samples");
  await page.waitForFunction(() => /dead letters, newest first/.test(document.querySelector("#samples-result").textContent));
  const values = await page.locator("#dead-letter-samples").textContent();
  expect(values.includes("this is not JSON"), "the dead letters' values shown with the token");
  // A swap: the module uploaded and activated; the next batches run on it.
  await page.setInputFiles(`input.module[data-stage="${stage}"]`, module);
  await page.click(`button.swap[data-stage="${stage}"]`);
  await page.waitForFunction(() => /^swap .*: 202 /.test(document.querySelector("#action-result").textContent), null, { timeout: 20000 });
  expect(true, `swapped with the token (${(await page.locator("#action-result").textContent()).trim()})`);
  await page.waitForFunction(s => !/keep-all/.test(document.querySelector(`#graph .node[data-name="${s}"] .version`)?.textContent ?? "keep-all"), stage, { timeout: 60000 });
  expect(true, `the graph shows the new version (${(await node.locator(".version").textContent()).trim()})`);
  await page.screenshot({ path: `${shots}/4-swapped.png`, fullPage: true });
  await button.click();
  await page.waitForFunction(() => /^roll back .*: 202 /.test(document.querySelector("#action-result").textContent), null, { timeout: 10000 });
  expect(true, `rolled back with the token (${(await page.locator("#action-result").textContent()).trim()})`);
  // The next batches show it in the plugin history.
  await page.waitForFunction(() => [...document.querySelectorAll("#plugin-history td")].some(td => td.textContent === "rolled back"), null, { timeout: 60000 });
  expect(true, "the rollback in the plugin history");
  await page.screenshot({ path: `${shots}/5-rolled-back.png`, fullPage: true });
  expect(failures.length === 0, `no script error nor failed request (${failures.join("; ")})`);
} finally {
  await browser.close();
}
