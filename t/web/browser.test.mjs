// The demo page in Debian's chromium, driven by playwright-core (never a
// downloaded browser), against the demo config (t/76-browser.t starts it).
//
//   PTY_BASE        http://127.0.0.1:port of the demo nginx
//   PTY_NGINX_PID   its master (SIGHUP: the reload that closes the sockets)
//   PTY_SHOTS       where screenshots go (a failed step's, demo.png)
//   PTY_TOKEN       a token for the page's URL (#token=), if the demo wants one
//   PTY_DEMO_SCREENSHOT  also copy demo.png there (docs/img/demo.png)
//   CHROMIUM        default /usr/bin/chromium

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, '../../src/web/package.json'));
const { chromium } = require('playwright-core');

const base = process.env.PTY_BASE;
const shots = process.env.PTY_SHOTS || '.';
const hash = process.env.PTY_TOKEN ? '#token=' + process.env.PTY_TOKEN : '';
const SHELL = "PS1='ready$ ' exec bash --norc --noprofile -i";
const WAIT = 20000;

/** @type {import('playwright-core').Browser} */
let browser;
/** @type {Record<string, import('playwright-core').Page>} */
const pages = {};
let session;              // the API entry of the session under test

before(async () => {
    mkdirSync(shots, { recursive: true });
    browser = await chromium.launch({
        executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
        // root in a container: no user namespaces for chromium's sandbox
        args: ['--no-sandbox', '--disable-dev-shm-usage'],
    });
});

after(async () => {
    if (browser) {
        await browser.close();
    }
});

/** Runs a step; on failure every open page is photographed. */
async function step(name, fn) {
    try {
        await fn();
    } catch (e) {
        for (const [who, page] of Object.entries(pages)) {
            const file = join(shots, 'failed-' + name.replace(/\W+/g, '_')
                + '-' + who + '.png');
            await page.screenshot({ path: file }).catch(() => {});
            e.message += '\n  screenshot: ' + file;
        }
        throw e;
    }
}

/** A page of the demo, 1280x720, its console errors failing the test. */
async function open(who, query) {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write'],
        { origin: base });
    const page = await ctx.newPage();
    page.on('pageerror', (e) => { page.errors = (page.errors || []).concat(e.message); });
    pages[who] = page;
    await page.goto(base + '/' + (query || '') + hash);
    return page;
}

const screen = (page) => page.evaluate(() => window.ptyDemo.screen());
const stats = (page) => page.evaluate(() => ({
    ...window.ptyDemo.view.client.stats,
    cols: window.ptyDemo.view.terminal.cols,
    rows: window.ptyDemo.view.terminal.rows,
    role: window.ptyDemo.view.client.role,
}));

/** Polls the page's screen until test(lines) holds. */
async function waitScreen(page, check, what, ms = WAIT) {
    const deadline = Date.now() + ms;
    let lines = [];
    for (;;) {
        lines = await screen(page);
        if (check(lines)) {
            return lines;
        }
        if (Date.now() > deadline) {
            throw new Error('screen never showed ' + what + ':\n'
                + lines.join('\n'));
        }
        await page.waitForTimeout(50);
    }
}

const hasLine = (text) => (lines) => lines.some((l) => l === text);
const matches = (re) => (lines) => re.test(lines.join('\n'));

async function waitState(page, state) {
    await page.waitForSelector('#state[data-state="' + state + '"]',
        { timeout: WAIT });
}

/** Both screens the same, once output has settled. */
async function sameScreens(a, b, what) {
    const deadline = Date.now() + WAIT;
    for (;;) {
        const [x, y] = [await screen(a), await screen(b)];
        if (JSON.stringify(x) === JSON.stringify(y)) {
            return x;
        }
        if (Date.now() > deadline) {
            assert.deepEqual(y, x, what);
        }
        await a.waitForTimeout(100);
    }
}

async function typeLine(page, text) {
    await page.click('#terminal');
    await page.keyboard.type(text);
    await page.keyboard.press('Enter');
}

