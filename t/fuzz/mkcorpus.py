#!/usr/bin/env python3
"""Writes the seed corpora of t/fuzz/corpus/<harness>/ from real frames,
requests and terminal output (the layouts are in each harness's comment).
Seeds that fuzzing found (crash-*) are kept; the rest is rewritten."""

import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, 'corpus')
ID = '0190f3c2-7d1e-7a3b-8c4d-5e6f708192a3'
TS = '2026-11-30T12:00:00.000Z'


def ws_frame(opcode, payload, fin=True, key=b'\x11\x22\x33\x44', enc=None):
    b = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if enc == 64 or n > 0xffff:
        b += bytes([0x80 | 127]) + struct.pack('>Q', n)
    elif enc == 16 or n >= 126:
        b += bytes([0x80 | 126]) + struct.pack('>H', n)
    else:
        b += bytes([0x80 | n])
    masked = bytes(c ^ key[i % 4] for i, c in enumerate(payload))
    return b + key + masked


def env(op, payload=None, **extra):
    m = {'op': op, 'id': ID, 'ts': TS}
    if payload is not None:
        m['payload'] = payload
    m.update(extra)
    return json.dumps(m, separators=(',', ':')).encode()


MESSAGES = [
    env('ping', {'client_ts': TS}),
    env('ping', {'client_ts': '2026-11-30T12:00:00+02:00'}),
    env('pty.join_session', {'role': 'controller', 'cols': 80, 'rows': 24},
        extensions=['https://agentic-sandbox.aiwg.io/extensions/'
                    'pty-extensions/v1']),
    env('pty.join_session', {'role': 'observer', 'client_label': 'ñ 👀'},
        replay_from=0),
    env('pty.join_session', {'role': 'controller'}, replay_from=3),
    env('pty.session_input', {'data': 'bHMgLWxhDQ=='}),
    env('pty.session_input', {'data': 'not base64!'}),
    env('pty.session_resize', {'cols': 132, 'rows': 50}),
    env('pty.session_resize', {'cols': 0, 'rows': 2000}),
    env('pty.request_role', {'role': 'observer'}),
    env('pty.request_role', {'role': 'controller'}),
    env('pty.request_keyframe'),
    env('pty.leave_session'),
    env('SendMessage', {}),
    env('pty.unknown'),
    b'{"op":"ping","id":"x","sequence":1}',
    b'{"op":"","id":""}',
    b'[1,2,3]',
    b'{"op":"ping","id":"a","payload":null,"service_parameters":{"k":"v"}}',
    b'{"op":"ping","op":"ping"}',
    b'not json',
    b'{"op":"pty.join_session","id":"' + b'\\"' * 100 + b'",'
    b'"payload":{"role":"observer","client_label":"\\u0000\\n"}}',
]

API_BODIES = [
    ('start', {'command': 'bash', 'cols': 80, 'rows': 24}),
    ('start', {'command': 'python3 -q', 'wait_for': '>>> ',
               'wait_ms': 2000}),
    ('start', {'command': ''}),
    ('start', {'cols': 0}),
    ('write', {'id': 'pty-1', 'input': 'ls\\r', 'submit': True}),
    ('write', {'id': 'pty-1', 'input': '\\x03\\u00e9\\uD83D\\uDE00',
               'wait_for': '$ ', 'wait_ms': 100}),
    ('write', {'id': 'pty-2', 'input': 5}),
    ('kill', {'id': 'pty-1'}),
    ('kill', {'id': 'pty-1', 'signal': 'KILL'}),
    ('list', {}),
    ('read', {'id': 'pty-1', 'screen': True}),
    ('read', {'id': 'pty-1', 'wait_for': 'done', 'wait_ms': 10}),
    ('status', {}),
]

