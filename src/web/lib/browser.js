// ngx-pty-client in a browser: an xterm.js terminal in an element, sized to
// it by the fit addon, joined to a session.  The page keeps its own chrome:
// everything it may draw comes as events of `view.client`.

import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { PtyClient, attachUrl } from './core.js';

export * from './core.js';

/**
 * @typedef {object} MountOptions
 * @property {string} [url]  attach URL; or attachPath on this page's host
 * @property {string} [attachPath]  e.g. the API's `attach_path`
 * @property {import('./core.js').Role} [role]
 * @property {string} [label]
 * @property {string} [token]  sent as the `bearer.` subprotocol entry
 * @property {number} [resizeDebounce]  ms after the last layout change
 *     before a controller resizes the session (default 150)
 * @property {import('@xterm/xterm').ITerminalOptions} [terminalOptions]
 * @property {Partial<import('./core.js').ClientOptions>} [clientOptions]
 *
 * @typedef {object} TerminalView
 * @property {PtyClient} client
 * @property {Terminal} terminal
 * @property {FitAddon} fit
 * @property {() => void} fitNow  fit and, for a controller, resize now
 * @property {() => Promise<boolean>} copySelection  to the clipboard
 * @property {(text?: string) => Promise<boolean>} paste  text, or the
 *     clipboard's; bracketed when the program asked for it
 * @property {() => void} dispose  leaves the session, removes the terminal
 */

/**
 * Mounts a terminal into `element` and joins the session.
 * @param {HTMLElement} element
 * @param {MountOptions} options
 * @returns {TerminalView}
 */
export function mountTerminal(element, options) {
    const url = options.url
        || (options.attachPath ? attachUrl(options.attachPath) : '');
    if (!url) {
        throw new TypeError('mountTerminal needs url or attachPath');
    }
    const terminal = new Terminal(Object.assign({
        cursorBlink: true,
        scrollback: 5000,
        fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
        fontSize: 14,
    }, options.terminalOptions || {}));
    const fit = new FitAddon();
    terminal.loadAddon(fit);
    terminal.open(element);

    const client = new PtyClient(Object.assign({
        url,
        terminal,
        role: options.role,
        label: options.label,
        token: options.token,
        initialSize: () => fit.proposeDimensions(),
    }, options.clientOptions || {}));

    const subs = [
        terminal.onData((data) => { client.input(data); }),
        // mouse reports in the legacy encoding are bytes, not UTF-8
        terminal.onBinary((data) => {
            client.input(Uint8Array.from(data, (c) => c.charCodeAt(0) & 0xff));
        }),
    ];
    const offRole = client.on('role', (r) => {
        terminal.options.disableStdin = r.role !== 'controller';
        if (r.role === 'controller') {
            fitNow();
        }
    });

    const fitNow = () => {
        const d = fit.proposeDimensions();
        if (!d || !(d.cols > 0) || !(d.rows > 0)) {
            return;
        }
        // the terminal itself follows the server's Resize frame, so every
        // member draws the same grid
        client.resize(d.cols, d.rows);
    };

    /** @type {ReturnType<typeof setTimeout> | null} */
    let timer = null;
    const debounce = options.resizeDebounce ?? 150;
    const onLayout = () => {
        if (timer) {
            clearTimeout(timer);
        }
        timer = setTimeout(() => { timer = null; fitNow(); }, debounce);
    };
    const ro = typeof ResizeObserver === 'function'
        ? new ResizeObserver(onLayout) : null;
    if (ro) {
        ro.observe(element);
    } else {
        window.addEventListener('resize', onLayout);
    }

    const copySelection = async () => {
        const text = terminal.getSelection();
        if (!text || !navigator.clipboard) {
            return false;
        }
        await navigator.clipboard.writeText(text);
        return true;
    };
    /** @param {string} [text] */
    const paste = async (text) => {
        if (text === undefined) {
            if (!navigator.clipboard) {
                return false;
            }
            text = await navigator.clipboard.readText();
        }
        // xterm.js brackets it when the program set ?2004 and sends onData
        terminal.paste(text);
        return true;
    };

    // Ctrl+Shift+C / Ctrl+Shift+V: copy and paste without taking Ctrl+C
    // from the program
    terminal.attachCustomKeyEventHandler((ev) => {
        if (ev.type !== 'keydown') {
            return true;
        }
        if (client.role === 'observer' && !ev.ctrlKey && !ev.metaKey
            && !ev.altKey && (ev.key.length === 1 || ev.key === 'Enter'))
        {
            // stdin is off for observers (so xterm.js answers no query
            // either); a keystroke gets the client's read-only error event
            client.input(ev.key);
            return false;
        }
        if (!ev.ctrlKey || !ev.shiftKey) {
            return true;
        }
        if (ev.code === 'KeyC') {
            copySelection();
            ev.preventDefault();
            return false;
        }
        if (ev.code === 'KeyV') {
            paste();
            ev.preventDefault();
            return false;
        }
        return true;
    });

    client.connect();

    return {
        client,
        terminal,
        fit,
        fitNow,
        copySelection,
        paste,
        dispose() {
            if (timer) {
                clearTimeout(timer);
            }
            if (ro) {
                ro.disconnect();
            } else {
                window.removeEventListener('resize', onLayout);
            }
            offRole();
            for (const s of subs) {
                s.dispose();
            }
            client.close();
            terminal.dispose();
        },
    };
}
