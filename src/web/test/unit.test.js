// What needs no server: encodings and the client's bookkeeping.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
    bearerProtocol, fromBase64, toBase64, uuid7, attachUrl, SUBPROTOCOL,
} from 'ngx-pty-client';

test('base64 round trip, every byte value and a large buffer', () => {
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    assert.deepEqual(fromBase64(toBase64(all)), all);
    const big = new Uint8Array(200000).map((_, i) => (i * 7) & 0xff);
    assert.deepEqual(fromBase64(toBase64(big)), big);
    assert.equal(toBase64(new TextEncoder().encode('hi\r\n')), 'aGkNCg==');
});

test('the bearer subprotocol entry is unpadded base64url of the token', () => {
    assert.equal(bearerProtocol('abc'), 'bearer.YWJj');
    assert.equal(bearerProtocol('a?b>'), 'bearer.YT9iPg');
    // only token characters (RFC 7230), so a browser accepts it
    assert.match(bearerProtocol('x'.repeat(100) + '+/= ü'),
        /^bearer\.[A-Za-z0-9_-]+$/);
});

test('uuid7: the binding schema pattern, time ordered', () => {
    const a = uuid7();
    assert.match(a,
        /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.ok(uuid7().slice(0, 8) >= a.slice(0, 8));
});

test('attachUrl follows the page scheme', () => {
    assert.equal(attachUrl('/agents/x/sessions/y/attach',
        { protocol: 'https:', host: 'ide.example:8443' }),
        'wss://ide.example:8443/agents/x/sessions/y/attach');
    assert.equal(attachUrl('/a', { protocol: 'http:', host: 'h' }), 'ws://h/a');
});
