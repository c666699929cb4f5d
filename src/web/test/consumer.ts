// A TypeScript consumer of the packed types: compiled by t/75-web-client.t
// with tsc --noEmit, never run.
import { PtyClient, PtyApi, type ClientEvents, type Role } from 'ngx-pty-client';
import { attach } from 'ngx-pty-client/node';

const role: Role = 'observer';
const s = attach({ url: 'ws://127.0.0.1:8080/agents/x/sessions/y/attach', role });
const client: PtyClient = s.client;
const off: () => void = client.on('state', (ev: ClientEvents['state']) => {
    const n: number = ev.attempt ?? 0;
    console.log(ev.state, ev.previous, n);
});
client.on('closed', (c) => console.log(c.exitCode === null ? c.reason : c.exitCode));
client.on('membership', (m) => console.log(m.controllers.map((x) => x.label)));
const sent: boolean = client.input('ls\r');
const api = new PtyApi({ base: '/pty/', token: 't' });
void api.list().then((l) => console.log(l.length, sent));
off();