test('controller: start a session in the page, type echo hello, see it',
    () => step('echo', async () => {
        const a = await open('controller', '?reconnect_delay=1000');
        await a.fill('#command', SHELL);
        await a.click('#start');
        await waitState(a, 'live');
        await waitScreen(a, matches(/^ready\$$/m), 'the prompt');
        await typeLine(a, 'echo hello');
        await waitScreen(a, hasLine('hello'), 'hello');
        // UTF-8 both ways
        await typeLine(a, 'echo "héllo ✓ 日本語"');
        await waitScreen(a, hasLine('héllo ✓ 日本語'), 'UTF-8 text');
        assert.equal(await a.textContent('#role'), 'controller');
        session = (await a.evaluate(() => window.ptyDemo.api.list()))
            .find((s) => s.command === SHELL);
        assert.ok(session, 'the session is listed');
        assert.match(await a.textContent('#sessions'), new RegExp(session.id));
    }));

test('observer: a second page sees the same screen and cannot type',
    () => step('observer', async () => {
        const a = pages.controller;
        const b = await open('observer', '?attach=' + session.id
            + '&role=observer&label=watcher&reconnect_delay=1000');
        await waitState(b, 'live');
        assert.equal(await b.textContent('#role'), 'observer (read-only)');
        await sameScreens(a, b, 'the observer draws what the controller does');

        await typeLine(b, 'echo typed-by-observer');
        await b.waitForSelector('#notice:has-text("read-only")');
        await typeLine(a, 'echo after-observer');
        await waitScreen(b, hasLine('after-observer'), 'the controller\'s line');
        assert.doesNotMatch((await screen(a)).join('\n'), /typed-by-observer/);
        // labels: the principal's name, then the client's (demo (watcher))
        await a.waitForSelector('#members li:has-text("watcher") >> text=/· observer$/');
        await a.waitForSelector('#members li.you:has-text("browser") >> text=/· controller \\(you\\)$/');
        assert.deepEqual(await screen(b), await screen(a));
    }));

test('the server closes the sockets; both reconnect, replay, match',
    () => step('reconnect', async () => {
        const [a, b] = [pages.controller, pages.observer];
        const before = await stats(b);
        // the pages stay away 2-4 s, long past the output below even on a
        // loaded machine (their 0.5-1 s was not, once in 13 full runs)
        const delay = (page, ms) => page.evaluate((ms) => {
            window.ptyDemo.view.client.options.reconnectDelay = ms;
        }, ms);
        await delay(a, 4000);
        await delay(b, 4000);
        // a reload: every connection gets goodbye server_shutdown and close
        process.kill(Number(process.env.PTY_NGINX_PID), 'SIGHUP');
        await waitState(b, 'reconnecting');
        // output while the pages are away
        const r = await fetch(base + '/pty/write', {
            method: 'POST',
            headers: process.env.PTY_TOKEN
                ? { Authorization: 'Bearer ' + process.env.PTY_TOKEN } : {},
            body: JSON.stringify({ id: session.id, submit: true,
                input: 'for i in 1 2 3; do echo gap-$i; done',
                wait_for: 'gap-3', wait_ms: 5000 }),
        });
        assert.equal(r.status, 200);
        assert.equal(await b.evaluate(() => window.ptyDemo.view.client.state),
            'reconnecting', 'the output came while the observer was away');
        await waitState(b, 'live');
        await waitState(a, 'live');
        await delay(a, 1000);
        await delay(b, 1000);
        await waitScreen(b, hasLine('gap-3'), 'the replayed output');
        const after = await stats(b);
        assert.equal(after.reconnects, before.reconnects + 1, 'one reconnect');
        assert.ok(after.replayedFrames > before.replayedFrames,
            'frames came by replay');
        await sameScreens(a, b, 'after the replay');
        // and it still works
        await typeLine(a, 'echo live-again');
        await waitScreen(b, hasLine('live-again'), 'live output');
    }));

test('top survives a reload of the observer page, through a Keyframe',
    () => step('top', async () => {
        const a = pages.controller;
        await typeLine(a, 'top -d 1');
        await waitScreen(a, matches(/load average/), 'top');
        await pages.observer.reload();
        const b = pages.observer;
        await waitState(b, 'live');
        const lines = await waitScreen(b,
            matches(/load average[\s\S]*PID\s+USER/), 'top after the reload');
        const s = await stats(b);
        assert.equal(s.connects, 1, 'a fresh page');
        assert.ok(s.keyframesApplied >= 1, 'painted from a Keyframe');
        assert.equal(s.role, 'observer', 'the reload kept the role');
        const header = (l) => l.findIndex((x) => /PID\s+USER/.test(x));
        assert.equal(header(lines), header(await screen(a)),
            'the same layout as the controller');

        await a.screenshot({ path: join(shots, 'demo.png') });
        if (process.env.PTY_DEMO_SCREENSHOT) {
            copyFileSync(join(shots, 'demo.png'), process.env.PTY_DEMO_SCREENSHOT);
        }
        await a.click('#terminal');
        await a.keyboard.press('q');
        await waitScreen(a, matches(/^ready\$$/m), 'the prompt after top');
    }));