TERMINAL = [
    b'hello world\r\n',
    b'\x1b[1;31mred\x1b[0m plain \x1b[4munder\x1b[24m\r\n',
    b'user@host:~$ ls -la\r\ntotal 0\r\n',
    b'abc\x08\x08X\x1b[K\r\n',
    b'\x1b[2J\x1b[H\x1b[?1049h\x1b[10;20Htui\x1b[?1049l',
    b'progress 10%\rprogress 50%\rprogress 100%\r\n',
    b'\x1b]0;title\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\r\n',
    b'wide \xe4\xb8\xad\xe6\x96\x87 e\xcc\x81 \xf0\x9f\x98\x80\r\n',
    b'\x1b[3;10r\x1b[3H\n\n\n\n\x1b[r\x1b7\x1b[5;5Hx\x1b8',
    b'\x1b[38;2;1;2;3;48;5;200mrgb\x1b[m\x1b[?25l\x1b[5 q\x1b[?2004h',
    b'tab\there\x1b[5Gover\x1b[2P\x1b[3@\x1b[2X\r\n',
    b'\x1b(0lqqk\r\nx  x\r\nmqqj\x1b(B\r\n',
    b'bad \xff\xfe utf8 \xc3\r\n',
    b'\x1bP1$r0m\x1b\\\x1b[6n\x1b[c\x1b[?6$p',
]

ESCAPES = [
    b'ls -la\\r', b'\\x03', b'\\e[A\\e[B', b'\\u00e9\\uD83D\\uDE00',
    b'\\uD83D alone', b'\\uDE00', b'\\x4', b'\\xZZ', b'\\u12G4', b'\\\\',
    b'trailing\\', b'\\q\\0\\a', b'\\x00\\u0000', b'\\t\\n\\r',
]


def write(name, items):
    d = os.path.join(CORPUS, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if not f.startswith('crash-'):
            os.unlink(os.path.join(d, f))
    for i, data in enumerate(items):
        with open(os.path.join(d, 'seed-%02d' % i), 'wb') as fh:
            fh.write(data)


def main():
    # ws: config byte, cut count + cuts, client frames
    msgs = MESSAGES[:8]
    frames = [ws_frame(1, m) for m in msgs]
    ws = []
    for i, f in enumerate(frames):
        ws.append(b'\x00\x00' + f)
        ws.append(b'\x00\x03\x01\x07\x02' + f + frames[(i + 1) % len(frames)])
    m = MESSAGES[2]
    ws += [
        b'\x00\x00' + ws_frame(1, m[:10], fin=False) + ws_frame(9, b'p')
        + ws_frame(0, m[10:20], fin=False) + ws_frame(0, m[20:]),
        b'\x00\x02\x00\x05' + ws_frame(9, b'ping') + ws_frame(10, b'')
        + ws_frame(8, b'\x03\xe8bye'),
        b'\x00\x00' + ws_frame(1, b'x' * 300, enc=16),
        b'\x00\x00' + ws_frame(1, b'{}', enc=64),
        b'\x8a\x00' + ws_frame(1, b'y' * 2000),
        b'\x00\x00' + ws_frame(2, b'bin') + ws_frame(1, b'{}'),
        b'\x00\x00' + ws_frame(1, b'\xff\xfe'),
        b'\x00\x00' + ws_frame(8, b'\x03'),
        b'\x00\x00' + ws_frame(8, b'\x0b\xb8\xff'),
        b'\x00\x00\x81\x02{}',
        b'\x00\x00' + ws_frame(0x31, b'{}'),
    ]
    write('ws', ws)

    # binding: config byte, messages separated by 0xff
    binding = []
    for cfg in (0x04, 0x05, 0x0f, 0x14, 0x64, 0x84, 0x00):
        binding.append(bytes([cfg]) + b'\xff'.join(MESSAGES[2:13]))
    binding += [bytes([0x04]) + m for m in MESSAGES]
    write('binding', binding)

    # api: call byte, cut count + cuts, body
    calls = ['start', 'write', 'kill', 'list', 'read', 'status']
    api = []
    for call, body in API_BODIES:
        b = json.dumps(body).encode().replace(b'\\\\', b'\\')
        api.append(bytes([calls.index(call)]) + b'\x02\x05\x10' + b)
    api += [b'\x01\x00{"id":"pty-1",', b'\x00\x00[]', b'\x04\x00',
            b'\x01\x00{"id":"pty-1","input":"a\\u0000b"}']
    write('api', api)

    # text: cuts, output
    write('text', [b'\x00' + t for t in TERMINAL]
          + [b'\x03\x00\x01\x04' + t for t in TERMINAL])

    # screen: cols, rows, resize, cuts, output
    write('screen', [b'\x4f\x17\x00\x00' + t for t in TERMINAL]
          + [b'\x09\x04\xc1\x02\x00\x03' + t for t in TERMINAL])

    write('escape', ESCAPES)
    return 0


if __name__ == '__main__':
    sys.exit(main())
