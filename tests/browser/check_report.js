// check_report.js - opens a flow's report.html in headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core) and checks what a person sees:
// every chart has a non-zero rendered size, at two window widths (charts scale
// with the window), and every design of results.csv appears in the page text.
// For every sweep family of results.json: its knee sentence is visible text,
// its own chart is drawn, and on the accuracy-vs-area chart of its model and
// data set a line titled with the family's name is drawn through the plot
// (longer than its legend sample) when the family has two points there.
//   node tests/browser/check_report.js RESULTS_DIR [SCREENSHOT.png]
// Exit 0 pass, 1 a check failed (one line per failure on stderr), 2 could not run.
'use strict';
const fs = require('fs');
const path = require('path');

function fail(code, msg) {
  console.error('check_report: ' + msg);
  process.exit(code);
}

let chromium;
try {
  ({ chromium } = require(path.join(__dirname, 'node_modules', 'playwright-core')));
} catch (e) {
  fail(2, 'playwright-core is not installed (flows/install-deps.sh: npm install --prefix tests/browser)');
}

const dir = process.argv[2];
if (!dir) fail(2, 'usage: check_report.js RESULTS_DIR [SCREENSHOT.png]');
const html = path.resolve(dir, 'report.html');
const csvPath = path.resolve(dir, 'results.csv');
if (!fs.existsSync(html) || !fs.existsSync(csvPath)) fail(2, `${dir}: no report.html or results.csv`);
const exe = process.env.MANTIS_CHROMIUM || '/usr/bin/chromium';
if (!fs.existsSync(exe)) fail(2, `${exe}: no Chromium (apt-get install chromium)`);

// The designs of results.csv: the first field of every row after the header.
const designs = [...new Set(fs.readFileSync(csvPath, 'utf8').split('\n').slice(1)
  .filter((l) => l.trim()).map((l) => l.split(',')[0]))];
// The sweep families (results.json "families"; none in older results).
const jsonPath = path.resolve(dir, 'results.json');
let families = [], rows = [];
if (fs.existsSync(jsonPath)) {
  const j = JSON.parse(fs.readFileSync(jsonPath, 'utf8'));
  families = j.families || [];
  rows = j.rows || [];
}
// Points of a family the area chart can join: an area and an accuracy.
const joinable = (f) => f.points.filter((p) => rows.some((r) => r.design === p && r.model === f.model &&
  r.dataset === f.dataset && r.run === f.run && r.area_um2 !== null && r.test_acc !== null)).length;

(async () => {
  const browser = await chromium.launch({ executablePath: exe, args: ['--no-sandbox'] });
  const errors = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto('file://' + html);
    const sizes = async () => page.$$eval('figure.chart svg', (svgs) => svgs.map((s) => {
      const r = s.getBoundingClientRect();
      return { id: s.parentElement.id, w: r.width, h: r.height };
    }));
    const wide = await sizes();
    if (wide.length === 0) errors.push('no chart in the page');
    for (const c of wide)
      if (!(c.w > 100 && c.h > 60)) errors.push(`chart ${c.id}: rendered ${c.w}x${c.h} px at a 1400 px window`);
    // scaling: a narrower window gives narrower charts that are still drawn
    await page.setViewportSize({ width: 700, height: 900 });
    const narrow = await sizes();
    for (let i = 0; i < narrow.length; i++) {
      const c = narrow[i];
      if (!(c.w > 100 && c.h > 60)) errors.push(`chart ${c.id}: rendered ${c.w}x${c.h} px at a 700 px window`);
      if (c.w > 700) errors.push(`chart ${c.id}: ${c.w} px wide in a 700 px window (does not scale)`);
    }
    const text = await page.evaluate(() => document.body.innerText);
    for (const d of designs) if (!text.includes(d)) errors.push(`design ${d} of results.csv is not in the page`);
    for (const f of families) {
      const where = `${f.label} (${f.model} on ${f.dataset}, ${f.run})`;
      if (!text.includes(f.sentence)) errors.push(`family ${where}: its knee sentence is not visible text`);
      if (f.chart && !wide.some((c) => c.id === f.chart)) errors.push(`family ${where}: its chart ${f.chart} is not drawn`);
      if (joinable(f) < 2) continue;
      const id = `area-${f.model}-${f.dataset}${f.run === 'infer' ? '-infer' : ''}`;
      // gnuplot's SVG: one <g id="gnuplot_plot_N"> per plot clause, its legend text and its path
      const len = await page.evaluate(([id, label]) => {
        const fig = document.getElementById(id);
        if (!fig) return -1;
        for (const g of fig.querySelectorAll('g[id^="gnuplot_plot_"]')) {
          if (![...g.querySelectorAll('text')].some((t) => t.textContent === label)) continue;
          const p = g.querySelector('path');
          if (!p || getComputedStyle(p).visibility === 'hidden' || p.getBoundingClientRect().width <= 0) return 0;
          return p.getTotalLength();
        }
        return -2;
      }, [id, f.label]);
      if (len === -1) errors.push(`family ${where}: no chart ${id}`);
      else if (len === -2) errors.push(`family ${where}: no line titled '${f.label}' on ${id}`);
      else if (!(len > 60)) errors.push(`family ${where}: its line on ${id} is not drawn through the plot (length ${len})`);
    }
    if (process.argv[3]) {
      await page.setViewportSize({ width: 1400, height: 900 });
      await page.screenshot({ path: process.argv[3], fullPage: true });
    }
    console.log(`check_report: ${wide.length} charts (${wide.map((c) => `${Math.round(c.w)}x${Math.round(c.h)}`).join(' ')}), ` +
      `${designs.length} designs, ${families.length} sweep families checked`);
  } finally {
    await browser.close();
  }
  for (const e of errors) console.error('check_report: FAIL ' + e);
  process.exit(errors.length ? 1 : 0);
})().catch((e) => fail(2, String(e && e.stack || e)));