test('repaint button: a Keyframe is painted, the screen unchanged',
    () => step('repaint', async () => {
        const a = pages.controller;
        const before = await stats(a);
        const lines = await screen(a);
        await a.click('#repaint');
        const deadline = Date.now() + WAIT;
        while ((await stats(a)).keyframesApplied === before.keyframesApplied) {
            assert.ok(Date.now() < deadline, 'no Keyframe painted');
            await a.waitForTimeout(100);
        }
        assert.deepEqual(await screen(a), lines);
    }));

test('copy and paste through the clipboard buttons',
    () => step('clipboard', async () => {
        const a = pages.controller;
        await typeLine(a, 'clear; echo copy-me-$((6*7))');
        await waitScreen(a, hasLine('copy-me-42'), 'the line to copy');
        await a.evaluate(() => {
            const t = window.ptyDemo.view.terminal;
            const y = window.ptyDemo.screen().indexOf('copy-me-42');
            t.select(0, t.buffer.active.viewportY + y, 10);
        });
        await a.click('#copy');
        const deadline = Date.now() + WAIT;
        let copied = '';
        while (copied !== 'copy-me-42') {
            assert.ok(Date.now() < deadline, 'clipboard: ' + copied);
            copied = await a.evaluate(() => navigator.clipboard.readText());
        }
        await a.evaluate(() => navigator.clipboard.writeText('echo pasted-ü'));
        await a.click('#paste');
        // the keyboard is the terminal's again at once (Enter on the
        // button would paste twice); the paste lands before the Enter
        assert.equal(await a.evaluate(() => document.activeElement.id),
            '', 'the paste button gave the keyboard back');
        await waitScreen(a, matches(/^ready\$ echo pasted-ü\s*$/m),
            'the paste on the command line, once');
        await a.keyboard.press('Enter');
        await waitScreen(a, hasLine('pasted-ü'), 'the pasted command ran');
    }));

test('resizing the window resizes the session: stty size follows',
    () => step('resize', async () => {
        const [a, b] = [pages.controller, pages.observer];
        const old = await stats(a);
        await a.setViewportSize({ width: 900, height: 480 });
        const deadline = Date.now() + WAIT;
        let now = old;
        while (now.cols === old.cols || now.rows === old.rows) {
            assert.ok(Date.now() < deadline, 'the terminal never resized');
            await a.waitForTimeout(100);
            now = await stats(a);
        }
        assert.ok(now.cols < old.cols && now.rows < old.rows,
            `${old.cols}x${old.rows} -> ${now.cols}x${now.rows}`);
        await typeLine(a, 'stty size');
        await waitScreen(a, hasLine(now.rows + ' ' + now.cols), 'stty size');
        await waitScreen(b, hasLine(now.rows + ' ' + now.cols), 'stty size');
        const o = await stats(b);
        assert.deepEqual([o.cols, o.rows], [now.cols, now.rows],
            'the observer follows the session\'s size');
        assert.match(await a.textContent('#size'), new RegExp(now.cols + '×' + now.rows));
    }));

test('without the token the page is refused and says how to get in',
    { skip: process.env.PTY_TOKEN ? false : 'the demo checks no token' },
    () => step('no-token', async () => {
        const ctx = await browser.newContext();
        const page = await ctx.newPage();
        pages.anonymous = page;
        // a token in the query (sent to the server, logged) is not taken,
        // only taken out of the address bar (t/76-browser.t counts it in
        // the access log: this request only)
        await page.goto(base + '/?token=' + process.env.PTY_TOKEN
            + '&attach=' + session.id);
        await page.waitForSelector('#notice.error:has-text("#token=")',
            { timeout: WAIT });
        assert.doesNotMatch(await page.textContent('#sessions'),
            new RegExp(session.id), 'no session listed');
        assert.doesNotMatch(page.url(), /token/, 'not in the address bar');
        await ctx.close();
        delete pages.anonymous;
    }));

test('no script errors in either page', () => {
    for (const [who, page] of Object.entries(pages)) {
        assert.deepEqual(page.errors || [], [], who);
    }
});
