// ngx-pty-client in Node: the same protocol core over the `ws` package,
// drawing into an @xterm/headless terminal, for scripts and tests.

import WebSocket from 'ws';
import headless from '@xterm/headless';
import { PtyClient, screenLines } from './core.js';

export * from './core.js';

const { Terminal } = headless;

/**
 * @typedef {object} NodeAttachOptions
 * @property {string} url  ws:// or wss:// attach URL
 * @property {import('./core.js').Role} [role]
 * @property {string} [label]
 * @property {string} [token]
 * @property {number} [cols]  the terminal's size before the first
 *     Keyframe, and what a controller asks for (default 80x24)
 * @property {number} [rows]
 * @property {Partial<import('./core.js').ClientOptions>} [clientOptions]
 *
 * @typedef {object} NodeSession
 * @property {PtyClient} client
 * @property {InstanceType<typeof Terminal>} terminal
 * @property {() => Promise<string[]>} screen  the screen once every write
 *     so far is painted
 * @property {(pattern: RegExp | string, timeoutMs?: number)
 *     => Promise<string[]>} waitForScreen
 * @property {(state: import('./core.js').ConnectionState,
 *     timeoutMs?: number) => Promise<void>} waitForState
 * @property {() => void} close
 */

/**
 * Attaches to a session and keeps its screen in a headless terminal.
 * @param {NodeAttachOptions} options
 * @returns {NodeSession}
 */
export function attach(options) {
    const terminal = new Terminal({
        cols: options.cols || 80, rows: options.rows || 24,
        allowProposedApi: true, scrollback: 1000,
    });
    const client = new PtyClient(Object.assign({
        url: options.url,
        terminal,
        role: options.role,
        label: options.label,
        token: options.token,
        WebSocket: /** @type {any} */ (WebSocket),
    }, options.clientOptions || {}));

    const screen = () => new Promise((resolve) => {
        terminal.write('', () => resolve(screenLines(terminal)));
    });

    /** @type {NodeSession['waitForScreen']} */
    const waitForScreen = async (pattern, timeoutMs = 10000) => {
        const re = typeof pattern === 'string'
            ? new RegExp(pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
            : pattern;
        const deadline = Date.now() + timeoutMs;
        for (;;) {
            const lines = await screen();
            if (re.test(lines.join('\n'))) {
                return lines;
            }
            if (Date.now() > deadline) {
                throw new Error('screen never matched ' + re + ':\n'
                    + lines.join('\n'));
            }
            await new Promise((r) => setTimeout(r, 50));
        }
    };

    /** @type {NodeSession['waitForState']} */
    const waitForState = (state, timeoutMs = 10000) => new Promise(
        (resolve, reject) => {
            if (client.state === state) {
                resolve();
                return;
            }
            const timer = setTimeout(() => {
                off();
                reject(new Error('state ' + client.state + ', not ' + state
                    + ' after ' + timeoutMs + ' ms'));
            }, timeoutMs);
            const off = client.on('state', (ev) => {
                if (ev.state === state) {
                    clearTimeout(timer);
                    off();
                    resolve();
                }
            });
        });

    client.connect();
    return {
        client, terminal, screen, waitForScreen, waitForState,
        close() {
            client.close();
        },
    };
}
